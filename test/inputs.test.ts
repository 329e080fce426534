import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, it } from 'node:test';
import type { Agent } from '../src/agent/agent.js';
import { loadPrices } from '../src/agent/registry.js';
import { openJob } from '../src/job/job.js';
import { parseSpec } from '../src/job/load-spec.js';
import { runJob } from '../src/job/run-job.js';
import { loadTask } from '../src/task/load.js';
import { CLI, tempDir, trivialTask } from './helpers.js';
import { FakeProvider } from './support/fake-provider.js';

function cli(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: 120_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('every input is validated where it enters', () => {
  it('re-validates flags merged into a job spec: --infra-retries abc is bad usage, not an endless retry', async () => {
    const task = await trivialTask();
    const r = cli([
      'run',
      '--name',
      'x',
      '--tasks',
      task,
      '--agent',
      'nop',
      '--infra-retries',
      'abc',
      '--jobs-dir',
      await tempDir(),
      '-q',
    ]);
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, /infraRetries/);
  });

  it('refuses a timeout no timer can hold, naming the file', async () => {
    const dir = await trivialTask({ 'task.toml': '[agent]\ntimeout_sec = 3000000\n' });
    await assert.rejects(loadTask(dir), (err: Error) => {
      assert.match(err.message, /task\.toml/);
      assert.match(err.message, /timeout_sec/);
      return true;
    });
  });

  it('refuses a price file that is not a table of prices, naming it', async () => {
    const dir = await tempDir();
    for (const [name, text] of [
      ['null.json', 'null'],
      ['neg.json', '{"m": {"input": -1, "output": 2}}'],
      ['str.json', '{"m": {"input": "cheap", "output": 2}}'],
    ]) {
      const file = path.join(dir, name!);
      await writeFile(file, text!);
      await assert.rejects(loadPrices(file), (err: Error & { code?: string }) => {
        assert.equal(err.code, 'bad_input');
        assert.ok(err.message.includes(file), err.message);
        return true;
      });
    }
    assert.deepEqual(
      await loadPrices(
        await (async () => {
          const f = path.join(dir, 'ok.json');
          await writeFile(f, '{"m": {"input": 1, "output": 2}}');
          return f;
        })(),
      ),
      { m: { input: 1, output: 2 } },
    );
  });

  it('says a damaged job store is damaged (exit 2: bad input, the file named), not that the job does not exist', async () => {
    const jobsDir = await tempDir();
    await mkdir(path.join(jobsDir, 'broken'), { recursive: true });
    await writeFile(
      path.join(jobsDir, 'broken', 'job.db'),
      'this is not a database, just text long enough to look like a file header '.repeat(20),
    );
    const r = cli(['trials', '--job', 'broken', '--jobs-dir', jobsDir]);
    assert.equal(r.status, 2, r.stderr);
    assert.ok(r.stderr.includes(path.join(jobsDir, 'broken', 'job.db')), r.stderr);
    assert.match(r.stderr, /damaged|not a termgrade store/);
    const none = cli(['trials', '--job', 'absent', '--jobs-dir', jobsDir]);
    assert.equal(none.status, 2);
    assert.match(none.stderr, /no job "absent"/);
  });

  it('refuses a second run of the same job while the first holds it (exit 2, a clear message)', async () => {
    const jobsDir = await tempDir();
    const spec = parseSpec(
      { name: 'busy', tasks: { paths: [await trivialTask()] }, agents: [{ agent: 'nop' }] },
      'test',
    );
    const held = await openJob(spec, jobsDir);
    try {
      const r = cli(['run', '--job', 'busy', '--jobs-dir', jobsDir, '-q']);
      assert.equal(r.status, 2, r.stderr);
      assert.match(r.stderr, /being run by another termgrade process/);
    } finally {
      await held.close();
    }
  });
});

describe('secrets never reach a record', () => {
  it('keeps a key out of the store and the listing, raw or JSON-escaped, even in error messages', async () => {
    const SECRET = 'sk-"tricky\\key"-0123456789';
    const jobsDir = await tempDir();
    const spec = parseSpec(
      { name: 'secret', tasks: { paths: [await trivialTask()] }, agents: [{ agent: 'nop' }] },
      'test',
    );
    const leaky: Agent = {
      name: 'leaky',
      model: null,
      setup: async () => {},
      run: async () => {
        throw new Error(
          `endpoint said: invalid key ${SECRET} (${JSON.stringify(SECRET)}, ${encodeURIComponent(SECRET)})`,
        );
      },
    };
    const opened = await openJob(spec, jobsDir);
    try {
      await runJob({
        spec,
        tasks: opened.tasks,
        store: opened.store,
        provider: new FakeProvider(),
        jobDir: opened.jobDir,
        agentFactory: () => ({ agent: leaky, secrets: [SECRET] }),
      });
    } finally {
      await opened.close();
    }
    const listing = cli(['trials', '--job', 'secret', '--jobs-dir', jobsDir, '--json']);
    assert.equal(listing.status, 0, listing.stderr);
    assert.match(listing.stdout, /REDACTED/);
    const db = await readFile(path.join(jobsDir, 'secret', 'job.db'));
    for (const text of [listing.stdout, db.toString('latin1')]) {
      for (const form of [SECRET, JSON.stringify(SECRET).slice(1, -1), encodeURIComponent(SECRET), 'tricky'])
        assert.ok(!text.includes(form), `found ${form}`);
    }
  });
});

