import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { checkTasks } from '../src/check/check.js';
import { classifySources, solutionReads } from '../src/check/leak-trace.js';
import { mutant, sourceKind } from '../src/check/mutants.js';
import { loadTask } from '../src/task/load.js';
import { docker, makeTask, tempDir } from './helpers.js';

const TOML = (name: string): string =>
  `[task]\nname = "${name}"\n\n[verifier]\ntimeout_sec = 120\n\n[agent]\ntimeout_sec = 120\n`;
/** The examples' toolbox image (Python, pytest, gcc), so its layer is shared. */
const TOOLBOX =
  'FROM debian:bookworm-slim\nRUN apt-get update && apt-get install -y --no-install-recommends python3 python3-pytest git procps make gcc libc6-dev sqlite3 && rm -rf /var/lib/apt/lists/*\nWORKDIR /app\n';
/** A test.sh line per check: PASSED / FAILED, then the reward, written last (both files). */
const verdicts = (checks: Array<[string, string]>): string =>
  [
    '#!/bin/bash',
    'ok=1',
    ...checks.map(
      ([name, cond]) =>
        `if ${cond}; then echo "PASSED test_outputs.py::${name}"; else echo "FAILED test_outputs.py::${name} - no"; ok=0; fi`,
    ),
    'echo $ok > /logs/verifier/reward.txt',
    'echo "{\\"reward\\": $ok}" > /logs/verifier/reward.json',
    '',
  ].join('\n');

/** The answer sits in the image, and the instruction names it only to forbid reading it. */
function forbiddenAnswer(): Promise<string> {
  return makeTask({
    'task.toml': TOML('forbidden_answer'),
    'instruction.md':
      "Sort the words of /app/words.txt alphabetically, one a line, into /app/sorted.txt. Do not read /app/.grader/expected.txt: it is the grader's own copy.\n",
    'environment/Dockerfile':
      "FROM debian:bookworm-slim\nWORKDIR /app\nRUN printf 'pear\\napple\\nfig\\nbanana\\ncherry\\n' > /app/words.txt && mkdir -p /app/.grader && sort /app/words.txt > /app/.grader/expected.txt\n",
    'solution/solve.sh': '#!/bin/bash\nsort /app/words.txt > /app/sorted.txt\n',
    'tests/test.sh': verdicts([['test_sorted', 'cmp -s /app/sorted.txt /app/.grader/expected.txt']]),
  });
}

/** A copy task whose source is found by a search (nothing names its path or folder): the source equals the output. */
function copyFound(): Promise<string> {
  return makeTask({
    'task.toml': TOML('copy_found'),
    'instruction.md':
      'Restore the newest nightly backup of the service settings (kept somewhere under /srv) to /app/settings.conf, unchanged.\n',
    'environment/Dockerfile':
      "FROM debian:bookworm-slim\nWORKDIR /app\nRUN mkdir -p /srv/backups/nightly && printf 'port=8080\\nmode=old\\n' > /srv/backups/nightly/settings-2024-01-01.conf && printf 'port=9090\\nmode=prod\\nworkers=4\\n' > /srv/backups/nightly/settings-2024-03-01.conf\n",
    'solution/solve.sh':
      '#!/bin/bash\nsrc=$(find /srv -name \'settings-*.conf\' | sort | tail -n 1)\ncp "$src" /app/settings.conf\n',
    'tests/test.sh': verdicts([
      [
        'test_restored',
        `[ "$(cat /app/settings.conf 2>/dev/null)" = "$(printf 'port=9090\\nmode=prod\\nworkers=4')" ]`,
      ],
    ]),
  });
}

const DOUBLE_PY = 'def double(n):\n    return n * 2\n';
const DOUBLE_C = 'int double_it(int n) {\n    return n * 2;\n}\n';
const writeFile = (file: string, body: string): string => `#!/bin/bash\ncat > ${file} <<'EOF'\n${body}EOF\n`;

/** Tests that grep the agent's Python for a name and an expression, and never call it. */
function grepPython(): Promise<string> {
  return makeTask({
    'task.toml': TOML('grep_python'),
    'instruction.md': 'Write /app/double.py with a function double(n) returning twice n.\n',
    'environment/Dockerfile': TOOLBOX,
    'solution/solve.sh': writeFile('/app/double.py', DOUBLE_PY),
    'tests/test.sh': verdicts([
      ['test_defined', "grep -q 'def double' /app/double.py"],
      ['test_doubles', "grep -q 'n \\* 2' /app/double.py"],
    ]),
  });
}

/** The same task, its tests calling the function (in a child, as nobody, so no reward file is theirs to write). */
function callPython(): Promise<string> {
  return makeTask({
    'task.toml': TOML('call_python'),
    'instruction.md': 'Write /app/double.py with a function double(n) returning twice n, as a module.\n',
    'environment/Dockerfile': TOOLBOX,
    'solution/solve.sh': writeFile('/app/double.py', DOUBLE_PY),
    'tests/test.sh': verdicts([
      [
        'test_doubles',
        `[ "$(cd /tmp && setpriv --reuid=65534 --regid=65534 --clear-groups python3 -c "import sys; sys.path.insert(0, '/app'); import double; print(double.double(4), double.double(-3))" 2>&1)" = "8 -6" ]`,
      ],
    ]),
  });
}

