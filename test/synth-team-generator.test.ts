import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { SynthReportSchema } from '../src/synth/schema.js';
import { SynthStore } from '../src/synth/store.js';
import { parsePytestSummary } from '../src/verifier/test-report.js';
import { runCli, tempDir } from './helpers.js';
import { TEAM_TESTS, TeamGenerator } from './support/team-generator.js';

/**
 * synth through the real binary with a second generator of a team's own, written from the README
 * and src/synth/schema.ts only (test/support/team-generator.ts): the usual COPY forms, report lines
 * in the form the prompt asks for, an endpoint that refuses the request format and one that goes
 * down mid-job and comes back. Two candidates, one job, four runs of the same command.
 */
const KEY = 'team-generator-key';
const generator = new TeamGenerator('team-gen', KEY);
after(() => generator.close());

describe('synth with a team generator of its own, through the binary', () => {
  it('stops on a refused request format, waits through an outage, resumes and admits both, and lists every candidate', async () => {
    const baseUrl = await generator.start();
    const dir = await tempDir('termgrade-synth-team-');
    const model = path.join(dir, 'team-gen.json');
    await writeFile(
      model,
      JSON.stringify({ baseUrl, model: 'team-gen', apiKeyEnv: 'TEAM_GEN_KEY', maxRetries: 1, backoffBaseSec: 0.1 }),
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
    const synth = (...more: string[]) =>
      runCli(
        ['synth', '--seeds', seeds, '--model', model, '--out', out, '-c', '1', '-r', '1', '--probes', 'fast', ...more],
        { env: { TEAM_GEN_KEY: KEY } },
      );

    // 1. The endpoint answers its model list but refuses every part request (400): the job stops
    // at the first request with exit 2, saying so, and rejects nothing.
    generator.state = 'refusing';
    const refused = await synth('--json');
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
    const outage = await synth('--json');
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

    // 3. Back: the same command resumes both and admits both, asking only for the parts not made.
    generator.state = 'up';
    generator.downAfter = null;
    const answeredBefore = generator.answered;
    const back = await synth('--candidates');
    assert.equal(back.status, 0, back.stderr);
    assert.match(back.stderr, /resuming 2 candidates \(2 waited on the generator\) of 2/);
    assert.equal(generator.answered - answeredBefore, 3 + 5, 'stock-a: its last three parts; stock-b: all five');
    assert.match(back.stdout, /candidates 2: admitted 2, rejected 0; end-to-end yield 100\.0%/);
    assert.match(back.stdout, /elapsed \d+\.\d s over every run of the job/);
    const table = back.stdout.slice(back.stdout.indexOf('candidate '));
    for (const id of ['stock-a', 'stock-b'])
      assert.match(table, new RegExp(`^${id}\\s+${id}\\s+admitted\\s+0\\s+write\\s+3\\s+admitted: ${out}/${id}$`, 'm'));

    // 4. Nothing left to do: the funnel in --json names each candidate's end.
    const done = await synth('--json');
    assert.equal(done.status, 0, done.stderr);
    assert.equal(generator.answered - answeredBefore, 8, 'nothing finished is generated again');
    const r2 = SynthReportSchema.parse(JSON.parse(done.stdout));
    assert.deepEqual(
      r2.candidateList.map((c) => [c.candidate, c.state, c.reason, c.rounds, c.tests]),
      [
        ['stock-a', 'admitted', null, 0, 3],
        ['stock-b', 'admitted', null, 0, 3],
      ],
    );
    assert.ok(r2.elapsedMs > r1.elapsedMs);

    // The tasks are the team's own, as written; their per-test results are its report lines.
    for (const t of r2.admittedTasks)
      assert.match(
        await readFile(path.join(t.path, 'environment', 'Dockerfile'), 'utf8'),
        /^COPY \["share\/", "\/srv\/share\/"\]$[\s\S]*^COPY --chown=root:root \.\/inbox\/ \/work\/inbox\/$/m,
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
      assert.deepEqual(
        parsePytestSummary(`${pass}\n${fail}`).map((t) => t.status),
        ['passed', 'failed'],
      );
    }
  });
});
