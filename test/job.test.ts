import assert from 'node:assert/strict';
import { spawnSync, execFileSync } from 'node:child_process';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import Docker from 'dockerode';
import { LABEL_MANAGED, LABEL_OWNER, ownerIsAlive } from '../src/sandbox/docker/labels.js';
import { JobStore } from '../src/store/store.js';
import { CLI, EXAMPLES, makeTask, runCli, tempDir } from './helpers.js';
import { ScriptedModelServer } from './support/scripted-model-server.js';
import { bash } from './support/scripts.js';

function rows(jobsDir: string, name: string) {
  const store = JobStore.open(path.join(jobsDir, name, 'job.db'), { readonly: true });
  try {
    assert.ok(store.integrityOk(), 'the store is intact');
    return [...store.listTrials()];
  } finally {
    store.close();
  }
}

function assertExactSlots(list: ReturnType<typeof rows>, expected: number): void {
  assert.equal(list.length, expected, `expected ${expected} trials, found ${list.length}`);
  const keys = new Set(list.map((r) => `${r.config}|${r.task}|${r.attempt}`));
  assert.equal(keys.size, list.length, 'no slot recorded twice');
  assert.equal(new Set(list.map((r) => r.trial_id)).size, list.length);
}

const docker = new Docker();
const termgradeContainers = async () =>
  docker.listContainers({ all: true, filters: { label: [`${LABEL_MANAGED}=true`] } });

