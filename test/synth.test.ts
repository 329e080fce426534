import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { ModelConfigSchema } from '../src/model/config.js';
import { Generator } from '../src/synth/generator.js';
import { partHash } from '../src/synth/assemble.js';
import { SynthStore } from '../src/synth/store.js';
import { synthesize } from '../src/synth/synth.js';
import { loadTask } from '../src/task/load.js';
import { ProtectionStore } from '../src/verifier/protection-store.js';
import { SynthReportSchema, type StageName } from '../src/synth/schema.js';
import { docker, runCli, tempDir, trivialTask } from './helpers.js';
import { ScriptedModelServer } from './support/scripted-model-server.js';
import { CANDIDATE_KINDS, EXPECTED, scriptedGenerator, seedFor } from './support/scripted-generator.js';

const servers: ScriptedModelServer[] = [];
after(() => Promise.all(servers.map((s) => s.close())));

async function generatorServer(): Promise<string> {
  const server = new ScriptedModelServer({ '*': scriptedGenerator() });
  servers.push(server);
  return server.start();
}

/** Stages a candidate of each kind runs with maxRounds 1, in order, by round (what the script implies). */
const FULL: StageName[] = [
  'scenario',
  'environment',
  'lint',
  'build',
  'observe',
  'instruction',
  'solution',
  'execute',
  'tests',
  'check',
];
const AFTER_ENV: StageName[] = [
  'environment',
  'lint',
  'build',
  'observe',
  'instruction',
  'solution',
  'execute',
  'tests',
  'check',
];
const STAGES_OF: Record<string, StageName[][]> = {
  good: [[...FULL, 'write']],
  malformed: [[...FULL, 'write']],
  build_error: [
    ['scenario', 'environment', 'lint', 'build'],
    [...AFTER_ENV, 'write'],
  ],
  unparseable: [
    ['scenario', 'environment', 'lint'],
    [...AFTER_ENV, 'write'],
  ],
  never_builds: [
    ['scenario', 'environment', 'lint', 'build'],
    ['environment', 'lint', 'build'],
  ],
  wrong_solution: [FULL.slice(0, 8), ['solution', 'execute', 'tests', 'check', 'write']],
  weak_tests: [FULL, ['tests', 'check', 'write']],
  forgeable: [FULL, ['tests', 'check']],
  leak_fixed: [FULL, ['environment', 'lint', 'build', 'observe', 'execute', 'check', 'write']],
  leak_always: [FULL, ['environment', 'lint', 'build', 'observe', 'execute', 'check']],
};

function stagesByRound(store: SynthStore, candidate: string): StageName[][] {
  const rows = store.stages().filter((s) => s.candidateId === candidate);
  const rounds: StageName[][] = [];
  for (const r of rows) (rounds[r.round] ??= []).push(r.stage);
  return rounds;
}

