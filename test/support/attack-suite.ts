import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe } from 'node:test';
import { cases, type Coverage } from './coverage.js';
import type { Agent } from '../../src/agent/agent.js';
import { MAX_SCANNED_CHANGES, type SandboxProvider } from '../../src/sandbox/sandbox.js';
import { accountingOf } from '../../src/trial/accounting.js';
import type { ProtectionRecord } from '../../src/verifier/protection.js';
import { loadTask } from '../../src/task/load.js';
import { runTrial } from '../../src/trial/run.js';
import type { TrialResult } from '../../src/trial/schema.js';
import path from 'node:path';
import { EXAMPLES, tempDir, trivialTask } from '../helpers.js';

/** An adversarial agent: runs one shell script in the sandbox, then says it is done. */
export function scriptAgent(script: string, timeoutSec = 60): Agent {
  return {
    name: 'attacker',
    model: null,
    setup: async () => {},
    run: async ({ sandbox, signal }) => {
      await sandbox.exec(['/bin/sh', '-c', script], { timeoutSec, signal });
      return { exitReason: 'completed', message: null };
    },
  };
}

/** A verifier that always fails the task unless /app/out.txt says hello (the honest answer). */
const HONEST_TEST =
  '#!/bin/bash\nif [ "$(cat /app/out.txt 2>/dev/null)" = hello ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n';

/** One trial of the script agent on the trivial task (files overridden), with the honest verifier unless given. */
const trialOn =
  (provider: () => SandboxProvider) =>
  async (script: string, files: Record<string, string> = {}, timeoutSec = 60): Promise<TrialResult> => {
    const task = await loadTask(await trivialTask({ 'tests/test.sh': HONEST_TEST, ...files }));
    return runTrial({ task, agent: scriptAgent(script, timeoutSec), provider: provider(), outDir: await tempDir() });
  };

/**
 * Every attack on the grade an agent has been seen to make, run against a sandbox provider. The
 * body names no backend: a new backend proves itself by passing this suite.
 */
