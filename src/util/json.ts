/**
 * JSON for statistics. JSON has no infinity and no NaN (JSON.stringify writes null for both, which
 * reads as "missing"); here an infinite value is written as the string "Infinity" or "-Infinity",
 * and NaN (undefined, e.g. an interval from one task) as null.
 */
export function statsJson(value: unknown, indent?: number): string {
  return JSON.stringify(
    value,
    (_key, v: unknown) => {
      if (typeof v !== 'number' || Number.isFinite(v)) return v;
      if (Number.isNaN(v)) return null;
      return v > 0 ? 'Infinity' : '-Infinity';
    },
    indent,
  );
}