describe('synth: seeds to admitted tasks on a real engine, with a scripted generator', () => {
  it('admits what the script makes admissible, repairs only the part at fault, never admits a leak or a forgeable reward, and counts the funnel', async () => {
    const baseUrl = await generatorServer();
    const out = await tempDir('termgrade-synth-');
    const seeds = CANDIDATE_KINDS.map((k) => seedFor(k, 0)).map((s) => ({ id: s.id, seed: s }));
    const records = new ProtectionStore(await tempDir('termgrade-synth-admission-'));
    const report = await synthesize({
      seeds,
      generator: new Generator(
        ModelConfigSchema.parse({ baseUrl, model: 'gen', maxRetries: 0, price: { input: 1, output: 2 } }),
      ),
      provider: docker(),
      outDir: out,
      maxRounds: 1,
      probes: 'fast',
      repeat: 1,
      concurrency: 2,
      protection: records,
    });
    SynthReportSchema.parse(report);
    // Admission recorded each admitted task's protected set, found by the published folder's content.
    for (const t of report.admittedTasks)
      assert.ok(await records.find(await loadTask(t.path)), `no admission record for ${t.path}`);
    const admitted = CANDIDATE_KINDS.filter((k) => EXPECTED[k].admitted).map((k) => `${k}-0`);
    assert.deepEqual(report.admittedTasks.map((t) => t.candidate).sort(), [...admitted].sort());
    assert.equal(report.candidates, CANDIDATE_KINDS.length);
    assert.equal(report.admitted, admitted.length);
    assert.equal(report.rejected, CANDIDATE_KINDS.length - admitted.length);
    assert.equal(report.endToEndYield, admitted.length / CANDIDATE_KINDS.length);

    const store = SynthStore.open(path.join(out, '.synth', 'synth.db'));
    try {
      const states = new Map(store.candidates().map((c) => [c.seedId, c]));
      for (const kind of CANDIDATE_KINDS) {
        const c = states.get(`${kind}-0`)!;
        const want = EXPECTED[kind];
        assert.equal(c.status, want.admitted ? 'admitted' : 'rejected', kind);
        assert.deepEqual(
          c.repairs.map((r) => r.part),
          want.repairs,
          `${kind}: repairs`,
        );
        if (want.rejected)
          assert.ok(
            c.rejected.includes(want.rejected) && c.rejected.includes('rounds_exhausted'),
            `${kind}: ${c.rejected.join(', ')}`,
          );
        // Every stage the script implies, each exactly once per round, in order.
        assert.deepEqual(stagesByRound(store, c.id), STAGES_OF[kind], `${kind}: stages`);
      }

      // The funnel's counts are what the script implies.
      const stage = (name: string) => report.stages.find((s) => s.stage === name)!;
      const n = CANDIDATE_KINDS.length;
      assert.deepEqual([stage('scenario').candidates, stage('scenario').passed], [n, n]);
      assert.deepEqual([stage('lint').candidates, stage('lint').passed, stage('lint').runs], [n, n, n + 5]);
      assert.deepEqual([stage('build').candidates, stage('build').passed], [n, n - 1]);
      assert.deepEqual([stage('execute').candidates, stage('execute').passed], [n - 1, n - 1]);
      assert.deepEqual(
        [stage('check').candidates, stage('check').passed, stage('check').runs],
        [n - 1, admitted.length, n - 1 + 4],
      );
      assert.deepEqual([stage('write').candidates, stage('write').passed], [admitted.length, admitted.length]);
      const repairs = Object.fromEntries(report.repairs.map((r) => [r.part, [r.attempts, r.candidates, r.admitted]]));
      assert.deepEqual(repairs, {
        environment: [5, 5, 3],
        instruction: [0, 0, 0],
        solution: [1, 1, 1],
        tests: [2, 2, 1],
      });
      assert.deepEqual(report.rejections, {
        rounds_exhausted: 3,
        build_failed: 1,
        solution_leaked: 1,
        reward_forgeable: 1,
      });
      // Five parts, each asked twice for the malformed kind (its first reply is not JSON).
      assert.equal(report.tokens.malformedReplies, 5);
      const calls = store.stages().reduce((a, s) => a + s.calls, 0);
      assert.equal(report.tokens.calls, calls);
      assert.equal(report.tokens.prompt, calls * 400);
      assert.ok(
        report.costUsd !== null &&
          Math.abs(report.costUsd - (calls * 400 * 1 + report.tokens.completion * 2) / 1e6) < 1e-9,
      );
      assert.deepEqual(report.testsPerAdmitted, { mean: 2, min: 2, max: 2 });

      // An unparseable Dockerfile is refused before any build: no build in its first round.
      assert.deepEqual(stagesByRound(store, 'unparseable-0')[0], ['scenario', 'environment', 'lint']);

      // A repaired candidate's other parts are unchanged: the hashes generated in round 0 stay.
      const firstHash = (id: string, part: string) =>
        store.stages().find((s) => s.candidateId === id && s.stage === part && s.round === 0)?.detail.hash;
      for (const [id, repaired] of [
        ['weak_tests-0', 'tests'],
        ['wrong_solution-0', 'solution'],
        ['leak_fixed-0', 'environment'],
      ] as const) {
        const c = states.get(id)!;
        for (const part of ['scenario', 'environment', 'instruction', 'solution', 'tests'] as const) {
          const before = firstHash(id, part);
          if (before === undefined) continue;
          assert.equal(c.hashes[part], partHash(c.parts[part]), `${id} ${part}`);
          if (part === repaired) assert.notEqual(c.hashes[part], before, `${id}: ${part} was regenerated`);
          else assert.equal(c.hashes[part], before, `${id}: ${part} must be unchanged by a ${repaired} repair`);
        }
      }

      // The admitted folders are what was checked, with their provenance; the rejected are not there.
      for (const id of admitted) {
        const toml = await readFile(path.join(out, id, 'task.toml'), 'utf8');
        const c = states.get(id)!;
        assert.match(toml, new RegExp(`seed = "${id}"`));
        assert.match(toml, new RegExp(`rounds = ${c.round}`));
        assert.match(toml, /model = "gen"/);
        assert.equal(await readFile(path.join(out, id, 'solution', 'solve.sh'), 'utf8'), c.parts.solution!.solveSh);
        assert.equal(await readFile(path.join(out, id, 'tests', 'test.sh'), 'utf8'), c.parts.tests!.testSh);
      }
      for (const id of ['leak_always-0', 'forgeable-0', 'never_builds-0'])
        assert.ok(!existsSync(path.join(out, id)), `${id} must not be admitted`);
      // The leak was repaired out of the image, not just re-checked until it passed.
      assert.ok(
        !readFileSync(path.join(out, 'leak_fixed-0', 'environment', 'Dockerfile'), 'utf8').includes('/var/backups'),
      );
      // Tests were written from what execution recorded: the expected hash is the solution's output's.
      const weak = states.get('weak_tests-0')!;
      const observed = weak.solutionState!.changes.find((ch) => ch.path === '/app/out.txt')!;
      assert.equal(observed.text, `${[...seedFor('weak_tests', 0).words].reverse().join('\n')}\n`);
      assert.ok(weak.parts.tests!.testSh.includes(`= "${observed.sha256}"`));
    } finally {
      store.close();
    }
  });
});