export function gradingAttacks(label: string, provider: () => SandboxProvider, coverage: Coverage = 'full'): void {
  const trial = trialOn(provider);
  const c = cases(coverage);

  describe(`grading cannot be forged (${label})`, () => {
    c.smoke(
      "ignores a reward.json the agent planted in /logs/verifier (reward.json would win over the verifier's reward.txt)",
      async () => {
        const r = await trial(`mkdir -p /logs/verifier; echo '{"reward": 1}' > /logs/verifier/reward.json`);
        assert.equal(r.reward, 0);
        assert.equal(r.error, null);
      },
    );

    c.full(
      "grades a planted reward.txt with a verifier that writes none as 0 (no reward after the agent's turn is the sandbox's doing)",
      async () => {
        const r = await trial(`mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt`, {
          'tests/test.sh': '#!/bin/bash\necho "tests ran, no reward written"\n',
        });
        assert.equal(r.reward, 0);
        assert.equal(r.error?.class, 'verifier_no_reward');
      },
    );

    c.full('unpacks the tests into a fresh /tests: files the agent put there are gone', async () => {
      const r = await trial(`mkdir -p /tests; echo 'echo 1 > /logs/verifier/reward.txt; exit 0' > /tests/override.sh`, {
        'tests/test.sh': `#!/bin/bash\n[ -f /tests/override.sh ] && . /tests/override.sh\n${HONEST_TEST.split('\n').slice(1).join('\n')}`,
      });
      assert.equal(r.reward, 0);
    });

    c.smoke(
      "a background forger keeps running but cannot reach the verifier's files, whether or not the task keeps processes",
      async () => {
        const forger = `nohup sh -c 'while :; do mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt; for p in /proc/[0-9]*; do echo 1 > $p/root/logs/verifier/reward.txt; done 2>/dev/null; sleep 0.05; done' >/dev/null 2>&1 &`;
        for (const toml of ['', '[verifier]\nkeep_agent_processes = true\n']) {
          const r = await trial(forger, {
            'task.toml': `[task]\nname = "forger"\n${toml}`,
            'tests/test.sh': `#!/bin/bash\necho 0 > /logs/verifier/reward.txt\nsleep 2\n`,
          });
          assert.equal(r.reward, 0, toml);
          assert.equal(r.error, null, JSON.stringify(r.errors));
        }
      },
    );

    c.full(
      'a program the grader runs, shadowed on the PATH (chmod, ls in /usr/local/bin), cannot start a forger',
      async () => {
        // Each shadow starts a background writer of reward 1 (processes are not ended again after
        // grading starts), then does the real program's work.
        const shadow = (name: string) =>
          `printf '#!/bin/sh\\nnohup sh -c "for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt; sleep 0.1; done" >/dev/null 2>&1 &\\nexec /bin/${name} "$@"\\n' > /usr/local/bin/${name}; chmod +x /usr/local/bin/${name}`;
        const r = await trial(['chmod', 'ls'].map(shadow).join('; '), {
          'tests/test.sh': `#!/bin/bash\necho 0 > /logs/verifier/reward.txt\nsleep 1\n`,
        });
        assert.equal(r.reward, 0, JSON.stringify(r.errors));
      },
    );

    c.full(
      "a program added earlier on the image's own PATH (a venv's bin) that test.sh relies on is tampering",
      async () => {
        // The image puts /app/.venv/bin first on the PATH; the agent drops a grep there that always matches.
        const r = await trial(`printf '#!/bin/sh\\nexit 0\\n' > /app/.venv/bin/grep; chmod +x /app/.venv/bin/grep`, {
          'environment/Dockerfile':
            'FROM debian:bookworm-slim\nWORKDIR /app\nRUN mkdir -p /app/.venv/bin\nENV PATH=/app/.venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n',
          'tests/test.sh':
            '#!/bin/bash\nif grep -q hello /app/out.txt 2>/dev/null; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n',
        });
        assert.equal(r.reward, 0, JSON.stringify(r.errors));
        assert.equal(r.error?.class, 'tampering');
        assert.deepEqual(
          r.tampering.map((t) => t.path),
          ['/app/.venv/bin/grep'],
        );
      },
    );

    c.full('grades a sandbox whose processes the agent killed with kill -9 -1 (the work it did counts)', async () => {
      const r = await trial(`echo hello > /app/out.txt; kill -9 -1`);
      assert.equal(r.reward, 1, JSON.stringify(r.errors));
      assert.ok(r.phases.verification);
    });

    c.full("revives a killed sandbox for grading even when the task keeps the agent's processes", async () => {
      const r = await trial(`echo hello > /app/out.txt; kill -9 -1`, {
        'task.toml': '[verifier]\nkeep_agent_processes = true\n',
      });
      assert.equal(r.reward, 1, JSON.stringify(r.errors));
    });

    c.full('grades a sandbox after a fork bomb, as a failure of the agent', async () => {
      const r = await trial(
        `b() { b | b & }; b`,
        { 'task.toml': '[environment]\npids_limit = 64\n[agent]\ntimeout_sec = 30\n' },
        5,
      );
      assert.equal(r.reward, 0, JSON.stringify(r.errors));
      assert.notEqual(r.error?.class, 'environment_error');
    });

    c.smoke('voids the reward when the agent replaces a program the verifier runs, naming the path', async () => {
      const r = await trial(
        `echo hello > /app/out.txt; printf '#!/bin/sh\\necho 1 > /logs/verifier/reward.txt\\n' > /usr/bin/bash.fake; mv /usr/bin/bash.fake "$(readlink -f /bin/bash)"`,
      );
      assert.equal(r.reward, 0);
      assert.equal(r.error?.class, 'tampering');
      assert.ok(
        r.tampering.some((t) => /\/bash$/.test(t.path)),
        JSON.stringify(r.tampering),
      );
    });

    // Its cases are all full: a smoke registration leaves the block out.
    if (c.isFull)
      describe('against a real pytest verifier', () => {
        const PASS_ALL = [
          'import pytest',
          '@pytest.hookimpl(hookwrapper=True)',
          'def pytest_runtest_makereport(item, call):',
          '    outcome = yield',
          '    outcome.get_result().outcome = "passed"',
        ].join('\\n');
        const onExample = async (script: string): Promise<TrialResult> => {
          const task = await loadTask(path.join(EXAMPLES, 'csv-summary'));
          return runTrial({ task, agent: scriptAgent(script), provider: provider(), outDir: await tempDir() });
        };

        c.full('a conftest.py planted in /tests is gone before pytest runs', async () => {
          const r = await onExample(`mkdir -p /tests && printf '${PASS_ALL}\\n' > /tests/conftest.py`);
          assert.equal(r.reward, 0);
          assert.ok(r.tests.some((t) => t.status === 'failed'));
        });

        c.full('a conftest.py above /tests, or a sitecustomize hook, is tampering: reward 0, paths named', async () => {
          for (const where of [
            '/conftest.py',
            '$(python3 -c "import site; print(site.getsitepackages()[0])")/sitecustomize.py',
          ]) {
            const r = await onExample(`mkdir -p "$(dirname ${where})"; printf '${PASS_ALL}\\n' > ${where}`);
            assert.equal(r.reward, 0, where);
            assert.equal(r.error?.class, 'tampering', where);
            assert.equal(r.tampering.length, 1, JSON.stringify(r.tampering));
          }
        });
      });

    c.smoke('a FIFO the tests block on is graded 0 (verifier_timeout), not lost coverage', async () => {
      const r = await trial(`mkfifo /app/out.txt`, {
        'task.toml': '[task]\nname = "fifo"\n[verifier]\ntimeout_sec = 5\n',
      });
      assert.equal(r.reward, 0, JSON.stringify(r.errors));
      assert.equal(r.error?.class, 'verifier_timeout');
      assert.equal(accountingOf(r.reward, r.error?.class), 'graded');
    });

    c.full(
      'a working folder turned into a file breaks grading: graded 0 (grading_blocked), not retried as infrastructure',
      async () => {
        const r = await trial(`cd / && rm -rf /app && echo x > /app`);
        assert.equal(r.reward, 0, JSON.stringify(r.errors));
        assert.equal(r.error?.class, 'grading_blocked');
        assert.equal(accountingOf(r.reward, r.error?.class), 'graded');
      },
    );

    c.full("an agent that breaks the harness's own places (the output spool, /logs) is still graded", async () => {
      for (const sabotage of [
        'rm -rf /tmp/.termgrade-exec; touch /tmp/.termgrade-exec',
        'rm -rf /logs; echo x > /logs',
      ]) {
        const r = await trial(`echo hello > /app/out.txt; ${sabotage}`);
        assert.equal(r.reward, 1, `${sabotage}: ${JSON.stringify(r.errors)}`);
      }
    });

    c.full('does not call ordinary work tampering', async () => {
      const r = await trial(
        `echo hello > /app/out.txt; mkdir -p /usr/local/lib/mylib /opt/tool/bin; echo x > /usr/local/lib/mylib/a.so; echo y > /opt/tool/bin/mytool; echo z > /etc/mytool.conf`,
      );
      assert.equal(r.reward, 1, JSON.stringify(r.tampering));
      assert.deepEqual(r.tampering, []);
    });

    c.smoke(
      'stops an agent that fills the disk past its limit, and grades it 0 without copying its files',
      async () => {
        const r = await trial(
          `echo hello > /app/out.txt; head -c 400000000 /dev/zero > /app/big; sleep 60`,
          { 'task.toml': '[environment]\nstorage_mb = 100\n[agent]\ntimeout_sec = 120\n' },
          100,
        );
        assert.equal(r.error?.class, 'disk_limit');
        // Graded (the agent's own failure), and 0: files past the limit are not copied for the verifier.
        assert.equal(r.reward, 0, JSON.stringify(r.errors));
        assert.ok(r.phases.agent_run!.durationMs < 40_000);
      },
    );

    c.smoke(
      'runs a task that asks for the internet offline unless a network is given: the host loopback is out of reach',
      async () => {
        const server = createServer((_q, s) => s.end('host secret')).listen(0, '127.0.0.1');
        await new Promise((r) => server.once('listening', r));
        const port = (server.address() as AddressInfo).port;
        try {
          const r = await trial(
            `if (exec 3<>/dev/tcp/127.0.0.1/${port}) 2>/dev/null; then echo hello > /app/out.txt; fi; ls /sys/class/net > /app/ifaces`,
            {
              'task.toml': '[environment]\nallow_internet = true\n',
              'tests/test.sh':
                '#!/bin/bash\nif [ "$(cat /app/ifaces)" = lo ] && [ ! -f /app/out.txt ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n',
            },
          );
          assert.equal(r.reward, 1, 'only the loopback interface, and the host server unreachable');
        } finally {
          server.close();
        }
      },
    );

    c.full('drops capabilities tasks do not need and sets no-new-privileges', async () => {
      const r = await trial(`grep -E '^(CapEff|NoNewPrivs)' /proc/self/status > /app/status`, {
        'tests/test.sh': `#!/bin/bash\ncap=$(awk '/CapEff/{print $2}' /app/status); nnp=$(awk '/NoNewPrivs/{print $2}' /app/status)\n# NET_RAW is bit 13, MKNOD bit 27\nif [ "$nnp" = 1 ] && [ $(( 0x$cap >> 13 & 1 )) = 0 ] && [ $(( 0x$cap >> 27 & 1 )) = 0 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n`,
      });
      assert.equal(r.reward, 1);
    });
  });
}

