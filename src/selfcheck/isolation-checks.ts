import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { expect, type SelfCheck } from './context.js';

/** Snapshots, verifiers and the end of a sandbox's life. */
export const ISOLATION_CHECKS: SelfCheck[] = [
  {
    name: 'snapshot-frozen',
    about: 'a snapshot keeps the files of its moment: later writes to the sandbox do not reach it',
    needs: [],
    run: async (ctx) => {
      const s = await ctx.sandbox();
      await s.putFiles([{ path: '/app/state', content: 'before\n' }]);
      const snap = await s.snapshot();
      try {
        await s.putFiles([
          { path: '/app/state', content: 'after\n' },
          { path: '/app/later', content: 'later\n' },
        ]);
        expect(
          (await snap.readFile('/app/state', 100))?.toString() === 'before\n',
          'the snapshot reads the live file, not the frozen one',
        );
        expect((await snap.readFile('/app/later', 100)) === null, 'a file written after the snapshot is in it');
      } finally {
        await snap.discard();
      }
    },
  },
  {
    name: 'verifier-isolation',
    about: "a verifier starts from the snapshot with exactly the tests, and its files are not the agent's",
    needs: [],
    run: async (ctx) => {
      const s = await ctx.sandbox();
      await s.putFiles([
        { path: '/app/state', content: 'before\n' },
        { path: '/tests/planted', content: 'x' },
        { path: '/logs/verifier/reward.txt', content: '1\n' },
      ]);
      const snap = await s.snapshot();
      try {
        await s.putFiles([{ path: '/app/state', content: 'after\n' }]);
        const tests = await ctx.tempDir();
        await writeFile(path.join(tests, 'test.sh'), 'echo graded\n');
        const v = await snap.startVerifier({ tests: [tests] });
        try {
          expect(
            (await v.readFile('/app/state', 100))?.toString() === 'before\n',
            'the verifier sees the live files, not the snapshot',
          );
          expect(
            (await v.readFile('/tests/planted', 100)) === null,
            'a file the agent left in /tests reached the verifier',
          );
          expect(
            (await v.readFile('/tests/test.sh', 100))?.toString() === 'echo graded\n',
            'the tests were not copied in',
          );
          expect(
            (await v.readFile('/logs/verifier/reward.txt', 100)) === null,
            'a reward the agent planted reached the verifier',
          );
          await v.putFiles([{ path: '/logs/verifier/reward.txt', content: '0\n' }]);
          expect(
            (await s.readFile('/logs/verifier/reward.txt', 100))?.toString() === '1\n',
            "the verifier writes into the agent's files",
          );
        } finally {
          await v.close();
        }
      } finally {
        await snap.discard();
      }
    },
  },
  {
    name: 'cleanup',
    about: 'close is idempotent (twice at once, then again) and a closed sandbox runs nothing',
    needs: [],
    run: async (ctx) => {
      const s = await ctx.sandbox();
      await Promise.all([s.close(), s.close()]);
      await s.close();
      const ran = await s.putFiles([{ path: '/app/after-close', content: 'x' }]).then(
        () => s.readFile('/app/after-close', 10).then((b) => b !== null),
        () => false, // refused: what a closed sandbox must do
      );
      expect(!ran, 'a closed sandbox still takes and keeps files');
      expect(
        await s.exec('true').then(
          () => false,
          () => true, // refused: what a closed sandbox must do
        ),
        'a closed sandbox still runs commands',
      );
    },
  },
  {
    name: 'fork',
    about:
      "a fork's child starts from the parent's files, neither sees the other's later writes, and what was not carried is said",
    needs: ['fork', 'commands'],
    run: async (ctx) => {
      const s = await ctx.sandbox();
      expect(s.fork !== undefined, 'the backend reports the fork capability, but its sandbox has no fork');
      await s.putFiles([{ path: '/app/state', content: 'parent\n' }]);
      await s.exec('sleep 300 > /dev/null 2>&1 &');
      // The shell returns once it has forked; its child is sleep only after its own exec, which a
      // loaded machine delays: waited for, so the fork is held to a process that surely ran.
      const seen = await s.exec(
        "for i in $(seq 100); do cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' '\\n' | grep -qx 'sleep' && exit 0; sleep 0.1; done; exit 1",
      );
      expect(seen.exitCode === 0, 'a background `sleep 300` never started');
      // One child: a pool of capacity 2 holds the parent and it.
      const made = await s.fork(1);
      try {
        expect(made.children.length === 1, `a fork of 1 made ${made.children.length}`);
        const child = made.children[0]!;
        expect(child.id !== s.id, 'the child is not a sandbox of its own');
        expect(
          (await child.readFile('/app/state', 100))?.toString() === 'parent\n',
          "the child lacks the parent's file",
        );
        await child.putFiles([{ path: '/app/state', content: 'child\n' }]);
        await s.putFiles([{ path: '/app/later', content: 'later\n' }]);
        expect(
          (await s.readFile('/app/state', 100))?.toString() === 'parent\n',
          "the child's write reached the parent",
        );
        expect((await child.readFile('/app/later', 100)) === null, "the parent's later write reached the child");
        expect(
          made.notCarried.some((c) => c.startsWith('sleep 300')),
          `a process the fork did not carry is not said (not carried: ${JSON.stringify(made.notCarried)})`,
        );
        const running = await child.exec("cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' ' | grep -c 'sleep 30[0]'");
        expect(running.stdout.text.trim() === '0', 'a process said not carried runs in the child');
      } finally {
        await Promise.all(made.children.map((c) => c.close()));
      }
    },
  },
];
