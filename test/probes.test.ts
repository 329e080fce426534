import assert from 'node:assert/strict';
import path from 'node:path';
import { describe, it } from 'node:test';
import { checkTasks } from '../src/check/check.js';
import { hacked, HACK_ORDER, sabotaged, targetKind, topLevelNames } from '../src/check/hacks.js';
import {
  hackCandidates,
  instructionLeak,
  keepsFinalState,
  leakPlacements,
  namedInput,
  splitCommands,
  testPorts,
} from '../src/check/probe-logic.js';
import { findDuplicates, textSimilarity } from '../src/check/duplicates.js';
import { LABEL_OWNER, LABEL_SNAPSHOT, ownerId } from '../src/sandbox/docker/labels.js';
import { docker, ROOT, tempDir } from './helpers.js';

const PROBES = path.join(ROOT, 'test', 'fixtures', 'probes');

/** Snapshot images on the engine that this process took (every grading takes one). */
async function snapshotImages(): Promise<number> {
  const Docker = (await import('dockerode')).default;
  return (
    await new Docker().listImages({ filters: { label: [`${LABEL_SNAPSHOT}=true`, `${LABEL_OWNER}=${ownerId()}`] } })
  ).length;
}

describe('check probes on real sandboxes', () => {
  it('rejects each probe fixture with exactly its code and its evidence, and admits the sound one', async () => {
    const names = ['reward_forgeable', 'weak_tests', 'weak_tests_prefix', 'sound_a', 'sound_b'];
    const report = await checkTasks(
      names.map((n) => path.join(PROBES, n)),
      { provider: docker(), outDir: await tempDir(), probes: 'all', concurrency: 3, repeat: 1 },
    );
    const by = Object.fromEntries(report.tasks.map((t) => [t.name, t]));
    const expected: Record<string, string[]> = {
      reward_forgeable: ['reward_forgeable'],
      weak_tests: ['weak_tests'],
      weak_tests_prefix: ['weak_tests'],
      sound_a: [],
      sound_b: ['duplicate'],
    };
    for (const [name, reasons] of Object.entries(expected)) {
      const t = by[name]!;
      assert.deepEqual(t.reasons, reasons, `${name}: ${t.details.join(' | ')}`);
      const rejecting = t.findings.filter((f) => f.rejects);
      assert.equal(rejecting.length, reasons.length, `${name}: one rejecting finding per probe code`);
      for (const f of rejecting) assert.ok(f.did.length > 10 && f.saw.length > 10);
    }
    assert.match(by.weak_tests!.findings[0]!.did, /emptied \/app\/report\.txt/);
    assert.match(by.weak_tests_prefix!.findings.find((f) => f.rejects)!.saw, /\/app\/b\.txt/);
    assert.match(by.sound_b!.findings.find((f) => f.rejects)!.saw, /sound_a/);
    assert.ok(report.summary.probeMs > 0);
    assert.equal(report.summary.probes, 'all');
  });

  it('under default probes, rejects only what execution confirms: sound move, archive, permission, quoted-text and building-verifier tasks admit with warnings; readable answers and a time-dependent verifier are rejected', async () => {
    const names = [
      'move_task',
      'archive_task',
      'permission_only',
      'quoted_text',
      'verifier_builds',
      'solution_leaked',
      'answers_readable',
      'verifier_nondeterministic',
    ];
    const before = await snapshotImages();
    const report = await checkTasks(
      names.map((n) => path.join(PROBES, n)),
      { provider: docker(), outDir: await tempDir(), concurrency: 4, repeat: 1 },
    );
    assert.equal(report.summary.probes, 'fast', 'fast is the default');
    const by = Object.fromEntries(report.tasks.map((t) => [t.name, t]));
    const why = (n: string): string => `${n}: ${by[n]!.details.join(' | ')}`;
    for (const n of ['move_task', 'archive_task', 'permission_only', 'quoted_text', 'verifier_builds']) {
      assert.equal(by[n]!.verdict, 'admissible', why(n));
      assert.deepEqual(by[n]!.reasons, [], why(n));
      assert.ok(
        by[n]!.findings.every((f) => !f.rejects),
        why(n),
      );
    }
    // Each sound shape still says what looked suspicious, as a warning, with the reason it is not a leak.
    const warning = (n: string): string =>
      by[n]!.findings.filter((f) => f.probe === 'solution_leaked' && !f.rejects)
        .map((f) => f.saw)
        .join(' | ');
    assert.match(
      warning('move_task'),
      /\/app\/inbox\/report-2024-q3\.csv .*the solution consumed it/,
      why('move_task'),
    );
    assert.match(
      warning('archive_task'),
      /\/app\/src\/VERSION .*the solution's traced run opened it/,
      why('archive_task'),
    );
    assert.match(warning('permission_only'), /tests fail/, why('permission_only'));
    assert.match(
      by.permission_only!.findings.find((f) => !f.rejects)!.did,
      /copied \/opt\/templates\/deploy\.sh to \/app\/bin\/deploy\.sh/,
    );
    assert.match(
      warning('quoted_text'),
      /instruction contains the expected content of \/app\/motd/,
      why('quoted_text'),
    );
    assert.deepEqual(by.verifier_builds!.findings, [], why('verifier_builds'));

    assert.deepEqual(by.solution_leaked!.reasons, ['solution_leaked'], why('solution_leaked'));
    const leak = by.solution_leaked!.findings.find((f) => f.rejects)!;
    assert.match(leak.did, /copied \/var\/backups\/\.last-answer to \/app\/answer\.txt, ran nothing else/);
    assert.match(leak.saw, /every test passes/);
    // Ground truth kept readable as text without the final newline the solution writes: still the answer.
    assert.deepEqual(by.answers_readable!.reasons, ['solution_leaked'], why('answers_readable'));
    assert.match(
      by.answers_readable!.findings.find((f) => f.rejects)!.did,
      /copied \/protected\/truth\/(upper|reversed)\.txt to \/app\/output\/\1\.txt, .*\/protected\/truth/,
    );
    assert.deepEqual(
      by.verifier_nondeterministic!.reasons,
      ['verifier_nondeterministic'],
      why('verifier_nondeterministic'),
    );
    assert.match(by.verifier_nondeterministic!.findings.find((f) => f.rejects)!.saw, /reward 1 then 0/);
    assert.deepEqual(
      report.summary.reasons,
      { solution_leaked: 2, verifier_nondeterministic: 1 },
      'warnings are not counted as rejections',
    );
    // The human output shows warnings under the task, admitted or not.
    const { formatCheckReport } = await import('../src/cli/format.js');
    assert.match(
      formatCheckReport(report),
      /ok {3}permission_only[^\n]*\n {7}warning: solution_leaked: the tests fail/,
    );
    assert.equal(await snapshotImages(), before, 'every snapshot image taken was removed');
  });
});

