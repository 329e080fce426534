import assert from 'node:assert/strict';
import { readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { describe, it } from 'node:test';
import { nameText } from '../src/sandbox/names.js';
import type { SnapshotBounds } from '../src/sandbox/sandbox.js';
import { loadTask } from '../src/task/load.js';
import { accountingOf } from '../src/trial/accounting.js';
import { runTrial } from '../src/trial/run.js';
import { findTampering } from '../src/verifier/tampering.js';
import { TEST_OUTPUT_HEAD_BYTES, TEST_OUTPUT_TAIL_BYTES } from '../src/verifier/test-output.js';
import type { TrialResult } from '../src/trial/schema.js';
import { onEachDockerExecPath, tempDir, trivialTask } from './helpers.js';
import { scriptAgent } from './support/attack-suite.js';

/** Graded 0, counted as graded (never "no reward": an infrastructure class would drop it from the count). */
function gradedZero(r: TrialResult): void {
  assert.equal(r.reward, 0, JSON.stringify(r.errors));
  assert.equal(accountingOf(r.reward, r.error?.class), 'graded', JSON.stringify(r.errors));
}

/** A folder (with a file in it) whose name is the bytes ff fe: not valid UTF-8 (sh is dash here: no $'...'). */
const ODD_NAME = `d="/app/$(printf '\\377\\376')"; mkdir "$d" && touch "$d/f"`;

describe('the programs the capped test output runs are watched', () => {
  it('a mkfifo added ahead on the system PATH (/usr/sbin before /usr/bin) is tampering', () => {
    const found = findTampering([{ path: '/usr/sbin/mkfifo', kind: 'added' }]);
    assert.deepEqual(
      found.map((t) => t.path),
      ['/usr/sbin/mkfifo'],
    );
  });
});

describe('names are bytes, shown as text', () => {
  it('keeps UTF-8 names as they are and escapes the bytes that are not UTF-8 (and \\ in such a name)', () => {
    assert.equal(nameText(Buffer.from('caf\u00e9 \\ x')), 'caf\u00e9 \\ x');
    assert.equal(nameText(Buffer.from([0xff, 0xfe])), '\\xff\\xfe');
    // A valid character beside invalid bytes stays itself; a cut-short one is escaped byte by byte.
    assert.equal(nameText(Buffer.concat([Buffer.from('\u00e9'), Buffer.from([0xc3, 0x5c, 0x41])])), '\u00e9\\xc3\\\\A');
  });
});

// In full on both paths: the snapshot's reads (the layer, or the engine's change list and archive) differ.
onEachDockerExecPath('full', (label, provider) => {
  const trial = async (
    script: string,
    files: Record<string, string> = {},
    gradingBounds?: SnapshotBounds,
    outDir?: string,
  ): Promise<TrialResult> => {
    const task = await loadTask(await trivialTask(files));
    return runTrial({
      task,
      agent: scriptAgent(script, 300),
      provider: provider(),
      outDir: outDir ?? (await tempDir()),
      gradingBounds,
    });
  };
  const long = { 'task.toml': '[task]\nname = "bounds"\n[verifier]\ntimeout_sec = 60\n[agent]\ntimeout_sec = 300\n' };

  describe(`after the agent's turn, the sandbox's content is never infrastructure (${label})`, () => {
    it("a folder whose name is not valid UTF-8 is scanned like any other: the grade is the tests' (0 unsolved, 1 solved)", async () => {
      const unsolved = await trial(ODD_NAME);
      gradedZero(unsolved);
      assert.equal(unsolved.error, null, JSON.stringify(unsolved.errors));
      const solved = await trial(`${ODD_NAME}; echo hello > /app/out.txt`);
      assert.equal(solved.reward, 1, JSON.stringify(solved.errors));
    });

    it('a tree deeper than a path can name (5,000 bytes) cannot be taken for grading: graded 0 (grading_blocked, the reason given), not a crash', async () => {
      const r = await trial(
        `n=$(printf '%0200d' 0); i=0; while [ $i -lt 25 ]; do mkdir $n && cd $n; i=$((i+1)); done; touch f; echo hello > /app/out.txt`,
      );
      gradedZero(r);
      // The copy (helper shell) or the engine's listing (engine exec) meets the long path first.
      assert.equal(r.error?.class, 'grading_blocked', JSON.stringify(r.errors));
      assert.match(r.error!.message, /name too long/i);
    });

    it('a log file whose name is not UTF-8 is copied out under its escaped name, and the grade stands', async () => {
      const out = await tempDir();
      const r = await trial(
        'echo hello > /app/out.txt',
        {
          'tests/test.sh':
            '#!/bin/bash\necho odd > "/logs/verifier/$(printf \'\\377\')x.log"\necho 1 > /logs/verifier/reward.txt\n',
        },
        undefined,
        out,
      );
      assert.equal(r.reward, 1, JSON.stringify(r.errors));
      const names = await readdir(path.join(out, r.trialId, 'verifier'));
      // Read from the layer here (helper shell): escaped; through the engine's archive (engine exec): U+FFFD.
      const odd = label.endsWith('helper shell') ? '\\xffx.log' : '\ufffdx.log';
      assert.ok(names.includes(odd), JSON.stringify(names));
      assert.equal(await readFile(path.join(out, r.trialId, 'verifier', odd), 'utf8'), 'odd\n');
    });

    it('a .pth file whose name is not UTF-8 is still judged (it cannot be read by its name: tampering), its path shown escaped', async () => {
      const r = await trial(
        `mkdir -p /usr/lib/python3/dist-packages && echo 'import os' > "/usr/lib/python3/dist-packages/$(printf 'a\\377\\\\')b.pth"; echo hello > /app/out.txt`,
      );
      gradedZero(r);
      assert.equal(r.error?.class, 'tampering');
      const found = r.tampering.map((t) => t.path);
      assert.equal(found.length, 1, JSON.stringify(found));
      // The layer is read here (helper shell): the name's bytes shown as they are; through the
      // engine's change list (engine exec) the engine has already replaced them with U+FFFD.
      if (label.endsWith('helper shell')) assert.equal(found[0], '/usr/lib/python3/dist-packages/a\\xff\\\\b.pth');
      else assert.match(found[0]!, /^\/usr\/lib\/python3\/dist-packages\/a.*b\.pth$/);
    });
  });

  describe(`grading is bounded on the host (${label})`, () => {
    it("a flood of files past the scan's limit is refused before it is copied: graded 0 (tampering) in seconds", async () => {
      // The limit scaled down (1,000 paths for 200,000) so that the flood is small enough to make
      // quickly: ten times the limit; the copy it would have cost is what the bound saves.
      const r = await trial(
        'mkdir -p /app/flood && cd /app/flood && seq 1 10000 | xargs touch; echo hello > /app/out.txt',
        long,
        { maxChanges: 1000 },
      );
      gradedZero(r);
      assert.equal(r.error?.class, 'tampering', JSON.stringify(r.errors));
      assert.match(r.tampering[0]!.why, /more than 1000 changed paths/);
      const took = r.phases.verification!.durationMs;
      assert.ok(took < 15_000, `grading took ${took} ms`);
    });

    it('bytes written in the last second of the turn, past the disk limit, are not copied: graded 0 (disk_limit)', async () => {
      // The watch polls every 5 s: a turn that ends right after the write is never seen by it.
      const r = await trial('echo hello > /app/out.txt; head -c 300000000 /dev/zero > /app/big', {
        'task.toml': '[task]\nname = "disk"\n[environment]\nstorage_mb = 100\n',
      });
      gradedZero(r);
      assert.equal(r.error?.class, 'disk_limit', JSON.stringify(r.errors));
      // Found at grading (the watch may or may not have seen the write during the turn).
      const atGrading = r.errors.find((e) => e.phase === 'verification');
      assert.equal(atGrading?.class, 'disk_limit', JSON.stringify(r.errors));
      assert.match(atGrading.message, /over its disk limit of 100 MB/);
    });

    // Once, through the helper shell: the cap is the verifier command's own (in the container, the
    // same on both paths; only the capped log is copied out). On engine exec the 3 GiB would only
    // time the engine's archive of the sparse file (20 s more), which the snapshot tests cover.
    const capOnce = label.endsWith('helper shell')
      ? false
      : 'the cap is in the verifier command, the same on both paths';
    it(
      "tests that print the agent's 3 GiB sparse file write 9 MiB of it: the output is capped in the verifier, the cut said, the grade the tests'",
      { skip: capOnce },
      async () => {
        const out = await tempDir();
        const r = await trial(
          'truncate -s 3G /app/big',
          {
            'tests/test.sh':
              '#!/bin/bash\necho first line\ncat /app/big\necho last line\necho 0 > /logs/verifier/reward.txt\nexit 3\n',
            'task.toml': '[task]\nname = "print"\n[verifier]\ntimeout_sec = 120\n',
          },
          undefined,
          out,
        );
        gradedZero(r);
        assert.equal(r.error, null, JSON.stringify(r.errors));
        const logged = path.join(out, r.trialId, 'verifier', 'test-stdout.txt');
        const size = (await stat(logged)).size;
        assert.ok(
          size <= TEST_OUTPUT_HEAD_BYTES + TEST_OUTPUT_TAIL_BYTES + 1024,
          `test-stdout.txt holds ${size} bytes`,
        );
        const text = await readFile(logged, 'latin1');
        assert.ok(text.startsWith('first line\n'));
        assert.match(text, /\[termgrade: test output cut: its first 8388608 bytes above/);
        assert.ok(text.endsWith('last line\n'), 'the end of the output (where a summary is) is kept');
      },
    );

    // Only where the copy is this machine's (helper shell): the engine's commit cannot be stopped midway.
    const notHere = label.endsWith('helper shell') ? false : "the engine's commit cannot be stopped midway";
    it(
      'a copy that passes its time bound is stopped: graded 0 (grading_blocked), the reason given',
      { skip: notHere },
      async () => {
        const r = await trial(
          'mkdir -p /app/many && cd /app/many && seq 1 20000 | xargs touch; echo hello > /app/out.txt',
          long,
          { copyTimeoutSec: 0.2 },
        );
        gradedZero(r);
        assert.equal(r.error?.class, 'grading_blocked', JSON.stringify(r.errors));
        assert.match(r.error!.message, /did not finish within 0.2 s/);
      },
    );
  });
});