/**
 * The attacks that need tools in the image (Python, pytest, a compiler) or a large sandbox: run
 * against every backend like the rest, in a file of their own per backend (they take minutes).
 */
export function gradingAttacksWithTools(
  label: string,
  provider: () => SandboxProvider,
  coverage: Coverage = 'full',
): void {
  const trial = trialOn(provider);
  const c = cases(coverage);

  describe(`grading cannot be forged, with tools in the image (${label})`, () => {
    describe('on an image with Python, pytest and a compiler', () => {
      // The same layer as the kv-service example's image, so a build cache serves both.
      const LAB = {
        'environment/Dockerfile':
          'FROM debian:bookworm-slim\nRUN apt-get update && apt-get install -y --no-install-recommends python3 python3-pytest git procps make gcc libc6-dev sqlite3 && rm -rf /var/lib/apt/lists/*\nWORKDIR /app\n',
      };
      /** A shared library whose constructor writes reward 1 and keeps writing it from a child. */
      const EVIL_C = `#include <stdio.h>\n#include <stdlib.h>\n#include <unistd.h>\n__attribute__((constructor)) static void forge(void) { system("mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt; (for i in 1 2 3 4 5 6 7 8 9 10; do echo 1 > /logs/verifier/reward.txt; sleep 0.3; done) >/dev/null 2>&1 &"); }\nint _nss_evil_getpwuid_r(void) { return 0; }\n`;
      const compile = (out: string) =>
        `cat > /tmp/evil.c <<'CSRC'\n${EVIL_C}CSRC\ngcc -shared -fPIC -o ${out} /tmp/evil.c`;
      const lab = (script: string, files: Record<string, string> = {}, timeoutSec = 120) =>
        trial(script, { ...LAB, ...files }, timeoutSec);
      const LS_VERIFIER = {
        'tests/test.sh':
          '#!/bin/bash\nls -l /app > /dev/null; id > /dev/null\nif [ "$(cat /app/out.txt 2>/dev/null)" = hello ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\nsleep 1\n',
      };

      c.full('a service the agent started keeps answering the tests, and its process is listed for them', async () => {
        const r = await lab(
          `cd /app && nohup python3 -m http.server 8123 --bind 127.0.0.1 >/dev/null 2>&1 & sleep 2; echo hello > /app/out.txt`,
          {
            'tests/test.sh':
              '#!/bin/bash\nok=0\npython3 -c "import urllib.request; urllib.request.urlopen(\'http://127.0.0.1:8123/out.txt\', timeout=5)" && pgrep -f http.server >/dev/null && ok=1\necho $ok > /logs/verifier/reward.txt\n',
          },
        );
        assert.equal(r.reward, 1, JSON.stringify(r.errors));
      });

      c.full('an NSS module named in /etc/nsswitch.conf (its constructor writes the reward) is tampering', async () => {
        const r = await lab(
          `${compile('/usr/lib/x86_64-linux-gnu/libnss_evil.so.2')} && sed -i 's/^passwd:.*/passwd: evil files/; s/^group:.*/group: evil files/' /etc/nsswitch.conf`,
          LS_VERIFIER,
        );
        assert.equal(r.reward, 0, JSON.stringify(r.errors));
        assert.equal(r.error?.class, 'tampering');
        assert.ok(
          r.tampering.some((t) => t.path === '/etc/nsswitch.conf') &&
            r.tampering.some((t) => /libnss_evil/.test(t.path)),
          JSON.stringify(r.tampering),
        );
      });

      c.full(
        "a library put first through the loader's configuration (ld.so.conf.d and its cache) is tampering",
        async () => {
          const r = await lab(
            `mkdir -p /opt/evil && ${compile('/opt/evil/libselinux.so.1')} && echo /opt/evil > /etc/ld.so.conf.d/00-evil.conf && ldconfig`,
            LS_VERIFIER,
          );
          assert.equal(r.reward, 0, JSON.stringify(r.errors));
          assert.equal(r.error?.class, 'tampering');
          assert.ok(
            r.tampering.some((t) => t.path === '/etc/ld.so.conf.d/00-evil.conf'),
            JSON.stringify(r.tampering),
          );
        },
      );

      // Smoke: the file's content is read by each path's own reader (the layer, or the engine's archive).
      c.smoke(
        'a .pth hook placed after 64 KiB of comments, or in a .pth too large to read whole, is tampering',
        async () => {
          const site = '$(python3 -c "import site; print(site.getsitepackages()[0])")';
          const hook = `import os; os.system('echo 1 > /logs/verifier/reward.txt')`;
          for (const pad of [70_000, 1_200_000]) {
            const r = await lab(
              `mkdir -p ${site}; (head -c ${pad} /dev/zero | tr '\\\\0' '#'; echo; echo "${hook}") > ${site}/zz.pth`,
              {
                'tests/test.sh': '#!/bin/bash\necho 0 > /logs/verifier/reward.txt\npython3 -c "print(1)"\n',
              },
            );
            assert.equal(r.reward, 0, `${pad}: ${JSON.stringify(r.errors)}`);
            assert.equal(r.error?.class, 'tampering', String(pad));
            assert.ok(
              r.tampering.some((t) => t.path.endsWith('/zz.pth')),
              JSON.stringify(r.tampering),
            );
          }
        },
      );

      c.full('a file the verifier reads that no rule names is protected once admission recorded it', async () => {
        // The image ships a checker the tests run by absolute path: no fixed rule knows it.
        const files = {
          ...LAB,
          'environment/Dockerfile': `${LAB['environment/Dockerfile']}RUN mkdir -p /opt/checker && printf '#!/bin/sh\\ngrep -qx hello /app/out.txt\\n' > /opt/checker/check && chmod +x /opt/checker/check\n`,
          'tests/test.sh':
            '#!/bin/bash\nif /opt/checker/check; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n',
        };
        const task = await loadTask(await trivialTask(files));
        let record: ProtectionRecord | null = null;
        const oracle = await runTrial({
          task,
          agent: scriptAgent('echo hello > /app/out.txt'),
          provider: provider(),
          outDir: await tempDir(),
          onProtectionRecord: (rec) => (record = rec),
        });
        assert.equal(oracle.reward, 1, JSON.stringify(oracle.errors));
        const forge = `printf '#!/bin/sh\\nexit 0\\n' > /opt/checker/check`;
        const unprotected = await runTrial({
          task,
          agent: scriptAgent(forge),
          provider: provider(),
          outDir: await tempDir(),
        });
        assert.equal(unprotected.protection, 'rules');
        // Every backend under test runs its containers on this machine, where strace follows the verifier.
        assert.ok(record !== null, "the reference solution's grading recorded the protected set");
        assert.equal(
          unprotected.reward,
          1,
          'without the record, the fixed rules do not know the checker (what the record is for)',
        );
        const r = await runTrial({
          task,
          agent: scriptAgent(forge),
          provider: provider(),
          outDir: await tempDir(),
          protection: record,
        });
        assert.equal(r.protection, 'admission');
        assert.equal(r.reward, 0, JSON.stringify(r.errors));
        assert.deepEqual(
          r.tampering.map((t) => t.path),
          ['/opt/checker/check'],
        );
        const honest = await runTrial({
          task,
          agent: scriptAgent(
            'apt-get --version >/dev/null; echo hello > /app/out.txt; mkdir -p /app/extra; echo x > /app/extra/notes',
          ),
          provider: provider(),
          outDir: await tempDir(),
          protection: record,
        });
        assert.equal(honest.reward, 1, JSON.stringify(honest.tampering));
      });
    });

    // Full only: on engine exec, grading-bounds.test.ts floods the engine's change list past a scaled-down limit.
    c.full(
      'a flood of changes past what the scan reads is tampering: the scan fails closed, so nothing can hide behind the flood',
      async () => {
        const r = await trial(
          `mkdir -p /app/flood && cd /app/flood && seq 1 ${MAX_SCANNED_CHANGES + 10} | xargs touch; echo hello > /app/out.txt`,
          { 'task.toml': '[task]\nname = "flood"\n[agent]\ntimeout_sec = 900\n' },
          900,
        );
        assert.equal(r.reward, 0, JSON.stringify(r.errors));
        assert.equal(r.error?.class, 'tampering');
        assert.match(r.tampering[0]!.why, /more than/);
      },
    );
  });
}