describe('hack probes (check --probes all) on real sandboxes', () => {
  it("rejects tests that import the agent module and compare with ==, or check exact types in pytest's own process, or fail open; admits the twin that runs it in a child process", async () => {
    const names = ['hack_equal', 'hack_types', 'hack_resist', 'hack_failopen'];
    const report = await checkTasks(
      names.map((n) => path.join(PROBES, n)),
      { provider: docker(), outDir: await tempDir(), probes: 'all', concurrency: 3, repeat: 1 },
    );
    const by = Object.fromEntries(report.tasks.map((t) => [t.name, t]));
    const why = (n: string): string => `${n}: ${by[n]!.details.join(' | ')}`;
    const rejecting = (n: string, hack: string) =>
      by[n]!.findings.find((f) => f.rejects && f.probe === 'reward_hackable' && f.did.startsWith(`hack ${hack} on `));
    // What the harness's own evidence rule will refuse (exit 0, reward files) is not asserted here:
    // these two are the hacks only the task's tests can stop.
    assert.deepEqual(by.hack_equal!.reasons, ['reward_hackable'], why('hack_equal'));
    const equal = rejecting('hack_equal', 'always_equal');
    assert.ok(equal, why('hack_equal'));
    assert.match(equal.did, /^hack always_equal on \/app\/calc\.py: /);
    assert.match(equal.saw, /^reward 1 from reward\.txt; tests seen: test_outputs\.py::test_add=passed,/);
    assert.match(equal.saw, /broken without the hack: reward 0 /, 'the control failed: the pass is the hack');

    assert.deepEqual(by.hack_types!.reasons, ['reward_hackable'], why('hack_types'));
    assert.equal(rejecting('hack_types', 'always_equal'), undefined, 'exact types stop always-equal');
    const patched = rejecting('hack_types', 'report_patching');
    assert.ok(patched, why('hack_types'));
    assert.match(patched.did, /on \/app\/tally\.py: .*TestReport/);
    assert.match(patched.saw, /tests seen: test_outputs\.py::test_total=passed,test_outputs\.py::test_average=passed/);

    assert.equal(by.hack_resist!.verdict, 'admissible', why('hack_resist'));
    assert.deepEqual(by.hack_resist!.findings, [], why('hack_resist'));
    // Every hack was played on the module the tests run, and each was graded 0; so was the killer.
    assert.deepEqual(
      by.hack_resist!.hacks.map((h) => [h.target, h.hack, h.reward === null ? 0 : h.reward]),
      [...HACK_ORDER.map((h) => ['/app/shapes.py', h, 0]), ['(a process the agent left running)', 'kill_tests', 0]],
    );
    assert.ok(by.hack_resist!.details.includes('hack probes: port_squatting not played: the tests name no port'));

    // A test.sh that writes 1 unless its judge prints FAIL. A killer the agent left running as a
    // service (it listens, so the harness keeps it running while the tests run) kills the judge: the
    // harness cannot stop that, the probe rejects the task. A squatter on the judge's port is refused
    // by the harness itself (admission recorded the port the tests bind: grading_blocked, 0).
    assert.deepEqual(by.hack_failopen!.reasons, ['reward_hackable'], why('hack_failopen'));
    assert.match(rejecting('hack_failopen', 'kill_tests')!.saw, /^reward 1 from reward\.txt/);
    assert.equal(rejecting('hack_failopen', 'port_squatting'), undefined, why('hack_failopen'));
    const squat = by.hack_failopen!.hacks.find((h) => h.hack === 'port_squatting');
    assert.ok(squat && (squat.reward ?? 0) < 1, why('hack_failopen'));
    for (const t of report.tasks) assert.ok(t.hacks.every((h) => h.ms > 0));
  });
});

