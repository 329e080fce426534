/**
 * The job store at scale: 100,000 synthetic trial records written one transaction per trial (as
 * the runner writes them) and in batches (as an import does), then listed back.
 *
 *   node dist/bench/store-ingest.js [records]
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { JobStore } from '../src/store/store.js';
import type { TrialResult } from '../src/trial/schema.js';
import { asStoredTrial, scaleShape, syntheticRecords } from './synthetic-records.js';

const N = Number(process.argv[2] ?? 100_000);
const shape = scaleShape(N);

function items(): Array<{ result: TrialResult; config: string }> {
  const out: Array<{ result: TrialResult; config: string }> = [];
  for (const r of syntheticRecords(shape)) {
    out.push(asStoredTrial(r));
    if (out.length >= N) break;
  }
  return out;
}

const dir = await mkdtemp(path.join(tmpdir(), 'termgrade-store-'));
try {
  const data = items();
  const extra = (r: TrialResult, config: string) => ({
    slot: { config, task: r.task.name, attempt: r.attempt },
    trialDir: `/jobs/x/trials/${r.trialId}`,
    infraAttempts: 1,
    retryReasons: [],
  });

  const one = JobStore.open(path.join(dir, 'one', 'job.db'));
  let t = performance.now();
  for (const { result, config } of data) one.recordTrial(result, extra(result, config));
  const perTrial = (performance.now() - t) / 1000;

  const batch = JobStore.open(path.join(dir, 'batch', 'job.db'));
  t = performance.now();
  for (let i = 0; i < data.length; i += 5000)
    batch.recordMany(data.slice(i, i + 5000).map(({ result, config }) => ({ result, extra: extra(result, config) })));
  const batched = (performance.now() - t) / 1000;

  t = performance.now();
  let listed = 0;
  let bytes = 0;
  for (const row of one.listTrials()) {
    listed += 1;
    bytes += JSON.stringify(row).length + 1;
  }
  const listing = (performance.now() - t) / 1000;
  if (listed !== data.length) throw new Error(`listed ${listed}, wrote ${data.length}`);
  const rate = (n: number, s: number) => `${Math.round(n / s).toLocaleString('en')} records/s`;
  console.log(
    `${data.length} trial records with 4 tests each, ${shape.configs.length} configurations x ${shape.tasks} tasks x k=${shape.k}`,
  );
  console.log(
    `  ingest, one transaction per trial (the runner's path)  ${perTrial.toFixed(2)} s  ${rate(data.length, perTrial)}`,
  );
  console.log(
    `  ingest, batches of 5,000 (the import path)             ${batched.toFixed(2)} s  ${rate(data.length, batched)}`,
  );
  console.log(
    `  list as JSON lines (trials --json)                     ${listing.toFixed(2)} s  ${rate(listed, listing)}  (${(bytes / 1e6).toFixed(0)} MB)`,
  );
  one.close();
  batch.close();
} finally {
  await rm(dir, { recursive: true, force: true });
}
