import assert from 'node:assert/strict';
import { lstat, mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { before, describe } from 'node:test';
import { cases, type Coverage } from './coverage.js';
import type { Sandbox, SandboxProvider } from '../../src/sandbox/sandbox.js';
import { loadTask } from '../../src/task/load.js';
import type { Task } from '../../src/task/task.js';
import { tempDir, trivialTask } from '../helpers.js';

/**
 * The Sandbox contract, as behaviour: every backend runs this suite (and the grading attack suite)
 * against real sandboxes. The body names no backend; what is specific to one backend (its labels,
 * its image builds) is tested beside it.
 */
export function sandboxBehaviour(label: string, provider: () => SandboxProvider, coverage: Coverage = 'full'): void {
  const c = cases(coverage);
  describe(`sandbox behaviour (${label})`, () => {
    let task: Task;
    before(async () => {
      task = await loadTask(await trivialTask({ 'task.toml': '[environment]\npids_limit = 128\nmemory_mb = 256\n' }));
    });

    async function withSandbox<T>(fn: (s: Sandbox) => Promise<T>): Promise<T> {
      const p = provider();
      const sandbox = await p.start(task, await p.prepare(task));
      try {
        return await fn(sandbox);
      } finally {
        await sandbox.close();
      }
    }

    c.smoke(
      "a snapshot freezes the files of one moment; its verifier shares the network and process list, not the files, and is out of the original's reach",
      async () => {
        await withSandbox(async (s) => {
          await s.exec(
            'mkdir -p /app /tests /logs/verifier && echo before > /app/state && echo planted > /tests/planted && echo 1 > /logs/verifier/reward.txt && (bash -c "exec -a svc-marker sleep 600" >/dev/null 2>&1 &)',
          );
          const snap = await s.snapshot();
          try {
            await s.exec('echo after > /app/state; echo new > /app/later');
            assert.ok((await snap.changes()).some((c) => c.path === '/app/state'));
            assert.equal((await snap.readFile('/app/state', 100))?.toString(), 'before\n');
            const tests = await tempDir();
            await writeFile(path.join(tests, 'test.sh'), 'echo graded\n');
            const v = await snap.startVerifier({ tests: [tests] });
            try {
              assert.equal(
                (await v.exec('cat /app/state; [ -e /app/later ] && echo later; true')).stdout.text,
                'before\n',
                'the snapshot, not the live files',
              );
              assert.equal(
                (await v.exec('ls -A /tests; cat /tests/test.sh; ls -A /logs/verifier')).stdout.text,
                'test.sh\necho graded\n',
                "the task's tests only, and an empty /logs/verifier, whatever the agent left",
              );
              const net = async (b: Sandbox) => (await b.exec('readlink /proc/self/ns/net')).stdout.text;
              assert.equal(await net(v), await net(s), "one network: the agent's localhost services answer");
              assert.match(
                (await v.exec('cat /proc/[0-9]*/cmdline 2>/dev/null | tr "\\0" " "')).stdout.text,
                /svc-marker/,
                "the agent's processes are listed",
              );
              await v.exec(
                'mkdir -p /logs/verifier && echo 0 > /logs/verifier/reward.txt && (bash -c "exec -a verifier-marker sleep 600" >/dev/null 2>&1 &)',
              );
              // From the original, the verifier's processes are visible but their files are not reachable.
              const reach = await s.exec(
                'for p in /proc/[0-9]*; do if [ "$(tr "\\0" " " < $p/cmdline 2>/dev/null)" = "verifier-marker 600 " ]; then echo FOUND; echo 1 > $p/root/logs/verifier/reward.txt && echo WROTE; ls $p/root/ >/dev/null 2>&1 && echo LISTED; fi; done; true',
              );
              assert.match(reach.stdout.text, /FOUND/, "the verifier's process is visible from the original");
              assert.doesNotMatch(reach.stdout.text, /WROTE|LISTED/, reach.stdout.text + reach.stderr.text);
              assert.equal(
                (await s.exec('cat /logs/verifier/reward.txt 2>/dev/null; true')).stdout.text,
                '1\n',
                "the verifier's files are its own (the agent's stays as it wrote it)",
              );
              await v.stop();
              const out = await tempDir();
              await v.copyOut('/logs/verifier', out, { trusted: true });
              assert.equal(
                await readFile(path.join(out, 'reward.txt'), 'utf8'),
                '0\n',
                "a stopped verifier's files are still read",
              );
            } finally {
              await v.close();
            }
          } finally {
            await snap.discard();
          }
        });
      },
    );

    c.full(
      "a verifier's folders are made afresh over links the agent left there, and nothing is written through them",
      async () => {
        await withSandbox(async (s) => {
          await s.exec('rm -rf /logs /tests; ln -s /etc /logs; ln -s /usr/lib /tests');
          const snap = await s.snapshot();
          try {
            const tests = await tempDir();
            await writeFile(path.join(tests, 'test.sh'), 'echo graded\n');
            const v = await snap.startVerifier({ tests: [tests] });
            try {
              const r = await v.exec(
                '[ -L /logs ] || [ -L /tests ] && echo LINK; [ -d /logs/verifier ] && echo DIR; ls -A /tests /logs/verifier; [ -e /etc/verifier ] && echo ETC; [ -e /usr/lib/test.sh ] && echo USR; true',
              );
              assert.equal(r.stdout.text, 'DIR\n/logs/verifier:\n\n/tests:\ntest.sh\n', r.stdout.text + r.stderr.text);
            } finally {
              await v.close();
            }
            // Nothing followed the links on this machine either (the layer is prepared from here).
            await assert.rejects(lstat('/etc/verifier'));
            await assert.rejects(lstat('/usr/lib/test.sh'));
          } finally {
            await snap.discard();
          }
        });
      },
    );

    c.smoke('runs commands with exit code, stdout, stderr, env and cwd', async () => {
      await withSandbox(async (s) => {
        const r = await s.exec('echo out; echo err >&2; echo "$GREETING from $(pwd)"; exit 3', {
          env: { GREETING: 'hi' },
          cwd: '/tmp',
        });
        assert.equal(r.exitCode, 3);
        assert.equal(r.stdout.text, 'out\nhi from /tmp\n');
        assert.equal(r.stderr.text, 'err\n');
        assert.equal(r.timedOut, false);
        const argv = await s.exec(['printf', '%s|', 'a b', '$HOME']);
        assert.equal(argv.stdout.text, 'a b|$HOME|');
      });
    });

    c.full('returns 50 MB of output bounded: head and tail kept, the rest counted', async () => {
      await withSandbox(async (s) => {
        const r = await s.exec('head -c 52428800 /dev/zero | tr "\\0" x; echo END', { maxOutputBytes: 65536 });
        assert.equal(r.exitCode, 0);
        assert.equal(r.stdout.totalBytes, 52428800 + 4);
        assert.equal(r.stdout.truncatedBytes, 52428804 - 65536);
        assert.ok(r.stdout.text.startsWith('xxxx'));
        assert.ok(r.stdout.text.endsWith('xxEND\n'));
        assert.match(r.stdout.text, /\[\.\.\. 52363268 bytes omitted \.\.\.\]/);
        assert.ok(r.stdout.text.length < 70000);
      });
    });

    c.full(
      'returns when the command exits although a background child keeps its stdout, and the child lives on',
      async () => {
        await withSandbox(async (s) => {
          const r = await s.exec(
            '(while true; do echo tick; sleep 0.2; done) & echo $! > /tmp/ticker.pid; echo started',
            { timeoutSec: 20 },
          );
          assert.equal(r.exitCode, 0);
          assert.equal(r.timedOut, false);
          assert.ok(r.durationMs < 15000, `took ${r.durationMs} ms`);
          assert.match(r.stdout.text, /started/);
          await new Promise((res) => setTimeout(res, 3000));
          const alive = await s.exec('kill -0 "$(cat /tmp/ticker.pid)" && echo alive');
          assert.equal(alive.stdout.text, 'alive\n', 'the background process must survive the exec');
        });
      },
    );

    c.full('kills the whole process group on timeout and still returns the output so far', async () => {
      await withSandbox(async (s) => {
        const r = await s.exec('echo before; sleep 300 & sleep 300; echo never', { timeoutSec: 1 });
        assert.equal(r.timedOut, true);
        assert.equal(r.exitCode, null);
        assert.equal(r.stdout.text, 'before\n');
        const left = await s.exec(
          'ls /proc | grep -E "^[0-9]+$" | while read p; do cat /proc/$p/cmdline 2>/dev/null | tr "\\0" " "; echo; done | grep -c "^sleep 300" || true',
        );
        assert.equal(left.stdout.text.trim(), '0', 'no sleep survives the timeout');
      });
    });

    c.smoke('has no network but loopback', async () => {
      await withSandbox(async (s) => {
        const r = await s.exec('cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d " "');
        assert.deepEqual(r.stdout.text.trim().split('\n'), ['lo']);
      });
    });

    c.smoke('copies folders in and out, and refuses nothing but stays inside the host folder', async () => {
      await withSandbox(async (s) => {
        const src = await tempDir();
        await mkdir(path.join(src, 'sub'), { recursive: true });
        await writeFile(path.join(src, 'a.txt'), 'alpha');
        await writeFile(path.join(src, 'sub', 'b.sh'), '#!/bin/sh\necho b\n', { mode: 0o755 });
        await s.copyIn(src, '/data/in');
        const r = await s.exec('cat /data/in/a.txt; /data/in/sub/b.sh');
        assert.equal(r.stdout.text, 'alphab\n');
        await s.putFiles([
          { path: '/data/out/x.txt', content: 'x' },
          { path: '/data/out/deep/y.txt', content: 'y' },
        ]);
        await s.exec('ln -s /etc/passwd /data/out/link');
        const dest = await tempDir();
        await s.copyOut('/data/out', dest);
        assert.equal(await readFile(path.join(dest, 'x.txt'), 'utf8'), 'x');
        assert.equal(await readFile(path.join(dest, 'deep', 'y.txt'), 'utf8'), 'y');
        await assert.rejects(readFile(path.join(dest, 'link'), 'utf8'), 'links are not extracted');
      });
    });

    c.smoke('lists filesystem changes against the image and reads files without running anything inside', async () => {
      await withSandbox(async (s) => {
        await s.exec(
          'echo new > /app/new.txt; echo changed >> /etc/hostname.copy; rm -f /etc/issue; echo changed > /etc/issue.net',
        );
        const changes = await s.changes();
        const kind = (p: string) => changes.find((c) => c.path === p)?.kind;
        assert.equal(kind('/app/new.txt'), 'added');
        assert.equal(kind('/etc/issue'), 'deleted');
        assert.equal((await s.readFile('/app/new.txt', 100))?.toString(), 'new\n');
        assert.equal((await s.readFile('/app/new.txt', 2))?.toString(), 'ne', 'bounded');
        assert.equal(await s.readFile('/app/absent', 100), null);
        assert.equal(await s.readFile('/etc/issue', 100), null, 'deleted');
        assert.equal(
          (await s.readFile('/etc/issue.net', 100))?.toString(),
          'changed\n',
          'an image file the agent changed',
        );
        assert.match(
          (await s.readFile('/etc/debian_version', 100))?.toString() ?? '',
          /^\d+/,
          'an image file left alone',
        );
      });
    });

    c.full('reports the disk it has written', async () => {
      await withSandbox(async (s) => {
        const before = (await s.diskUsage()) ?? 0;
        await s.exec('head -c 20000000 /dev/zero > /app/blob');
        const after = await s.diskUsage();
        if (after === null) return; // a backend that cannot tell says null, and the limit is not enforced
        assert.ok(after - before >= 19_000_000, `${before} -> ${after}`);
      });
    });

    c.full('copies in through the backend itself when asked to trust nothing inside', async () => {
      await withSandbox(async (s) => {
        const src = await tempDir();
        await writeFile(path.join(src, 't.sh'), 'echo trusted\n');
        // tar replaced by one that does nothing and says it succeeded: a copy that used it would
        // leave nothing behind, so the trusted path must not run it.
        await s.exec(`printf '#!/bin/sh\\nexit 0\\n' > "$(command -v tar)"`);
        await s.copyIn(src, '/tests', { trusted: true });
        assert.equal((await s.readFile('/tests/t.sh', 100))?.toString(), 'echo trusted\n');
        const out = await tempDir();
        await s.copyOut('/tests', out, { trusted: true });
        assert.equal(await readFile(path.join(out, 't.sh'), 'utf8'), 'echo trusted\n');
      });
    });

    c.full(
      'copies out nothing from outside the sandbox, while a process in it swaps a folder and a file for links',
      async () => {
        // A folder on this machine that the sandbox does not have: a copy that followed a link
        // named after it (resolved here instead of inside the sandbox) would bring its file back.
        const outside = await tempDir();
        await writeFile(path.join(outside, 'secret.txt'), 'FROM THE HOST\n');
        await withSandbox(async (s) => {
          // Many files beside the swapped ones: a copy lists the folder, then takes its entries one by
          // one, so by the time it reaches a swapped one it has often changed since the listing.
          await s.exec(
            'mkdir -p /logs/verifier && cd /logs/verifier && echo 1 > reward.txt && for i in $(seq 400); do echo $i > p$i; done',
          );
          // Eight folders and eight files, each swapped by its own loop: folder, link, folder, ...
          for (let j = 0; j < 8; j++) {
            await s.exec(
              `cd /logs/verifier && nohup /bin/sh -c 'while :; do rm -rf d${j}; mkdir d${j}; echo inside > d${j}/secret.txt; rm -rf d${j}; ln -s ${outside} d${j}; done' > /dev/null 2>&1 &`,
            );
            await s.exec(
              `cd /logs/verifier && nohup /bin/sh -c 'while :; do rm -f f${j}; echo inside > f${j}; rm -f f${j}; ln -s ${outside}/secret.txt f${j}; done' > /dev/null 2>&1 &`,
            );
          }
          // At any moment about half of the 16 swapped names are links: a copy that followed one is
          // caught within a few copies; 20 keep the race hot without costing a minute per backend.
          let copied = 0;
          for (let i = 0; i < 20; i++) {
            const out = await tempDir();
            // A copy may fail while files vanish under it (an engine's archive breaks midway); one that
            // fails has brought nothing, and what arrives is still checked.
            if (
              await s.copyOut('/logs/verifier', out, { trusted: true }).then(
                () => true,
                () => false,
              )
            ) {
              copied += 1;
              assert.equal(await readFile(path.join(out, 'reward.txt'), 'utf8'), '1\n');
            }
            for (const rel of await readdir(out, { recursive: true })) {
              const file = path.join(out, rel);
              if ((await lstat(file)).isFile())
                assert.doesNotMatch(await readFile(file, 'utf8'), /FROM THE HOST/, `copy ${i}: ${rel}`);
            }
          }
          assert.ok(copied >= 18, `only ${copied} of 20 copies went through`);
        });
      },
    );

    c.smoke('closes idempotently; a closed sandbox runs nothing', async () => {
      const p = provider();
      const s = await p.start(task, await p.prepare(task));
      await Promise.all([s.close(), s.close()]);
      await s.close();
      await assert.rejects(s.exec('true'));
    });

    c.full(
      "a verifier run as its own process (where the backend offers it): fresh folders, the agent's network, every process ended when it ends, a timeout ends it",
      async (t) => {
        await withSandbox(async (s) => {
          await s.exec(
            'mkdir -p /logs/verifier /tests && echo planted > /tests/planted && echo 1 > /logs/verifier/reward.txt',
          );
          const tests = await tempDir();
          await writeFile(path.join(tests, 'test.sh'), 'echo graded\n');
          // test.sh's stand-in: writes its reward, leaves a writer behind that would change it a second later.
          const command =
            'ls -A /tests /logs/verifier > /tmp/seen; mv /tmp/seen /logs/verifier/seen; readlink /proc/self/ns/net > /logs/verifier/net; echo "$TG_MARK" > /logs/verifier/reward.txt; (sleep 1; echo 0 > /logs/verifier/reward.txt) >/dev/null 2>&1 & exit 3';
          const snap = await s.snapshot({ verifier: { command, env: { TG_MARK: '1' } } });
          try {
            if (!snap.runVerifier) {
              t.skip('this backend sends the verifier its command (startVerifier only)');
              return;
            }
            const run = await snap.runVerifier({ tests: [tests], timeoutSec: 60 });
            try {
              assert.equal(run.exitCode, 3);
              assert.equal(run.timedOut, false);
              await new Promise((r) => setTimeout(r, 1500));
              const out = await tempDir();
              await run.box.copyOut('/logs/verifier', out, { trusted: true });
              assert.equal(
                await readFile(path.join(out, 'reward.txt'), 'utf8'),
                '1\n',
                'the writer it left was ended with it',
              );
              assert.equal(
                await readFile(path.join(out, 'seen'), 'utf8'),
                '/logs/verifier:\n\n/tests:\ntest.sh\n',
                'fresh folders, whatever the agent left',
              );
              assert.equal(
                await readFile(path.join(out, 'net'), 'utf8'),
                (await s.exec('readlink /proc/self/ns/net')).stdout.text,
                "the agent's network",
              );
            } finally {
              await run.box.close();
            }
          } finally {
            await snap.discard();
          }
          const slow = await s.snapshot({ verifier: { command: 'sleep 600', env: {} } });
          try {
            const run = await slow.runVerifier!({ tests: [tests], timeoutSec: 2 });
            assert.deepEqual([run.timedOut, run.exitCode], [true, null]);
            await run.box.close();
          } finally {
            await slow.discard();
          }
        });
      },
    );

    c.smoke('answers a health check', async () => {
      const h = await provider().health();
      assert.equal(h.ok, true, h.detail);
    });
  });
}
