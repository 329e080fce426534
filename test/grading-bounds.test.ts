import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { nameText } from '../src/sandbox/names.js';
import { loadTask } from '../src/task/load.js';
import { accountingOf } from '../src/trial/accounting.js';
import { runTrial } from '../src/trial/run.js';
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

describe('names are bytes, shown as text', () => {
  it('keeps UTF-8 names as they are and escapes the bytes that are not UTF-8 (and \\ in such a name)', () => {
    assert.equal(nameText(Buffer.from('caf\u00e9 \\ x')), 'caf\u00e9 \\ x');
    assert.equal(nameText(Buffer.from([0xff, 0xfe])), '\\xff\\xfe');
    // A valid character beside invalid bytes stays itself; a cut-short one is escaped byte by byte.
    assert.equal(nameText(Buffer.concat([Buffer.from('\u00e9'), Buffer.from([0xc3, 0x5c, 0x41])])), '\u00e9\\xc3\\\\A');
  });
});

onEachDockerExecPath((label, provider) => {
  const trial = async (script: string, files: Record<string, string> = {}): Promise<TrialResult> => {
    const task = await loadTask(await trivialTask(files));
    return runTrial({ task, agent: scriptAgent(script), provider: provider(), outDir: await tempDir() });
  };

  describe(`after the agent's turn, the sandbox's content is never infrastructure (${label})`, () => {
    it("a folder whose name is not valid UTF-8 is scanned like any other: the grade is the tests' (0 unsolved, 1 solved)", async () => {
      const unsolved = await trial(ODD_NAME);
      gradedZero(unsolved);
      assert.equal(unsolved.error, null, JSON.stringify(unsolved.errors));
      const solved = await trial(`${ODD_NAME}; echo hello > /app/out.txt`);
      assert.equal(solved.reward, 1, JSON.stringify(solved.errors));
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
});
