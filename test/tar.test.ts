import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';

/**
 * An archive that ends early (an engine's stream cut mid-file) errors the entry being read as well
 * as the extract. When the first entry is a file in a folder not yet made, extractInto is still
 * waiting on mkdir when that error comes; without a listener on the entry it was an uncaught
 * exception that ended the whole process (and failed every test of the file). Each case runs in a
 * child node, so such an exception shows as the child's exit and stderr, not as this file's.
 */
const TAR = fileURLToPath(new URL('../src/sandbox/tar.js', import.meta.url));

/** Runs `call` (an expression over `tar`, `archive` and `dir`) in a child; its rejection's message, or why not. */
function inChild(call: string): { status: number | null; stdout: string; stderr: string } {
  const script = `
    import { mkdtemp } from 'node:fs/promises';
    import { tmpdir } from 'node:os';
    import path from 'node:path';
    import { Readable } from 'node:stream';
    import tarStream from 'tar-stream';
    const tar = await import(${JSON.stringify(TAR)});
    // One file, 4 KiB, in a folder the archive never names: the first entry is the file.
    const pack = tarStream.pack();
    const chunks = [];
    pack.on('data', (c) => chunks.push(c));
    const ended = new Promise((resolve) => pack.on('end', resolve));
    pack.entry({ name: 'top/new/deeper/file.txt', size: 4096, mode: 0o644 }, Buffer.alloc(4096, 120));
    pack.finalize();
    await ended;
    // Cut after the header and 100 bytes of the file's 4096.
    const archive = () => Readable.from([Buffer.concat(chunks).subarray(0, 512 + 100)]);
    const dir = await mkdtemp(path.join(tmpdir(), 'termgrade-tar-'));
    try {
      await ${call};
      console.log(JSON.stringify({ resolved: true }));
    } catch (err) {
      console.log(JSON.stringify({ rejected: err.message }));
    }
    // Past the mkdir the entry waited on, and a few turns more: a late error would surface here.
    await new Promise((resolve) => setTimeout(resolve, 300));
  `;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
    cwd: fileURLToPath(new URL('..', import.meta.url)),
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('archive reads of an archive that ends early', () => {
  for (const [name, call] of [
    ['extractInto (the file waits on mkdir of its new folder)', 'tar.extractInto(archive(), dir, 1 << 20)'],
    ['firstFile', 'tar.firstFile(archive(), 1 << 20)'],
  ] as const)
    it(`${name} rejects with the archive's error, and nothing is thrown past it`, () => {
      const r = inChild(call);
      assert.equal(r.status, 0, `the child ended ${r.status}: an uncaught error?\n${r.stderr}`);
      assert.equal(r.stderr, '', 'no uncaught exception or unhandled rejection');
      assert.deepEqual(JSON.parse(r.stdout.trim()), { rejected: 'Unexpected end of data' });
    });
});