/** Tests that grep the agent's C for a name and an expression, and never build it. */
function grepC(): Promise<string> {
  return makeTask({
    'task.toml': TOML('grep_c'),
    'instruction.md': 'Write /app/double.c with a C function int double_it(int n) returning twice n.\n',
    'environment/Dockerfile': TOOLBOX,
    'solution/solve.sh': writeFile('/app/double.c', DOUBLE_C),
    'tests/test.sh': verdicts([
      ['test_defined', "grep -q 'int double_it' /app/double.c"],
      ['test_doubles', "grep -q 'n \\* 2' /app/double.c"],
    ]),
  });
}

/** The same C task, its tests linking the function into a program of theirs and running it as nobody. */
function callC(): Promise<string> {
  return makeTask({
    'task.toml': TOML('call_c'),
    'instruction.md': 'Write /app/double.c with a C function int double_it(int n) returning twice n (no main).\n',
    'environment/Dockerfile': TOOLBOX,
    'solution/solve.sh': writeFile('/app/double.c', DOUBLE_C),
    'tests/main.c':
      '#include <stdio.h>\nint double_it(int n);\nint main(void) { printf("%d %d\\n", double_it(4), double_it(-3)); return 0; }\n',
    'tests/test.sh': verdicts([
      [
        'test_doubles',
        `gcc -o /tmp/t /tests/main.c /app/double.c && chmod 755 /tmp/t && [ "$(cd /tmp && setpriv --reuid=65534 --regid=65534 --clear-groups /tmp/t 2>&1)" = "8 -6" ]`,
      ],
    ]),
  });
}

