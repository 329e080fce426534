import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { JobStore } from '../src/store/store.js';
import { etaSeconds } from '../src/cli/job-progress.js';
import { ROOT, runCli, tempDir, trivialTask } from './helpers.js';
import { ScriptedModelServer } from './support/scripted-model-server.js';
import { bash } from './support/scripts.js';

const servers: ScriptedModelServer[] = [];
after(() => Promise.all(servers.map((s) => s.close())));

async function serve(
  scripts: ConstructorParameters<typeof ScriptedModelServer>[0],
  options?: ConstructorParameters<typeof ScriptedModelServer>[1],
): Promise<{ server: ScriptedModelServer; url: string }> {
  const server = new ScriptedModelServer(scripts, options);
  servers.push(server);
  return { server, url: await server.start() };
}

function rows(jobsDir: string, name: string) {
  const store = JobStore.open(path.join(jobsDir, name, 'job.db'), { readonly: true });
  try {
    return [...store.listTrials()];
  } finally {
    store.close();
  }
}

/** Every file under a folder, as text (the store included), to look for what must not be there. */
async function everyFile(dir: string): Promise<string> {
  let all = '';
  for (const e of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (e.isFile()) all += (await readFile(path.join(e.parentPath, e.name))).toString('latin1');
  }
  return all;
}

const ONE_SHOT = path.join(ROOT, 'examples', 'agents', 'one-shot.mjs');