describe('synth: a job killed with SIGKILL resumes', () => {
  it('runs no recorded stage again and admits the same set', async () => {
    const baseUrl = await generatorServer();
    const dir = await tempDir('termgrade-synth-kill-');
    const kinds = ['good', 'weak_tests', 'build_error'] as const;
    await writeFile(path.join(dir, 'seeds.jsonl'), kinds.map((k) => JSON.stringify(seedFor(k, 1))).join('\n') + '\n');
    await writeFile(path.join(dir, 'gen.json'), JSON.stringify({ baseUrl, model: 'gen', maxRetries: 0 }));
    const out = path.join(dir, 'out');
    const args = [
      'synth',
      '--seeds',
      path.join(dir, 'seeds.jsonl'),
      '--model',
      path.join(dir, 'gen.json'),
      '--out',
      out,
      '--max-rounds',
      '1',
      '--probes',
      'fast',
      '--repeat',
      '1',
      '--jsonl',
    ];
    // Killed inside the first admission check, with stages of other candidates under way.
    const killed = await runCli(args, { killOn: (e) => e.type === 'stage-start' && e.stage === 'check' });
    assert.ok(killed.killed, `the job ended before it was killed: ${killed.stderr}`);
    const mid = SynthStore.open(path.join(out, '.synth', 'synth.db'));
    const before = mid.stages().map((s) => `${s.candidateId}/${s.round}/${s.stage}`);
    mid.close();
    assert.ok(before.length > 0 && !before.some((s) => s.endsWith('/write')), `killed too late: ${before.join(' ')}`);

    const resumed = await runCli(args);
    assert.equal(resumed.status, 0, resumed.stderr);
    const lines = resumed.stdout
      .trim()
      .split('\n')
      .map(
        (l) => JSON.parse(l) as { type: string; stage?: string; candidate?: string; round?: number; report?: unknown },
      );
    const report = SynthReportSchema.parse(lines.at(-1)!.report);
    assert.deepEqual(report.admittedTasks.map((t) => t.candidate).sort(), kinds.map((k) => `${k}-1`).sort());
    // No stage recorded before the kill ran again after it.
    const rerun = lines.filter((l) => l.type === 'stage-start').map((l) => `${l.candidate}/${l.round}/${l.stage}`);
    assert.deepEqual(
      rerun.filter((s) => before.includes(s)),
      [],
    );
    const store = SynthStore.open(path.join(out, '.synth', 'synth.db'));
    try {
      for (const k of kinds) assert.deepEqual(stagesByRound(store, `${k}-1`), STAGES_OF[k], k);
    } finally {
      store.close();
    }
    // --repeat 1 reached each admission check: its oracle ran as attempt 0 only (a run whose
    // infrastructure failed runs again under the same attempt), where the default runs 0 and 1.
    const trials = (await readdir(path.join(out, '.synth', 'work'), { recursive: true })).filter((p) =>
      /(^|\/)check-\d+\/trials\/[^/]+$/.test(p),
    );
    const oracle = new Set(trials.map((p) => /__oracle__(\d+)__/.exec(p)?.[1]).filter((a) => a !== undefined));
    assert.ok(
      trials.some((p) => p.includes('__nop__')),
      `no admission trials found: ${trials.join(' ')}`,
    );
    assert.deepEqual([...oracle], ['0'], trials.join(' '));
  });
});

