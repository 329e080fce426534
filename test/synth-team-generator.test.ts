import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { SynthReportSchema } from '../src/synth/schema.js';
import { SynthStore } from '../src/synth/store.js';
import { parsePytestSummary } from '../src/verifier/test-report.js';
import { runCli, tempDir } from './helpers.js';
import { TEAM_TESTS, TeamGenerator } from './support/team-generator.js';

/**
 * synth through the real binary with a generator of a team's own, written from the README and
 * src/synth/schema.ts only (test/support/team-generator.ts): a wrong key and an unknown model
 * refused before any job, the usual COPY forms, report lines in the form the prompt asks for, an
 * endpoint that refuses the request format, one that answers 503 mid-job (a gateway whose model
 * server is gone) and one that goes away mid-job (nothing listening) and comes back. Two
 * candidates, one job, five runs of the same command.
 */
const KEY = 'team-generator-key';
const generator = new TeamGenerator('team-gen', KEY);
after(() => generator.close());

/** A job of two seeds against the generator: its model file, pool folder, and `synth` with more flags. */
async function setUp(baseUrl: string) {
  const dir = await tempDir('termgrade-synth-team-');
  const model = path.join(dir, 'team-gen.json');
  // The client's own retries, short: an endpoint that stays down is found in about a second.
  await writeFile(
    model,
    JSON.stringify({
      baseUrl,
      model: 'team-gen',
      apiKeyEnv: 'TEAM_GEN_KEY',
      maxRetries: 1,
      backoffBaseSec: 0.1,
      backoffMaxSec: 0.2,
    }),
  );
  const seeds = path.join(dir, 'seeds.jsonl');
  await writeFile(
    seeds,
    [
      { id: 'stock-a', counts: 'steel screws in the north warehouse', quantities: [3, 4, 5, 6] },
      { id: 'stock-b', counts: 'tins of paint at the harbour depot', quantities: [10, 20, 30] },
    ]
      .map((s) => JSON.stringify(s))
      .join('\n'),
  );
  const out = path.join(dir, 'pool');
  const synth = (more: string[], key = KEY) =>
    runCli(
      ['synth', '--seeds', seeds, '--model', model, '--out', out, '-c', '1', '-r', '1', '--probes', 'fast', ...more],
      { env: { TEAM_GEN_KEY: key } },
    );
  return { model, out, synth };
}

