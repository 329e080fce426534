import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, it } from 'node:test';
import { checkTasks } from '../src/check/check.js';
import { downloadFailure, verifierNeeds } from '../src/verifier/toolchain/needs.js';
import { asGraded, planOf } from '../src/verifier/toolchain/plan.js';
import { loadTask } from '../src/task/load.js';
import { startServer } from '../src/serve/server.js';
import { loadServedTasks } from '../src/serve/tasks.js';
import { docker, makeTask, ROOT, runCli, tempDir } from './helpers.js';
import { readdir } from 'node:fs/promises';

const TB2 = path.join(ROOT, 'test', 'fixtures', 'tb2');
const templateOf = (name: string): Promise<string> => readFile(path.join(TB2, name, 'tests', 'test.sh'), 'utf8');

describe('what a verifier fetches, read from test.sh', () => {
  it("names every fetching command of TB2's standard template and its uvx pytest run", async () => {
    const needs = verifierNeeds(await templateOf('word-count'));
    assert.deepEqual(
      needs.commands.map((c) => [c.kind, c.line]),
      [
        ['apt', 3],
        ['apt', 4],
        ['download', 6],
        ['uv', 16],
      ],
    );
    assert.match(needs.commands[2]!.command, /astral\.sh\/uv/);
    assert.deepEqual(needs.uvxPytest, [
      { line: 16, python: '3.13', with: ['pytest==8.4.1', 'pytest-json-ctrf==0.3.5'], unknownFlags: [] },
    ]);
    const plan = planOf(needs);
    assert.equal(plan.kind, 'toolchain');
  });

  it('a multi-step task with no tests/test.sh at its root is graded as it is (run) and left out with a warning (serve)', async () => {
    const dir = await makeTask({
      'task.toml': '[task]\nname = "two-steps"\n[[steps]]\nname = "a"\n[[steps]]\nname = "b"\n',
      'environment/Dockerfile': 'FROM debian:bookworm-slim\n',
      'steps/a/instruction.md': 'Do a.\n',
      'steps/a/tests/test.sh': '#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n',
      'steps/b/instruction.md': 'Do b.\n',
      'steps/b/tests/test.sh': '#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n',
    });
    const task = await loadTask(dir);
    assert.equal(await asGraded(task, null), task);
    assert.deepEqual(await loadServedTasks([dir]), []);
  });

  it('says what the toolchain cannot serve: a requirement it lacks, pip, uv run, another download', async () => {
    // A requirement the base set lacks is asked of Debian (python3-NAME), or of a wheel given.
    const httpx = planOf(verifierNeeds(await templateOf('word-count-httpx')));
    assert.ok(
      httpx.kind === 'toolchain' &&
        httpx.extras.debs.httpx === 'python3-httpx' &&
        httpx.substituted.includes('httpx==0.28.1 -> Debian python3-httpx'),
      JSON.stringify(httpx),
    );
    const wheel = planOf(verifierNeeds(await templateOf('word-count-httpx')), {
      httpx: '/w/httpx-0.28.1-py3-none-any.whl',
    });
    assert.ok(
      wheel.kind === 'toolchain' &&
        wheel.extras.wheels.httpx === '/w/httpx-0.28.1-py3-none-any.whl' &&
        Object.keys(wheel.extras.debs).length === 0,
      JSON.stringify(wheel),
    );
    const url = planOf(verifierNeeds('uvx -w git+https://example.com/x.git pytest /tests\n'));
    assert.ok(url.kind === 'needs-network' && /neither a package name/.test(url.unmet.join()), JSON.stringify(url));
    const pip = planOf(
      verifierNeeds(
        '#!/bin/bash\npip3 install --break-system-packages pytest==8.4.1 pytest-json-ctrf==0.3.5\npytest --ctrf /logs/verifier/ctrf.json /tests/test_outputs.py -rA\n',
      ),
    );
    // pip / pip3 / uv pip install lines are served as uvx's -w are; python3 -m pip and options
    // with no offline equivalent are not.
    assert.ok(
      pip.kind === 'toolchain' &&
        pip.pipServed &&
        pip.substituted.join('; ') ===
          'pytest==8.4.1 -> python3-pytest; pytest-json-ctrf==0.3.5 -> (termgrade ctrf_report plugin)',
      JSON.stringify(pip),
    );
    const uvPip = planOf(verifierNeeds('set -e\nuv pip install --system httpx==0.28.1\npytest /tests\n'));
    assert.ok(
      uvPip.kind === 'toolchain' && uvPip.pipServed && uvPip.extras.debs.httpx === 'python3-httpx',
      JSON.stringify(uvPip),
    );
    const pythonPip = planOf(verifierNeeds('python3 -m pip install httpx\npytest /tests\n'));
    assert.ok(
      pythonPip.kind === 'needs-network' &&
        /line 1: pip install needs the network: python3 -m pip install httpx \(python3 -m pip is not served/.test(
          pythonPip.unmet.join(),
        ),
      JSON.stringify(pythonPip),
    );
    const reqFile = planOf(verifierNeeds('pip install -r /tests/requirements.txt\npytest /tests\n'));
    assert.ok(
      reqFile.kind === 'needs-network' &&
        /\(-r \/tests\/requirements\.txt has no offline equivalent\)/.test(reqFile.unmet.join()),
      JSON.stringify(reqFile),
    );
    // `uv run` of pytest is served as uvx's run; `uv venv` is not.
    const uvRun = planOf(verifierNeeds('uv venv && uv pip install pytest\nuv run pytest /tests\n'));
    assert.ok(
      uvRun.kind === 'needs-network' && uvRun.unmet.length === 1 && /line 1: .*uv venv/.test(uvRun.unmet[0]!),
      JSON.stringify(uvRun),
    );
    const uvRunWith = planOf(verifierNeeds('uv run --no-project -p 3.11 --with numpy pytest /tests\n'));
    assert.ok(uvRunWith.kind === 'toolchain' && uvRunWith.substituted.length === 0, JSON.stringify(uvRunWith));
    const data = planOf(
      verifierNeeds(
        'curl -LsSf https://astral.sh/uv/0.9.5/install.sh | sh\nwget https://example.com/data.tar.gz # the expected output\nuvx -w pytest pytest /tests\n',
      ),
    );
    assert.ok(data.kind === 'needs-network' && /example\.com/.test(data.unmet.join()), JSON.stringify(data));
    // set -e before the fetching lines: their offline failure ends test.sh before it grades.
    const errexit = planOf(
      verifierNeeds(
        '#!/bin/bash\nset -e\napt-get update\napt-get install -y curl\ncurl -LsSf https://astral.sh/uv/0.9.5/install.sh | sh\nsource $HOME/.local/bin/env\nuvx -p 3.13 -w pytest==8.4.1 pytest /tests/test_outputs.py\n',
      ),
    );
    assert.ok(
      errexit.kind === 'needs-network' && /line 3: its failure offline ends test\.sh/.test(errexit.unmet.join()),
      JSON.stringify(errexit),
    );
    assert.equal(
      planOf(verifierNeeds('set -e\nset +e\napt-get update\nuvx -w pytest pytest /tests\n')).kind,
      'toolchain',
    );
    // The newer template's guarded installer (skipped where uv is on the PATH) and `python -m pytest` under uvx.
    const guarded =
      '#!/bin/bash\nif ! command -v uv &> /dev/null; then\n    apt-get update && apt-get install -y curl\n    (set -o pipefail; curl -LsSf https://astral.sh/uv/0.10.11/install.sh | sh) || exit $?\nfi\nsource $HOME/.local/bin/env\nuvx -p 3.13 --with pytest==8.4.1 --with pytest-json-ctrf==0.3.5 python -m pytest /tests/test_outputs.py --ctrf /logs/verifier/ctrf.json -rA\n';
    assert.deepEqual(planOf(verifierNeeds(guarded)), {
      kind: 'toolchain',
      commands: verifierNeeds(guarded).commands,
      substituted: [
        'python 3.13 -> Debian python3 3.11 (the toolchain has no other Python)',
        'pytest==8.4.1 -> python3-pytest',
        'pytest-json-ctrf==0.3.5 -> (termgrade ctrf_report plugin)',
      ],
      extras: { debs: {}, wheels: {} },
      pipServed: false,
      aptPackages: [],
    });
    // Packages the tests use, installed with apt: served only if the image has them (the oracle decides).
    const apt = planOf(
      verifierNeeds('apt-get update\napt-get install -y curl primer3 binutils\nuvx -w pytest pytest /tests\n'),
    );
    assert.ok(apt.kind === 'toolchain' && apt.aptPackages.join() === 'primer3,binutils', JSON.stringify(apt));
    // Comments and plain commands fetch nothing.
    assert.deepEqual(
      planOf(
        verifierNeeds(
          '#!/bin/bash\n# apt-get install curl\npython3 -m pytest /tests -rA\necho 1 > /logs/verifier/reward.txt\n',
        ),
      ),
      { kind: 'offline' },
    );
  });

  it("confirms from the verifier's log that fetching failed for want of a network", () => {
    assert.match(
      downloadFailure(
        "Err:1 http://deb.debian.org/debian bookworm InRelease\n  Temporary failure resolving 'deb.debian.org'\n",
      )!,
      /Temporary failure resolving/,
    );
    assert.match(
      downloadFailure(
        'curl: (6) Could not resolve host: astral.sh\n/tests/test.sh: line 16: uvx: command not found\n',
      )!,
      /Could not resolve host: astral\.sh/,
    );
    assert.equal(downloadFailure('FAILED test_outputs.py::test_count_is_right - AssertionError\n'), null);
  });
});

describe('Terminal-Bench 2 template graded offline (real Docker)', () => {
  it("admits a task in TB2's exact template shape: test.sh's uvx pytest served by the offline toolchain", async () => {
    const out = await tempDir();
    const report = await checkTasks([path.join(TB2, 'word-count')], {
      provider: docker(),
      outDir: out,
      repeat: 1,
      probes: 'fast',
    });
    const t = report.tasks[0]!;
    assert.equal(t.verdict, 'admissible', t.details.join('\n'));
    assert.deepEqual([...t.tests].sort(), [
      'test_outputs.py::test_count_file_exists',
      'test_outputs.py::test_count_is_right',
    ]);
    assert.ok(
      t.details.some((d) => /verifier toolchain/.test(d)),
      t.details.join('\n'),
    );
    // The CTRF report came from the toolchain's plugin, and the nop agent's run failed the tests.
    const ctrf = JSON.parse(await readFile(path.join(out, 'trials', t.trials[0]!, 'verifier', 'ctrf.json'), 'utf8'));
    assert.equal(ctrf.results.summary.passed, 2);
    assert.equal(t.nop?.reward, 0);
  });

  it("grades a run's offline trials of the TB2 template with the toolchain (the real binary)", async () => {
    const jobs = await tempDir();
    const r = await runCli([
      'run',
      '-t',
      path.join(TB2, 'word-count'),
      '-a',
      'oracle',
      '-k',
      '1',
      '--jobs-dir',
      jobs,
      '--no-preflight',
      '--name',
      'tb2',
    ]);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout + r.stderr, /oracle\s+1\s+100\.0/);
    const trials = path.join(jobs, 'tb2', 'trials');
    const [trial] = await readdir(trials);
    const ctrf = JSON.parse(await readFile(path.join(trials, trial!, 'verifier', 'ctrf.json'), 'utf8'));
    assert.equal(ctrf.results.tool.extra.runner, 'termgrade offline verifier toolchain');
  });

  it('serve grades a session of the TB2 template offline with the toolchain', async () => {
    const server = await startServer({
      provider: docker(),
      tasks: await loadServedTasks([path.join(TB2, 'word-count')]),
      dataDir: await tempDir(),
    });
    const call = async (url: string, body: unknown) => {
      const res = await fetch(`${server.url}${url}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${server.token}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      return { status: res.status, json: await res.json() };
    };
    try {
      const s = await call('/v1/sessions', { task: 'word-count' });
      assert.equal(s.status, 201, JSON.stringify(s.json));
      const solved = await call(`/v1/sessions/${s.json.session_id}/exec`, {
        command: "wc -w < /app/input.txt | tr -d ' ' > /app/count.txt",
      });
      assert.equal(solved.json.exit_code, 0, JSON.stringify(solved.json));
      const graded = await call(`/v1/sessions/${s.json.session_id}/verify`, {});
      assert.equal(graded.json.reward, 1, JSON.stringify(graded.json));
      const missed = await call('/v1/sessions', { task: 'word-count' });
      const zero = await call(`/v1/sessions/${missed.json.session_id}/verify`, {});
      assert.equal(zero.json.reward, 0, JSON.stringify(zero.json));
    } finally {
      await server.close();
    }
  });

  it('names a verifier that needs the network, with its commands, instead of a bare oracle_failed', async () => {
    const off = await checkTasks([path.join(TB2, 'word-count')], {
      provider: docker(),
      outDir: await tempDir(),
      repeat: 1,
      probes: 'none',
      verifierToolchain: false,
    });
    const t = off.tasks[0]!;
    assert.deepEqual(t.reasons, ['verifier_needs_network'], t.details.join('\n'));
    const detail = t.details.find((d) => d.startsWith('verifier_needs_network'))!;
    assert.match(detail, /line 3 \(apt\): apt-get update.*line 6 \(download\): curl .*astral\.sh.*line 16 \(uv\): uvx/);
    assert.match(detail, /its log shows: /);

    // A requirement Debian has no package of: the toolchain says so, with the next step.
    const mteb = await checkTasks([path.join(TB2, 'word-count-mteb')], {
      provider: docker(),
      outDir: await tempDir(),
      repeat: 1,
      probes: 'none',
    });
    const m = mteb.tasks[0]!;
    assert.deepEqual(m.reasons, ['verifier_needs_network'], m.details.join('\n'));
    assert.match(
      m.details.join('\n'),
      /mteb==1\.38\.0: Debian has no package python3-mteb; next step: .*--verifier-wheels DIR.*--network NAME/,
    );
  });
});
