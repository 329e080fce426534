import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readdir, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { withFileLock } from '../src/util/lock.js';
import { ROOT } from './helpers.js';

describe('machine-wide lock', () => {
  it('makes a second process wait until the first releases it', async () => {
    const name = `test-${process.pid}-${Date.now()}`;
    const script = `import('${path.join(ROOT, 'dist/src/util/lock.js')}').then(({ withFileLock }) =>
      withFileLock('${name}', async () => { console.log('held'); await new Promise((r) => setTimeout(r, 1500)); }))`;
    const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    await new Promise<void>((resolve) => child.stdout.once('data', () => resolve()));
    const started = Date.now();
    let childDone = false;
    child.on('exit', () => (childDone = true));
    await withFileLock(name, async () => {
      assert.ok(childDone || Date.now() - started >= 1000, 'entered only after the other process left');
    });
    assert.ok(Date.now() - started >= 1000);
  });

  it('takes over a lock whose owner died', async () => {
    const name = `stale-${process.pid}-${Date.now()}`;
    const dead = spawn(process.execPath, ['-e', '0']);
    await new Promise((r) => dead.on('exit', r));
    await writeFile(path.join(tmpdir(), `termgrade-${name}.lock`), String(dead.pid));
    const started = Date.now();
    assert.equal(await withFileLock(name, async () => 'got it'), 'got it');
    assert.ok(Date.now() - started < 1000);
  });

  it('stops waiting when cancelled', async () => {
    const name = `cancel-${process.pid}-${Date.now()}`;
    await withFileLock(name, async () => {
      const ctl = new AbortController();
      setTimeout(() => ctl.abort(), 300);
      await assert.rejects(
        withFileLock(name, async () => 1, ctl.signal),
        /cancelled/,
      );
    });
  });
});

describe('machine-wide lock, robustness', () => {
  it('takes over an old lock file that names no owner (a process killed before writing it)', async () => {
    const name = `empty-${process.pid}-${Date.now()}`;
    const file = path.join(tmpdir(), `termgrade-${name}.lock`);
    await writeFile(file, '');
    const past = new Date(Date.now() - 60_000);
    await utimes(file, past, past);
    assert.equal(await withFileLock(name, async () => 'taken'), 'taken');
  });

  it('never leaves a lock file behind once released', async () => {
    const name = `clean-${process.pid}-${Date.now()}`;
    await withFileLock(name, async () => undefined);
    const left = (await readdir(tmpdir())).filter((f) => f.startsWith(`termgrade-${name}`));
    assert.deepEqual(left, []);
  });
});
