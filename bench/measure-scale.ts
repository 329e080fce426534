/**
 * `stats` and `select` over 100,000 trial records, end to end through the CLI (read JSONL,
 * parse, aggregate, print), as a user runs them.
 *
 *   node dist/bench/measure-scale.js [records]
 */
import { spawnSync } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { scaleShape, syntheticRecords } from './synthetic-records.js';

const target = Number(process.argv[2] ?? 100_000);
const cli = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../src/cli/main.js');
const { configs, tasks, k } = scaleShape(target);

const dir = await mkdtemp(path.join(tmpdir(), 'termgrade-measure-'));
try {
  const file = path.join(dir, 'trials.jsonl');
  const ws = createWriteStream(file);
  let count = 0;
  for (const r of syntheticRecords({ configs, tasks, k })) {
    if (!ws.write(`${JSON.stringify(r)}\n`)) await new Promise<void>((res) => ws.once('drain', () => res()));
    count += 1;
  }
  await new Promise<void>((res) => ws.end(() => res()));
  const mb = (await stat(file)).size / 1e6;
  console.log(
    `${count} trial records (${configs.length} configurations x ${tasks} tasks x k=${k}), ${mb.toFixed(0)} MB of JSONL`,
  );
  for (const args of [
    ['stats', file],
    ['stats', file, '--tasks', '--json'],
    ['select', file, '--model', 'bash-tool/model-a', '--n', '150', '--validation', '50', '-o', path.join(dir, 'sel')],
    ['compare', 'bash-tool/model-a', 'bash-tool/model-b', file],
  ]) {
    const t = performance.now();
    const r = spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', maxBuffer: 1 << 30 });
    const s = (performance.now() - t) / 1000;
    if (r.status !== 0) throw new Error(`${args[0]} failed: ${r.stderr}`);
    console.log(
      `  termgrade ${args[0]!.padEnd(8)} ${args.includes('--tasks') ? '--tasks --json' : ''.padEnd(14)} ${s.toFixed(2)} s  (${Math.round(count / s).toLocaleString('en')} records/s)`,
    );
  }
} finally {
  await rm(dir, { recursive: true, force: true });
}
