import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { readdir, readFile, stat, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { exportHarborJobs } from '../src/harbor/export-job.js';
import { harborConfigToSpec, isHarborJobConfig } from '../src/harbor/job-config.js';
import { importHarbor } from '../src/harbor/import-job.js';
import { openJob } from '../src/job/job.js';
import { runJob } from '../src/job/run-job.js';
import { FakeProvider } from './support/fake-provider.js';
import { harborAgentConfig } from '../src/harbor/layout.js';
import { parseSpec } from '../src/job/load-spec.js';
import { JobStore } from '../src/store/store.js';
import { TrialResultSchema } from '../src/trial/schema.js';
import { EXAMPLES, ROOT, runCli, tempDir, trivialTask } from './helpers.js';
import { readHarborJobFolder } from './support/harbor-models.js';
import { ScriptedModelServer } from './support/scripted-model-server.js';
import { TERMINUS_SOLVES } from './support/scripts.js';
import type { ScriptStep } from './support/scripted-model-server.js';
import { assertSameTrials, pythonHarborView } from './support/harbor-roundtrip.js';

const FIXTURES = path.join(ROOT, 'test', 'fixtures', 'harbor');
const KEY = 'sk-harbor-test-key-0123456789';

/** Every file under a folder, as text (for looking for a secret anywhere in an export). */
async function allText(dir: string): Promise<string> {
  let out = '';
  for (const name of await readdir(dir)) {
    const p = path.join(dir, name);
    out += (await stat(p)).isDirectory() ? await allText(p) : await readFile(p, 'utf8');
  }
  return out;
}

describe("Harbor's job config and job folder", () => {
  const servers: ScriptedModelServer[] = [];
  after(() => Promise.all(servers.map((s) => s.close())));

  it("runs a Harbor job.yaml through the real binary: Harbor's job folder in jobs_dir opens in Harbor's models and holds what the store holds, token ids included, and imports back to the same trials", async () => {
    // The model's replies carry token ids and logprobs (as vLLM's do): they reach rollout_details.
    const withIds = (st: ScriptStep): ScriptStep => ('reply' in st ? { reply: { ...st.reply, tokenIds: true } } : st);
    const solve = TERMINUS_SOLVES['log-errors']!.map(withIds);
    const server = new ScriptedModelServer({ 'scripted-m': [...solve, ...solve] });
    servers.push(server);
    const baseUrl = await server.start();
    const cwd = await tempDir();
    await symlink(EXAMPLES, path.join(cwd, 'tasks'));
    await writeFile(
      path.join(cwd, 'job.yaml'),
      (await readFile(path.join(FIXTURES, 'job.yaml'), 'utf8')).replace('api_base: API_BASE', `api_base: ${baseUrl}`),
    );

    const run = await runCli(['run', '-c', 'job.yaml', '-q'], { cwd, env: { OPENAI_API_KEY: KEY } });
    assert.equal(run.status, 0, run.stderr);
    // One warning, naming each field that has no equivalent (and the agent that runs as another).
    const warnings = run.stderr.split('\n').filter((l) => l.startsWith('termgrade: warning:'));
    assert.equal(warnings.length, 1, run.stderr);
    for (const field of [
      'environment.override_cpus',
      'agents[1].kwargs.parser_name',
      'agents[1].env.OPENAI_API_KEY',
      'agents[1].name',
      'metrics',
    ])
      assert.match(run.stderr, new RegExp(`\\n  ${field.replace(/[[\].]/g, '\\$&')}: `), `${field} named`);
    assert.doesNotMatch(
      run.stderr,
      /orchestrator|timeout_multiplier|n_attempts|datasets/,
      'fields carried over are not listed',
    );

    // termgrade's store in its own jobs folder; Harbor's job folder in jobs_dir (relative to the
    // working directory), named job_name; n_attempts as k.
    const jobDir = path.join(cwd, '.termgrade', 'jobs', 'harbor-fixture');
    assert.equal(existsSync(path.join(cwd, 'jobs', 'harbor-fixture', 'job.db')), false, "no store in Harbor's folder");
    const store = JobStore.open(path.join(jobDir, 'job.db'), { readonly: true });
    const rows = [...store.listTrials()];
    const spec = JSON.parse(store.getMeta('spec')!);
    store.close();
    assert.equal(spec.k, 2);
    assert.equal(spec.concurrency, 1);
    assert.deepEqual(spec.tasks.include, ['log-errors']);
    assert.deepEqual(
      spec.agents.map((a: { agent: string; model?: { model: string; baseUrl: string; temperature: number } }) => [
        a.agent,
        a.model?.model ?? null,
        a.model?.temperature ?? null,
      ]),
      [
        ['oracle', null, null],
        ['terminus', 'scripted-m', 0],
      ],
    );
    assert.deepEqual(
      rows.map((r) => [r.config, r.task, r.attempt, r.reward]),
      [
        ['oracle', 'log-errors', 0, 1],
        ['oracle', 'log-errors', 1, 1],
        ['terminus/scripted-m', 'log-errors', 0, 1],
        ['terminus/scripted-m', 'log-errors', 1, 1],
      ],
    );

    const out = path.join(cwd, 'jobs');
    // (with -q the run prints no summary; harbor-roundtrip.test.ts reads the line that names the folder)
    const h = await readHarborJobFolder(path.join(out, 'harbor-fixture'));
    // The second double (Python: Harbor's models as pydantic reads them) opens the same folder and
    // reads the store's facts in it: checksum, rewards, tokens, and token ids for the model's trials.
    const py = pythonHarborView(path.join(out, 'harbor-fixture'));
    assert.equal(py.job.job_name, 'harbor-fixture');
    assert.equal(py.trials.length, rows.length);
    for (const t of py.trials) {
      const meta = h.trials.find((x) => x.result.trial_name === t.trial_name)!.result.agent_result?.metadata;
      const row = rows.find((r) => r.trial_id === (meta?.termgrade as { trialId?: string } | undefined)?.trialId)!;
      assert.deepEqual(
        [t.task_checksum, t.rewards, t.n_input_tokens, t.n_output_tokens, t.rollout_turns > 0],
        [row.task_checksum, { reward: row.reward }, row.input_tokens, row.output_tokens, row.agent === 'terminus'],
        `${t.trial_name} as Harbor's models read it`,
      );
    }

    // Job config: the spec as Harbor spells it, with no secret.
    assert.equal(h.config.job_name, 'harbor-fixture');
    assert.equal(h.config.n_attempts, 2);
    assert.equal(h.config.n_concurrent_trials, 1);
    assert.deepEqual(
      h.config.datasets?.map((d) => [d.path, d.task_names]),
      [[path.join(cwd, 'tasks'), ['log-errors']]],
    );
    assert.deepEqual(
      h.config.agents?.map((a) => [a.name, a.model_name, a.kwargs?.api_base]),
      [
        ['oracle', null, undefined],
        ['terminus', 'scripted-m', baseUrl],
      ],
    );
    assert.ok(!(await allText(out)).includes(KEY), 'the API key appears nowhere in the export');

    // Trials: one folder per stored trial; rewards, tokens, cost and per-phase timings as recorded.
    assert.equal(h.trials.length, rows.length);
    for (const row of rows) {
      const t = h.trials.find(
        (x) =>
          (x.result.agent_result?.metadata?.termgrade as { trialId?: string } | undefined)?.trialId === row.trial_id,
      );
      assert.ok(t, `trial ${row.trial_id} exported`);
      const own = TrialResultSchema.parse(JSON.parse(await readFile(path.join(row.trial_dir!, 'result.json'), 'utf8')));
      const r = t.result;
      assert.equal(r.task_name, row.task);
      assert.equal(r.trial_name, path.basename(t.dir));
      assert.equal(r.agent_info.name, row.agent);
      assert.equal(r.agent_info.model_info?.name ?? null, row.model);
      assert.deepEqual(r.verifier_result?.rewards, { reward: row.reward });
      assert.equal(r.exception_info ?? null, null);
      assert.equal(r.agent_result?.n_input_tokens ?? null, row.input_tokens);
      assert.equal(r.agent_result?.n_output_tokens ?? null, row.output_tokens);
      assert.equal(r.agent_result?.cost_usd ?? null, row.cost_usd);
      assert.equal(Date.parse(r.started_at!), Date.parse(own.startedAt));
      assert.equal(Date.parse(r.finished_at!), Date.parse(own.finishedAt));
      for (const [harbor, ours] of [
        ['environment_setup', 'environment_setup'],
        ['agent_setup', 'agent_setup'],
        ['agent_execution', 'agent_run'],
        ['verifier', 'verification'],
      ] as const) {
        assert.equal(Date.parse(r[harbor]!.started_at!), Date.parse(own.phases[ours]!.startedAt), `${harbor} start`);
        assert.equal(Date.parse(r[harbor]!.finished_at!), Date.parse(own.phases[ours]!.finishedAt), `${harbor} end`);
      }
      assert.deepEqual(t.config, r.config, "the trial's config.json is its result's config");
      assert.ok((await readFile(path.join(t.dir, 'verifier', 'test-stdout.txt'), 'utf8')).length >= 0);
    }
    const terminus = h.trials.filter((t) => t.result.agent_info.name === 'terminus');
    assert.ok(
      terminus.every((t) => (t.result.agent_result?.n_input_tokens ?? 0) > 0),
      'a model trial carries its tokens',
    );
    assert.equal(
      JSON.parse(
        await readFile(path.join(terminus[0]!.dir, 'agent', 'trajectory.json'), 'utf8'),
      ).schema_version.startsWith('ATIF'),
      true,
      "the agent's trajectory is copied",
    );

    // Job result: counts and reward tallies per agent x model x dataset equal the store's.
    assert.equal(h.result.n_total_trials, rows.length);
    assert.equal(h.result.stats.n_completed_trials, rows.length);
    assert.equal(h.result.stats.n_trials, rows.length);
    assert.equal(h.result.stats.n_errored_trials, 0);
    assert.deepEqual(Object.keys(h.result.stats.evals ?? {}).sort(), ['oracle__tasks', 'terminus__scripted-m__tasks']);
    const ev = h.result.stats.evals!['terminus__scripted-m__tasks']!;
    assert.equal(ev.n_trials, 2);
    assert.deepEqual(ev.reward_stats, { reward: { '1.0': terminus.map((t) => t.result.trial_name).sort() } });
    // Token ids: rollout_details holds, per model turn, the ids and logprobs the trajectory holds.
    for (const t of terminus) {
      const traj = JSON.parse(await readFile(path.join(t.dir, 'agent', 'trajectory.json'), 'utf8'));
      const turns = traj.steps.filter(
        (st: { metrics?: { completion_token_ids?: number[] } }) => st.metrics?.completion_token_ids,
      );
      assert.ok(turns.length >= 3, 'every model turn has token ids');
      assert.deepEqual(t.result.agent_result?.rollout_details, [
        {
          prompt_token_ids: turns.map((st: { metrics: { prompt_token_ids: number[] } }) => st.metrics.prompt_token_ids),
          completion_token_ids: turns.map(
            (st: { metrics: { completion_token_ids: number[] } }) => st.metrics.completion_token_ids,
          ),
          logprobs: turns.map((st: { metrics: { logprobs: number[] } }) => st.metrics.logprobs),
        },
      ]);
    }
    const oracles = h.trials.filter((t) => t.result.agent_info.name === 'oracle');
    assert.ok(
      oracles.every((t) => t.result.agent_result?.rollout_details === null),
      'no model, no token ids',
    );
    assert.deepEqual(ev.metrics, [{ mean: 1 }]);
    assert.equal(
      h.result.stats.n_input_tokens,
      rows.reduce((a, r) => a + (r.input_tokens ?? 0), 0),
    );
    assert.equal(Date.parse(h.result.started_at), Math.min(...h.trials.map((t) => Date.parse(t.result.started_at!))));

    // The other direction: importing the folder the run wrote gives back the same trial records.
    const back = await runCli(['import', path.join(out, 'harbor-fixture'), '--job', 'back'], { cwd });
    assert.equal(back.status, 0, back.stderr);
    await assertSameTrials(jobDir, path.join(cwd, '.termgrade', 'jobs', 'back'));
  });

  it('writes trials without a reward as Harbor does an exception (no verifier_result, never a 0), and import reads them back as infrastructure', async () => {
    const jobsDir = await tempDir();
    const spec = parseSpec(
      {
        name: 'mixed',
        tasks: {
          paths: [
            await trivialTask({ 'task.toml': '[task]\nname = "a"\n' }),
            await trivialTask({ 'task.toml': '[task]\nname = "b"\n' }),
          ],
        },
        agents: [{ agent: 'oracle' }],
        k: 2,
        infraRetries: 0,
      },
      'test',
    );
    const opened = await openJob(spec, jobsDir);
    try {
      await runJob({
        spec,
        tasks: opened.tasks,
        store: opened.store,
        provider: new FakeProvider({ startFails: (t) => t.name === 'b', grade: (t, n) => (n === 0 ? 1 : 0) }),
        jobDir: opened.jobDir,
      });
    } finally {
      await opened.close();
    }
    const out = await tempDir();
    await exportHarborJobs([path.join(jobsDir, 'mixed')], out);
    const h = await readHarborJobFolder(path.join(out, 'mixed'));
    const byTask = (task: string) => h.trials.filter((t) => t.result.task_name === task).map((t) => t.result);
    // The fake provider gives its first grading 1 and the next 0: which attempt grades first is the
    // scheduler's, so the trials are taken by reward, not by their order.
    const a = byTask('a');
    assert.deepEqual(a.map((r) => r.verifier_result?.rewards?.reward).sort(), [0, 1]);
    const [won, lost] = [
      a.find((r) => r.verifier_result?.rewards?.reward === 1)!,
      a.find((r) => r.verifier_result?.rewards?.reward === 0)!,
    ];
    assert.deepEqual(
      byTask('b').map((r) => [r.verifier_result ?? null, r.exception_info?.exception_type]),
      [
        [null, 'EnvironmentStartError'],
        [null, 'EnvironmentStartError'],
      ],
    );
    assert.match(
      await readFile(path.join(out, 'mixed', byTask('b')[0]!.trial_name, 'exception.txt'), 'utf8'),
      /did not start/,
    );
    const s = h.result.stats;
    assert.deepEqual([h.result.n_total_trials, s.n_completed_trials, s.n_errored_trials, s.n_errors], [4, 4, 2, 2]);
    const ev = s.evals!['oracle__adhoc']!;
    assert.deepEqual([ev.n_trials, ev.n_errors], [2, 2]);
    assert.deepEqual(ev.reward_stats, { reward: { '1.0': [won.trial_name], '0.0': [lost.trial_name] } });
    assert.deepEqual(ev.exception_stats, { EnvironmentStartError: byTask('b').map((r) => r.trial_name) });
    assert.deepEqual(ev.metrics, [{ mean: 0.5 }], 'the mean is over graded trials');
    assert.deepEqual(ev.pass_at_k, { 1: 0.5, 2: 1 });
    const store = JobStore.open(path.join(jobsDir, 'back', 'job.db'));
    try {
      await importHarbor(out, store);
      assert.deepEqual([...store.listTrials()].map((r) => [r.task, r.reward]).sort(), [
        ['a', 0],
        ['a', 1],
        ['b', null],
        ['b', null],
      ]);
    } finally {
      store.close();
    }
  });

  it("reads Harbor's config.json (JSON) and names every field it cannot carry over", async () => {
    const raw = JSON.parse(await readFile(path.join(FIXTURES, 'config.json'), 'utf8'));
    assert.equal(isHarborJobConfig(raw), true);
    const c = harborConfigToSpec(raw, 'config.json', '/work', 'x');
    const spec = parseSpec(c.spec, 'test');
    assert.equal(spec.name, 'harbor-json');
    assert.equal(spec.k, 1);
    assert.equal(spec.concurrency, 3);
    assert.equal(spec.forceBuild, true);
    assert.equal(spec.infraRetries, 1);
    assert.deepEqual([spec.timeouts.agentMultiplier, spec.timeouts.verifierMultiplier], [2, 2]);
    assert.deepEqual(spec.tasks, { paths: ['/work/tasks'], include: [], exclude: ['git-*'], limit: 2 });
    assert.equal(spec.harborJobsDir, '/work/jobs', "Harbor's job folder goes to jobs_dir");
    assert.deepEqual(c.ignored.map((i) => i.field).sort(), [
      'agents[0].override_timeout_sec',
      'artifacts',
      'environment.delete',
      'environment.override_memory_mb',
      'environment.type',
      'retry.max_retries',
      'verifier.override_timeout_sec',
    ]);
    assert.ok(
      c.ignored.every((i) => i.why.length > 10),
      'each says why',
    );
    // A key neither Harbor nor termgrade knows is named too, never dropped silently.
    assert.deepEqual(
      harborConfigToSpec({ ...raw, n_attempt: 3 }, 'f', '/w', 'x')
        .ignored.map((i) => i.field)
        .filter((f) => f === 'n_attempt'),
      ['n_attempt'],
    );
    // ... with the key it most likely meant.
    assert.match(
      harborConfigToSpec({ ...raw, n_attempt: 3 }, 'f', '/w', 'x').ignored.find((i) => i.field === 'n_attempt')!.why,
      /did you mean n_attempts\?/,
    );
    // A termgrade job file is not taken for Harbor's.
    assert.equal(isHarborJobConfig({ name: 'j', tasks: { paths: ['t'] }, agents: [{ agent: 'oracle' }], k: 2 }), false);
  });

  it('refuses, with exit 2 and the field, what would change which trials run: a registry dataset, a Python agent, an agent termgrade lacks', async () => {
    const cwd = await tempDir();
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [
        { agents: [{ name: 'oracle' }], datasets: [{ name: 'terminal-bench', version: '2.0' }] },
        /datasets\[0\]: dataset terminal-bench@2\.0 comes from a registry/,
      ],
      [
        { agents: [{ import_path: 'my_pkg.agents:MyAgent' }], datasets: [{ path: 'tasks' }] },
        /agents\[0\]\.import_path: "my_pkg\.agents:MyAgent" is a Python agent class/,
      ],
      [
        { agents: [{ name: 'claude-code', model_name: 'anthropic/claude-sonnet-4' }], datasets: [{ path: 'tasks' }] },
        /agents\[0\]\.name: Harbor agent "claude-code" has no termgrade equivalent/,
      ],
      [
        { agents: [{ name: 'terminus-2', model_name: 'anthropic/claude-sonnet-4' }], datasets: [{ path: 'tasks' }] },
        /agents\[0\]\.model_name: "anthropic\/claude-sonnet-4": .*kwargs\.api_base/,
      ],
    ];
    for (const [i, [config, message]] of cases.entries()) {
      // Harbor writes both: job.yaml by hand, config.json in every job folder.
      const file = i % 2 ? 'config.json' : 'job.yaml';
      await writeFile(path.join(cwd, file), JSON.stringify(config));
      const r = await runCli(['run', '--config', file, '--jobs-dir', path.join(cwd, 'jobs')], { cwd });
      assert.equal(r.status, 2, r.stderr);
      assert.match(r.stderr, message);
      assert.equal(existsSync(path.join(cwd, 'jobs')), false, 'a refused run leaves no job');
    }
    // `-c N` is still the concurrency; two job files are refused.
    const both = await runCli(['run', 'a.yaml', '-c', 'b.yaml'], { cwd });
    assert.equal(both.status, 2);
    assert.match(both.stderr, /give one job file \(got a\.yaml, b\.yaml\)/);
    const bad = await runCli(['run', '-c', '0'], { cwd });
    assert.equal(bad.status, 2);
  });

  it('exports no secret in an agent config: stored secret-looking variables become ${NAME}, endpoints lose their user and password', () => {
    const a = harborAgentConfig({
      agent: 'bash-tool',
      env: { MODE: 'eval', API_TOKEN: 'tok-123456789' },
      envFiles: [],
      model: {
        baseUrl: 'http://user:pw-secret@127.0.0.1:9/v1?api_key=k-secret',
        model: 'm',
        apiKeyEnv: 'OPENAI_API_KEY',
        extraBody: {},
        headers: { Authorization: 'Bearer h-secret' },
        requestTimeoutSec: 600,
        maxRetries: 6,
        backoffBaseSec: 1,
        backoffMaxSec: 60,
      },
    });
    assert.deepEqual(a.env, { MODE: 'eval', API_TOKEN: '${API_TOKEN}' });
    const text = JSON.stringify(a);
    for (const s of ['tok-123456789', 'pw-secret', 'k-secret', 'h-secret'])
      assert.ok(!text.includes(s), `${s} not exported`);
    assert.equal(a.kwargs.api_key_env, 'OPENAI_API_KEY');
  });
});