describe('evaluation jobs', () => {
  const servers: ScriptedModelServer[] = [];
  after(() => Promise.all(servers.map((s) => s.close())));

  it('records exactly tasks x configurations x k trials (oracle, nop and a scripted model, k = 2)', async () => {
    // Three of the examples (JUnit only, a service, git state): every example is checked and run
    // by the README tour and cli.test; what is counted here is the job's slots, which 3 show as 8 would.
    const tasks = ['log-errors', 'kv-service', 'git-restore'].map((n) => path.join(EXAMPLES, n));
    const server = new ScriptedModelServer({ '*': () => bash('echo TERMGRADE_TASK_COMPLETE') });
    servers.push(server);
    const baseUrl = await server.start();
    const dir = await tempDir();
    const jobFile = path.join(dir, 'job.yaml');
    await writeFile(
      jobFile,
      [
        'name: examples-k2',
        'tasks:',
        `  paths: ${JSON.stringify(tasks)}`,
        'agents:',
        '  - agent: oracle',
        '  - agent: nop',
        '  - agent: bash-tool',
        '    label: scripted',
        `    model: { baseUrl: ${JSON.stringify(baseUrl)}, model: scripted-m }`,
        '    concurrency: 3',
        'k: 2',
        'concurrency: 6',
      ].join('\n'),
    );
    const jobsDir = path.join(dir, 'jobs');
    const r = await runCli(['run', jobFile, '--jobs-dir', jobsDir, '--quiet']);
    assert.equal(r.status, 0, r.stderr);
    const list = rows(jobsDir, 'examples-k2');
    assertExactSlots(list, 3 * 3 * 2);
    assert.ok(
      list.every((t) => t.status === 'completed'),
      list
        .filter((t) => t.status !== 'completed')
        .map((t) => `${t.trial_id}: ${t.error_message}`)
        .join('\n'),
    );
    assert.equal(list.filter((t) => t.config === 'oracle' && t.reward === 1).length, 6);
    assert.equal(list.filter((t) => t.config === 'scripted').length, 6);
    assert.ok(
      list
        .filter((t) => t.config === 'scripted')
        .every((t) => t.model === 'scripted-m' && t.exit_reason === 'completed'),
    );

    const listing = spawnSync(
      process.execPath,
      [CLI, 'trials', '--job', 'examples-k2', '--jobs-dir', jobsDir, '--json'],
      { encoding: 'utf8' },
    );
    const lines = listing.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    assert.equal(lines.length, 18);
    for (const key of ['trial_id', 'task', 'agent', 'model', 'attempt', 'status', 'reward'])
      assert.ok(key in lines[0], `listing has ${key}`);
    const stats = JSON.parse(
      spawnSync(process.execPath, [CLI, 'stats', path.join(jobsDir, 'examples-k2'), '--json'], { encoding: 'utf8' })
        .stdout,
    );
    assert.deepEqual(
      stats.configs.map((c: { config: string; trials: number }) => [c.config, c.trials]),
      [
        ['nop', 6],
        ['oracle', 6],
        ['scripted', 6],
      ],
    );

    const again = await runCli(['run', '--job', 'examples-k2', '--jobs-dir', jobsDir]);
    assert.equal(again.status, 0, again.stderr);
    assert.match(again.stdout, /0 trials recorded this run .* 18 recorded before/);
    assertExactSlots(rows(jobsDir, 'examples-k2'), 18);
  });

  it('survives SIGKILL during a build, mid-agent, mid-verify and mid-write: exactly the expected trials, none twice, no container left', async () => {
    const stamp = `${process.pid}-${Date.now()}`;
    const base = {
      'instruction.md': 'Write hello into /app/out.txt.\n',
      'solution/solve.sh': '#!/bin/bash\necho hello > /app/out.txt\n',
      'tests/test.sh':
        '#!/bin/bash\nif [ "$(cat /app/out.txt)" = hello ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n',
      'environment/Dockerfile': 'FROM debian:bookworm-slim\nWORKDIR /app\n',
    };
    const root = await tempDir();
    const make = async (name: string, files: Record<string, string>) => {
      const dir = await makeTask({
        ...base,
        'task.toml': `[task]\nname = "${name}"\n[agent]\ntimeout_sec = 60\n[verifier]\ntimeout_sec = 60\n`,
        ...files,
      });
      await mkdir(path.join(root, 'tasks'), { recursive: true });
      execFileSync('cp', ['-r', dir, path.join(root, 'tasks', name)]);
    };
    await make('slow-build', {
      'environment/Dockerfile': `FROM debian:bookworm-slim\nRUN echo ${stamp} > /stamp && sleep 4\nWORKDIR /app\n`,
    });
    await make('slow-agent', { 'solution/solve.sh': '#!/bin/bash\nsleep 3\necho hello > /app/out.txt\n' });
    await make('slow-verify', { 'tests/test.sh': '#!/bin/bash\nsleep 3\necho 1 > /logs/verifier/reward.txt\n' });
    const jobsDir = path.join(root, 'jobs');
    const args = [
      'run',
      '--job',
      'crashy',
      '--tasks',
      path.join(root, 'tasks'),
      '--agent',
      'oracle',
      '-k',
      '2',
      '-c',
      '2',
      '--jobs-dir',
      jobsDir,
      '--jsonl',
    ];

    const points: Array<[string, (e: Record<string, unknown>) => boolean, string[]?]> = [
      ['during a build', (e) => e.type === 'build-start' && e.task === 'slow-build'],
      [
        'mid-agent',
        (e) => e.type === 'phase' && e.phase === 'agent_run' && (e.slot as { task: string }).task === 'slow-agent',
      ],
      [
        'mid-verify',
        (e) => e.type === 'phase' && e.phase === 'verification' && (e.slot as { task: string }).task === 'slow-verify',
      ],
      ['mid-write', (e) => e.type === 'store-write-stalled', ['--fault-store-write-delay-ms', '5000']],
    ];
    let before = 0;
    for (const [where, killOn, extra] of points) {
      const r = await runCli([...args, ...(extra ?? [])], { killOn });
      assert.ok(r.killed, `the run reached the point ${where} (stderr: ${r.stderr})`);
      const list = rows(jobsDir, 'crashy');
      assert.ok(list.length >= before, `${where}: nothing recorded was lost`);
      before = list.filter((t) => t.status !== 'not_run').length;
      const keys = list.map((t) => `${t.task}|${t.attempt}`);
      assert.equal(new Set(keys).size, keys.length, `${where}: no slot twice`);
    }
    const final = await runCli(args);
    assert.equal(final.status, 0, final.stderr);
    const list = rows(jobsDir, 'crashy');
    assertExactSlots(list, 3 * 2);
    assert.ok(
      list.every((t) => t.status === 'completed' && t.reward === 1),
      JSON.stringify(list.map((t) => [t.trial_id, t.status, t.error_message])),
    );
    // Other test files run alongside; only containers whose owning process is gone are leftovers.
    const leftovers = (await termgradeContainers()).filter((c) => !ownerIsAlive(c.Labels[LABEL_OWNER]));
    assert.deepEqual(
      leftovers.map((c) => c.Id),
      [],
      'containers of the killed runs were removed',
    );
  });

  it('refuses to go on with a spec that would mix incomparable trials', async () => {
    const server = new ScriptedModelServer({ '*': () => bash('echo TERMGRADE_TASK_COMPLETE') });
    servers.push(server);
    const baseUrl = await server.start();
    const root = await tempDir();
    const task = await makeTask({
      'task.toml': '[task]\nname = "tiny"\n',
      'instruction.md': 'Do nothing.\n',
      'environment/Dockerfile': 'FROM debian:bookworm-slim\n',
      'solution/solve.sh': '#!/bin/bash\ntrue\n',
      'tests/test.sh': '#!/bin/bash\necho 0 > /logs/verifier/reward.txt\n',
    });
    const jobsDir = path.join(root, 'jobs');
    const args = (temp: string) => [
      'run',
      '--job',
      'strict',
      '--tasks',
      task,
      '--agent',
      'bash-tool',
      '--model',
      'm',
      '--base-url',
      baseUrl,
      '--temperature',
      temp,
      '--jobs-dir',
      jobsDir,
      '-q',
    ];
    assert.equal((await runCli(args('0.5'))).status, 0);
    const changed = await runCli(args('1.0'));
    assert.equal(changed.status, 2);
    assert.match(changed.stderr, /configuration "bash-tool\/m" changed since its trials were recorded/);
    await writeFile(path.join(task, 'tests', 'test.sh'), '#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n');
    const edited = await runCli(args('0.5'));
    assert.equal(edited.status, 2);
    assert.match(edited.stderr, /task "tiny" changed since its trials were recorded/);
    assertExactSlots(rows(jobsDir, 'strict'), 1);
  });

  it('retries infrastructure failures a bounded number of times, and never retries outcomes', async () => {
    const root = await tempDir();
    const common = {
      'instruction.md': 'x\n',
      'environment/Dockerfile': 'FROM debian:bookworm-slim\n',
      'solution/solve.sh': '#!/bin/bash\nsleep 30\n',
      'tests/test.sh': '#!/bin/bash\necho 0 > /logs/verifier/reward.txt\n',
    };
    for (const [name, toml] of [
      ['no-room', '[task]\nname = "no-room"\n[environment]\nmemory_mb = 1\n'],
      ['too-slow', '[task]\nname = "too-slow"\n[agent]\ntimeout_sec = 1\n'],
    ]) {
      const dir = await makeTask({ ...common, 'task.toml': toml! });
      await mkdir(path.join(root, 'tasks'), { recursive: true });
      execFileSync('cp', ['-r', dir, path.join(root, 'tasks', name!)]);
    }
    const jobsDir = path.join(root, 'jobs');
    const r = await runCli([
      'run',
      '--name',
      'retries',
      '--tasks',
      path.join(root, 'tasks'),
      '--agent',
      'oracle',
      '--jobs-dir',
      jobsDir,
      '-q',
    ]);
    assert.equal(r.status, 0, r.stderr);
    const byTask = Object.fromEntries(rows(jobsDir, 'retries').map((t) => [t.task, t]));
    assert.equal(byTask['no-room']!.status, 'error');
    assert.equal(byTask['no-room']!.error_class, 'environment_error');
    assert.equal(byTask['no-room']!.infra_attempts, 3);
    assert.equal(JSON.parse(byTask['no-room']!.retry_reasons_json).length, 2);
    assert.equal(byTask['too-slow']!.exit_reason, 'agent_timeout');
    assert.equal(byTask['too-slow']!.infra_attempts, 1, 'a timeout is a result, not retried');
  });

  it('stops at the budget: finished trials kept, the rest recorded as not run, and a resume finishes them', async () => {
    const task = await makeTask({
      'task.toml': '[task]\nname = "slowish"\n',
      'instruction.md': 'x\n',
      'environment/Dockerfile': 'FROM debian:bookworm-slim\n',
      'solution/solve.sh': '#!/bin/bash\nsleep 3\n',
      'tests/test.sh': '#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n',
    });
    const jobsDir = path.join(await tempDir(), 'jobs');
    const args = [
      'run',
      '--job',
      'budget',
      '--tasks',
      task,
      '--agent',
      'oracle',
      '-k',
      '4',
      '-c',
      '1',
      '--jobs-dir',
      jobsDir,
      '-q',
    ];
    // Four trials of at least 3 s one after another cannot all end within 12 s; one trial (a
    // grading snapshots and starts the verifier's sandbox: ~1.5 s more) does, with room for a busy engine.
    const r = await runCli([...args, '--budget', '12']);
    assert.equal(r.status, 1, 'exit 1: slots left');
    const first = rows(jobsDir, 'budget');
    assertExactSlots(first, 4);
    const done = first.filter((t) => t.status === 'completed').length;
    assert.ok(done >= 1 && done < 4, `finished ${done}`);
    assert.ok(first.filter((t) => t.status === 'not_run').every((t) => t.reward === null));
    const stats = JSON.parse(
      spawnSync(process.execPath, [CLI, 'stats', path.join(jobsDir, 'budget'), '--json'], { encoding: 'utf8' }).stdout,
    );
    assert.equal(stats.configs[0].trials, done, 'not-run slots are not trials');
    assert.equal((await runCli(args)).status, 0);
    const final = rows(jobsDir, 'budget');
    assertExactSlots(final, 4);
    assert.ok(final.every((t) => t.status === 'completed'));
  });

  describe('a store that cannot be written', () => {
    let mnt = '';
    before(async () => {
      mnt = await tempDir('termgrade-tmpfs-');
      try {
        execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=8m', 'tmpfs', mnt]);
      } catch {
        mnt = '';
      }
    });
    after(() => {
      if (mnt) spawnSync('umount', ['-l', mnt]);
    });

    const tinyTask = () =>
      makeTask({
        'task.toml': '[task]\nname = "tiny"\n',
        'instruction.md': 'x\n',
        'environment/Dockerfile': 'FROM debian:bookworm-slim\n',
        'solution/solve.sh': '#!/bin/bash\ntrue\n',
        'tests/test.sh': '#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n',
      });

    it('fails loudly when the disk is full, and keeps every finished trial', async (t) => {
      if (!mnt) return t.skip('cannot mount a tmpfs here');
      const task = await tinyTask();
      const jobsDir = path.join(mnt, 'full');
      const args = (k: string) => [
        'run',
        '--job',
        'full',
        '--tasks',
        task,
        '--agent',
        'oracle',
        '-k',
        k,
        '--jobs-dir',
        jobsDir,
        '-q',
      ];
      const first = await runCli(args('2'));
      assert.equal(first.status, 0, first.stderr);
      spawnSync('dd', ['if=/dev/zero', `of=${path.join(mnt, 'filler')}`, 'bs=64k']);
      try {
        const r = await runCli(args('4'));
        assert.equal(r.status, 5, r.stderr);
        assert.match(r.stderr, /disk is full\. Every trial finished before this is kept/);
      } finally {
        spawnSync('rm', ['-f', path.join(mnt, 'filler')]);
      }
      const list = rows(jobsDir, 'full').filter((x) => x.status === 'completed');
      assert.equal(list.length, 2);
    });

    it('fails loudly when the store is read-only, and keeps every finished trial', async (t) => {
      if (!mnt) return t.skip('cannot mount a tmpfs here');
      const task = await tinyTask();
      const jobsDir = path.join(mnt, 'ro');
      const args = (k: string) => [
        'run',
        '--job',
        'ro',
        '--tasks',
        task,
        '--agent',
        'oracle',
        '-k',
        k,
        '--jobs-dir',
        jobsDir,
        '-q',
      ];
      const first = await runCli(args('2'));
      assert.equal(first.status, 0, first.stderr);
      execFileSync('mount', ['-o', 'remount,ro', mnt]);
      try {
        const r = await runCli(args('4'));
        assert.equal(r.status, 5, r.stderr);
        assert.match(r.stderr, /it is read-only\. Every trial finished before this is kept/);
      } finally {
        execFileSync('mount', ['-o', 'remount,rw', mnt]);
      }
      assert.equal(rows(jobsDir, 'ro').filter((x) => x.status === 'completed').length, 2);
    });
  });

  it('imports Harbor job folders, tests from CTRF, exceptions as error classes', async () => {
    const root = await tempDir();
    const trial = async (name: string, result: Record<string, unknown>, ctrf?: unknown) => {
      await mkdir(path.join(root, 'job-1', name, 'verifier'), { recursive: true });
      await writeFile(path.join(root, 'job-1', name, 'result.json'), JSON.stringify(result));
      if (ctrf) await writeFile(path.join(root, 'job-1', name, 'verifier', 'ctrf.json'), JSON.stringify(ctrf));
    };
    // The job-level summary Harbor writes beside the trial folders: not a trial, skipped.
    await mkdir(path.join(root, 'job-1'), { recursive: true });
    await writeFile(
      path.join(root, 'job-1', 'result.json'),
      JSON.stringify({ started_at: '2026-01-01T00:00:00Z', n_total_trials: 3 }),
    );
    const agent = { agent_info: { name: 'terminus-2', model_info: { name: 'm1' } } };
    await trial(
      'hello__a1',
      {
        ...agent,
        task_name: 'hello',
        trial_name: 'hello__a1',
        verifier_result: { rewards: { reward: 1 } },
        agent_result: { n_input_tokens: 100, n_output_tokens: 20, cost_usd: 0.01 },
        started_at: '2026-01-01T00:00:00Z',
        finished_at: '2026-01-01T00:01:00Z',
      },
      { results: { tests: [{ name: 'test_outputs.py::test_a', status: 'passed', duration: 3 }] } },
    );
    await trial('hello__a2', {
      ...agent,
      task_name: 'hello',
      trial_name: 'hello__a2',
      verifier_result: { rewards: { reward: 0 } },
      exception_info: { exception_type: 'AgentTimeoutError', exception_message: 'timed out' },
    });
    await trial('hello__a3', {
      ...agent,
      task_name: 'hello',
      trial_name: 'hello__a3',
      verifier_result: null,
      exception_info: { exception_type: 'RewardFileNotFoundError', exception_message: 'no reward' },
    });
    // Reward 1 while Harbor's CTRF shows a failed test: imported with its reward and a finding.
    await trial(
      'hello__a4',
      { ...agent, task_name: 'hello', trial_name: 'hello__a4', verifier_result: { rewards: { reward: 1 } } },
      { results: { tests: [{ name: 'test_outputs.py::test_a', status: 'failed', duration: 3 }] } },
    );
    await writeFile(path.join(root, 'job-1', 'hello__a4', 'verifier', 'reward.txt'), '1\n');
    const jobsDir = path.join(root, 'jobs');
    const r = spawnSync(process.execPath, [CLI, 'import', root, '--job', 'harbor', '--jobs-dir', jobsDir], {
      encoding: 'utf8',
    });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /imported 4 Harbor trials/);
    const list = rows(jobsDir, 'harbor');
    assert.deepEqual(
      list.map((t) => [t.config, t.task, t.attempt, t.status, t.reward, t.error_class]),
      [
        ['terminus-2/m1', 'hello', 0, 'completed', 1, null],
        ['terminus-2/m1', 'hello', 1, 'completed', 0, 'agent_timeout'],
        // Harbor counts a trial with no reward file as 0: an import keeps Harbor's accounting.
        ['terminus-2/m1', 'hello', 2, 'completed', 0, 'verifier_no_reward'],
        ['terminus-2/m1', 'hello', 3, 'completed', 1, null],
      ],
    );
    assert.deepEqual(
      list.map((t) => JSON.parse(t.findings_json).map((f: { code: string }) => f.code)),
      [[], [], [], ['reward_with_failed_tests']],
    );
    assert.equal(list[0]!.tests_passed, 1);
    assert.equal(list[0]!.duration_ms, 60_000);
    const stats = JSON.parse(
      spawnSync(process.execPath, [CLI, 'stats', path.join(jobsDir, 'harbor'), '--json'], { encoding: 'utf8' }).stdout,
    );
    assert.equal(stats.configs[0].trials, 4);
    assert.deepEqual(stats.configs[0].findings, { inconsistentTrials: 1, byCode: { reward_with_failed_tests: 1 } });
    assert.deepEqual(stats.configs[0].errorsByClass, {});
    assert.deepEqual(stats.configs[0].outcomesByClass, { agent_timeout: 1, verifier_no_reward: 1 });
  });
});

