import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdir, readFile, readdir } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { oracleAgent } from '../src/agent/oracle.js';
import { checkTasks } from '../src/check/check.js';
import { loadTask } from '../src/task/load.js';
import { networkFor, phaseNetworks } from '../src/task/network.js';
import { TaskConfigSchema } from '../src/task/schema.js';
import { runTrial } from '../src/trial/run.js';
import { aggregateStepRewards, missesMinimum } from '../src/trial/step-rewards.js';
import { copyArtifacts, runCollect } from '../src/verifier/collect.js';
import { docker, tempDir, trivialTask } from './helpers.js';
import { FakeProvider } from './support/fake-provider.js';
import { FAKE_STEP_GRADES, multiStepBehaviour, multiStepTask } from './support/multi-step.js';

// The shared multi-step suite on the fake provider (its grades stand for the scripts' results).
let fake: FakeProvider | null = null;
multiStepBehaviour('fake provider', () => (fake ??= new FakeProvider({ grade: (_t, n) => FAKE_STEP_GRADES[n % 3]! })), {
  scripted: false,
  snapshots: () => fake?.snapshots ?? 0,
  failingFirstStep: () => new FakeProvider({ grade: () => 0 }),
});

describe("step rewards (Harbor's aggregation)", () => {
  it('"mean" is the per-key mean over contributing, verified steps, a missing key counting 0', () => {
    const got = aggregateStepRewards('mean', [
      { rewards: { reward: 1, quality: 0.5 }, contributes: true },
      { rewards: { reward: 0 }, contributes: true },
      { rewards: { reward: 1 }, contributes: false },
      { rewards: null, contributes: true },
    ]);
    assert.deepEqual(got, { reward: 0.5, rewards: { reward: 0.5, quality: 0.25 } });
  });
  it('"final" is the last contributing verified step\'s rewards as they are', () => {
    assert.deepEqual(
      aggregateStepRewards('final', [
        { rewards: { reward: 1 }, contributes: true },
        { rewards: { reward: 0.2, x: 3 }, contributes: true },
        { rewards: { reward: 1 }, contributes: false },
      ]),
      { reward: 0.2, rewards: { reward: 0.2, x: 3 } },
    );
    assert.equal(aggregateStepRewards('final', [{ rewards: null, contributes: true }]), null);
  });
  it('min_reward: a number against the primary reward, a map against each named reward', () => {
    assert.equal(missesMinimum(undefined, 0, {}), false);
    assert.equal(missesMinimum(1, 0.99, {}), true);
    assert.equal(missesMinimum(0.5, 0.5, {}), false);
    assert.equal(missesMinimum({ a: 1 }, 1, { reward: 1 }), true, 'a missing name counts 0');
    assert.equal(missesMinimum({ a: 0.5 }, 0, { a: 0.6 }), false);
    assert.equal(missesMinimum(0, null, {}), true, 'no reward misses any minimum');
  });
});

