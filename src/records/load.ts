import { createReadStream } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { TermgradeError } from '../util/errors.js';
import { filesNamed } from '../util/files.js';
import { storedRules } from './sampling.js';
import { slotKey } from '../store/store.js';
import { trialKey, TrialFolderJobs, type JobRef } from '../store/identity.js';
import { isNotRun, toStatsRecord, type StatsRecord } from './record.js';
import { openJobRecords, recordSource } from './source.js';

function badRecord(where: string, err: unknown): TermgradeError {
  const detail =
    err instanceof Error && 'issues' in err
      ? JSON.stringify((err as { issues: unknown[] }).issues[0])
      : (err as Error).message;
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

async function readJsonl(file: string, out: StatsRecord[], jobs: Jobs): Promise<void> {
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
    let rec: StatsRecord;
    try {
      rec = toStatsRecord(raw);
    } catch (err) {
      throw badRecord(`${file}:${n}`, err);
    }
    jobs.note({
      id: rec.job ?? '',
      name: rec.job ? path.basename(file) : `${path.basename(file)} (no job ids)`,
      source: file,
    });
    out.push(rec);
  }
}

/** A job folder: its store's graded and errored trials. */
function readJob(dir: string, out: StatsRecord[], jobs: Jobs): void {
  const store = openJobRecords(dir);
  try {
    jobs.note({ id: store.jobId(), name: path.basename(path.resolve(dir)), source: dir });
    const ruleOf = storedRules(store);
    // Each task's rates come from its own rule (its own prior): the rule its trials were sampled under.
    // Records replaced by `run --retry` count as discarded runs of their slot (retry waste).
    const replaced = new Map<string, Array<{ class: string; durationMs: number }>>();
    for (const h of store.allHistory()) {
      const key = slotKey(h);
      replaced.set(key, [
        ...(replaced.get(key) ?? []),
        ...h.retries,
        { class: h.error_class ?? 'replaced', durationMs: h.duration_ms },
      ]);
    }
    for (const row of store.listTrials()) {
      if (row.status === 'not_run') continue;
      const rec = toStatsRecord(row);
      const earlier = replaced.get(slotKey(row));
      out.push({
        ...rec,
        retries: earlier ? [...earlier, ...(rec.retries ?? [])] : rec.retries,
        adaptive: ruleOf(row.config, row.task),
      });
    }
  } finally {
    store.close();
  }
}

/** The jobs records were read from, by id (the first source that named each). */
class Jobs {
  readonly refs = new Map<string, JobRef>();
  note(ref: JobRef): void {
    if (!this.refs.has(ref.id)) this.refs.set(ref.id, ref);
  }
}

/** Records read from several sources, and the jobs they came from with each one's trial count. */
export interface RecordSet {
  records: StatsRecord[];
  jobs: Array<JobRef & { trials: number }>;
}

/** Trial records of the sources (see loadRecordSet). */
export async function loadRecords(sources: string[]): Promise<StatsRecord[]> {
  return (await loadRecordSet(sources)).records;
}

/**
 * Trial records from job folders (their job.db), JSONL files (one trial result or job-listing line
 * per line) and folders holding trial folders (every result.json below them, e.g. a check's --out). A bad line is an
 * error naming the file and line. A trial is its job and its trial id (store/identity.ts): the
 * same trial read twice (a job given twice, or with its own trials folder) is counted once, and
 * trials of two jobs are never merged, however alike their ids. A folder holding neither a job nor
 * a trial is bad input, unless `allowEmpty` (a report of a synth job alone has no trials to read).
 */
export async function loadRecordSet(sources: string[], how: { allowEmpty?: boolean } = {}): Promise<RecordSet> {
  const out: StatsRecord[] = [];
  const jobs = new Jobs();
  const folders = new TrialFolderJobs();
  for (const source of sources) {
    const kind = (await recordSource(source)).kind;
    if (kind === 'job') {
      readJob(source, out, jobs);
    } else if (kind === 'folder') {
      let found = 0;
      for await (const file of filesNamed(source, 'result.json')) {
        found += 1;
        let raw: unknown;
        try {
          raw = JSON.parse(await readFile(file, 'utf8'));
        } catch (err) {
          throw new TermgradeError('bad_input', `${file}: not JSON: ${(err as Error).message}`);
        }
        let rec: StatsRecord;
        try {
          rec = toStatsRecord(raw);
        } catch (err) {
          throw badRecord(file, err);
        }
        const job = folders.of(file);
        jobs.note(job);
        out.push({ ...rec, job: job.id });
      }
      if (!found && !how.allowEmpty)
        throw new TermgradeError(
          'bad_input',
          `${source}: not a job folder (no job.db) and no trial folders under it (no result.json)`,
        );
    } else {
      await readJsonl(source, out, jobs);
    }
  }
  const seen = new Set<string>();
  const records = out.filter((r) => {
    const key = trialKey(r.job ?? '', r.trialId);
    return seen.has(key) ? false : (seen.add(key), true);
  });
  const counts = new Map<string, number>();
  for (const r of records) counts.set(r.job ?? '', (counts.get(r.job ?? '') ?? 0) + 1);
  return { records, jobs: [...jobs.refs.values()].map((j) => ({ ...j, trials: counts.get(j.id) ?? 0 })) };
}
