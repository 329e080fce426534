import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { readFileSync } from 'node:fs';
import { ModelConfigSchema } from '../src/model/config.js';
import { funnel } from '../src/synth/funnel.js';
import {
  Generator,
  REPORT_EXAMPLES,
  SYSTEM_PROMPT,
  isEndpointOutage,
  isFatalModelError,
} from '../src/synth/generator.js';
import { ModelError, classifyStatus } from '../src/model/errors.js';
import { parsePytestSummary, summaryLine } from '../src/verifier/test-report.js';
import { lintEnvironment } from '../src/synth/lint.js';
import { FIRST_PLAN, repairPlan, routeFailure } from '../src/synth/route.js';
import { EnvironmentPartSchema, ScenarioSchema, type CandidateState } from '../src/synth/schema.js';
import type { StageRecord } from '../src/synth/store.js';
import { EXEMPLAR_BRIEF, readExemplar, readExemplars } from '../src/synth/exemplar.js';
import { readSeeds, synthesize } from '../src/synth/synth.js';
import { SynthStore } from '../src/synth/store.js';
import { TermgradeError } from '../src/util/errors.js';
import { FakeProvider, type FakeBehaviour } from './support/fake-provider.js';
import { scriptedGenerator, seedFor } from './support/scripted-generator.js';
import { ROOT, makeTask, runCli, tempDir, trivialTask } from './helpers.js';
import { ScriptedModelServer } from './support/scripted-model-server.js';

const servers: ScriptedModelServer[] = [];
after(() => Promise.all(servers.map((s) => s.close())));

const env = (dockerfile: string, files: Array<{ path: string; content: string }> = []) =>
  EnvironmentPartSchema.parse({ dockerfile, files });

describe('synth: the Dockerfile is refused before any build when it cannot parse', () => {
  it('passes a plain Dockerfile whose COPY sources were all written', () => {
    assert.deepEqual(
      lintEnvironment(
        env('FROM debian:bookworm-slim\nWORKDIR /app\nCOPY a.txt /app/a.txt\nRUN echo hi \\\n  && true\n', [
          { path: 'a.txt', content: 'x' },
        ]),
      ),
      [],
    );
  });
  it('names an unknown instruction, a missing FROM, a COPY of an unwritten file, a URL and an escape', () => {
    assert.match(
      lintEnvironment(env('FRM debian:bookworm-slim\n')).join('\n'),
      /line 1: "FRM debian:bookworm-slim" is not a Dockerfile instruction/,
    );
    assert.match(
      lintEnvironment(env('WORKDIR /app\nFROM debian:bookworm-slim\n')).join('\n'),
      /first instruction \(after ARGs\) is WORKDIR, not FROM/,
    );
    assert.match(
      lintEnvironment(env('FROM debian:bookworm-slim\nCOPY b.txt /b\n')).join('\n'),
      /COPY source b.txt is not among the files written/,
    );
    assert.match(
      lintEnvironment(env('FROM debian:bookworm-slim\nADD https://example.com/x /x\n')).join('\n'),
      /from a URL/,
    );
    assert.match(
      lintEnvironment(env('FROM debian:bookworm-slim\nCOPY ../x /x\n')).join('\n'),
      /outside the build context/,
    );
  });
  it('keeps heredoc bodies out of the instruction check', () => {
    assert.deepEqual(lintEnvironment(env('FROM debian:bookworm-slim\nRUN <<EOF\nnot an instruction\nEOF\n')), []);
  });
});

