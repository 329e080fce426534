/**
 * Field-by-field comparison of two termgrade jobs (a job and its Harbor round trip) and of two
 * Harbor job folders (a folder and its import exported again). What may differ is named here, each
 * with why; README "What a round trip keeps" lists the same.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { JobStore } from '../../src/store/store.js';
import { ROOT } from '../helpers.js';
import { type JobResult, type TrialResult } from './harbor-models.js';

/** Store columns that name where a trial is, not what it is: a round trip moves it. */
const WHERE = ['job_id', 'trial_dir', 'source'] as const;

/** Every file under a folder, relative path -> bytes (as base64), `skip` names left out at any depth. */
export async function filesOf(dir: string, skip: ReadonlySet<string> = new Set()): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  const walk = async (d: string, rel: string): Promise<void> => {
    for (const name of (await readdir(d)).sort()) {
      if (skip.has(name)) continue;
      const p = path.join(d, name);
      if ((await stat(p)).isDirectory()) await walk(p, path.join(rel, name));
      else out.set(path.join(rel, name), (await readFile(p)).toString('base64'));
    }
  };
  await walk(dir, '');
  return out;
}

/**
 * The same trials in two job folders: every store column but where the trial is (job id, folder,
 * `source` = harbor for an import), the same per-test rows, the same trial record (result.json)
 * field by field, and the same logs (agent/, verifier/) byte for byte.
 */
export async function assertSameTrials(jobA: string, jobB: string, withNotRun = false): Promise<number> {
  const read = (dir: string) => {
    const store = JobStore.open(path.join(dir, 'job.db'), { readonly: true });
    try {
      // Every row, a cancelled or pending trial (not_run) too: `withNotRun` false leaves those out.
      return [...store.listTrials()]
        .filter((r) => withNotRun || r.status !== 'not_run')
        .map((r) => ({ row: r, tests: store.testsOf(r.trial_id) }));
    } finally {
      store.close();
    }
  };
  const a = read(jobA);
  const b = read(jobB);
  assert.deepEqual(b.map((x) => x.row.trial_id).sort(), a.map((x) => x.row.trial_id).sort(), 'the same trial ids');
  for (const x of a) {
    const y = b.find((t) => t.row.trial_id === x.row.trial_id)!;
    const strip = (r: Record<string, unknown>) =>
      Object.fromEntries(Object.entries(r).filter(([k]) => !WHERE.includes(k as never)));
    assert.deepEqual(strip(y.row), strip(x.row), `${x.row.trial_id}: every store column`);
    assert.equal(y.row.source, 'harbor');
    assert.deepEqual(y.tests, x.tests, `${x.row.trial_id}: per-test rows`);
    assert.equal(!!y.row.trial_dir, !!x.row.trial_dir, `${x.row.trial_id}: a folder in both or neither`);
    if (!x.row.trial_dir) continue;
    const record = async (dir: string) => readFile(path.join(dir, 'result.json'), 'utf8').catch(() => 'null');
    const ra = JSON.parse(await record(x.row.trial_dir));
    const rb = JSON.parse(await record(y.row.trial_dir!));
    assert.equal(rb === null, ra === null, `${x.row.trial_id}: a record in both or neither (a pending trial has none)`);
    for (const key of new Set([...Object.keys(ra ?? {}), ...Object.keys(rb ?? {})]))
      assert.deepEqual(rb[key], ra[key], `${x.row.trial_id}: result.json field ${key}`);
    const logs = async (dir: string) => filesOf(dir, new Set(['result.json', 'harbor']));
    assert.deepEqual(await logs(y.row.trial_dir!), await logs(x.row.trial_dir!), `${x.row.trial_id}: logs`);
  }
  return a.length;
}

/** A JSON file of a folder. */
export const readJson = async <T = Record<string, unknown>>(file: string): Promise<T> =>
  JSON.parse(await readFile(file, 'utf8')) as T;

/**
 * Two Harbor job folders with the same content: the same trial folders, each trial's result.json
 * and config.json equal field by field but for where it lies (trial_uri, config.trials_dir), every
 * other file byte for byte; the job's config.json but for its name and folder (job_name, jobs_dir);
 * its result.json (`exact`: but for when it was written, updated_at; `harbor-stats`: a folder Harbor
 * wrote, whose statistics termgrade computes again under its own accounting).
 */
