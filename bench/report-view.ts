/**
 * `termgrade report` and `termgrade view` at 100,000 trials (a synthetic job store, trial folders
 * absent as after a move), each against reading the same store alone, side by side in one run:
 * - report build (records, every figure, SVG charts, the page) / the records `stats` reads;
 * - the viewer's first page (open the store, index it, one filtered and sorted page over HTTP)
 *   / listing the store's rows alone.
 *
 *   node dist/bench/report-view.js [records]
 */
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { buildReport } from '../src/report/build.js';
import { loadRecords } from '../src/records/load.js';
import { JobStore } from '../src/store/store.js';
import type { TrialResult } from '../src/trial/schema.js';
import { startViewer } from '../src/view/server.js';
import { asStoredTrial, scaleShape, syntheticRecords } from './synthetic-records.js';

const N = Number(process.argv[2] ?? 100_000);
const { configs, tasks, k } = scaleShape(N);
const dir = await mkdtemp(path.join(tmpdir(), 'termgrade-report-bench-'));
try {
  const jobDir = path.join(dir, 'job');
  const store = JobStore.open(path.join(jobDir, 'job.db'));
  const batch: Array<{ result: TrialResult; extra: Parameters<JobStore['recordTrial']>[1] }> = [];
  let n = 0;
  for (const r of syntheticRecords({ configs, tasks, k })) {
    if (n++ >= N) break;
    const { result, config } = asStoredTrial(r);
    batch.push({
      result,
      extra: {
        slot: { config, task: result.task.name, attempt: result.attempt },
        trialDir: path.join(jobDir, 'trials', result.trialId),
        infraAttempts: 1,
        retryReasons: [],
      },
    });
    if (batch.length === 5000) store.recordMany(batch.splice(0));
  }
  if (batch.length) store.recordMany(batch.splice(0));
  store.setMeta('slots', String(N));
  store.close();

  const time = async <T>(fn: () => Promise<T> | T): Promise<[number, T]> => {
    const t = performance.now();
    const v = await fn();
    return [(performance.now() - t) / 1000, v];
  };
  const [tRecords, records] = await time(() => loadRecords([jobDir]));
  const [tReport, built] = await time(() => buildReport({ sources: [jobDir], outDir: path.join(dir, 'report') }));
  const [tRows, rows] = await time(() => {
    const s = JobStore.open(path.join(jobDir, 'job.db'), { readonly: true });
    const all = [...s.listTrials()];
    s.close();
    return all;
  });
  const [tFirst, first] = await time(async () => {
    const viewer = await startViewer({ sources: [jobDir], port: 0 });
    const page = (await (
      await fetch(`${viewer.url}/api/trials?status=completed&sort=duration_ms&dir=desc&limit=50`, {
        headers: { authorization: `Bearer ${viewer.token}` },
      })
    ).json()) as { total: number; rows: unknown[] };
    await viewer.close();
    return page;
  });
  const [, paged] = await time(async () => {
    const viewer = await startViewer({ sources: [jobDir], port: 0 });
    const t = performance.now();
    for (let i = 0; i < 20; i++)
      await (
        await fetch(`${viewer.url}/api/trials?test=test_3&reward=fail&sort=task&offset=${i * 50}&limit=50`, {
          headers: { authorization: `Bearer ${viewer.token}` },
        })
      ).json();
    const ms = (performance.now() - t) / 20;
    await viewer.close();
    return ms;
  });
  console.log(
    `${records.length} trial records (${configs.length} configurations x ${tasks} tasks x k=${k}); store ${((await stat(path.join(jobDir, 'job.db'))).size / 1e6).toFixed(0)} MB`,
  );
  console.log(`  records as stats reads them      ${tRecords.toFixed(2)} s`);
  console.log(
    `  report build (page + charts)     ${tReport.toFixed(2)} s   ratio ${(tReport / tRecords).toFixed(2)}  (${((await stat(built.index)).size / 1e6).toFixed(1)} MB page)`,
  );
  console.log(`  store rows listed alone          ${tRows.toFixed(2)} s   (${rows.length} rows)`);
  console.log(
    `  viewer first page (open+index+query over HTTP) ${tFirst.toFixed(2)} s   ratio ${(tFirst / tRows).toFixed(2)}  (${first.total} matching, ${first.rows.length} shown)`,
  );
  console.log(
    `  viewer, a later page with filters (failing test, reward) and sorting: ${paged.toFixed(1)} ms per page`,
  );
} finally {
  await rm(dir, { recursive: true, force: true });
}
