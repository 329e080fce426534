import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { checkTasks } from '../src/check/check.js';
import { docker, makeTask, tempDir } from './helpers.js';

/**
 * Terminal-Bench 2's test.sh shape (apt-get curl, uv's installer, then uvx pytest), with the uvx
 * line given: everything before it fails offline, the toolchain serves the uvx run.
 */
const templateWith = (uvx: string): string =>
  [
    '#!/bin/bash',
    'apt-get update',
    'apt-get install -y curl',
    'curl -LsSf https://astral.sh/uv/0.9.5/install.sh | sh',
    'source $HOME/.local/bin/env',
    uvx,
    'if [ $? -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi',
    '',
  ].join('\n');

const TOML = '[task]\nname = "NAME"\n\n[verifier]\ntimeout_sec = 300\n\n[agent]\ntimeout_sec = 120\n';
/** Debian without Python: the toolchain's own Python is the only one there. */
const NO_PYTHON = 'FROM debian:bookworm-slim\nWORKDIR /app\nRUN ! command -v python3\n';

/** A task whose tests run the agent's /app/total.py as `python3 /app/total.py`, in a subprocess. */
function subprocessTask(): Promise<string> {
  return makeTask({
    'task.toml': TOML.replace('NAME', 'tb2-subprocess-python'),
    'instruction.md': 'Write /app/total.py: it prints the sum of the integers in /app/numbers.txt, one a line.\n',
    'environment/Dockerfile': `${NO_PYTHON}RUN printf '3\\n4\\n35\\n' > /app/numbers.txt\n`,
    'solution/solve.sh':
      "#!/bin/bash\ncat > /app/total.py <<'EOF'\nprint(sum(int(l) for l in open('/app/numbers.txt') if l.strip()))\nEOF\n",
    'tests/test.sh': templateWith(
      'uvx -p 3.13 -w pytest==8.4.1 -w pytest-json-ctrf==0.3.5 pytest --ctrf /logs/verifier/ctrf.json /tests/test_outputs.py -rA',
    ),
    'tests/test_outputs.py': [
      'import subprocess',
      '',
      '',
      'def test_total_printed():',
      '    out = subprocess.run(["python3", "/app/total.py"], capture_output=True, text=True, check=True)',
      '    assert out.stdout.strip() == "42"',
      '',
    ].join('\n'),
  });
}

/** A task whose tests import numpy, asked with `--with` (not `-w`), solving with LAPACK and multiplying with BLAS. */
function numpyWithTask(): Promise<string> {
  return makeTask({
    'task.toml': TOML.replace('NAME', 'tb2-with-numpy'),
    'instruction.md': 'Write the solution x of 2x + y = 5, x - y = 1 to /app/x.txt, as x then y on one line.\n',
    'environment/Dockerfile': NO_PYTHON,
    'solution/solve.sh': '#!/bin/bash\necho "2 1" > /app/x.txt\n',
    'tests/test.sh': templateWith(
      'uvx -p 3.11 --with pytest==8.4.1 --with=pytest-json-ctrf==0.3.5 --with numpy==2.3.3 pytest --ctrf /logs/verifier/ctrf.json /tests/test_outputs.py -rA',
    ),
    'tests/test_outputs.py': [
      'import numpy as np',
      '',
      '',
      'def test_solution():',
      '    a = np.array([[2.0, 1.0], [1.0, -1.0]])',
      '    got = np.array([float(v) for v in open("/app/x.txt").read().split()])',
      '    assert np.allclose(np.linalg.solve(a, [5.0, 1.0]), got)',
      '    assert np.allclose(a @ got, [5.0, 1.0])',
      '',
    ].join('\n'),
  });
}