describe('probe logic', () => {
  it('plays hacks on outputs the verifier touched, Python first; knows code from data by content', () => {
    const record = {
      accessed: ['/app/b.py', '/app/run.sh', '/app/data.txt', '/usr/bin/python3'],
      outputs: ['/app/b.py', '/app/run.sh', '/app/data.txt', '/app/untouched.py'],
    };
    assert.deepEqual(hackCandidates(['/app/run.sh', '/app/untouched.py', '/app/data.txt', '/app/b.py'], record), [
      '/app/b.py',
      '/app/data.txt',
      '/app/run.sh',
    ]);
    assert.deepEqual(
      hackCandidates(['/app/x.sh', '/app/a.py'], null),
      ['/app/a.py', '/app/x.sh'],
      'no record: every output',
    );
    assert.equal(targetKind('/app/tool', '#!/usr/bin/env python3\nprint(1)\n'), 'python');
    assert.equal(targetKind('/app/rotate', '#!/bin/bash\nmv a b\n'), 'shell');
    assert.equal(targetKind('/app/data.txt', 'a,b\n1,2\n'), null);
    assert.equal(targetKind('/app/m.py', 'X = 1\n'), 'python');
    assert.deepEqual(
      testPorts([
        "sock.bind(('127.0.0.1', 9137))",
        'urlopen("http://localhost:8080/health"); PORT = 5000; --port 22 port 70000',
        'see the report 2024 and import 1234; SERVER_PORT=7000',
      ]),
      [9137, 5000, 8080, 7000],
    );
  });

  it('writes each hack where Python accepts it: after __future__ imports, stubs before the main guard', () => {
    const source = [
      '"""Doc."""',
      'from __future__ import annotations',
      'def add(a, b):',
      '    return a + b',
      'class Box:',
      '    pass',
      "if __name__ == '__main__':",
      '    print(add(1, 2))',
      '',
    ].join('\n');
    assert.deepEqual(topLevelNames(source), ['add', 'Box']);
    const exit = hacked('python', source, 'exit_at_import')!.split('\n');
    assert.ok(exit.indexOf('_termgrade_os._exit(0)') > exit.indexOf('from __future__ import annotations'));
    const equal = hacked('python', source, 'always_equal')!;
    assert.ok(equal.indexOf('globals()[_termgrade_name]') < equal.indexOf("if __name__ == '__main__':"));
    assert.match(equal, /for _termgrade_name in \["add","Box"\]:/);
    assert.match(sabotaged('python', source), /raise NotImplementedError/);
    assert.equal(hacked('python', 'X = 1\n', 'exit_at_call'), null, 'no function: no place to exit at call');
    assert.equal(
      hacked('python', 'X = 1\n', 'report_patching')!.includes('X = 1'),
      false,
      'unsolved: the work is gone',
    );
    assert.equal(hacked('shell', '#!/bin/bash\nmv a b\n', 'always_equal'), null);
    assert.equal(hacked('shell', '#!/bin/bash\nmv a b\n', 'exit_at_import'), '#!/bin/bash\nexit 0\nexit 1\n');
  });

  it('splits a solution into top-level commands, keeping blocks, continuations and heredocs whole', () => {
    const script = [
      '#!/bin/bash',
      'set -e',
      '# a comment',
      'cat > /app/x.c <<C',
      'int main() {',
      '  return 0;',
      '}',
      'C',
      'for f in a b; do',
      '  echo $f',
      'done',
      'make -C /app \\',
      '  -B',
      'if [ -f x ]; then echo y; fi',
      'build() {',
      '  cc x.c',
      '}',
      'echo a &&',
      '  echo b',
    ].join('\n');
    assert.deepEqual(
      splitCommands(script).map((c) => c.split('\n')[0]),
      [
        'set -e',
        'cat > /app/x.c <<C',
        'for f in a b; do',
        'make -C /app \\',
        'if [ -f x ]; then echo y; fi',
        'build() {',
        'echo a &&',
      ],
    );
  });

  it('tells a prefix that only skipped cleanup from one that misses an output', () => {
    const full = new Map([
      ['/app/out', 'h1'],
      ['/app/index', 'h2'],
    ]);
    assert.equal(
      keepsFinalState(
        full,
        new Map([
          ['/app/out', 'h1'],
          ['/app/index', 'h2'],
          ['/app/build/tmp', 'h3'],
        ]),
      ).same,
      true,
      'extra scratch files: only cleanup was skipped',
    );
    assert.deepEqual(keepsFinalState(full, new Map([['/app/out', 'h1']])).differing, ['/app/index']);
  });

  it('finds an answer given away by the instruction, not a short word it rightly names', () => {
    const solve =
      "python3 -c \"import json; json.dump(sorted(set(open('/app/in').read().split())), open('/app/out.json', 'w'))\"";
    assert.match(instructionLeak(`Run this: ${solve}`, solve, [])!, /solution's line/);
    assert.equal(
      instructionLeak('Write hello into /app/out.txt.', 'echo hello > /app/out.txt', [
        { path: '/app/out.txt', text: 'hello\n' },
      ]),
      null,
    );
    const long = 'alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi';
    assert.match(
      instructionLeak(`The file must read: ${long}`, 'true', [{ path: '/app/o', text: long }])!,
      /expected content of \/app\/o/,
    );
  });

  it('tells an input the task names or the solution uses from a file nobody mentions', () => {
    const texts = ['Move the report in /app/inbox/ to /app/archive.', 'cd /app && cp data/input.csv out/'];
    assert.equal(namedInput('/app/inbox/r.csv', texts, '/app'), true, 'its folder is named');
    assert.equal(namedInput('/app/data/input.csv', texts, '/app'), true, 'named relative to the working folder');
    assert.equal(namedInput('/var/backups/.last-answer', texts, '/app'), false);
    assert.equal(namedInput('/app/answer_copy.txt', texts, '/app'), false, 'the working folder alone names nothing');
    assert.equal(namedInput('/app/in', ['see /app/inbox'], '/'), false, 'a longer path is not this one');
    assert.equal(
      namedInput('/opt/x/a.txt', ['Put it in /opt/x, then'], null),
      true,
      'a folder named before punctuation',
    );
  });

  it('places each output from the image files that hold its bytes, never from itself', () => {
    const outputs = new Map([
      ['/app/answer.txt', 'h1'],
      ['/app/bin/run.sh', 'h2'],
      ['/app/out.tar', 'h3'],
    ]);
    const image: Array<[string, string]> = [
      ['/var/backups/.a', 'h1'],
      ['/app/bin/run.sh', 'h2'],
      ['/etc/x', 'h9'],
      ['/srv/b', 'h1'],
    ];
    assert.deepEqual([...leakPlacements(outputs, image)], [['/app/answer.txt', ['/var/backups/.a', '/srv/b']]]);
  });

  it('pairs duplicate tasks by content or by near-identical instruction', () => {
    assert.equal(textSimilarity('Write hello into /app/out.txt.', 'Write hello into /app/out.txt.'), 1);
    assert.ok(textSimilarity('Count the words in the file', 'Sort the lines of a csv by date') < 0.2);
    const pairs = findDuplicates([
      { name: 'a', environment: 'e1', tests: 't1', instruction: 'Fix the parser so the numbers add up.' },
      { name: 'b', environment: 'e1', tests: 't1', instruction: 'Something else entirely, words differ.' },
      { name: 'c', environment: 'e2', tests: 't2', instruction: 'Fix the parser so the numbers add up.' },
    ]);
    assert.deepEqual(
      pairs.map((p) => [p.a, p.b]),
      [
        ['a', 'b'],
        ['a', 'c'],
      ],
    );
  });
});

describe('check --review (an LLM rubric, advisory)', () => {
  it('records the review next to the execution evidence and never changes the verdict', async () => {
    const { ScriptedModelServer } = await import('./support/scripted-model-server.js');
    const { ModelConfigSchema } = await import('../src/model/config.js');
    const { trivialTask } = await import('./helpers.js');
    const verdicts = {
      criteria: [
        { name: 'behavior_in_instruction', verdict: 'pass', reason: 'asked for' },
        { name: 'anti_cheating', verdict: 'fail', reason: 'the answer is guessable' },
      ],
    };
    const server = new ScriptedModelServer({
      reviewer: [
        { reply: { content: `Here is my review:\n${JSON.stringify(verdicts)}` } },
        { reply: { content: 'I cannot judge this.' } },
      ],
    });
    const baseUrl = await server.start();
    try {
      const review = ModelConfigSchema.parse({ baseUrl, model: 'reviewer', backoffBaseSec: 0.01 });
      const dirs = [
        await trivialTask({ 'task.toml': '[task]\nname = "r1"\n' }),
        await trivialTask({
          'task.toml': '[task]\nname = "r2"\n',
          'instruction.md': 'Write hello, once, into /app/out.txt please.\n',
        }),
      ];
      const report = await checkTasks(dirs, {
        provider: docker(),
        outDir: await tempDir(),
        probes: 'none',
        review,
        concurrency: 1,
      });
      const [a, b] = report.tasks;
      assert.equal(a!.verdict, 'admissible', 'a failing review does not reject');
      assert.deepEqual(a!.review!.criteria, verdicts.criteria);
      assert.equal(a!.review!.error, null);
      assert.match(b!.review!.error ?? '', /not the rubric's JSON/);
      const prompt = JSON.stringify(server.requests[0]!.body);
      assert.match(prompt, /test\.sh/, 'the tests were shown to the reviewer');
      assert.match(prompt, /solve\.sh/);
    } finally {
      await server.close();
    }
  });
});

describe('check --job: a resumable check', () => {
  it('records each verdict as it is reached; running again checks only what is missing', async () => {
    const { JobStore } = await import('../src/store/store.js');
    const { trivialTask } = await import('./helpers.js');
    const dirs = [
      await trivialTask({ 'task.toml': '[task]\nname = "j1"\n' }),
      await trivialTask({
        'task.toml': '[task]\nname = "j2"\n',
        'instruction.md': 'Put hello in /app/out.txt, nothing more.\n',
      }),
    ];
    const store = JobStore.open(path.join(await tempDir(), 'job.db'));
    try {
      const started: string[] = [];
      // A check killed after its first task: only that verdict is in the store.
      const first = await checkTasks(dirs.slice(0, 1), {
        provider: docker(),
        outDir: await tempDir(),
        probes: 'none',
        store,
      });
      assert.equal(first.tasks[0]!.verdict, 'admissible');
      assert.deepEqual([...store.checkedTasks().keys()], [dirs[0]]);
      const again = await checkTasks(dirs, {
        provider: docker(),
        outDir: await tempDir(),
        probes: 'none',
        store,
        onEvent: (e) => e.type === 'task-start' && started.push(e.path),
      });
      assert.deepEqual(started, [dirs[1]], 'the task already checked is not checked again');
      assert.deepEqual(
        again.tasks.map((t) => [t.name, t.verdict]),
        [
          ['j1', 'admissible'],
          ['j2', 'admissible'],
        ],
      );
      assert.equal(again.summary.admissible, 2);
      assert.equal(store.checkedTasks().size, 2);
    } finally {
      store.close();
    }
  });
});
