import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, it } from 'node:test';
import { ROOT, tempDir } from './helpers.js';

/** node's own TAP for a test file with this body (the real reporter, not a hand-written sample). */
async function tapOf(dir: string, name: string, body: string): Promise<string> {
  const file = path.join(dir, `${name}.test.mjs`);
  await writeFile(file, `import { describe, it, test } from 'node:test';\n${body}`);
  // Without the runner's NODE_TEST_CONTEXT (set in this process by node --test), which would make
  // the child report to a parent runner in its own protocol instead of printing TAP.
  const env = { ...process.env, NODE_TEST_CONTEXT: undefined };
  const r = spawnSync(process.execPath, ['--test', '--test-reporter=tap', file], { encoding: 'utf8', env });
  assert.equal(r.status, 0, r.stderr);
  const log = path.join(dir, `${name}.tap`);
  await writeFile(log, r.stdout);
  return log;
}

const count = (...logs: string[]) =>
  spawnSync(process.execPath, [path.join(ROOT, 'scripts', 'count-behaviours.mjs'), ...logs], { encoding: 'utf8' });

describe('scripts/count-behaviours.mjs', () => {
  it('counts leaf tests once per name whatever the label, never a suite or a parent, and lists what a change dropped', async () => {
    const dir = await tempDir();
    const before = await tapOf(
      dir,
      'before',
      [
        "describe('a suite', () => {",
        "  for (const via of ['helper shell', 'engine exec']) it(`reads a file [docker, ${via}]`, () => {});",
        "  it('writes a file', () => {});",
        '});',
        "test('a parent', async (t) => {",
        "  await t.test('first child', () => {});",
        "  await t.test('second child', () => {});",
        '});',
        "it('not yet', { skip: true }, () => {});",
        '',
      ].join('\n'),
    );
    const after = await tapOf(
      dir,
      'after',
      [
        "describe('a suite', () => {",
        "  it('reads a file [docker, helper shell]', () => {});",
        "  it('writes a file', () => {});",
        "  it('lists a folder', () => {});",
        '});',
        '',
      ].join('\n'),
    );
    const one = count(before);
    assert.equal(one.status, 0, one.stderr);
    // reads a file (twice), writes a file, first child, second child, not yet: 5 names, 6 runs.
    assert.equal(one.stdout, `${before}: 5 distinct behaviours in 6 leaf runs\n`);

    const two = count(before, after);
    assert.equal(two.status, 0, two.stderr);
    assert.deepEqual(two.stdout.trim().split('\n'), [
      `${before}: 5 distinct behaviours in 6 leaf runs`,
      `${after}: 3 distinct behaviours in 3 leaf runs`,
      '- first child',
      '- not yet',
      '- second child',
      '+ lists a folder',
    ]);
  });

  it('names a log it cannot read', () => {
    const r = count('/nonexistent/run.tap');
    assert.equal(r.status, 2);
    assert.match(r.stderr, /^\/nonexistent\/run\.tap: ENOENT/);
  });
});