describe('run: agents, models and environments from flags', () => {
  it('loads a custom agent from one file, gives it the environment, and scrubs env-file values from every record', async () => {
    const secret = 's3cr3t-value-123';
    // The model writes a script that uses one variable from --agent-env and one from --env-file.
    const { server, url } = await serve({
      m: [{ reply: { content: '```bash\necho "$GREETING $TOKEN" > /app/out.txt\necho token is $TOKEN\n```' } }],
    });
    const task = await trivialTask({
      'tests/test.sh': `#!/bin/bash\nif [ "$(cat /app/out.txt)" = "hello ${secret}" ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n`,
    });
    const root = await tempDir();
    const envFile = path.join(root, 'agent.env');
    await writeFile(envFile, `# for the agent\nexport TOKEN="${secret}"\n`);
    const jobsDir = path.join(root, 'jobs');
    const r = await runCli([
      'run',
      '--name',
      'custom',
      '--tasks',
      task,
      '--agent-import-path',
      ONE_SHOT,
      '--model',
      `m@${url}`,
      '--agent-env',
      'GREETING=hello',
      '--env-file',
      envFile,
      '--jobs-dir',
      jobsDir,
      '-q',
    ]);
    assert.equal(r.status, 0, r.stderr);
    const [row] = rows(jobsDir, 'custom');
    assert.equal(row!.config, 'one-shot/m');
    assert.equal(row!.agent, 'one-shot');
    assert.equal(row!.reward, 1, 'the script saw both variables, so the test passed');
    assert.equal(server.requests.length, 1);
    const log = await readFile(path.join(jobsDir, 'custom', 'trials', row!.trial_id, 'agent', 'one-shot.txt'), 'utf8');
    assert.match(log, /token is \[REDACTED\]/, 'the agent log was written, with the value scrubbed');
    assert.ok(
      !(await everyFile(path.join(jobsDir, 'custom'))).includes(secret),
      'no env-file value in any file of the job, store included',
    );
    assert.ok(!JSON.stringify(rows(jobsDir, 'custom')).includes(secret));
  });

  it('runs one configuration per model, each on its own endpoint, next to agents that need none', async () => {
    const a = await serve({ a: () => bash('echo hello > /app/out.txt; echo TERMGRADE_TASK_COMPLETE') });
    const b = await serve({ b: () => bash('echo TERMGRADE_TASK_COMPLETE') });
    const task = await trivialTask();
    const jobsDir = path.join(await tempDir(), 'jobs');
    const r = await runCli([
      'run',
      '--name',
      'models',
      '--tasks',
      task,
      '-a',
      'bash-tool',
      'nop',
      '-m',
      `a@${a.url}`,
      `b@${b.url}`,
      '--jobs-dir',
      jobsDir,
      '-q',
    ]);
    assert.equal(r.status, 0, r.stderr);
    // -q silences the progress, not the summary the run was for.
    assert.match(r.stdout, /^job models: 3 trials recorded this run \(3 graded/m, r.stdout);
    const byConfig = Object.fromEntries(rows(jobsDir, 'models').map((t) => [t.config, t]));
    assert.deepEqual(Object.keys(byConfig).sort(), ['bash-tool/a', 'bash-tool/b', 'nop']);
    assert.equal(byConfig['bash-tool/a']!.reward, 1);
    assert.equal(byConfig['bash-tool/b']!.reward, 0);
    assert.ok(
      a.server.requests.length > 0 && a.server.requests.every((q) => q.body.model === 'a'),
      'model a asked only at its endpoint',
    );
    assert.ok(b.server.requests.length > 0 && b.server.requests.every((q) => q.body.model === 'b'));
  });

  it('checks every model endpoint before anything starts, and says what is wrong', async () => {
    const task = await trivialTask();
    const jobsDir = path.join(await tempDir(), 'jobs');
    const run = (extra: string[], env: Record<string, string | undefined> = {}) =>
      runCli(['run', '--name', 'pre', '--tasks', task, '-a', 'bash-tool', '--jobs-dir', jobsDir, '-q', ...extra], {
        env,
      });

    // Nothing listens on a port just released.
    const closed = await serve({ m: [] });
    await closed.server.close();
    const down = await run(['-m', `m@${closed.url}`]);
    assert.equal(down.status, 2, down.stderr);
    assert.match(down.stderr, /preflight failed[\s\S]*does not answer \(ECONNREFUSED\)/);

    const other = await serve({ served: [] });
    const wrong = await run(['-m', `typo@${other.url}`]);
    assert.equal(wrong.status, 2);
    assert.match(wrong.stderr, /does not serve model "typo" \(it serves: served\)/);

    const keyed = await serve({ m: [] }, { requireKey: 'right-key-123456' });
    const unset = await run(['-m', `m@${keyed.url}`, '--api-key-env', 'TG_PREFLIGHT_KEY'], {
      TG_PREFLIGHT_KEY: undefined,
    });
    assert.equal(unset.status, 2);
    assert.match(unset.stderr, /needs an API key, and TG_PREFLIGHT_KEY is not set/);
    const rejected = await run(['-m', `m@${keyed.url}`, '--api-key-env', 'TG_PREFLIGHT_KEY'], {
      TG_PREFLIGHT_KEY: 'wrong-key-654321',
    });
    assert.equal(rejected.status, 2);
    assert.match(rejected.stderr, /rejects the key in TG_PREFLIGHT_KEY/);
    assert.doesNotMatch(rejected.stderr, /wrong-key-654321/);
    // Each refusal came before the job was opened: no job folder, no container.
    assert.equal(existsSync(path.join(jobsDir, 'pre')), false);
    assert.equal(keyed.server.requests.length, 0, 'only the listing was asked, never a completion');

    // --no-preflight goes on to the trial, whose model calls then fail (retried until the agent's
    // time is up): the trial is recorded with its error class.
    const skipped = await run([
      '-m',
      `m@${closed.url}`,
      '--no-preflight',
      '--infra-retries',
      '0',
      '--timeout-multiplier',
      '0.1',
    ]);
    assert.doesNotMatch(skipped.stderr, /preflight/);
    const [row, ...more] = rows(jobsDir, 'pre');
    assert.equal(more.length, 0);
    assert.ok(['model_unavailable', 'agent_timeout'].includes(row!.error_class!), row!.error_class ?? 'no class');
  });

  it('refuses a bad agent module, a misplaced agent flag and a bad env file with exit 2 and the file named', async () => {
    const root = await tempDir();
    const task = await trivialTask();
    const jobsDir = path.join(root, 'jobs');
    const noDefault = path.join(root, 'bad-agent.mjs');
    await writeFile(noDefault, 'export const x = 1;\n');
    const noCreate = path.join(root, 'no-create.mjs');
    await writeFile(noCreate, "export default { name: 'half' };\n");
    const badEnv = path.join(root, 'bad.env');
    await writeFile(badEnv, 'GOOD=1\nthis line has no equals sign\n');
    const jobFile = path.join(root, 'job.yaml');
    await writeFile(jobFile, `name: filed\ntasks: { paths: [${JSON.stringify(task)}] }\nagents: [{ agent: nop }]\n`);
    const cases: Array<[string[], RegExp]> = [
      [
        ['--tasks', task, '--agent-import-path', noDefault],
        /agent module .*bad-agent\.mjs: its default export must be an agent plugin/,
      ],
      [['--tasks', task, '--agent-import-path', noCreate], /no-create\.mjs: .*create: must be a function/],
      [
        ['--tasks', task, '--agent-import-path', path.join(root, 'missing.mjs')],
        /missing\.mjs: cannot be loaded: no such file/,
      ],
      [
        ['--tasks', task, '-a', 'my-agent'],
        /unknown agent "my-agent" \(known: oracle, nop, terminus, bash-tool; a custom agent is loaded with --agent-import-path/,
      ],
      [['--tasks', task, '-a', 'bash-tool', '-m', 'm'], /--model m: give its endpoint, as m@http/],
      [[jobFile, '-m', 'm@http://127.0.0.1:9/v1'], /--model: agent settings come from the job file .*job\.yaml/],
      [['--tasks', task, '-a', 'nop', '--env-file', badEnv], /bad\.env:2: expected KEY=VALUE/],
      [['--tasks', task, '-a', 'nop', '--agent-env', 'no-equals'], /--agent-env "no-equals": expected KEY=VALUE/],
    ];
    for (const [args, message] of cases) {
      const r = await runCli(['run', ...args, '--jobs-dir', jobsDir, '-q']);
      assert.equal(r.status, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, message);
      assert.doesNotMatch(r.stderr, /internal error|\n\s+at /, 'a message, not a stack trace');
    }
  });

  it('takes a custom agent from a job file, its path relative to the file, and keeps it for resume by name', async () => {
    const root = await tempDir();
    const { url } = await serve({ m: () => ({ reply: { content: '```bash\necho hello > /app/out.txt\n```' } }) });
    execFileSync('cp', [ONE_SHOT, path.join(root, 'agent.mjs')]);
    const task = await trivialTask();
    const jobFile = path.join(root, 'job.toml');
    await writeFile(
      jobFile,
      `name = "filed"\nk = 1\n[tasks]\npaths = [${JSON.stringify(task)}]\n[[agents]]\nagent = "one-shot"\nimportPath = "./agent.mjs"\nmodel = { baseUrl = "${url}", model = "m" }\n`,
    );
    const jobsDir = path.join(root, 'jobs');
    const first = await runCli(['run', jobFile, '--jobs-dir', jobsDir, '-q'], { cwd: '/' });
    assert.equal(first.status, 0, first.stderr);
    const resumed = await runCli(['run', '--job', 'filed', '-k', '2', '--jobs-dir', jobsDir, '-q'], { cwd: '/' });
    assert.equal(resumed.status, 0, resumed.stderr);
    assert.deepEqual(
      rows(jobsDir, 'filed')
        .map((t) => [t.config, t.attempt, t.reward])
        .sort(),
      [
        ['one-shot/m', 0, 1],
        ['one-shot/m', 1, 1],
      ],
    );
  });
});

describe('run: what it says while and after it works', () => {
  it('shows image builds as their own phase, and an ETA once a trial has finished', async () => {
    // A Dockerfile no other test builds: its image is built in this run, not found.
    const task = await trivialTask({
      'environment/Dockerfile': `FROM debian:bookworm-slim\nWORKDIR /app\nRUN echo ${Date.now()}-${process.pid} > /built\n`,
    });
    const jobsDir = path.join(await tempDir(), 'jobs');
    const r = await runCli([
      'run',
      '--name',
      'talk',
      '--tasks',
      task,
      '-a',
      'oracle',
      '-k',
      '2',
      '-c',
      '1',
      '--jobs-dir',
      jobsDir,
    ]);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stderr, /building images \(trials wait for their task's image\)/);
    // Stderr is not a terminal here: the status lines at the end give every configuration's counts.
    assert.match(r.stderr, /\[oracle\] 2\/2 done, 0 running, 0 failed, [\d.]+\/min, ETA 0s/);
    assert.match(r.stdout, /config\s+graded\s+pass@1 %/, 'the ending table');
    assert.match(r.stdout, /more: termgrade stats .* --tasks/);
    const listing = await runCli(['trials', '--job', 'talk', '--jobs-dir', jobsDir]);
    assert.match(
      listing.stdout,
      /^trial\s+config\s+task\s+attempt\s+status\s+reward\s+error class\s+tests passed\s+runs/m,
      'columns named for what they hold',
    );
  });

  it('an internal error is one line naming the file that holds the whole trace', async () => {
    // A fault injected into the process from outside (no hook in the product): stdout breaks.
    const inject = 'data:text/javascript,process.stdout.write = () => { throw new TypeError("injected fault") };';
    const r = await runCli(['schema', 'stats'], { nodeArgs: ['--import', inject] });
    assert.equal(r.status, 4);
    const lines = r.stderr.trim().split('\n');
    assert.equal(lines.length, 1, r.stderr);
    const m = /^termgrade: internal error: injected fault \(full trace in (\S+); please report it\)$/.exec(lines[0]!);
    assert.ok(m, lines[0]);
    const trace = await readFile(m[1]!, 'utf8');
    assert.match(trace, /TypeError: injected fault\n\s+at /);
    await rm(m[1]!);
  });
});

describe('progress ETA', () => {
  it('is the trials left times the mean duration, over the trials running at once; unknown before one finished', () => {
    assert.equal(etaSeconds({ total: 10, done: 0, running: 2, durationMs: 0 }, 4), Number.POSITIVE_INFINITY);
    // 6 left, 2 of them half done: (6 - 1) trials of 10 s over 2 lanes.
    assert.equal(etaSeconds({ total: 10, done: 4, running: 2, durationMs: 40_000 }, 4), 25);
    // Lanes never exceed the concurrency, and a finished configuration has nothing left.
    assert.equal(etaSeconds({ total: 10, done: 2, running: 8, durationMs: 20_000 }, 4), (4 * 10) / 4);
    assert.equal(etaSeconds({ total: 3, done: 3, running: 0, durationMs: 9_000 }, 4), 0);
  });
});

describe('retry waste', () => {
  it('a job with an endpoint fault and a verifier timeout reports the time lost by cause, as its trial records add up', async () => {
    // The first model call of the "hello" task fails (no client retries): that run is discarded as
    // model_unavailable and run again. The "stuck" task's verifier outlives its timeout.
    const seen = new Set<string>();
    const { url } = await serve({
      flaky: (_i, body) => {
        const user = JSON.stringify(body.messages[1] ?? '');
        if (user.includes('hello') && !seen.has('hello')) {
          seen.add('hello');
          return { fault: 'server_error', status: 500 };
        }
        return body.messages.length <= 2 ? bash('echo hello > /app/out.txt') : bash('echo TERMGRADE_TASK_COMPLETE');
      },
    });
    const root = await tempDir();
    const hello = await trivialTask({ 'task.toml': '[task]\nname = "hello"\n' });
    const stuck = await trivialTask({
      'task.toml': '[task]\nname = "stuck"\n[verifier]\ntimeout_sec = 1\n',
      'instruction.md': 'Do nothing.\n',
      'tests/test.sh': '#!/bin/bash\nsleep 30\n',
    });
    const jobFile = path.join(root, 'job.json');
    await writeFile(
      jobFile,
      JSON.stringify({
        name: 'waste',
        tasks: { paths: [hello, stuck] },
        agents: [{ agent: 'bash-tool', model: { baseUrl: url, model: 'flaky', maxRetries: 0 } }],
        k: 1,
        infraRetries: 1,
      }),
    );
    const jobsDir = path.join(root, 'jobs');
    const r = await runCli(['run', jobFile, '--jobs-dir', jobsDir]);
    assert.equal(r.status, 0, r.stderr);

    // What the trial folders say: every run has its own folder and result.json.
    const trialsDir = path.join(jobsDir, 'waste', 'trials');
    const results = await Promise.all(
      (await readdir(trialsDir)).map(
        async (d) =>
          JSON.parse(await readFile(path.join(trialsDir, d, 'result.json'), 'utf8')) as {
            trialId: string;
            reward: number | null;
            durationMs: number;
            error: { class: string } | null;
          },
      ),
    );
    assert.equal(results.length, 3, 'hello twice (one discarded), stuck once');
    const expected: Record<string, number> = {};
    for (const t of results)
      if (t.reward === null) expected[t.error!.class] = (expected[t.error!.class] ?? 0) + t.durationMs;
    // The stuck verifier is graded 0 (verifier_timeout): it bought a grade. Only the endpoint's failure is waste.
    assert.deepEqual(Object.keys(expected).sort(), ['model_unavailable']);
    assert.equal(results.find((t) => t.error?.class === 'verifier_timeout')?.reward, 0);
    const total = results.reduce((a, t) => a + t.durationMs, 0);

    const stats = JSON.parse((await runCli(['stats', path.join(jobsDir, 'waste'), '--json'])).stdout) as {
      configs: Array<{
        retryWaste: {
          sandboxMs: number;
          wastedMs: number;
          share: number;
          byCause: Record<string, number>;
          runs: number;
          wastedRuns: number;
        };
      }>;
    };
    const waste = stats.configs[0]!.retryWaste;
    assert.deepEqual(waste.byCause, expected);
    assert.equal(waste.sandboxMs, total);
    assert.equal(waste.runs, 3);
    assert.equal(waste.wastedRuns, 1);
    assert.equal(waste.share, expected.model_unavailable! / total);
    // run's ending says the same, by cause.
    assert.match(r.stdout, /time wasted %/);
    assert.match(
      r.stdout,
      /bash-tool\/flaky: [\d.]+% of sandbox time bought no grade \(1 of 3 runs\): model_unavailable [\d.]+%/,
    );
  });
});

describe('run-trial with a custom agent', () => {
  it('loads the module and runs its agent (the name from the module when --agent is not given)', async () => {
    const { url } = await serve({ m: [{ reply: { content: '```bash\necho hello > /app/out.txt\n```' } }] });
    const r = await runCli([
      'run-trial',
      await trivialTask(),
      '--agent-import-path',
      ONE_SHOT,
      '--model',
      'm',
      '--base-url',
      url,
      '--json',
      '-o',
      await tempDir(),
    ]);
    assert.equal(r.status, 0, r.stderr);
    const result = JSON.parse(r.stdout) as { agent: { name: string; model: string }; reward: number };
    assert.deepEqual([result.agent.name, result.agent.model, result.reward], ['one-shot', 'm', 1]);
  });
});
