import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { before, describe, it } from 'node:test';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { jsonSchemaOf, OUTPUT_SCHEMAS, type OutputName } from '../src/cli/schemas.js';
import { ROOT, runCli, tempDir, trivialTask } from './helpers.js';

/** The published schema files, as a user would fetch them from the repository. */
function published(name: OutputName): Record<string, unknown> {
  return JSON.parse(readFileSync(path.join(ROOT, 'schemas', `${name}.schema.json`), 'utf8')) as Record<string, unknown>;
}

const ajv = new Ajv2020({ allErrors: true, strict: false });
const validators = new Map<OutputName, ReturnType<typeof ajv.compile>>();

/** Validates one output against its published schema; fails naming the output and every error. */
function assertValid(name: OutputName, value: unknown, what: string): void {
  let v = validators.get(name);
  if (!v) validators.set(name, (v = ajv.compile(published(name))));
  assert.ok(
    v(value),
    `${what} does not match schemas/${name}.schema.json: ${ajv.errorsText(v.errors, { separator: '\n  ' })}`,
  );
}

const lines = (text: string): unknown[] =>
  text
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));

describe('published JSON Schemas of every machine-readable output', () => {
  it('are the ones the zod contracts generate (regenerate with: termgrade schema --out schemas)', () => {
    for (const name of Object.keys(OUTPUT_SCHEMAS) as OutputName[]) {
      assert.deepEqual(
        published(name),
        JSON.parse(JSON.stringify(jsonSchemaOf(name))),
        `schemas/${name}.schema.json is out of date`,
      );
    }
  });

  it('reject what the contracts forbid: a key not in the contract, a wrong type, a missing field', () => {
    // Without this, a schema that accepted anything would pass every test below.
    const event = { type: 'build-done', task: 't', cached: true, ms: 12 };
    assertValid('job-event', event, 'a build-done event');
    assert.throws(() => assertValid('job-event', { ...event, extra: 1 }, 'x'), /must NOT have additional properties/);
    assert.throws(() => assertValid('job-event', { ...event, ms: 'soon' }, 'x'), /must be number/);
    assert.throws(
      () => assertValid('job-event', { type: 'build-done', task: 't' }, 'x'),
      /must have required property/,
    );
    assert.throws(
      () => assertValid('stats', { configs: [{ config: 'x' }] }, 'x'),
      /must have required property 'tasks'/,
    );
  });

  describe('match real output of the CLI', () => {
    const root = { dir: '', jobsDir: '', tasks: [] as string[] };
    let events: unknown[] = [];

    before(async () => {
      root.dir = await tempDir();
      root.jobsDir = path.join(root.dir, 'jobs');
      root.tasks = [
        await trivialTask({ 'task.toml': '[task]\nname = "one"\n' }),
        await trivialTask({ 'task.toml': '[task]\nname = "two"\n' }),
      ];
      const r = await runCli([
        'run',
        '--name',
        'shapes',
        '--tasks',
        ...root.tasks,
        '-a',
        'oracle',
        'nop',
        '-k',
        '2',
        '--jobs-dir',
        root.jobsDir,
        '--jsonl',
      ]);
      assert.equal(r.status, 0, r.stderr);
      events = lines(r.stdout);
    });

    it('run --jsonl: every event, each type seen', () => {
      for (const e of events) assertValid('job-event', e, `event ${JSON.stringify(e).slice(0, 80)}`);
      const types = new Set(events.map((e) => (e as { type: string }).type));
      for (const t of [
        'job-start',
        'build-start',
        'build-done',
        'trial-start',
        'phase',
        'trial-recording',
        'trial-done',
        'job-done',
      ])
        assert.ok(types.has(t), `saw a ${t} event`);
    });

    it('trials --json, stats --json (with --tasks), compare, select and overlap --json', async () => {
      const trials = await runCli(['trials', '--job', 'shapes', '--jobs-dir', root.jobsDir, '--json']);
      const rows = lines(trials.stdout);
      assert.equal(rows.length, 8);
      for (const row of rows) assertValid('trial-row', row, 'a trials --json line');
      const store = path.join(root.jobsDir, 'shapes');
      const outputs: Array<[OutputName, string[]]> = [
        ['stats', ['stats', store, '--tasks', '--json']],
        ['compare', ['compare', 'oracle', 'nop', store, '--json']],
        [
          'select',
          ['select', store, '--model', 'oracle', '--band', '0:1', '--min-trials', '1', '--validation', '1', '--json'],
        ],
        ['overlap', ['overlap', store, '--min-trials', '1', '--json']],
      ];
      for (const [name, args] of outputs) {
        const r = await runCli(args);
        assert.equal(r.status, 0, `${args.join(' ')}: ${r.stderr}`);
        const [value, ...more] = lines(r.stdout);
        assert.equal(more.length, 0, `${name}: one JSON object`);
        assertValid(name, value, `${args.slice(0, 1)} --json`);
      }
      // Infinite and undefined statistics (a t statistic over identical differences, one-task
      // intervals) are where a hand-written schema usually goes wrong: they were in this output.
      const compare = lines((await runCli(['compare', 'oracle', 'nop', store, '--json'])).stdout)[0] as Record<
        string,
        unknown
      >;
      assert.equal(compare.tStat, 'Infinity');
    });

    it('run-trial --json and check --json', async () => {
      const trial = await runCli([
        'run-trial',
        root.tasks[0]!,
        '--agent',
        'oracle',
        '--json',
        '-o',
        path.join(root.dir, 'trials'),
      ]);
      assert.equal(trial.status, 0, trial.stderr);
      assertValid('trial-result', lines(trial.stdout)[0], 'run-trial --json');
      const check = await runCli([
        'check',
        root.tasks[1]!,
        '--json',
        '--quiet',
        '--probes',
        'none',
        '-o',
        path.join(root.dir, 'check'),
      ]);
      assert.equal(check.status, 0, check.stderr);
      assertValid('check', lines(check.stdout)[0], 'check --json');
    });

    it('engines --json: one engine that answers and one that does not', async () => {
      const out = await runCli([
        'engines',
        '--json',
        '--engine',
        `unix://${process.env.DOCKER_HOST?.replace(/^unix:\/\//, '') ?? '/var/run/docker.sock'},name=main`,
        '--engine',
        'unix:///nonexistent/docker.sock,name=gone',
      ]);
      assert.equal(out.status, 0, out.stderr);
      const value = lines(out.stdout)[0] as { engines: Array<{ ok: boolean }> };
      assert.deepEqual(
        value.engines.map((e) => e.ok),
        [true, false],
      );
      assertValid('engines', value, 'engines --json');
    });

    it('drift --json on grades a server recorded', async () => {
      const grades = path.join(root.dir, 'grades.jsonl');
      const at = (i: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString();
      await writeFile(
        grades,
        Array.from({ length: 12 }, (_, i) =>
          JSON.stringify({
            trial_id: `episode:${i}`,
            task: i % 2 ? 'one' : 'two',
            model: 'step-100',
            reward: i % 3 === 0 ? 1 : 0,
            finished_at: at(i),
          }),
        ).join('\n'),
      );
      const r = await runCli(['drift', grades, '--min-trials', '2', '--json']);
      assert.equal(r.status, 0, r.stderr);
      assertValid('drift', lines(r.stdout)[0], 'drift --json');
    });
  });

  it('job-spec: a job file as users write it validates, a typo does not', () => {
    const spec = {
      name: 'j',
      tasks: { paths: ['tasks'] },
      agents: [{ agent: 'terminus', model: { baseUrl: 'http://127.0.0.1:8000/v1', model: 'm' } }],
      k: 4,
    };
    assertValid('job-spec', spec, 'a job file');
    assert.throws(() => assertValid('job-spec', { ...spec, kk: 4 }, 'x'), /additional properties/);
  });
});
