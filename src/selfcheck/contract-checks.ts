import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { expect, type SelfCheck } from './context.js';
import { ifMissing } from '../util/errors.js';

/** The Sandbox contract (sandbox.ts), as checks any backend can be run through. */
export const CONTRACT_CHECKS: SelfCheck[] = [
  {
    name: 'exec',
    about: 'a command returns its exit code, stdout and stderr, with the env and cwd it was given',
    needs: ['commands'],
    run: async (ctx) => {
      const s = await ctx.sandbox();
      const r = await s.exec('echo out; echo err >&2; echo "$GREETING from $(pwd)"; exit 3', {
        env: { GREETING: 'hi' },
        cwd: '/tmp',
      });
      expect(r.exitCode === 3 && !r.timedOut, `exit ${r.exitCode}, timedOut ${r.timedOut} (want 3, false)`);
      expect(r.stdout.text === 'out\nhi from /tmp\n', `stdout ${JSON.stringify(r.stdout.text)}`);
      expect(r.stderr.text === 'err\n', `stderr ${JSON.stringify(r.stderr.text)}`);
      const argv = await s.exec(['printf', '%s|', 'a b', '$HOME']);
      expect(argv.stdout.text === 'a b|$HOME|', `an argv array was re-parsed: ${JSON.stringify(argv.stdout.text)}`);
    },
  },
  {
    name: 'files-in-out',
    about: 'files put, copied in and copied out arrive whole; a missing file reads as null',
    needs: [],
    run: async (ctx) => {
      const s = await ctx.sandbox();
      const src = await ctx.tempDir();
      await mkdir(path.join(src, 'sub'));
      await writeFile(path.join(src, 'sub', 'a.txt'), 'alpha');
      await s.copyIn(src, '/data/in');
      await s.putFiles([{ path: '/data/out/x.txt', content: 'x' }]);
      expect(
        (await s.readFile('/data/in/sub/a.txt', 100))?.toString() === 'alpha',
        'a copied-in file does not read back',
      );
      expect((await s.readFile('/data/in/sub/a.txt', 2))?.toString() === 'al', 'readFile passed its byte limit');
      expect((await s.readFile('/data/absent', 100)) === null, 'a missing file does not read as null');
      const out = await ctx.tempDir();
      await s.copyOut('/data/out', out);
      expect(
        (await ifMissing(readFile(path.join(out, 'x.txt'), 'utf8'), null)) === 'x',
        'a put file was not copied out',
      );
    },
  },
  {
    name: 'timeout',
    about: "a timeout kills the command's whole process group and still returns its output so far",
    needs: ['commands'],
    run: async (ctx) => {
      const s = await ctx.sandbox();
      // Bounded here too: a backend that ignores the timeout fails the check instead of hanging it.
      const bound = AbortSignal.timeout(10_000);
      const r = await s
        .exec('echo before; sleep 300 & sleep 300; echo never', { timeoutSec: 1, signal: bound })
        .catch((err: unknown) => {
          expect(!bound.aborted, 'the command was still running 10 s after its 1 s timeout');
          throw err;
        });
      expect(r.timedOut && r.exitCode === null, `timedOut ${r.timedOut}, exit ${r.exitCode} (want true, null)`);
      expect(r.stdout.text === 'before\n', `output so far lost: ${JSON.stringify(r.stdout.text)}`);
      const left = await s.exec(
        'for p in /proc/[0-9]*; do tr "\\0" " " < $p/cmdline 2>/dev/null; echo; done | grep -c "^sleep 300" || true',
      );
      expect(
        left.stdout.text.trim() === '0',
        `${left.stdout.text.trim()} process(es) of the group outlived the timeout`,
      );
    },
  },
  {
    name: 'output-bounded',
    about: 'a flood of output is kept bounded: head and tail, the rest counted',
    needs: ['commands'],
    run: async (ctx) => {
      const s = await ctx.sandbox();
      const r = await s.exec('head -c 5000000 /dev/zero | tr "\\0" x; echo END', { maxOutputBytes: 65536 });
      expect(r.stdout.totalBytes === 5000004, `totalBytes ${r.stdout.totalBytes}`);
      expect(
        r.stdout.text.length < 70_000 && r.stdout.text.endsWith('xEND\n'),
        `kept ${r.stdout.text.length} characters, tail ${JSON.stringify(r.stdout.text.slice(-5))}`,
      );
    },
  },
  {
    name: 'network-isolation',
    about: 'a sandbox started on no network has no interface but loopback',
    needs: ['commands', 'networkIsolation'],
    run: async (ctx) => {
      const s = await ctx.sandbox();
      const r = await s.exec('tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " "');
      expect(r.exitCode === 0 && r.stdout.text.trim() === 'lo', `interfaces: ${JSON.stringify(r.stdout.text.trim())}`);
    },
  },
];
