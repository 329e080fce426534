import type { ConfigStats } from '../report/aggregate.js';
/** Left-aligned text columns, right-aligned numbers; enough for terminal reports. */
export function table(header: string[], rows: Array<Array<string | number>>): string {
  const cells = [header, ...rows.map((r) => r.map((c) => String(c)))];
  const widths = header.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)));
  const numeric = header.map(
    (_, i) =>
      rows.length > 0 && rows.every((r) => typeof r[i] === 'number' || /^[-+]?[\d.]+%?$|^-$/.test(String(r[i]))),
  );
  return cells
    .map((r) =>
      r
        .map((c, i) => (numeric[i] ? c.padStart(widths[i]!) : c.padEnd(widths[i]!)))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

export const pct = (x: number | null | undefined, digits = 1): string =>
  x === null || x === undefined || Number.isNaN(x) ? '-' : (x * 100).toFixed(digits);
export const num = (x: number | null | undefined, digits = 0): string =>
  x === null || x === undefined || Number.isNaN(x) ? '-' : x.toFixed(digits);

/** "0.25:0.75" -> [0.25, 0.75] */
export function parseBand(text: string): [number, number] {
  const m = /^\s*([\d.]+)\s*:\s*([\d.]+)\s*$/.exec(text);
  const lo = Number(m?.[1]);
  const hi = Number(m?.[2]);
  if (!m || !(lo >= 0 && hi <= 1 && lo <= hi)) throw new Error(`expected LO:HI with 0 <= LO <= HI <= 1, got "${text}"`);
  return [lo, hi];
}

/** "time wasted" by cause, one line per configuration that lost any. */
export function wasteLines(stats: ConfigStats[]): string {
  return stats
    .filter((c) => c.retryWaste.wastedMs > 0)
    .map((c) => {
      const w = c.retryWaste;
      const causes = Object.entries(w.byCause)
        .sort((a, b) => b[1] - a[1])
        .map(([k, ms]) => `${k} ${pct(ms / w.sandboxMs)}%`)
        .join(', ');
      return `${c.config}: ${pct(w.share)}% of sandbox time bought no grade (${w.wastedRuns} of ${w.runs} runs): ${causes}\n`;
    })
    .join('');
}