describe('task schema: the newer Harbor keys', () => {
  const parse = (toml: Record<string, unknown>) => TaskConfigSchema.safeParse(toml);
  it('refuses artifact paths that could climb out, naming the field', () => {
    for (const bad of [
      '/app/../etc/passwd',
      'relative/path',
      '/',
      { source: '/app/x', destination: '../out' },
      { source: '/app/x', destination: '/abs' },
    ]) {
      const r = parse({ artifacts: [bad] });
      assert.equal(r.success, false, JSON.stringify(bad));
    }
    const ok = parse({ artifacts: ['/app/out.txt', { source: '/data/results', destination: 'results' }] });
    assert.ok(ok.success);
    assert.deepEqual(ok.data.artifacts, [
      { source: '/app/out.txt', destination: 'app/out.txt' },
      { source: '/data/results', destination: 'results' },
    ]);
  });
  it("reads the network policy of each phase, each falling back to the environment's", () => {
    const cfg = (t: Record<string, unknown>) => TaskConfigSchema.parse(t);
    assert.deepEqual(phaseNetworks(cfg({})), {
      environment: 'no-network',
      agent: 'no-network',
      verifier: 'no-network',
    });
    assert.deepEqual(phaseNetworks(cfg({ environment: { allow_internet: true } })), {
      environment: 'public',
      agent: 'public',
      verifier: 'public',
    });
    assert.deepEqual(
      phaseNetworks(
        cfg({
          environment: { network_mode: 'no-network' },
          agent: { network_mode: 'allowlist', allowed_hosts: ['pypi.org'] },
          verifier: { network_mode: 'public' },
        }),
      ),
      { environment: 'no-network', agent: 'allowlist', verifier: 'public' },
    );
    assert.equal(networkFor('public', 'tasks-net'), 'tasks-net');
    assert.equal(
      networkFor('allowlist', 'tasks-net'),
      null,
      'an allowlist cannot be enforced: no network (fail closed)',
    );
    assert.equal(networkFor('public', null), null, 'without a network the user made, never one');
  });
  it('a step without its instruction, a duplicate step and a task with no contributing step are refused with the file named', async () => {
    const dir = await multiStepTask();
    const { rm, writeFile, readFile: rf } = await import('node:fs/promises');
    const toml = await rf(path.join(dir, 'task.toml'), 'utf8');
    await writeFile(path.join(dir, 'task.toml'), `${toml}\n[[steps]]\nname = "01-create"\n`);
    await assert.rejects(loadTask(dir), /steps\.3\] "01-create".*a second step of this name/);
    await writeFile(path.join(dir, 'task.toml'), toml);
    await rm(path.join(dir, 'steps', '02-append', 'instruction.md'));
    await assert.rejects(loadTask(dir), /steps\/02-append\/instruction\.md.*missing/);
  });
});

describe("per-phase network (fake provider: which network each phase's sandbox is on)", () => {
  it("starts on the user's network when a phase may use it, then gives each phase its own; the verifier shares the agent sandbox's", async () => {
    const provider = new FakeProvider();
    const task = await loadTask(
      await trivialTask({
        'task.toml':
          '[environment]\nnetwork_mode = "no-network"\n[agent]\nnetwork_mode = "public"\n[verifier]\nnetwork_mode = "no-network"\n',
      }),
    );
    const r = await runTrial({ task, agent: oracleAgent, provider, outDir: await tempDir(), network: 'tasks-net' });
    assert.equal(r.reward, 1, JSON.stringify(r.errors));
    const box = provider.started[0]!;
    assert.deepEqual(
      box.networkLog,
      [null, 'tasks-net', null],
      'baseline none for setup, the network for the agent, none for the verifier',
    );
    assert.deepEqual(provider.networksAtGrading, [null]);
  });
  it('runs a task that asks for no network on none, whatever network the user gives, and never switches', async () => {
    const provider = new FakeProvider();
    const task = await loadTask(await trivialTask());
    await runTrial({ task, agent: oracleAgent, provider, outDir: await tempDir(), network: 'tasks-net' });
    assert.equal(provider.started[0]!.networkLog.length, 0);
    assert.equal(provider.started[0]!.network, null);
  });
});