describe('synth with a team generator of its own, through the binary', () => {
  let baseUrl: string;
  before(async () => {
    baseUrl = await generator.start();
  });

  it('refuses a wrong key and an unknown model with exit 2 before any job', async () => {
    const { model, out, synth } = await setUp(baseUrl);
    const badKey = await synth([], 'wrong');
    assert.equal(badKey.status, 2, badKey.stderr);
    assert.match(badKey.stderr, /rejects the key in TEAM_GEN_KEY \(HTTP 401\)/);
    assert.ok(!badKey.stderr.includes('wrong'), 'the key is never printed');
    const cfg = JSON.parse(await readFile(model, 'utf8')) as Record<string, unknown>;
    await writeFile(model, JSON.stringify({ ...cfg, model: 'no-such-model' }));
    const badModel = await synth([]);
    assert.equal(badModel.status, 2, badModel.stderr);
    assert.match(badModel.stderr, /does not serve model "no-such-model" \(it serves: team-gen\)/);
    // Nothing was started: no job folder, no build.
    assert.ok(!existsSync(path.join(out, '.synth')), 'no job was created');
  });

  it('stops on a refused request format, waits through a 503 outage and a vanished endpoint, resumes and admits both, and lists every candidate', async () => {
    const { out, synth } = await setUp(baseUrl);

    // 1. The endpoint answers its model list but refuses every part request (400): the job stops
    // at the first request with exit 2, saying so, and rejects nothing.
    generator.state = 'refusing';
    const refused = await synth(['--json']);
    assert.equal(refused.status, 2, refused.stderr);
    assert.match(
      refused.stderr,
      /refused stock-a's scenario request: .*json_schema.* not supported.*no candidate rejected.*run the same command again/,
    );
    assert.equal(refused.stdout, '');
    const store = SynthStore.open(path.join(out, '.synth', 'synth.db'));
    try {
      assert.deepEqual(
        store.candidates().map((c) => [c.id, c.status]),
        [
          ['stock-a', 'active'],
          ['stock-b', 'active'],
        ],
      );
    } finally {
      store.close();
    }

    // 2. Up again, then down (503 after stock-a's scenario and environment): stock-a is built and
    // observed, then waits for its instruction; stock-b waits for its scenario. None rejected.
    generator.state = 'up';
    generator.downAfter = 2;
    const refusedBefore = generator.refused;
    const outage = await synth(['--json']);
    assert.equal(outage.status, 3, `exit 3 while candidates wait on the generator\n${outage.stderr}`);
    assert.ok(outage.stdout, outage.stderr);
    const r1 = SynthReportSchema.parse(JSON.parse(outage.stdout));
    assert.equal(r1.rejected, 0, JSON.stringify(r1.candidateList));
    assert.equal(r1.waitingOnGenerator, 2);
    assert.deepEqual(
      r1.candidateList.map((c) => [c.candidate, c.seed, c.state, c.stage, c.rounds]),
      [
        ['stock-a', 'stock-a', 'waiting_generator', 'instruction', 0],
        ['stock-b', 'stock-b', 'waiting_generator', 'scenario', 0],
      ],
    );
    for (const c of r1.candidateList) assert.match(c.reason ?? '', /the generator did not answer \(.*503/);
    assert.match(outage.stderr, /resuming 2 candidates of 2/);
    assert.match(outage.stderr, /stock-b round 0: scenario waits on the generator, not rejected/);
    // stock-a's call spent the client's two attempts; stock-b, once the endpoint was found down,
    // only asked whether it was back (GET /models) before waiting, not its own two attempts.
    assert.equal(generator.refused - refusedBefore, 2 + 1);
    assert.match(outage.stderr, /stock-a round 0: build passed/);
    assert.ok(r1.elapsedMs > 0);

    // 3. Up, then gone (nothing listens) once stock-a's last three parts are answered: the same
    // command resumes both, asks stock-a only for the parts not made and admits it; stock-b waits.
    generator.state = 'up';
    generator.downAfter = null;
    const answeredBefore = generator.answered;
    generator.dropAfter = answeredBefore + 3;
    const gone = await synth(['--json']);
    assert.equal(gone.status, 3, `exit 3 while a candidate waits on the generator\n${gone.stderr}`);
    assert.match(gone.stderr, /resuming 2 candidates \(2 waited on the generator\) of 2/);
    assert.equal(
      generator.answered - answeredBefore,
      3,
      "stock-a: its last three parts; stock-b's scenario found no one",
    );
    const r2 = SynthReportSchema.parse(JSON.parse(gone.stdout));
    assert.deepEqual([r2.rejected, r2.admitted, r2.waitingOnGenerator], [0, 1, 1], JSON.stringify(r2.candidateList));
    assert.deepEqual(
      r2.candidateList.map((c) => [c.candidate, c.state, c.stage]),
      [
        ['stock-a', 'admitted', 'write'],
        ['stock-b', 'waiting_generator', 'scenario'],
      ],
    );
    assert.match(r2.candidateList[1]!.reason!, /the generator did not answer \(connection failed/);
    assert.match(gone.stderr, /stock-b round 0: scenario waits on the generator, not rejected/);
    assert.match(gone.stderr, /1 candidate\(s\) wait on the generator .* run the same command again when it is back/);

    // 4. Back on the same address: the same command resumes the one left and admits it.
    await generator.comeBack();
    const back = await synth(['--candidates']);
    assert.equal(back.status, 0, back.stderr);
    assert.match(back.stderr, /resuming 1 candidate \(1 waited on the generator\) of 2/);
    assert.equal(generator.answered - answeredBefore, 3 + 5, 'stock-b: all five');
    assert.match(back.stdout, /candidates 2: admitted 2, rejected 0; end-to-end yield 100\.0%/);
    assert.match(back.stdout, /elapsed \d+\.\d s over every run of the job/);
    const table = back.stdout.slice(back.stdout.indexOf('candidate '));
    for (const id of ['stock-a', 'stock-b'])
      assert.match(table, new RegExp(`^${id}\\s+${id}\\s+admitted\\s+0\\s+write\\s+3\\s+admitted: ${out}/${id}$`, 'm'));

    // 5. Nothing left to do: the funnel in --json names each candidate's end.
    const done = await synth(['--json']);
    assert.equal(done.status, 0, done.stderr);
    assert.equal(generator.answered - answeredBefore, 8, 'nothing finished is generated again');
    const r3 = SynthReportSchema.parse(JSON.parse(done.stdout));
    assert.equal(r3.resumed, 0);
    assert.deepEqual(
      r3.candidateList.map((c) => [c.candidate, c.state, c.reason, c.rounds, c.tests]),
      [
        ['stock-a', 'admitted', null, 0, 3],
        ['stock-b', 'admitted', null, 0, 3],
      ],
    );
    assert.ok(r3.elapsedMs > r2.elapsedMs && r2.elapsedMs > r1.elapsedMs);

    // The tasks are the team's own, as written (folders copied with a trailing slash, in JSON form,
    // from ./ with --chown); their per-test results are its report lines.
    assert.equal(r3.admittedTasks.length, 2);
    for (const t of r3.admittedTasks)
      assert.match(
        await readFile(path.join(t.path, 'environment', 'Dockerfile'), 'utf8'),
        /^COPY share\/ \/srv\/share\/$\n^COPY \["share\/", "\/opt\/share\/"\]$[\s\S]*^COPY --chown=root:root \.\/inbox\/ \/work\/inbox\/$/m,
      );
    const admitted = SynthStore.open(path.join(out, '.synth', 'synth.db'));
    try {
      for (const c of admitted.candidates()) assert.deepEqual(c.tests, [...TEAM_TESTS], c.id);
    } finally {
      admitted.close();
    }
    // What it printed is the form every prompt it was sent shows: a line of each kind, parsed.
    assert.ok(generator.systemPrompts.size > 0);
    for (const system of generator.systemPrompts) {
      const pass = /^PASSED \S+::\S+$/m.exec(system)?.[0];
      const fail = /^FAILED \S+::\S+ - .+$/m.exec(system)?.[0];
      assert.ok(pass && fail, `the prompt shows a PASSED and a FAILED line:\n${system}`);
      assert.match(
        system,
        /^PASSED test_outputs\.py::test_report_exists\nFAILED test_outputs\.py::test_total_is_42 - /m,
      );
      assert.deepEqual(
        parsePytestSummary(`${pass}\n${fail}`).map((t) => t.status),
        ['passed', 'failed'],
      );
    }
  });
});