describe('usual mistakes get a clear message and exit 2, never a stack trace', () => {
  it('a typo in a job file names the key and the key it meant', async () => {
    const dir = await tempDir();
    const task = await trivialTask();
    for (const [text, want] of [
      [
        `name: typo\ntasks: { paths: [${task}] }\nagents: [{ agent: nop }]\nkk: 4\n`,
        /unknown key "kk" in \(top level\); did you mean "k"\?/,
      ],
      [
        `name: typo\ntasks: { paths: [${task}] }\nagents: [{ agent: nop, concurency: 3 }]\n`,
        /unknown key "concurency" in agents\.0; did you mean "concurrency"\?/,
      ],
    ] as const) {
      const file = path.join(dir, 'job.yaml');
      await writeFile(file, text);
      const r = cli(['run', file, '--jobs-dir', await tempDir(), '-q']);
      assert.equal(r.status, 2, r.stderr);
      assert.match(r.stderr, want);
      assert.ok(r.stderr.includes(file), 'the file is named');
      assert.doesNotMatch(r.stderr, /\n\s+at /, 'no stack trace');
    }
  });

  it('--name of an existing job is refused (resume is said with --job); a task missing tests/ is refused even with -q', async () => {
    const jobsDir = await tempDir();
    const task = await trivialTask();
    assert.equal(
      cli(['run', '--name', 'once', '--tasks', task, '--agent', 'nop', '--jobs-dir', jobsDir, '-q']).status,
      0,
    );
    const again = cli(['run', '--name', 'once', '--tasks', task, '--agent', 'nop', '--jobs-dir', jobsDir, '-q']);
    assert.equal(again.status, 2);
    assert.match(again.stderr, /already exists.*--job once/);
    const broken = await trivialTask();
    await (await import('node:fs/promises')).rm(path.join(broken, 'tests'), { recursive: true });
    const r = cli(['run', '--name', 'broken', '--tasks', broken, '--agent', 'nop', '--jobs-dir', jobsDir, '-q']);
    assert.equal(r.status, 2);
    assert.match(r.stderr, /tests\/test\.sh: missing/);
  });

  it('check given a task.toml checks its folder; a listing filter that does not exist is refused', async () => {
    const task = await trivialTask();
    const r = cli(['check', path.join(task, 'task.toml'), '--json', '-q', '--probes', 'none', '-o', await tempDir()]);
    assert.equal(r.status, 0, r.stderr);
    assert.equal(JSON.parse(r.stdout).summary.admissible, 1);
    const bad = cli(['trials', '--job', 'x', '--status', 'failed']);
    assert.equal(bad.status, 2);
    assert.match(bad.stderr, /Allowed choices are completed, error, not_run/);
  });

  it('stats piped into a reader that stops early ends quietly', async () => {
    const file = path.join(await tempDir(), 'records.jsonl');
    const lines = Array.from({ length: 3000 }, (_, i) =>
      JSON.stringify({
        trial_id: `t${i}`,
        task: `task-${i % 1000}`,
        agent: 'a',
        model: 'm',
        reward: i % 2,
        error_class: null,
      }),
    );
    await writeFile(file, `${lines.join('\n')}\n`);
    const r = spawnSync('bash', ['-c', `node ${CLI} stats ${file} --tasks | head -1`], { encoding: 'utf8' });
    assert.equal(r.status, 0);
    assert.doesNotMatch(r.stderr, /EPIPE|internal error/);
  });
});

describe('run: choosing tasks from flags, and a clear ending', () => {
  it('filters, limits and samples tasks (the same seed, the same tasks), and ends with a per-configuration table', async () => {
    const root = await tempDir();
    for (let i = 0; i < 6; i++) {
      const t = await trivialTask({ 'task.toml': `[task]\nname = "t${i}"\n` });
      await (await import('node:fs/promises')).cp(t, path.join(root, `t${i}`), { recursive: true });
    }
    const jobsDir = await tempDir();
    const listed = (job: string) =>
      new Set(
        JSON.parse(
          `[${spawnSync(process.execPath, [CLI, 'trials', '--job', job, '--jobs-dir', jobsDir, '--json'], { encoding: 'utf8' }).stdout.trim().split('\n').join(',')}]`,
        ).map((r: { task: string }) => r.task),
      );
    const run = (name: string, extra: string[]) =>
      cli(['run', '--name', name, '--tasks', root, '--agent', 'nop', '--jobs-dir', jobsDir, ...extra]);
    assert.equal(run('filtered', ['--task', 't[1-4]', '--exclude-task', 't2', '--n-tasks', '2', '-q']).status, 0);
    assert.deepEqual([...listed('filtered')].sort(), ['t1', 't3']);
    assert.equal(run('s1', ['--sample', '3', '--seed', '7', '-q']).status, 0);
    assert.equal(run('s2', ['--sample', '3', '--seed', '7', '-q']).status, 0);
    assert.equal(listed('s1').size, 3);
    assert.deepEqual([...listed('s1')].sort(), [...listed('s2')].sort(), 'the same seed draws the same tasks');
    const ending = run('ending', ['--n-tasks', '2']);
    assert.equal(ending.status, 0, ending.stderr);
    assert.match(ending.stdout, /config\s+graded\s+pass@1 %/);
    assert.match(ending.stdout, /^nop\s+2\s+0\.0/m);
    assert.match(ending.stdout, /more: termgrade stats/);
  });
});