/** An isolated network for these tests, on a documentation-reserved range (never a private one), internal: nothing leaves it. */
const NET = `tgts-${process.pid}`;
describe('per-phase network on real Docker', () => {
  before(() => {
    // A network trials may join: the host holds no address on it (see trial-network.ts).
    const r = spawnSync(
      'docker',
      [
        'network',
        'create',
        '--internal',
        '-o',
        'com.docker.network.bridge.inhibit_ipv4=true',
        '--subnet',
        '198.18.77.0/24',
        NET,
      ],
      { encoding: 'utf8' },
    );
    assert.equal(r.status, 0, r.stderr);
  });
  after(() => {
    spawnSync('docker', ['network', 'rm', NET]);
  });
  it("each phase's container gets the network its policy says: the agent on it, the verifier (sharing the agent's namespace) off it", async () => {
    const task = await loadTask(
      await trivialTask({
        'task.toml':
          '[agent]\nnetwork_mode = "public"\ntimeout_sec = 30\n[verifier]\nnetwork_mode = "no-network"\ntimeout_sec = 30\n',
        // The agent records its interfaces; the verifier records its own, and passes only when it has loopback alone.
        'solution/solve.sh':
          '#!/bin/bash\nls /sys/class/net | sort | tr "\\n" , > /app/agent-net; echo hello > /app/out.txt\n',
        'tests/test.sh':
          '#!/bin/bash\nls /sys/class/net | sort | tr "\\n" , > /logs/verifier/verifier-net\nif [ "$(cat /logs/verifier/verifier-net)" = "lo," ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\ncp /app/agent-net /logs/verifier/agent-net\n',
      }),
    );
    const out = await tempDir();
    const r = await runTrial({ task, agent: oracleAgent, provider: docker(), outDir: out, network: NET });
    assert.equal(r.reward, 1, JSON.stringify(r.errors));
    const logs = path.join(out, r.trialId, 'verifier');
    assert.match(
      await readFile(path.join(logs, 'agent-net'), 'utf8'),
      /^eth[0-9]+,lo,$/,
      'the agent phase was on the network',
    );
    assert.equal(
      await readFile(path.join(logs, 'verifier-net'), 'utf8'),
      'lo,',
      'the verifier phase had loopback only',
    );
  });
});

