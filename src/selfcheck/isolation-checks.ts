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
        () => false,
      );
      expect(!ran, 'a closed sandbox still takes and keeps files');
      expect(
        await s.exec('true').then(
          () => false,
          () => true,
        ),
        'a closed sandbox still runs commands',
      );
    },
  },
];
