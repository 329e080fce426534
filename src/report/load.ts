import { createReadStream } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { TermgradeError } from '../util/errors.js';
import { filesNamed } from '../util/files.js';
import { baseRuleOf, taskRuleOf, type Priors } from '../job/adaptive-gate.js';
import type { JobSpec } from '../job/spec.js';
import { JobStore, slotKey } from '../store/store.js';
import { isNotRun, toStatsRecord, type StatsRecord } from './records.js';

function badRecord(where: string, err: unknown): TermgradeError {
  const detail = err instanceof Error && 'issues' in err ? JSON.stringify((err as { issues: unknown[] }).issues[0]) : (err as Error).message;
  return new TermgradeError('bad_input', `${where}: not a trial record: ${detail}`);
}

/** Lines of a file, read in large chunks (readline is several times slower on 100 MB files). */
async function* lines(file: string): AsyncGenerator<string> {
  let rest = '';
  for await (const chunk of createReadStream(file, { encoding: 'utf8', highWaterMark: 1 << 20 })) {
    const parts = (rest + (chunk as string)).split('\n');
    rest = parts.pop()!;
    yield* parts;
  }
  if (rest) yield rest;
}

async function readJsonl(file: string, out: StatsRecord[]): Promise<void> {
  let n = 0;
  for await (const text of lines(file)) {
    n += 1;
    const line = text.endsWith('\r') ? text.slice(0, -1) : text;
    if (line.trim() === '') continue;
    let raw: unknown;
    try {
      raw = JSON.parse(line);
    } catch (err) {
      throw new TermgradeError('bad_input', `${file}:${n}: not JSON: ${(err as Error).message}`);
    }
    if (isNotRun(raw)) continue;
    try {
      out.push(toStatsRecord(raw));
    } catch (err) {
      throw badRecord(`${file}:${n}`, err);
    }
  }
}

/** A job folder: its store's graded and errored trials. */
function readJob(dir: string, out: StatsRecord[]): void {
  const store = JobStore.open(path.join(dir, 'job.db'), { readonly: true });
  try {
    const spec = JSON.parse(store.getMeta('spec') ?? '{}') as Partial<JobSpec>;
    const priors = JSON.parse(store.getMeta('priors') ?? 'null') as Priors | null;
    // Jobs made before the stopping rule could be chosen used predictive curtailment in pairs.
    const stored = spec.adaptive as Partial<NonNullable<JobSpec['adaptive']>> | undefined;
    const adaptive = stored && spec.k ? { lo: 0.25, hi: 0.75, method: 'curtail' as const, step: 2, ...stored } : null;
    const base = adaptive ? baseRuleOf(adaptive, spec.k!) : null;
    // Each task's rates come from its own rule (its own prior): the rule its trials were sampled under.
    // Records replaced by `run --retry` count as discarded runs of their slot (retry waste).
    const replaced = new Map<string, Array<{ class: string; durationMs: number }>>();
    for (const h of store.allHistory()) {
      const key = slotKey(h);
      replaced.set(key, [...(replaced.get(key) ?? []), ...h.retries, { class: h.error_class ?? 'replaced', durationMs: h.duration_ms }]);
    }
    for (const row of store.listTrials()) {
      if (row.status === 'not_run') continue;
      const rec = toStatsRecord(row);
      const earlier = replaced.get(slotKey(row));
      out.push({ ...rec, retries: earlier ? [...earlier, ...(rec.retries ?? [])] : rec.retries, adaptive: base && adaptive ? taskRuleOf(base, adaptive, priors, row.config, row.task) : null });
    }
  } finally {
    store.close();
  }
}

/**
 * Trial records from job folders (their job.db), JSONL files (one trial result or job-listing line
 * per line) and folders holding trial folders (every result.json below them, e.g. a check's --out). A bad line is an
 * error naming the file and line; a trial id seen twice is counted once.
 */
export async function loadRecords(sources: string[]): Promise<StatsRecord[]> {
  const out: StatsRecord[] = [];
  for (const source of sources) {
    let st;
    try {
      st = await stat(source);
    } catch {
      throw new TermgradeError('bad_input', `${source}: no such file or folder`);
    }
    if (st.isDirectory() && (await stat(path.join(source, 'job.db')).catch(() => null))) {
      readJob(source, out);
    } else if (st.isDirectory()) {
      for await (const file of filesNamed(source, 'result.json')) {
        let raw: unknown;
        try {
          raw = JSON.parse(await readFile(file, 'utf8'));
        } catch (err) {
          throw new TermgradeError('bad_input', `${file}: not JSON: ${(err as Error).message}`);
        }
        try {
          out.push(toStatsRecord(raw));
        } catch (err) {
          throw badRecord(file, err);
        }
      }
    } else {
      await readJsonl(source, out);
    }
  }
  const seen = new Set<string>();
  return out.filter((r) => (seen.has(r.trialId) ? false : (seen.add(r.trialId), true)));
}