describe('synth: lint reads COPY as Docker does', () => {
  const files = [
    { path: 'share/bin/build.sh', content: 'x' },
    { path: 'site/index.html', content: 'x' },
    { path: 'site/app.js', content: 'x' },
    { path: 'a.txt', content: 'x' },
  ];
  const lint = (lines: string): string[] =>
    lintEnvironment(env(`FROM debian:bookworm-slim\nARG DIR=site\n${lines}\n`, files));
  it('accepts every form Docker accepts for files written', () => {
    for (const line of [
      'COPY share/ /srv/share/',
      'COPY ./share/ /srv/share/',
      'COPY ./share /srv/share',
      'COPY share/bin/ /usr/local/bin/',
      'COPY site/*.html /srv/',
      'COPY s?te/ /srv/site/',
      'COPY * /srv/',
      'COPY [ab].txt /srv/',
      'COPY --chown=app:app --chmod=755 share/ /srv/share/',
      'COPY --chmod=u+x share/bin/build.sh /usr/local/bin/build',
      'COPY --link a.txt /a.txt',
      'COPY ["site/", "/srv/site/"]',
      'COPY --chown=1000:1000 ["a.txt", "/srv/a.txt"]',
      'COPY a.txt site/app.js /srv/',
      'COPY /a.txt /a.txt',
      'COPY . /src',
      'COPY ./ /src/',
      'COPY $DIR/ /srv/site/',
      'COPY ${DIR}/index.html /srv/',
      'COPY $FROM_BUILD_ARG /srv/',
      'COPY --from=builder /out /out',
      'ADD --chmod=644 a.txt /a.txt',
      'COPY Dockerfile /srv/Dockerfile',
    ])
      assert.deepEqual(lint(line), [], line);
  });
  it('reads --from as Docker does: an earlier stage by name or index, else an image pulled at build', () => {
    const staged = (line: string): string[] =>
      lintEnvironment(
        env(
          `FROM debian:bookworm-slim AS Tools
RUN true
FROM debian:bookworm-slim AS final
${line}
`,
          files,
        ),
      );
    for (const line of [
      'COPY --from=tools /opt/ /opt/',
      'COPY --from=0 /opt/ /opt/',
      'COPY --from=busybox:1.36 /bin/busybox /bin/',
      // Not in the context: the sources are the stage's own, never checked against the files written.
      'COPY --from=tools /not/written /x',
    ])
      assert.deepEqual(staged(line), [], line);
    assert.match(
      staged('COPY --from=2 /opt /opt').join('\n'),
      /--from=2 names stage 2, but only stage 0 comes before this one \(Docker: index out of bounds\)/,
    );
    assert.match(
      staged('COPY --from=1 /opt /opt').join('\n'),
      /--from=1 is this stage itself \(Docker: refers to current build stage\)/,
    );
    assert.match(staged('COPY --from=final /opt /opt').join('\n'), /--from=final is this stage's own name/);
    assert.match(lint('COPY --from=0 /etc/os-release /x').join('\n'), /no stage comes before this one/);
  });
  it('refuses what Docker would refuse, saying why', () => {
    const cases: Array<[string, RegExp]> = [
      [
        'COPY shared/ /srv/',
        /source shared\/ is not among the files written, so Docker's build would fail \("shared": not found\)/,
      ],
      ['COPY a.txt/ /srv/', /ends with \/ but a.txt is a file written, not a folder/],
      [
        'COPY site/*.css /srv/',
        /matches none of the files written, and Docker fails a COPY whose pattern matches nothing/,
      ],
      ['COPY a.txt site/app.js /srv', /2 sources go into \/srv, which does not end with \//],
      ['COPY --own=app a.txt /a', /--own is not a COPY flag \(Docker refuses it as unknown\)/],
      ['COPY --chown a.txt /a', /--chown needs a value/],
      ['COPY --chmod=999 a.txt /a', /--chmod=999 is neither an octal mode/],
      ['COPY ../a.txt /a', /outside the build context/],
      ['COPY https://example.com/x /x', /is a URL, which Docker refuses for COPY/],
      ['COPY a.txt', /needs a source and a destination/],
      ['COPY ["a.txt", /a]', /source \["a.txt", has a \[ that no \] closes/],
    ];
    for (const [line, want] of cases) assert.match(lint(line).join('\n'), want, line);
  });
});

describe('synth: what the prompt asks test.sh to print is what the parser reads', () => {
  it('parses every report line the system prompt shows, to a named test with its status', () => {
    const shown = SYSTEM_PROMPT.split('\n').filter((l) => /^(PASSED|FAILED) /.test(l));
    assert.deepEqual(shown, [...REPORT_EXAMPLES]);
    for (const line of shown) {
      const tests = parsePytestSummary(line);
      assert.equal(tests.length, 1, line);
      assert.equal(tests[0]!.status, line.startsWith('PASSED') ? 'passed' : 'failed');
      assert.match(tests[0]!.name, /^test_outputs\.py::test_/);
    }
    assert.equal(parsePytestSummary(REPORT_EXAMPLES[1]).at(0)?.message, 'expected 42, got 41');
    assert.throws(() => summaryLine('PASSED', 'no id'), /not a test id/);
  });
  it('routes an admissible task with no per-test result to the tests', () => {
    assert.equal(routeFailure('check', ['no_test_report'], []), 'tests');
  });
});

describe('synth: failures are routed to the part at fault', () => {
  it('routes each kind of failure', () => {
    assert.equal(routeFailure('lint', ['dockerfile_invalid'], []), 'environment');
    assert.equal(routeFailure('build', ['build_failed'], []), 'environment');
    assert.equal(routeFailure('execute', ['solution_wrong'], []), 'solution');
    assert.equal(routeFailure('check', ['oracle_failed'], []), 'tests');
    assert.equal(routeFailure('check', ['nop_passed'], []), 'tests');
    assert.equal(routeFailure('check', ['weak_tests'], []), 'tests');
    assert.equal(routeFailure('check', ['reward_forgeable'], []), 'tests');
    // Tests a published reward hack passes are the tests' to repair (run the agent's code in a child, check exact types).
    assert.equal(routeFailure('check', ['reward_hackable'], []), 'tests');
    // An infrastructure that failed through check's retries is no part's fault: nothing to repair.
    assert.equal(routeFailure('check', ['infra_error'], []), null);
    assert.equal(
      routeFailure('check', ['solution_leaked'], ['solution_leaked: copied /var/x to /app/y: every test passes']),
      'environment',
    );
    assert.equal(
      routeFailure('check', ['solution_leaked'], ['solution_leaked: the instruction spells out the answer']),
      'instruction',
    );
    // A warning about the instruction is not where the confirmed leak is.
    assert.equal(
      routeFailure('check', ['solution_leaked'], ['solution_leaked (warning): compared the instruction with solve.sh']),
      'environment',
    );
    assert.equal(routeFailure('check', ['timeout'], []), 'solution');
    assert.equal(routeFailure('check', ['duplicate'], []), null);
  });
  it('plans a repair as the part, what executes it again, and parts not yet written', () => {
    assert.deepEqual(repairPlan('tests', new Set(['scenario', 'environment', 'instruction', 'solution', 'tests'])), [
      'tests',
      'check',
    ]);
    assert.deepEqual(repairPlan('solution', new Set(['scenario', 'environment', 'instruction', 'solution'])), [
      'solution',
      'execute',
      'tests',
      'check',
    ]);
    assert.deepEqual(repairPlan('environment', new Set(['scenario', 'environment'])), [
      'environment',
      'lint',
      'build',
      'observe',
      'instruction',
      'solution',
      'execute',
      'tests',
      'check',
    ]);
    assert.deepEqual(
      repairPlan('environment', new Set(['scenario', 'environment', 'instruction', 'solution', 'tests'])),
      ['environment', 'lint', 'build', 'observe', 'execute', 'check'],
    );
    assert.deepEqual(FIRST_PLAN.slice(0, 4), ['scenario', 'environment', 'lint', 'build']);
  });
});

describe('synth: the funnel', () => {
  const state = (
    id: string,
    status: CandidateState['status'],
    repairs: CandidateState['repairs'],
    tests: string[] = [],
  ): CandidateState =>
    ({
      id,
      seedId: id,
      seed: {},
      status,
      plan: [],
      round: repairs.length,
      parts: {},
      hashes: {},
      image: null,
      environmentState: null,
      solutionState: null,
      failure: null,
      repairs,
      tokens: { prompt: 0, completion: 0 },
      costUsd: null,
      rejected: status === 'rejected' ? ['rounds_exhausted', 'build_failed'] : [],
      tests,
      admittedPath: status === 'admitted' ? `/out/${id}` : null,
      waiting: null,
    }) as CandidateState;
  const row = (
    candidateId: string,
    stage: StageRecord['stage'],
    round: number,
    outcome: 'passed' | 'failed',
    durationMs: number,
    tokens = 0,
  ): StageRecord => ({
    candidateId,
    round,
    stage,
    outcome,
    startedAt: '',
    durationMs,
    calls: tokens ? 1 : 0,
    malformed: 0,
    promptTokens: tokens,
    completionTokens: tokens / 2,
    costUsd: tokens ? 0.001 : null,
    detail: {},
  });

  it('counts candidates per stage once however many rounds, yields, repairs, tests, tokens and time', () => {
    const candidates = [
      state('a', 'admitted', [], ['t1', 't2', 't3']),
      state('b', 'admitted', [{ round: 1, part: 'environment', reasons: ['build_failed'] }], ['t1']),
      state('c', 'rejected', [{ round: 1, part: 'environment', reasons: ['build_failed'] }]),
    ];
    const rows = [
      row('a', 'build', 0, 'passed', 100),
      row('b', 'build', 0, 'failed', 50),
      row('b', 'build', 1, 'passed', 50),
      row('c', 'build', 0, 'failed', 100),
      row('c', 'build', 1, 'failed', 100),
      row('a', 'scenario', 0, 'passed', 600, 100),
    ];
    const f = funnel(candidates, rows, '/out');
    const build = f.stages.find((s) => s.stage === 'build')!;
    assert.deepEqual([build.candidates, build.passed, build.runs, build.wallMs], [3, 2, 5, 400]);
    assert.equal(build.yield, 2 / 3);
    assert.equal(build.timeShare, 0.4);
    assert.equal(f.endToEndYield, 2 / 3);
    assert.deepEqual(
      f.repairs.find((r) => r.part === 'environment'),
      { part: 'environment', attempts: 2, candidates: 2, admitted: 1 },
    );
    assert.deepEqual(f.testsPerAdmitted, { mean: 2, min: 1, max: 3 });
    assert.deepEqual(f.tokens, { prompt: 100, completion: 50, calls: 1, malformedReplies: 0 });
    assert.equal(f.costUsd, 0.001);
    assert.deepEqual(f.rejections, { rounds_exhausted: 1, build_failed: 1 });
  });

  it('lists every candidate with its seed, state, reason and rounds, and counts those waiting on the generator', () => {
    const waiting: CandidateState = {
      ...state('w', 'active', []),
      plan: ['tests', 'check'],
      waiting: { on: 'generator', why: 'the generator did not answer' },
    };
    const f = funnel(
      [
        state('a', 'admitted', [], ['t1']),
        state('c', 'rejected', [{ round: 1, part: 'environment', reasons: [] }]),
        waiting,
        { ...state('i', 'active', []), plan: ['build'] },
      ],
      [row('a', 'write', 0, 'passed', 1), row('c', 'build', 1, 'failed', 1)],
      '/out',
      { elapsedMs: 1234, resumed: 2 },
    );
    assert.equal(f.unfinished, 2);
    assert.equal(f.waitingOnGenerator, 1);
    assert.equal(f.elapsedMs, 1234);
    assert.equal(f.resumed, 2);
    assert.deepEqual(
      f.candidateList.map((c) => [c.candidate, c.state, c.reason, c.rounds, c.stage]),
      [
        ['a', 'admitted', null, 0, 'write'],
        ['c', 'rejected', 'rounds_exhausted, build_failed', 1, 'build'],
        ['w', 'waiting_generator', 'the generator did not answer', 0, 'tests'],
        ['i', 'unfinished', 'interrupted: run the same command again', 0, 'build'],
      ],
    );
  });

  it('is published as schemas/synth.schema.json and a funnel validates against it', () => {
    const schema = JSON.parse(readFileSync(path.join(ROOT, 'schemas', 'synth.schema.json'), 'utf8')) as object;
    const validate = new Ajv2020({ allErrors: true, strict: false }).compile(schema);
    const f = funnel([state('a', 'admitted', [], ['t'])], [row('a', 'build', 0, 'passed', 1)], '/out');
    assert.ok(validate(f), JSON.stringify(validate.errors));
    assert.ok(!validate({ ...f, admitted: -1 }));
  });
});

describe('synth: the generator asks for structured output and re-asks a malformed reply', () => {
  it('sends the part schema as response_format, retries a reply that is not JSON or not valid, and counts every token', async () => {
    const good = { domain: 'd', startingState: 's', goal: 'g', constraints: [], checkable: ['c'], outputs: ['/app/x'] };
    const server = new ScriptedModelServer({
      gen: [
        { reply: { content: 'here you go: {', usage: { prompt: 10, completion: 5 } } },
        {
          reply: { content: JSON.stringify({ ...good, outputs: ['relative'] }), usage: { prompt: 20, completion: 5 } },
        },
        { reply: { content: `\`\`\`json\n${JSON.stringify(good)}\n\`\`\``, usage: { prompt: 30, completion: 5 } } },
      ],
    });
    servers.push(server);
    const generator = new Generator(
      ModelConfigSchema.parse({ baseUrl: await server.start(), model: 'gen', maxRetries: 0 }),
      { maxMalformed: 2 },
    );
    const got = await generator.generate('scenario', ScenarioSchema, { stage: 'scenario' });
    assert.deepEqual(got.value, good);
    assert.deepEqual([got.calls, got.malformed, got.usage.prompt, got.usage.completion], [3, 2, 60, 15]);
    const first = server.requests[0]!.body as {
      response_format?: { type: string; json_schema: { name: string; schema: { required?: string[] } } };
    };
    assert.equal(first.response_format?.type, 'json_schema');
    assert.ok(first.response_format?.json_schema.schema.required?.includes('outputs'));
    // The model is told what was wrong with its last reply.
    const third = server.requests[2]!.body.messages;
    assert.match(String(third[third.length - 1]!.content), /field outputs\.0: .*start with "\/"/i);
  });

  it('gives up within its bound and says why', async () => {
    const server = new ScriptedModelServer({ gen: [{ reply: { content: 'no' } }, { reply: { content: 'still no' } }] });
    servers.push(server);
    const generator = new Generator(
      ModelConfigSchema.parse({ baseUrl: await server.start(), model: 'gen', maxRetries: 0 }),
      { maxMalformed: 1 },
    );
    const got = await generator.generate('scenario', ScenarioSchema, { stage: 'scenario' });
    assert.equal(got.value, null);
    assert.equal(got.calls, 2);
    assert.match(got.problem!, /not JSON/);
  });
});

describe("synth: a generator's failure is an outage, the job's end, or the candidate's", () => {
  it('waits on what waiting may cure, stops the job on what every call would meet, rejects the rest', () => {
    const at = (status: number, message = 'x'): ModelError =>
      new ModelError(classifyStatus(status, message), message, status);
    // Not served (after the client's retries): the candidate waits and the same command resumes it.
    for (const err of [
      at(503),
      at(502),
      at(500),
      at(429),
      at(408),
      new ModelError('transient', 'ECONNREFUSED'),
      new ModelError('timeout', 't'),
    ])
      assert.deepEqual([isEndpointOutage(err), isFatalModelError(err)], [true, false], err.message);
    // Refused as every later request would be (key, model, a 400 such as an unsupported
    // response_format): the job stops, nothing rejected; it was an outage before, waiting forever.
    for (const err of [at(401), at(403), at(404), at(400, "response_format 'json_schema' is not supported")])
      assert.deepEqual([isEndpointOutage(err), isFatalModelError(err)], [false, true], `${err.status}`);
    // This candidate's own request: rejected (generator_error).
    for (const err of [
      at(400, "This model's maximum context length is 8192 tokens"),
      new ModelError('refusal', 'no'),
      new Error('x'),
    ])
      assert.deepEqual([isEndpointOutage(err), isFatalModelError(err)], [false, false], err.message);
  });
});

describe('synth: an engine gone during a build is infrastructure, not the environment', () => {
  it("stops the job with the stage unrecorded and no repair spent; a failed build with the engine up is the environment's", async () => {
    const server = new ScriptedModelServer({ '*': scriptedGenerator() });
    const baseUrl = await server.start();
    try {
      const seed = seedFor('good', 0);
      const generator = new Generator(ModelConfigSchema.parse({ baseUrl, model: 'gen', maxRetries: 0 }));
      const run = async (behaviour: FakeBehaviour) => {
        const outDir = await tempDir('termgrade-synth-engine-');
        const result = await synthesize({
          seeds: [{ id: seed.id, seed }],
          generator,
          provider: new FakeProvider(behaviour),
          outDir,
          maxRounds: 0,
        }).catch((err: unknown) => err);
        const store = SynthStore.open(path.join(outDir, '.synth', 'synth.db'));
        try {
          return { result, candidate: store.candidates()[0]!, stages: store.stages().map((r) => r.stage) };
        } finally {
          store.close();
        }
      };
      const down = await run({ engineDown: () => true });
      assert.ok(
        down.result instanceof TermgradeError && down.result.code === 'engine_unavailable',
        String(down.result),
      );
      assert.deepEqual(down.stages, ['scenario', 'environment', 'lint'], 'build is not recorded');
      assert.deepEqual([down.candidate.status, down.candidate.round, down.candidate.plan[0]], ['active', 0, 'build']);
      // The control: the same build failing with the engine up is the environment's (no round left: rejected).
      const broken = await run({ prepareFails: () => true });
      assert.deepEqual(broken.candidate.rejected, ['rounds_exhausted', 'build_failed']);
    } finally {
      await server.close();
    }
  });
});

describe('synth: bad input', () => {
  it('names the seeds file line and the problem', async () => {
    const dir = await tempDir();
    const file = path.join(dir, 'seeds.jsonl');
    await writeFile(file, '{"id": "a", "topic": "x"}\n\n[1, 2]\n');
    await assert.rejects(readSeeds(file), new RegExp(`${file}:3: a seed must be a JSON object`));
    await writeFile(file, '{"id": "a"}\n{"id": "a"}\n');
    await assert.rejects(readSeeds(file), /:2: seed id a is used twice/);
    await writeFile(file, '{"id": "../etc"}\n');
    await assert.rejects(readSeeds(file), /:1: field id: letters, digits/);
    await writeFile(file, '{"topic": "x"}\n');
    assert.deepEqual(await readSeeds(file), [{ id: 'seed-1', seed: { topic: 'x' } }]);
  });

  it('exits 2 naming the model config field, or the seeds line', async () => {
    const dir = await tempDir();
    await writeFile(path.join(dir, 'seeds.jsonl'), '{"id": "a"}\n');
    await writeFile(path.join(dir, 'gen.json'), JSON.stringify({ baseUrl: 'not a url', model: 'g' }));
    const bad = await runCli([
      'synth',
      '--seeds',
      path.join(dir, 'seeds.jsonl'),
      '--model',
      path.join(dir, 'gen.json'),
      '--out',
      path.join(dir, 'out'),
    ]);
    assert.equal(bad.status, 2);
    assert.match(bad.stderr, /--model .*gen\.json: field baseUrl/);
    await writeFile(path.join(dir, 'seeds.jsonl'), 'nope\n');
    const badSeeds = await runCli([
      'synth',
      '--seeds',
      path.join(dir, 'seeds.jsonl'),
      '--model',
      path.join(dir, 'gen.json'),
      '--out',
      path.join(dir, 'out'),
    ]);
    assert.equal(badSeeds.status, 2);
    assert.match(badSeeds.stderr, /seeds\.jsonl:1: not JSON/);
  });
});

describe('synth: an existing task folder as an exemplar seed', () => {
  it("summarises the exemplar's instruction, environment and tests into its seed, with the brief", async () => {
    const dir = await trivialTask({ 'environment/data.csv': 'a,b\n1,2\n' });
    const { id, seed } = await readExemplar(dir);
    assert.equal(id, `exemplar-${path.basename(dir)}`);
    const ex = seed.exemplar as {
      instruction: string;
      environment: { dockerfile: string; files: unknown[] };
      tests: { testSh: string; files: unknown[] };
    };
    assert.equal(ex.instruction, 'Write hello into /app/out.txt.\n');
    assert.match(ex.environment.dockerfile, /^FROM debian:bookworm-slim/);
    assert.deepEqual(ex.environment.files, [
      { path: 'Dockerfile', size: 39 },
      { path: 'data.csv', size: 8 },
    ]);
    assert.match(ex.tests.testSh, /PASSED t\.py::test_hello/);
    assert.equal(seed.brief, EXEMPLAR_BRIEF);
    // The solution is not part of the summary: the generator writes its own.
    assert.ok(!JSON.stringify(seed).includes('echo hello > /app/out.txt'));
  });

  it('clips a long instruction and refuses a folder that is no task, naming it', async () => {
    const long = await trivialTask({ 'instruction.md': 'x '.repeat(5000) });
    const ex = (await readExemplar(long)).seed.exemplar as { instruction: string };
    assert.match(ex.instruction, /\[\.\.\. 7000 more characters\]$/);
    const notTask = await makeTask({ 'README.md': 'hi' });
    await assert.rejects(
      readExemplar(notTask),
      (err: Error) =>
        err.message.includes(`--exemplars ${notTask}: not a loadable task folder`) && /task\.toml/.test(err.message),
    );
    await assert.rejects(readExemplars([long, long]), /both give the seed id/);
  });

  it('exits 2 when neither seeds nor exemplars are given, or an exemplar is no task', async () => {
    const dir = await tempDir();
    await writeFile(path.join(dir, 'gen.json'), JSON.stringify({ baseUrl: 'http://127.0.0.1:9/v1', model: 'g' }));
    const none = await runCli(['synth', '--model', path.join(dir, 'gen.json'), '--out', path.join(dir, 'out')]);
    assert.equal(none.status, 2);
    assert.match(none.stderr, /needs --seeds FILE or --exemplars DIR/);
    const bad = await runCli([
      'synth',
      '--exemplars',
      dir,
      '--model',
      path.join(dir, 'gen.json'),
      '--out',
      path.join(dir, 'out'),
    ]);
    assert.equal(bad.status, 2, bad.stderr);
    assert.match(bad.stderr, /--exemplars .*: not a loadable task folder/);
  });
});
