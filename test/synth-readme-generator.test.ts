import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { SynthReportSchema, type SynthReport } from '../src/synth/schema.js';
import { SynthStore } from '../src/synth/store.js';
import { runCli, tempDir } from './helpers.js';
import { ReadmeGenerator } from './support/readme-generator.js';

/**
 * synth through the real binary, driven by a generator written from the README and the schema
 * only (test/support/readme-generator.ts), on loopback HTTP.
 */
const generators: ReadmeGenerator[] = [];
after(() => Promise.all(generators.map((g) => g.close())));

const KEY = 'readme-generator-key';

async function setUp(seeds: number[], goDownAfter?: number) {
  const gen = new ReadmeGenerator({ model: 'own-gen', key: KEY, goDownAfter });
  generators.push(gen);
  const baseUrl = await gen.start();
  const dir = await tempDir('termgrade-synth-readme-');
  const model = path.join(dir, 'gen.json');
  // The client's own retries, short: an endpoint that stays down is found in about a second.
  await writeFile(
    model,
    JSON.stringify({
      baseUrl,
      model: 'own-gen',
      apiKeyEnv: 'OWN_GEN_KEY',
      maxRetries: 1,
      backoffBaseSec: 0.1,
      backoffMaxSec: 0.2,
    }),
  );
  const seedsFile = path.join(dir, 'seeds.jsonl');
  await writeFile(seedsFile, seeds.map((n) => JSON.stringify({ id: `sum-${n}`, n, skill: 'sum numbers' })).join('\n'));
  const out = path.join(dir, 'pool');
  const args = (...more: string[]) => [
    'synth',
    '--seeds',
    seedsFile,
    '--model',
    model,
    '--out',
    out,
    '-c',
    '1',
    '--probes',
    'fast',
    '-r',
    '1',
    ...more,
  ];
  return { gen, model, out, args, dir };
}

const env = { OWN_GEN_KEY: KEY };

describe('synth with a generator of its own (README and schema only), through the binary', () => {
  it('refuses a wrong key and an unknown model with exit 2 before any build', async () => {
    const { model, out, args } = await setUp([1]);
    const badKey = await runCli(args(), { env: { OWN_GEN_KEY: 'wrong' } });
    assert.equal(badKey.status, 2, badKey.stderr);
    assert.match(badKey.stderr, /rejects the key in OWN_GEN_KEY \(HTTP 401\)/);
    assert.ok(!badKey.stderr.includes('wrong'), 'the key is never printed');
    const cfg = JSON.parse(await readFile(model, 'utf8')) as Record<string, unknown>;
    await writeFile(model, JSON.stringify({ ...cfg, model: 'no-such-model' }));
    const badModel = await runCli(args(), { env });
    assert.equal(badModel.status, 2, badModel.stderr);
    assert.match(badModel.stderr, /does not serve model "no-such-model" \(it serves: own-gen\)/);
    // Nothing was started: no job folder, no build.
    assert.ok(!existsSync(path.join(out, '.synth')), 'no job was created');
  });

  it('admits what it writes (COPY share/, report lines as the prompt asks); an outage mid-job leaves candidates waiting, not rejected, and the same command admits them', async () => {
    // Seed 1 takes calls 1-5; seed 2 its scenario and environment (6, 7); then the endpoint goes down.
    const { gen, out, args } = await setUp([1, 2, 3], 7);
    const first = await runCli(args('--json'), { env });
    assert.equal(first.status, 3, `exit 3 while candidates wait on the generator\n${first.stderr}`);
    assert.ok(first.stdout, first.stderr);
    const r1 = SynthReportSchema.parse(JSON.parse(first.stdout)) as SynthReport;
    assert.equal(r1.rejected, 0, JSON.stringify(r1.candidateList));
    assert.equal(r1.admitted, 1);
    assert.equal(r1.waitingOnGenerator, 2);
    assert.deepEqual(
      r1.candidateList.map((c) => [c.candidate, c.state, c.stage]),
      [
        ['sum-1', 'admitted', 'write'],
        ['sum-2', 'waiting_generator', 'instruction'],
        ['sum-3', 'waiting_generator', 'scenario'],
      ],
    );
    assert.match(r1.candidateList[1]!.reason!, /the generator did not answer \(connection failed/);
    assert.match(first.stderr, /sum-2 round 0: instruction waits on the generator, not rejected/);
    assert.match(first.stderr, /2 candidate\(s\) wait on the generator .* run the same command again when it is back/);
    assert.ok(r1.elapsedMs > 0);

    await gen.comeBack();
    const callsBefore = gen.chatCalls;
    const second = await runCli(args('--candidates'), { env });
    assert.equal(second.status, 0, second.stderr);
    assert.match(second.stderr, /resuming 2 candidates \(2 waited on the generator\) of 3/);
    assert.equal(gen.chatCalls - callsBefore, 3 + 5, 'sum-2 asks for its last three parts, sum-3 for all five');
    assert.match(second.stdout, /candidates 3: admitted 3, rejected 0; end-to-end yield 100\.0%/);
    assert.match(second.stdout, /elapsed \d+\.\d s over every run of the job/);
    const table = second.stdout.slice(second.stdout.indexOf('candidate  '));
    for (const id of ['sum-1', 'sum-2', 'sum-3'])
      assert.match(table, new RegExp(`^${id}\\s+${id}\\s+admitted\\s+0\\s+write\\s+3\\s+admitted: `, 'm'));

    // A third run has nothing to do, and says every candidate's end in --json.
    const third = await runCli(args('--json'), { env });
    assert.equal(third.status, 0, third.stderr);
    assert.equal(gen.chatCalls - callsBefore, 8, 'nothing finished is generated again');
    const r3 = SynthReportSchema.parse(JSON.parse(third.stdout)) as SynthReport;
    assert.equal(r3.resumed, 0);
    assert.ok(r3.elapsedMs >= r1.elapsedMs);
    assert.deepEqual(
      r3.candidateList.map((c) => [c.seed, c.state, c.reason, c.rounds, c.tests]),
      [
        ['sum-1', 'admitted', null, 0, 3],
        ['sum-2', 'admitted', null, 0, 3],
        ['sum-3', 'admitted', null, 0, 3],
      ],
    );
    // The admitted tasks are the generator's own, as written: folders copied with a trailing slash,
    // and per-test results named from the report lines the prompt asked for.
    for (const t of r3.admittedTasks) {
      assert.match(
        await readFile(path.join(t.path, 'environment', 'Dockerfile'), 'utf8'),
        /^COPY share\/ \/srv\/share\/$/m,
      );
      assert.equal(t.tests, 3);
    }
    const store = SynthStore.open(path.join(out, '.synth', 'synth.db'));
    try {
      for (const c of store.candidates())
        assert.deepEqual(c.tests, [
          'test_outputs.py::test_report_exists_output_exists',
          'test_outputs.py::test_report_exists_total_is_right',
          'test_outputs.py::test_report_exists_input_kept',
        ]);
    } finally {
      store.close();
    }
    // What it printed is what the prompt showed: every part's prompt shows the same two lines.
    for (const system of gen.systemPrompts)
      assert.match(
        system,
        /^PASSED test_outputs\.py::test_report_exists\nFAILED test_outputs\.py::test_total_is_42 - /m,
      );
  });
});