export async function assertSameHarborFolders(
  a: string,
  b: string,
  jobResult: 'exact' | 'harbor-stats',
): Promise<void> {
  const trialsOf = async (d: string) => {
    const names: string[] = [];
    for (const n of (await readdir(d)).sort()) if ((await stat(path.join(d, n))).isDirectory()) names.push(n);
    return names;
  };
  const names = await trialsOf(a);
  assert.deepEqual(await trialsOf(b), names, 'the same trial folders');
  for (const name of names) {
    const maybe = (d: string) => readJson<TrialResult>(path.join(d, name, 'result.json')).catch(() => null);
    const [ra, rb] = [await maybe(a), await maybe(b)];
    assert.equal(rb === null, ra === null, `${name}: a result.json in both or neither (a pending trial has none)`);
    for (const key of new Set([...Object.keys(ra ?? {}), ...Object.keys(rb ?? {})] as Array<keyof TrialResult>)) {
      if (key === 'trial_uri') continue;
      if (key === 'config') {
        assert.deepEqual({ ...rb!.config, trials_dir: null }, { ...ra!.config, trials_dir: null }, `${name}: config`);
        continue;
      }
      assert.deepEqual(rb![key], ra![key], `${name}: result.json field ${key}`);
    }
    const [ca, cb] = [
      await readJson(path.join(a, name, 'config.json')),
      await readJson(path.join(b, name, 'config.json')),
    ];
    assert.deepEqual({ ...cb, trials_dir: null }, { ...ca, trials_dir: null }, `${name}: config.json`);
    const files = (d: string) => filesOf(d, new Set(['result.json', 'config.json']));
    assert.deepEqual(await files(path.join(b, name)), await files(path.join(a, name)), `${name}: every other file`);
  }
  const [ja, jb] = [await readJson(path.join(a, 'config.json')), await readJson(path.join(b, 'config.json'))];
  assert.deepEqual(
    { ...jb, job_name: null, jobs_dir: null },
    { ...ja, job_name: null, jobs_dir: null },
    'job config.json',
  );
  const [xa, xb] = [
    await readJson<JobResult>(path.join(a, 'result.json')),
    await readJson<JobResult>(path.join(b, 'result.json')),
  ];
  if (jobResult === 'exact') {
    assert.deepEqual({ ...xb, updated_at: null }, { ...xa, updated_at: null }, 'job result.json');
    return;
  }
  // A job Harbor wrote: its id, times and counts, and per agent x model x dataset the trials, errors,
  // rewards (keys compared as the numbers pydantic reads) and exceptions. Its metrics are not
  // compared: termgrade's mean is over graded trials, Harbor's counts a trial without a reward as 0.
  assert.equal(xb.id, xa.id, 'job id');
  for (const key of ['started_at', 'finished_at'] as const)
    assert.equal(Date.parse(String(xb[key])), Date.parse(String(xa[key])), `job ${key}`);
  assert.equal(xb.n_total_trials, xa.n_total_trials);
  assert.deepEqual([xb.stats.n_trials, xb.stats.n_errors], [xa.stats.n_trials, xa.stats.n_errors], 'job counts');
  for (const key of ['n_pending_trials', 'n_cancelled_trials', 'n_running_trials'] as const)
    if (xa.stats[key] !== undefined) assert.equal(xb.stats[key], xa.stats[key], `job ${key}`);
  const byNumber = (m: Record<string, Record<string, string[]>>) =>
    Object.fromEntries(
      Object.entries(m).map(([k, v]) => [
        k,
        Object.entries(v)
          .map(([n, t]) => [Number(n), [...t].sort()])
          .sort(),
      ]),
    );
  assert.deepEqual(Object.keys(xb.stats.evals!).sort(), Object.keys(xa.stats.evals!).sort(), 'evals');
  for (const [key, ea] of Object.entries(xa.stats.evals!)) {
    const eb = xb.stats.evals![key]!;
    assert.deepEqual([eb.n_trials, eb.n_errors], [ea.n_trials, ea.n_errors], `${key}: counts`);
    assert.deepEqual(byNumber(eb.reward_stats!), byNumber(ea.reward_stats!), `${key}: reward_stats`);
    assert.deepEqual(eb.exception_stats, ea.exception_stats, `${key}: exception_stats`);
  }
}

/** What test/support/harbor_reader.py (the second, Python double of Harbor's models) knows of a job folder. */
export interface PythonHarborView {
  job: { job_name: string; id: string; n_total_trials: number; n_trials: number; n_errors: number; evals: string[] };
  trials: Array<
    Record<string, unknown> & {
      folder: string;
      trial_name: string;
      task_checksum: string;
      rewards: Record<string, number> | null;
      n_input_tokens: number | null;
      n_output_tokens: number | null;
      rollout_turns: number;
    }
  >;
}

const PYTHON_READER = path.join(ROOT, 'test', 'support', 'harbor_reader.py');

/** Runs the Python reader on a folder: its summary when Harbor's models accept the folder, else its complaint. */
export function readWithPython(dir: string): { ok: true; view: PythonHarborView } | { ok: false; stderr: string } {
  const r = spawnSync('python3', [PYTHON_READER, dir], { encoding: 'utf8' });
  if (r.error) throw r.error;
  if (r.status !== 0) return { ok: false, stderr: r.stderr };
  return { ok: true, view: JSON.parse(r.stdout) as PythonHarborView };
}

/** The Python reader's summary of a folder Harbor's models must accept (fails the test with its complaint). */
export function pythonHarborView(dir: string): PythonHarborView {
  const r = readWithPython(dir);
  assert.ok(r.ok, `Harbor's models (Python double) refuse ${dir}: ${r.ok ? '' : r.stderr}`);
  return r.view;
}