describe('synth: existing task folders as exemplar seeds', () => {
  it('refuses a candidate that duplicates one the job admitted before it, in the same run and after a resume', async () => {
    const baseUrl = await generatorServer();
    const out = await tempDir('termgrade-synth-dup-');
    const good = seedFor('good', 5);
    // Three seed lines with the same fields: the scripted generator writes the same task for each.
    const seeds = ['good-5', 'good-5-again', 'good-5-third'].map((id) => ({ id, seed: good }));
    const run = (n: number) =>
      synthesize({
        seeds: seeds.slice(0, n),
        generator: new Generator(ModelConfigSchema.parse({ baseUrl, model: 'gen', maxRetries: 0 })),
        provider: docker(),
        outDir: out,
        maxRounds: 1,
        probes: 'fast',
        repeat: 1,
        concurrency: 1,
      });
    const first = await run(2);
    assert.deepEqual(
      first.admittedTasks.map((t) => t.candidate),
      ['good-5'],
    );
    assert.deepEqual(first.rejections, { duplicate: 1 });
    // Resumed with one more: the index of admitted tasks is read back from the job's record.
    const second = await run(3);
    assert.deepEqual(
      second.admittedTasks.map((t) => t.candidate),
      ['good-5'],
    );
    assert.deepEqual(second.rejections, { duplicate: 2 });
    const store = SynthStore.open(path.join(out, '.synth', 'synth.db'));
    try {
      for (const id of ['good-5-again', 'good-5-third']) {
        const write = store.stages().find((x) => x.candidateId === id && x.stage === 'write')!;
        assert.match(String((write.detail.evidence as string[])[0]), /the same task as .*good-5: /, id);
      }
    } finally {
      store.close();
    }
  });

  it('summarises each exemplar into the scenario request, admits a different task of its skill and refuses a copy of it', async () => {
    const server = new ScriptedModelServer({ '*': scriptedGenerator() });
    servers.push(server);
    const baseUrl = await server.start();
    const sortTask = await trivialTask({
      'task.toml': '[task]\nname = "sort-numbers"\n\n[verifier]\ntimeout_sec = 30\n\n[agent]\ntimeout_sec = 30\n',
      'instruction.md':
        'Sort the numbers in /app/nums.txt ascending, one per line, and write them to /app/sorted.txt.\n',
    });
    // The scripted generator copies this exemplar's instruction word for word (its name says copycat).
    const copied = 'Write the lines of /app/words.txt in reverse order, last line first, to /app/out.txt.\n';
    const copycat = await trivialTask({
      'task.toml': '[task]\nname = "copycat-reverse"\n\n[verifier]\ntimeout_sec = 30\n\n[agent]\ntimeout_sec = 30\n',
      'instruction.md': copied,
    });
    const out = await tempDir('termgrade-synth-exemplar-');
    const report = await synthesize({
      seeds: [],
      exemplars: [sortTask, copycat],
      generator: new Generator(ModelConfigSchema.parse({ baseUrl, model: 'gen', maxRetries: 0 })),
      provider: docker(),
      outDir: out,
      maxRounds: 1,
      probes: 'fast',
      repeat: 1,
      concurrency: 2,
    });
    const sortId = `exemplar-${path.basename(sortTask)}`;
    const copyId = `exemplar-${path.basename(copycat)}`;
    assert.equal(report.candidates, 2);
    assert.deepEqual(
      report.admittedTasks.map((t) => t.candidate),
      [sortId],
    );
    assert.deepEqual(report.rejections, { duplicate: 1 });

    // The scenario request carries the exemplar's instruction, Dockerfile and test.sh, and the brief.
    const scenario = server.requests
      .map(
        (r) =>
          JSON.parse(
            String(
              (r.body as { messages: Array<{ role: string; content: string }> }).messages.find(
                (m) => m.role === 'user',
              )!.content,
            ),
          ) as { stage: string; candidate: string; seed: { brief?: string; exemplar?: Record<string, unknown> } },
      )
      .find((q) => q.stage === 'scenario' && q.candidate === sortId)!;
    const ex = scenario.seed.exemplar as {
      instruction: string;
      environment: { dockerfile: string };
      tests: { testSh: string };
    };
    assert.equal(ex.instruction, readFileSync(path.join(sortTask, 'instruction.md'), 'utf8'));
    assert.equal(ex.environment.dockerfile, readFileSync(path.join(sortTask, 'environment', 'Dockerfile'), 'utf8'));
    assert.equal(ex.tests.testSh, readFileSync(path.join(sortTask, 'tests', 'test.sh'), 'utf8'));
    assert.match(scenario.seed.brief ?? '', /different task that exercises the same skill/);

    // The admitted task is not the exemplar; the copy was refused at admission, naming the exemplar.
    const admittedInstruction = await readFile(path.join(out, sortId, 'instruction.md'), 'utf8');
    assert.notEqual(admittedInstruction, readFileSync(path.join(sortTask, 'instruction.md'), 'utf8'));
    assert.ok(!existsSync(path.join(out, copyId)));
    const store = SynthStore.open(path.join(out, '.synth', 'synth.db'));
    try {
      const c = store.candidates().find((x) => x.id === copyId)!;
      assert.equal(c.status, 'rejected');
      assert.deepEqual(c.rejected, ['duplicate']);
      // It got through check: only the comparison with the pool, exemplars included, refused it.
      assert.deepEqual(stagesByRound(store, copyId), [[...FULL, 'write']]);
      const write = store.stages().find((s) => s.candidateId === copyId && s.stage === 'write')!;
      assert.match(String((write.detail.evidence as string[])[0]), new RegExp(`the same task as ${copycat}`));
    } finally {
      store.close();
    }
  });
});