describe('adaptive jobs', () => {
  it('stop a task once its band decision is settled, record fewer trials, and report GMS rates', async () => {
    const dir = await makeTask({
      'task.toml': '[task]\nname = "settles"\n',
      'instruction.md': 'Write hello into /app/out.txt.\n',
      'environment/Dockerfile': 'FROM debian:bookworm-slim\nWORKDIR /app\n',
      'solution/solve.sh': '#!/bin/bash\necho hello > /app/out.txt\n',
      'tests/test.sh':
        '#!/bin/bash\nif [ "$(cat /app/out.txt 2>/dev/null)" = hello ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n',
    });
    const jobsDir = path.join(await tempDir(), 'jobs');
    const args = [
      'run',
      '--job',
      'adaptive',
      '--tasks',
      dir,
      '--agent',
      'oracle',
      'nop',
      '-k',
      '16',
      '-c',
      '4',
      '--adaptive',
      '--jobs-dir',
      jobsDir,
    ];
    const r = await runCli(args);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /not needed \(settled early by adaptive sampling\)/);
    const list = rows(jobsDir, 'adaptive');
    for (const config of ['oracle', 'nop']) {
      const mine = list.filter((t) => t.config === config);
      assert.ok(mine.length >= 1 && mine.length < 16, `${config}: ${mine.length} trials, fewer than k`);
      assert.deepEqual(
        mine.map((t) => t.attempt).sort((a, b) => a - b),
        mine.map((_, i) => i),
        'attempts are a prefix',
      );
    }
    const stats = JSON.parse(
      spawnSync(process.execPath, [CLI, 'stats', path.join(jobsDir, 'adaptive'), '--json', '--tasks'], {
        encoding: 'utf8',
      }).stdout,
    );
    const byConfig = Object.fromEntries(
      stats.tasks.map((t: { config: string; rate: number; rateMethod: string }) => [t.config, t]),
    );
    assert.equal(byConfig.oracle.rateMethod, 'gms');
    assert.equal(byConfig.oracle.rate, 1);
    assert.equal(byConfig.nop.rate, 0);
    // Resuming runs nothing more; switching the job to fixed sampling is refused.
    const again = await runCli(args);
    assert.equal(again.status, 0, again.stderr);
    assert.match(again.stdout, /^job adaptive: 0 trials recorded this run/);
    const fixed = await runCli(args.filter((a) => a !== '--adaptive'));
    assert.equal(fixed.status, 2);
    assert.match(fixed.stderr, /sampling changed since trials were recorded/);

    // The next checkpoint: the same tasks with this job as the prior. Each configuration takes its
    // prior from the configuration of the same label, and stops no later than it did cold (a task
    // always or never solved gains nothing: a prior that stopped a run of failures before cold does
    // would be wrong too often for a task that drifted; test/adaptive-drift.test.ts).
    const coldCounts = Object.fromEntries(['oracle', 'nop'].map((c) => [c, list.filter((t) => t.config === c).length]));
    const informedArgs = [
      'run',
      '--job',
      'informed',
      '--tasks',
      dir,
      '--agent',
      'oracle',
      'nop',
      '-k',
      '16',
      '-c',
      '4',
      '--prior',
      path.join(jobsDir, 'adaptive'),
      '--jobs-dir',
      jobsDir,
    ];
    const informed = await runCli([...informedArgs, '-q']);
    assert.equal(informed.status, 0, informed.stderr);
    const after = rows(jobsDir, 'informed');
    for (const config of ['oracle', 'nop']) {
      const n = after.filter((t) => t.config === config).length;
      assert.ok(
        n >= 1 && n <= coldCounts[config]!,
        `${config}: ${n} trials with the prior, ${coldCounts[config]} cold`,
      );
    }
    const informedStats = JSON.parse(
      spawnSync(process.execPath, [CLI, 'stats', path.join(jobsDir, 'informed'), '--json', '--tasks'], {
        encoding: 'utf8',
      }).stdout,
    );
    const rates = Object.fromEntries(
      informedStats.tasks.map((t: { config: string; rate: number; adaptive: { informed: unknown } }) => [t.config, t]),
    );
    assert.equal(rates.oracle.rate, 1, 'the GMS estimate for the informed rule');
    assert.equal(rates.nop.rate, 0);
    assert.ok(rates.oracle.adaptive.informed, "each task's own rule, prior included, is the one its rate comes from");
    // The prior was read once and kept: the job resumes with its source gone.
    await rm(path.join(jobsDir, 'adaptive'), { recursive: true });
    const resumed = await runCli(['run', '--job', 'informed', '--jobs-dir', jobsDir, '-q']);
    assert.equal(resumed.status, 0, resumed.stderr);
    assert.equal(rows(jobsDir, 'informed').length, after.length);
  });
});