describe('artifacts copied out of a real verifier sandbox', () => {
  it('copies files and folders, refuses links and what passes the bound (keeping none of it), and records the collect hooks', async () => {
    const task = await loadTask(
      await trivialTask({
        'task.toml': [
          'artifacts = ["/app/small.txt", "/app/dir", "/app/link", "/app/big", "/app/absent"]',
          '[verifier]\ntimeout_sec = 30',
          '[[verifier.collect]]\ncommand = "mkdir -p /logs/artifacts && echo collected > /logs/artifacts/c.txt"',
          '[[verifier.collect]]\ncommand = "exit 3"',
          '',
        ].join('\n'),
      }),
    );
    const provider = docker();
    const box = await provider.start(task, await provider.prepare(task));
    try {
      await box.exec(
        'mkdir -p /app/dir/sub && echo s > /app/small.txt && echo d > /app/dir/sub/d.txt && ln -s /etc/passwd /app/link && head -c 5000 /dev/zero > /app/big/x 2>/dev/null || (mkdir -p /app/big && head -c 5000 /dev/zero > /app/big/x)',
      );
      const { hooks, kinds } = await runCollect(box, task);
      assert.deepEqual(
        hooks.map((h) => h.exitCode),
        [0, 3],
        'a failing hook is recorded, not thrown',
      );
      await box.stop();
      const host = await tempDir();
      const got = await copyArtifacts(box, task, kinds, host, 1000);
      const by = Object.fromEntries(got.map((a) => [a.source, a]));
      assert.equal(by['/logs/artifacts']!.ok, true);
      assert.equal(by['/app/small.txt']!.ok, true);
      assert.equal(by['/app/dir']!.ok, true);
      assert.match(by['/app/link']!.message ?? '', /symbolic link/);
      assert.match(by['/app/big']!.message ?? '', /over the artifacts' bound of 1000 bytes/);
      assert.match(by['/app/absent']!.message ?? '', /not there/);
      assert.equal(await readFile(path.join(host, 'logs', 'artifacts', 'c.txt'), 'utf8'), 'collected\n');
      assert.equal(await readFile(path.join(host, 'app', 'dir', 'sub', 'd.txt'), 'utf8'), 'd\n');
      assert.deepEqual(
        (await readdir(path.join(host, 'app'))).sort(),
        ['dir', 'small.txt'],
        'nothing kept of a refused artifact',
      );
      await mkdir(host, { recursive: true });
    } finally {
      await box.close();
    }
  });
});

describe('a multi-step trial with named rewards, recorded, exported, counted and shown', () => {
  it('keeps the steps, every named reward and the versions in the store, the export, stats and the viewer', async () => {
    const { JobStore } = await import('../src/store/store.js');
    const { collectTrialRows } = await import('../src/export/trials.js');
    const { runCli } = await import('./helpers.js');
    const { startViewer } = await import('../src/view/server.js');
    const { chromium } = await import('playwright-core');
    const task = await loadTask(await multiStepTask());
    const jobDir = await tempDir();
    const trials = path.join(jobDir, 'trials');
    const r = await runTrial({ task, agent: oracleAgent, provider: docker(), outDir: trials });
    const store = JobStore.open(path.join(jobDir, 'job.db'));
    try {
      store.recordTrial(r, {
        slot: { config: 'oracle', task: task.name, attempt: 0 },
        trialDir: path.join(trials, r.trialId),
        infraAttempts: 1,
        retryReasons: [],
      });
      const row = [...store.listTrials()][0]!;
      assert.deepEqual(
        JSON.parse(row.steps_json).map((s: { name: string }) => s.name),
        ['01-create', '02-append', '03-finish'],
      );
      assert.equal(row.task_version, '2.1.0');
      assert.deepEqual([row.dataset_name, row.dataset_version], ['fixtures/multi', '0.3.0']);
    } finally {
      store.close();
    }
    const [exported] = await collectTrialRows([jobDir]);
    assert.ok(Math.abs(JSON.parse(exported!.rewards).quality - 0.5 / 3) < 1e-9, exported!.rewards);
    assert.equal(JSON.parse(exported!.steps).length, 3);
    assert.deepEqual(
      [exported!.task_version, exported!.dataset_name, exported!.dataset_version],
      ['2.1.0', 'fixtures/multi', '0.3.0'],
    );
    // Rates use the primary reward only; the other named rewards are shown beside them.
    const stats = await runCli(['stats', jobDir]);
    assert.equal(stats.status, 0, stats.stderr);
    assert.match(
      stats.stdout,
      /named rewards \(mean over graded trials; rates use `reward` only\): quality 0\.167 \(1\)/,
    );
    const viewer = await startViewer({ sources: [jobDir], port: 0 });
    const browser = await chromium.launch({
      executablePath: '/usr/bin/chromium',
      args: ['--no-sandbox', '--disable-gpu', '--no-first-run'],
    });
    try {
      const page = await browser.newPage();
      await page.goto(viewer.openUrl);
      await page.goto(`${viewer.url}/#/`);
      await page.waitForSelector('#trials tbody tr');
      await page.locator('#trials tbody tr td a').first().click();
      await page.waitForSelector('#steps');
      assert.deepEqual(await page.locator('#steps tbody tr td:first-child').allTextContents(), [
        '01-create',
        '02-append',
        '03-finish',
      ]);
      assert.match((await page.locator('#rewards').textContent()) ?? '', /quality 0\.167/);
      assert.match(
        (await page.locator('#versions').textContent()) ?? '',
        /task version 2\.1\.0 · dataset fixtures\/multi 0\.3\.0/,
      );
    } finally {
      await browser.close();
      await viewer.close();
    }
  });
});

describe('check on a multi-step task (fake provider)', () => {
  it("runs the steps' reference solutions as the oracle (not refused for a missing root solve.sh) and runs no probe on it", async () => {
    const dir = await multiStepTask();
    // The oracle's three step gradings come first (1 each), then the do-nothing agent's (0).
    const pass = await checkTasks([dir], {
      provider: new FakeProvider({ grade: (_t, n) => (n < 3 ? 1 : 0) }),
      outDir: await tempDir(),
      repeat: 1,
    });
    const t = pass.tasks[0]!;
    assert.deepEqual(t.reasons, [], JSON.stringify(t.details));
    assert.ok(
      t.details.some((d) => /probes not run: a multi-step task \(3 steps\)/.test(d)),
      JSON.stringify(t.details),
    );
    const fail = await checkTasks([dir], {
      provider: new FakeProvider({ grade: (_t, n) => FAKE_STEP_GRADES[n % 3]! }),
      outDir: await tempDir(),
      repeat: 1,
    });
    assert.deepEqual(fail.tasks[0]!.reasons, ['oracle_failed'], 'a step the reference solution fails fails the oracle');
  });
});