/** TB2-shaped: tests that import numpy, scipy and pandas (pinned with -w, as TB2's tests pin them). */
function scientificTask(): Promise<string> {
  return makeTask({
    'task.toml': TOML.replace('NAME', 'tb2-numpy-scipy-pandas'),
    'instruction.md':
      'Write /app/stats.csv with a header `name,mean` and one row per column of /app/data.csv (a, b): its name and its mean.\n',
    'environment/Dockerfile': `${NO_PYTHON}RUN printf 'a,b\\n1,10\\n2,20\\n3,60\\n' > /app/data.csv\n`,
    'solution/solve.sh': '#!/bin/bash\nprintf "name,mean\\na,2\\nb,30\\n" > /app/stats.csv\n',
    'tests/test.sh': templateWith(
      'uvx -p 3.13 -w pytest==8.4.1 -w pytest-json-ctrf==0.3.5 -w numpy==2.3.3 -w scipy==1.16.2 -w pandas==2.3.3 pytest --ctrf /logs/verifier/ctrf.json /tests/test_outputs.py -rA',
    ),
    'tests/test_outputs.py': [
      'import numpy as np',
      'import pandas as pd',
      'from scipy import linalg, stats',
      '',
      '',
      'def test_means():',
      '    data = pd.read_csv("/app/data.csv")',
      '    got = pd.read_csv("/app/stats.csv").set_index("name")["mean"]',
      '    for col in data.columns:',
      '        assert np.isclose(got[col], stats.tmean(data[col].to_numpy()))',
      '',
      '',
      'def test_lapack_through_scipy():',
      '    m = np.array([[4.0, 1.0], [2.0, 3.0]])',
      '    assert np.allclose(linalg.inv(m) @ m, np.eye(2))',
      '',
    ].join('\n'),
  });
}

describe("Harbor's uvx semantics offline, and TB2's scientific packages (real Docker)", () => {
  it('admits, offline, tests that run python3 in a subprocess under uvx on an image without Python, uvx --with numpy, and tests importing numpy, scipy and pandas', async () => {
    const tasks = [await subprocessTask(), await numpyWithTask(), await scientificTask()];
    const report = await checkTasks(tasks, {
      provider: docker(),
      outDir: await tempDir(),
      repeat: 1,
      probes: 'fast',
      concurrency: 3,
    });
    const by = Object.fromEntries(report.tasks.map((t) => [t.name, t]));
    for (const [name, tests] of Object.entries({
      'tb2-subprocess-python': 1,
      'tb2-with-numpy': 1,
      'tb2-numpy-scipy-pandas': 2,
    })) {
      const t = by[name]!;
      assert.equal(t.verdict, 'admissible', `${name}: ${t.details.join('\n')}`);
      assert.equal(t.tests.length, tests, `${name}: ${t.tests.join(', ')}`);
      assert.equal(t.oracle.passed, 1);
      assert.equal(t.nop?.reward, 0, `${name}: the do-nothing run fails`);
    }
    // The Python asked for: substituted and said so (3.13), or served as asked (3.11).
    assert.ok(
      by['tb2-subprocess-python']!.substitutions.some((s) =>
        /^python 3\.13 -> Debian python3 3\.11\S* \(another version: the toolchain has Python 3\.11 only\)$/.test(s),
      ),
      by['tb2-subprocess-python']!.substitutions.join('; '),
    );
    assert.ok(
      by['tb2-with-numpy']!.substitutions.some((s) => /^python 3\.11 -> Debian python3 3\.11\.\S+$/.test(s)),
      by['tb2-with-numpy']!.substitutions.join('; '),
    );
    assert.ok(
      by['tb2-with-numpy']!.substitutions.some((s) => /^numpy==2\.3\.3 -> Debian python3-numpy 1:?1\.2/.test(s)),
      by['tb2-with-numpy']!.substitutions.join('; '),
    );
    const sci = by['tb2-numpy-scipy-pandas']!.substitutions.join('; ');
    assert.match(sci, /scipy==1\.16\.2 -> Debian python3-scipy 1\.1/);
    assert.match(sci, /pandas==2\.3\.3 -> Debian python3-pandas 1\.5/);
  });
});
