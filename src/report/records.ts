import type { StatsRecord } from '../records/record.js';

/**
 * The mean of each named reward other than the primary one, per configuration, over its graded
 * trials that report it (the others are kept and shown, never used for rates).
 */
export function namedRewardMeans(
  records: StatsRecord[],
): Map<string, Array<{ name: string; mean: number; trials: number }>> {
  const sums = new Map<string, Map<string, { sum: number; n: number }>>();
  for (const r of records) {
    if (r.reward === null || !r.rewards) continue;
    for (const [k, v] of Object.entries(r.rewards)) {
      if (k === 'reward') continue;
      const byName = sums.get(r.config) ?? new Map<string, { sum: number; n: number }>();
      const acc = byName.get(k) ?? { sum: 0, n: 0 };
      acc.sum += v;
      acc.n += 1;
      byName.set(k, acc);
      sums.set(r.config, byName);
    }
  }
  return new Map(
    [...sums].map(([config, byName]) => [
      config,
      [...byName].sort(([a], [b]) => a.localeCompare(b)).map(([name, a]) => ({ name, mean: a.sum / a.n, trials: a.n })),
    ]),
  );
}

/**
 * Each configuration split by the image its trials ran on (`stats --by-image`): trials on two
 * builds of one task (a rebuild that pulled other packages, an engine that built its own) are
 * then told apart. The label gains ` @` and the id's first 12 digits (`?` when not recorded).
 */
export function splitByImage(records: StatsRecord[]): StatsRecord[] {
  return records.map((r) => ({
    ...r,
    config: `${r.config} @${r.imageId ? r.imageId.replace(/^sha256:/, '').slice(0, 12) : '?'}`,
  }));
}
