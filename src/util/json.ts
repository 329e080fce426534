import { z } from 'zod';

/** Marks a statistic in a contract: its JSON Schema allows what statsJson writes for it. */
export const STAT_DESCRIPTION =
  'a statistic: a number; "Infinity" or "-Infinity" when infinite; null when undefined (NaN)';

/** A number that may be infinite or undefined (NaN), written by statsJson as described above. */
export const stat = (): z.ZodNumber => z.number().describe(STAT_DESCRIPTION);

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
