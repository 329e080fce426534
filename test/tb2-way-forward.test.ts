import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { cp, readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { CheckReportSchema } from '../src/check/schema.js';
import { INHIBIT_IPV4 } from '../src/sandbox/docker/trial-network.js';
import { ROOT, runCli, tempDir } from './helpers.js';

const run = promisify(execFile);
const TB2 = path.join(ROOT, 'test', 'fixtures', 'tb2');

/** A copy of the TB2 template whose uvx asks for `req` and whose tests import `module`. */
async function templateAsking(req: string, module: string): Promise<string> {
  const dir = path.join(await tempDir('termgrade-tb2-'), `word-count-${module}`);
  await cp(path.join(TB2, 'word-count'), dir, { recursive: true });
  const sh = path.join(dir, 'tests', 'test.sh');
  await writeFile(
    sh,
    (await readFile(sh, 'utf8')).replace(
      '-w pytest-json-ctrf==0.3.5 \\',
      `-w pytest-json-ctrf==0.3.5 \\\n  -w ${req} \\`,
    ),
  );
  // Its own instruction: check compares the tasks it is given for duplicates.
  await writeFile(
    path.join(dir, 'instruction.md'),
    `Count the words of /app/input.txt into /app/count.txt (${module} edition).\n`,
  );
  const py = path.join(dir, 'tests', 'test_outputs.py');
  await writeFile(
    py,
    `${await readFile(py, 'utf8')}\n\ndef test_${module}_is_served():\n    import ${module}\n    assert ${module}.ANSWER == 42\n`,
  );
  return dir;
}

/**
 * A TB2-style task whose test.sh fetches (apt-get, and pip, which the toolchain serves) but grades
 * without it: graded offline as written, its unserved fetch lines must fail at once (the settings
 * in effect are printed to its log).
 */
async function taskFetchingUnserved(): Promise<string> {
  const dir = path.join(await tempDir('termgrade-tb2-'), 'word-count-pip');
  await cp(path.join(TB2, 'word-count'), dir, { recursive: true });
  await writeFile(
    path.join(dir, 'tests', 'test.sh'),
    [
      '#!/bin/bash',
      'apt-get update',
      'apt-get install -y python3-pip',
      'pip install pytest==8.4.1',
      `echo "apt retries: $(apt-config dump 2>/dev/null | grep '^Acquire::Retries ')"`,
      'echo "pip retries: ${PIP_RETRIES:-unset}"',
      'if [ "$(cat /app/count.txt 2>/dev/null)" = 9 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi',
      '',
    ].join('\n'),
  );
  await writeFile(
    path.join(dir, 'instruction.md'),
    'Count the words of /app/input.txt into /app/count.txt (pip edition).\n',
  );
  return dir;
}

/**
 * A task whose tests need what `python3 -m pip` would install (the image's own interpreter, which
 * the toolchain does not stand in for), in an image without Python: a dead end unless the next step is named.
 */
async function taskNeedingPip(): Promise<string> {
  const dir = path.join(await tempDir('termgrade-tb2-'), 'word-count-pip-pytest');
  await cp(path.join(TB2, 'word-count'), dir, { recursive: true });
  await writeFile(
    path.join(dir, 'tests', 'test.sh'),
    '#!/bin/bash\npython3 -m pip install pytest==8.4.1\npython3 -m pytest /tests/test_outputs.py -rA && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n',
  );
  await writeFile(
    path.join(dir, 'instruction.md'),
    'Count the words of /app/input.txt into /app/count.txt (pytest edition).\n',
  );
  return dir;
}

/** A pure-Python wheel, as pip would find it in a folder: NAME-VERSION-py3-none-any.whl. */
async function makeWheel(dir: string, name: string): Promise<void> {
  const script = `
import zipfile, sys
d, n = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(f"{d}/{n}-1.0-py3-none-any.whl", "w") as z:
    z.writestr(f"{n}/__init__.py", "ANSWER = 42\\n")
    z.writestr(f"{n}-1.0.dist-info/METADATA", f"Metadata-Version: 2.1\\nName: {n}\\nVersion: 1.0\\n")
    z.writestr(f"{n}-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n")
    z.writestr(f"{n}-1.0.dist-info/RECORD", "")
`;
  await run('python3', ['-c', script, dir, name]);
}

describe('TB2 offline with a way forward (the real binary, real Docker)', () => {
  it("serves what the toolchain lacks from Debian's package or a wheel folder, names the substitutions and the probes not run, and names the next step for what Debian lacks", async () => {
    const wheels = await tempDir('termgrade-wheels-');
    await makeWheel(wheels, 'tgdemo');
    const wheelTask = await templateAsking('tgdemo==1.0', 'tgdemo');
    const pipTask = await taskFetchingUnserved();
    const pytestTask = await taskNeedingPip();
    const out = await tempDir('termgrade-tb2-check-');
    const r = await runCli([
      'check',
      path.join(TB2, 'word-count-httpx'),
      path.join(TB2, 'word-count-mteb'),
      wheelTask,
      pipTask,
      pytestTask,
      '-r',
      '1',
      '--probes',
      'fast',
      '--verifier-wheels',
      wheels,
      '--out',
      out,
    ]);
    assert.equal(r.status, 1, r.stderr);
    const text = r.stdout;
    // httpx: Debian's python3-httpx stood in for 0.28.1, with its version, and the tests importing it passed.
    assert.match(text, /^ok {3}word-count-httpx {2}\(3 tests/m);
    assert.match(
      text,
      /substituted: python 3\.13 -> Debian python3 3\.11[^;]*; pytest==8\.4\.1 -> Debian python3-pytest 7\.2[^;]*; pytest-json-ctrf==0\.3\.5 -> \(termgrade ctrf_report plugin\); httpx==0\.28\.1 -> Debian python3-httpx 0\.2\d/,
    );
    assert.match(text, /probes not run: weak_tests, reward_hackable: --probes fast \(--probes all runs them\)/);
    // The wheel folder served tgdemo.
    assert.match(text, /^ok {3}word-count-tgdemo {2}\(3 tests/m);
    assert.match(text, /tgdemo==1\.0 -> wheel:tgdemo-1\.0-py3-none-any\.whl/);
    // mteb: Debian has none; the reason and the next step.
    assert.match(text, /^FAIL word-count-mteb \[verifier_needs_network\]/m);
    assert.match(
      text,
      /Debian has no package python3-mteb; next step: put its wheel .* --verifier-wheels DIR, or check the task online with --network NAME/,
    );
    assert.match(
      text,
      /probes not run: reward_forgeable, solution_leaked, verifier_nondeterministic: the oracle and do-nothing runs already rejected the task/,
    );
    // Its apt-get lines are not served, yet the task grades without them: admitted, its fetch lines
    // failing at once offline (apt-get update waited 7-12 s on its retries before).
    assert.match(text, /^ok {3}word-count-pip /m);
    const trials = await readdir(path.join(out, 'trials'));
    const oracle = trials.find((t) => t.startsWith('word-count-pip__oracle__'))!;
    const log = await readFile(path.join(out, 'trials', oracle, 'verifier', 'test-stdout.txt'), 'utf8');
    assert.match(log, /^apt retries: Acquire::Retries "0";$/m, log);
    assert.match(log, /^pip retries: 0$/m, log);
    // python3 -m pip is not served and the image has no Python, so the log says nothing of the
    // network: the reason stands, with the way forward.
    assert.match(text, /^FAIL word-count-pip-pytest \[oracle_failed/m);
    assert.match(
      text,
      /oracle_failed: test\.sh also fetches what the offline toolchain cannot serve \(line 2: pip install needs the network: python3 -m pip install pytest==8\.4\.1 \(python3 -m pip is not served offline; pip, pip3 and uv pip install are\);.*; if that is why, next step: ask for Python requirements through `uvx -w NAME pytest \.\.\.` or `pip install NAME` .*--network NAME/,
    );
  });

  it("serves test.sh's `pip install NAME==V` from Debian's package as uvx's -w: admitted offline, the substitution named (check --json)", async () => {
    const dir = path.join(await tempDir('termgrade-tb2-'), 'word-count-pip-httpx');
    await cp(path.join(TB2, 'word-count-httpx'), dir, { recursive: true });
    await writeFile(
      path.join(dir, 'tests', 'test.sh'),
      [
        '#!/bin/bash',
        'pip install --no-cache-dir pytest==8.4.1 httpx==0.28.1',
        'pytest --ctrf /logs/verifier/ctrf.json /tests/test_outputs.py -rA',
        'if [ $? -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi',
        '',
      ].join('\n'),
    );
    await writeFile(
      path.join(dir, 'instruction.md'),
      'Count the words of /app/input.txt into /app/count.txt (pip install edition).\n',
    );
    const r = await runCli(['check', dir, '-r', '1', '--probes', 'fast', '--json']);
    const report = CheckReportSchema.parse(JSON.parse(r.stdout));
    const t = report.tasks[0]!;
    assert.equal(t.verdict, 'admissible', `${r.stderr}\n${t.reasons.join()}\n${t.details.join('\n')}`);
    assert.equal(r.status, 0, r.stderr);
    // The toolchain's pip said what stood in, with Debian's versions; its pytest ran the tests (3 of them, CTRF).
    assert.ok(
      t.substitutions.some((s) => /^httpx==0\.28\.1 -> Debian python3-httpx 0\.2\d/.test(s)) &&
        t.substitutions.some((s) => /^pytest==8\.4\.1 -> Debian python3-pytest 7\.2/.test(s)),
      t.substitutions.join('\n'),
    );
  });

  describe('a task that truly needs the network, checked online', () => {
    const net = `tg-check-net-${process.pid}`;
    before(async () => {
      await run('docker', [
        'network',
        'create',
        '--internal',
        '--subnet',
        '100.64.93.0/24',
        '-o',
        `${INHIBIT_IPV4}=true`,
        net,
      ]);
    });
    after(async () => {
      await run('docker', ['network', 'rm', net]).catch(() => undefined);
    });

    it('runs its trials on the isolated network NAME with no toolchain (run --network rules), and refuses a network that is not isolated', async () => {
      const refused = await runCli(['check', path.join(TB2, 'word-count-mteb'), '--network', 'host']);
      assert.equal(refused.status, 2, refused.stderr);
      assert.match(refused.stderr, /network "host" is not an isolated network/);
      const r = await runCli(['check', path.join(TB2, 'word-count-mteb'), '--network', net, '-r', '1', '--json']);
      const report = CheckReportSchema.parse(JSON.parse(r.stdout));
      const t = report.tasks[0]!;
      assert.ok(
        t.details.some((d) => d === `verifier: checked online on network ${net}: test.sh fetches its own tools`),
        t.details.join('\n'),
      );
      // This machine's isolated network has no way out: apt-get itself failed on it (not the toolchain).
      assert.deepEqual(t.reasons, ['verifier_needs_network'], t.details.join('\n'));
      assert.ok(!t.details.join('\n').includes('offline verifier toolchain'), t.details.join('\n'));
      assert.deepEqual(t.substitutions, []);
    });
  });
});
