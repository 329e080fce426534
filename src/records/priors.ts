import { TermgradeError } from '../util/errors.js';
import { countByTask } from './counts.js';
import { loadRecords } from './load.js';
import { priorConfigOf, type AdaptiveSpec, type Priors } from './sampling.js';

/**
 * Each configuration's (by label) earlier counts per task, from the prior's source: its configuration named
 * in the spec, else the one with the same label (never silently another's).
 */
export async function readPriors(prior: NonNullable<AdaptiveSpec['prior']>, labels: string[]): Promise<Priors> {
  const records = await loadRecords([prior.source]);
  const counts = countByTask(records);
  const time = new Map<string, { sum: number; n: number }>();
  for (const r of records) {
    if (r.reward === null) continue;
    const key = `${r.config}\u0000${r.task}`;
    const t = time.get(key) ?? { sum: 0, n: 0 };
    time.set(key, { sum: t.sum + r.durationMs, n: t.n + 1 });
  }
  const meanMs = (config: string, task: string): number | undefined => {
    const t = time.get(`${config}\u0000${task}`);
    return t && t.n ? Math.round(t.sum / t.n) : undefined;
  };
  const available = [...new Set(counts.map((t) => t.config))].sort();
  if (!available.length)
    throw new TermgradeError('bad_input', `${prior.source}: no graded trials to take a prior from`);
  const priors: Priors = {};
  for (const label of labels) {
    const chosen = priorConfigOf(label, available, prior.config);
    if ('problem' in chosen)
      throw new TermgradeError('usage', `${prior.source}: prior of "${label}": ${chosen.problem}`);
    const from = chosen.from;
    priors[label] = Object.fromEntries(
      counts
        .filter((t) => t.config === from && t.n > 0)
        .map((t) => [t.task, { n: t.n, c: t.c, ms: meanMs(from, t.task) }]),
    );
  }
  return priors;
}