describe('solution_leaked decided by the solution’s traced run (real Docker)', () => {
  it('rejects an answer file the instruction forbids reading but the image holds; admits a copy task whose source the solution finds and reads', async () => {
    const report = await checkTasks([await forbiddenAnswer(), await copyFound()], {
      provider: docker(),
      outDir: await tempDir(),
      repeat: 1,
      probes: 'fast',
      concurrency: 2,
    });
    const by = Object.fromEntries(report.tasks.map((t) => [t.name, t]));
    const why = (n: string): string => `${n}: ${by[n]!.details.join(' | ')}`;
    assert.deepEqual(by.forbidden_answer!.reasons, ['solution_leaked'], why('forbidden_answer'));
    const leak = by.forbidden_answer!.findings.find((f) => f.rejects)!;
    // The file, the output and the trace's evidence.
    assert.match(leak.did, /copied \/app\/\.grader\/expected\.txt to \/app\/sorted\.txt, ran nothing else/);
    assert.match(
      leak.saw,
      /every test passes .*\/app\/\.grader\/expected\.txt: the solution's traced run opened \d+ files and never this one \(the task names it, yet the solution never reads it\)/,
    );
    assert.equal(by.copy_found!.verdict, 'admissible', why('copy_found'));
    const input = by.copy_found!.findings.find((f) => f.probe === 'solution_leaked')!;
    assert.equal(input.rejects, false);
    assert.match(
      input.saw,
      /\/srv\/backups\/nightly\/settings-2024-03-01\.conf \(the content of \/app\/settings\.conf; the solution's traced run opened it\): an input, not a leak/,
    );
  });
});

describe('weak_tests: tests that read code instead of running it (check --probes all, real Docker)', () => {
  it('rejects grep-only tests of Python and C with the mutant shown; admits tests that call the function', async () => {
    const report = await checkTasks([await grepPython(), await callPython(), await grepC(), await callC()], {
      provider: docker(),
      outDir: await tempDir(),
      repeat: 1,
      probes: 'all',
      concurrency: 2,
    });
    const by = Object.fromEntries(report.tasks.map((t) => [t.name, t]));
    const why = (n: string): string => `${n}: ${by[n]!.details.join(' | ')}`;
    for (const [name, file, added] of [
      ['grep_python', '/app/double.py', /raise RuntimeError\("termgrade: the text is kept, the behaviour removed"\)/],
      ['grep_c', '/app/double.c', /__attribute__\(\(constructor\)\) static void termgrade_mutant/],
    ] as const) {
      assert.deepEqual(by[name]!.reasons, ['weak_tests'], why(name));
      const f = by[name]!.findings.find((x) => x.rejects)!;
      assert.ok(f.did.includes(`kept every line of ${file}`), f.did);
      assert.match(f.did, added);
      assert.match(
        f.saw,
        /every test still passes .* removing it fails them .*: the tests read its text and never run it/,
      );
    }
    for (const name of ['call_python', 'call_c']) {
      assert.equal(by[name]!.verdict, 'admissible', why(name));
      assert.ok(
        by[name]!.findings.every((f) => !f.rejects),
        why(name),
      );
    }
  });

  it('keeps every line of a Python, shell and C file and removes its behaviour, as each really runs', async () => {
    const task = await loadTask(
      await makeTask({
        'task.toml': TOML('mutant-runs'),
        'instruction.md': 'x\n',
        'environment/Dockerfile': TOOLBOX,
        'solution/solve.sh': '#!/bin/bash\n',
        'tests/test.sh': '#!/bin/bash\n',
      }),
    );
    const provider = docker();
    const s = await provider.start(task, await provider.prepare(task));
    try {
      const sources: Array<[string, string, string]> = [
        ['/app/m.py', 'from __future__ import annotations\nprint(6 * 7)\n', 'python3 /app/m.py'],
        ['/app/m.sh', '#!/bin/sh\necho $((6 * 7))\n', 'sh /app/m.sh'],
        [
          '/app/m.c',
          '#include <stdio.h>\nint main(void) { printf("%d\\n", 6 * 7); return 0; }\n',
          'gcc -o /tmp/m /app/m.c && /tmp/m',
        ],
      ];
      for (const [file, text, runIt] of sources) {
        const kind = sourceKind(file, text)!;
        const m = mutant(kind, text);
        // Every line of the original is there, in order.
        const kept = m.content.split('\n').filter((l) => l !== m.added);
        assert.deepEqual(kept, text.split('\n'), file);
        await s.putFiles([{ path: file, content: text }]);
        const before = await s.exec(['sh', '-c', runIt]);
        assert.equal(before.stdout.text.trim(), '42', `${file}: ${before.stderr.text}`);
        await s.putFiles([{ path: file, content: m.content }]);
        const after = await s.exec(['sh', '-c', runIt]);
        assert.notEqual(after.exitCode, 0, `${file} mutant still runs: ${after.stdout.text}`);
        assert.equal(after.stdout.text.trim(), '', file);
      }
    } finally {
      await s.close();
    }
  });
});

describe('probe logic: leaks by trace, mutants', () => {
  it('reads what a traced solution opened, and judges an image file by it, not by the instruction', () => {
    const log = [
      '101 execve("/usr/bin/cp", ["cp", "/srv/a.conf", "/app/a.conf"], 0x0 /* 3 vars */) = 0',
      '101 openat(AT_FDCWD</app>, "/srv/a.conf", O_RDONLY) = 3</srv/a.conf>',
      '101 openat(AT_FDCWD</app>, "/app/.hidden", O_RDONLY) = -1 ENOENT (No such file or directory)',
      '101 newfstatat(AT_FDCWD</app>, "/srv/b.conf", {st_mode=S_IFREG|0644, st_size=9, ...}, 0) = 0',
    ].join('\n');
    const reads = solutionReads(log);
    assert.ok(reads.opened.has('/srv/a.conf') && reads.opened.has('/usr/bin/cp'));
    assert.ok(!reads.opened.has('/app/.hidden'), 'a failed open is no read');
    assert.ok(!reads.opened.has('/srv/b.conf'), 'a stat is no read');
    const named = { texts: ['Do not read /srv/b.conf: it is the grader copy.'], workdir: '/app' };
    const judged = classifySources(
      new Map([
        ['/app/a.conf', ['/srv/a.conf']],
        ['/app/b.conf', ['/srv/b.conf']],
        ['/app/c.conf', ['/srv/c.conf']],
      ]),
      new Set(['/srv/c.conf']),
      reads,
      named,
    );
    assert.deepEqual(
      judged.map((j) => [j.output, j.hidden]),
      [
        ['/app/a.conf', false],
        ['/app/b.conf', true],
        ['/app/c.conf', false],
      ],
    );
    assert.match(judged[1]!.why, /never this one \(the task names it/);
    // Untraced (a backend that cannot trace): the naming rule decides, and says so.
    const untraced = classifySources(new Map([['/app/b.conf', ['/srv/b.conf']]]), new Set(), null, named);
    assert.equal(untraced[0]!.hidden, false);
    assert.match(untraced[0]!.why, /no trace/);
  });

  it('knows source files by name or shebang, and places the added line where each language runs it first', () => {
    assert.equal(sourceKind('/app/x.py', 'x = 1\n'), 'python');
    assert.equal(sourceKind('/app/run', '#!/usr/bin/env bash\necho\n'), 'shell');
    assert.equal(sourceKind('/app/lib.h', 'int f(void);\n'), 'c');
    assert.equal(sourceKind('/app/main.go', 'package main\n'), 'go');
    assert.equal(sourceKind('/app/x.mjs', 'export const a = 1;\n'), 'javascript');
    assert.equal(sourceKind('/app/data.csv', 'a,b\n'), null);
    const py = mutant('python', '#!/usr/bin/env python3\n# coding: utf-8\nfrom __future__ import annotations\nx = 1\n');
    assert.deepEqual(py.content.split('\n').slice(2, 5), ['from __future__ import annotations', py.added, 'x = 1']);
    const go = mutant('go', 'package main\n\nfunc main() {}\n');
    assert.ok(go.content.startsWith('package main\n') && go.content.trimEnd().endsWith(go.added));
    const sh = mutant('shell', '#!/bin/bash\necho hi\n');
    assert.deepEqual(sh.content.split('\n').slice(0, 2), ['#!/bin/bash', sh.added]);
  });
});
