/** Mean and standard error (sample sd / sqrt(n)) of per-task values. */
export interface MeanSe {
  mean: number;
  se: number;
  n: number;
}

export function meanSe(values: number[]): MeanSe {
  const n = values.length;
  if (n === 0) return { mean: Number.NaN, se: Number.NaN, n };
  const mean = values.reduce((a, b) => a + b, 0) / n;
  if (n === 1) return { mean, se: Number.NaN, n };
  const variance = values.reduce((a, v) => a + (v - mean) ** 2, 0) / (n - 1);
  return { mean, se: Math.sqrt(variance / n), n };
}

export function median(values: number[]): number {
  if (values.length === 0) return Number.NaN;
  const s = [...values].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}
