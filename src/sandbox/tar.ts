import { createWriteStream } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import tarFs from 'tar-fs';
import tarStream from 'tar-stream';
import type { FileEntry } from './sandbox.js';

/** A tar of `hostDir`'s contents with every entry placed under `destDir` (relative to /), owned by root. */
export function packDir(hostDir: string, destDir: string): Readable {
  const prefix = destDir.replace(/^\/+|\/+$/g, '');
  return tarFs.pack(hostDir, {
    map: (header) => {
      const name = header.name === '.' ? '' : header.name;
      header.name = prefix ? (name ? `${prefix}/${name}` : prefix) : name;
      header.uid = 0;
      header.gid = 0;
      return header;
    },
  }) as unknown as Readable;
}

/**
 * A build context: `hostDir`'s contents with some files replaced or added (a rewritten Dockerfile,
 * generated files), streamed without copying the folder.
 */
export function packContext(hostDir: string, overrides: Array<{ path: string; content: string }>): Readable {
  const replaced = new Set(overrides.map((o) => o.path));
  return tarFs.pack(hostDir, {
    ignore: (name) => replaced.has(path.relative(hostDir, name).split(path.sep).join('/')),
    map: (header) => {
      header.uid = 0;
      header.gid = 0;
      return header;
    },
    finalize: false,
    finish: (pack) => {
      for (const o of overrides) pack.entry({ name: o.path, mode: 0o644, uid: 0, gid: 0 }, o.content);
      pack.finalize();
    },
  }) as unknown as Readable;
}

/** A tar (to extract at /) of in-memory files and folders, parents included. */
export async function packEntries(entries: FileEntry[]): Promise<Buffer> {
  const pack = tarStream.pack();
  const chunks: Buffer[] = [];
  pack.on('data', (c: unknown) => {
    chunks.push(c as Buffer);
  });
  const done = new Promise<void>((resolve, reject) => {
    pack.on('end', resolve);
    pack.on('error', reject);
  });
  const dirs = new Set<string>();
  const addDir = (dir: string): void => {
    if (dir === '' || dirs.has(dir)) return;
    addDir(path.posix.dirname(dir) === '.' ? '' : path.posix.dirname(dir));
    dirs.add(dir);
    pack.entry({ name: `${dir}/`, type: 'directory', mode: 0o755, uid: 0, gid: 0 });
  };
  for (const e of entries) {
    const rel = path.posix.normalize(e.path).replace(/^\/+/, '').replace(/\/+$/, '');
    if (e.content === undefined) {
      addDir(rel);
      continue;
    }
    const parent = path.posix.dirname(rel);
    addDir(parent === '.' ? '' : parent);
    const body = typeof e.content === 'string' ? Buffer.from(e.content) : e.content;
    pack.entry({ name: rel, type: 'file', mode: e.mode ?? 0o644, uid: 0, gid: 0, size: body.length }, body);
  }
  pack.finalize();
  await done;
  return Buffer.concat(chunks);
}

/**
 * Extracts a tar stream (as the engine returns for a folder: one top-level entry, its name) into
 * `hostDir`, dropping that first component. Only plain files and folders are written, never links,
 * and never outside `hostDir`; after `maxBytes` of content the rest is skipped.
 */
export async function extractInto(
  tar: Readable,
  hostDir: string,
  maxBytes: number,
): Promise<{ bytes: number; skipped: number }> {
  const extract = tarStream.extract();
  let bytes = 0;
  let skipped = 0;
  const root = path.resolve(hostDir);
  extract.on('entry', (header, stream, next) => {
    // An archive that ends early errors its open entry as well as the extract: the pipeline below
    // rejects with it, so the entry's own error (raised before a branch below listens) is expected.
    stream.on('error', () => undefined);
    const parts = header.name.split('/').filter((p) => p && p !== '.');
    const rel = parts.slice(1).join('/');
    const target = path.resolve(root, rel);
    const safe = rel !== '' && !rel.split('/').includes('..') && target.startsWith(root + path.sep);
    const finish = (err?: unknown): void => (err ? next(err as Error) : next());
    if (!safe || (header.type !== 'file' && header.type !== 'directory')) {
      stream.resume();
      stream.on('end', () => finish());
      return;
    }
    if (header.type === 'directory') {
      mkdir(target, { recursive: true }).then(() => {
        stream.resume();
        stream.on('end', () => finish());
      }, finish);
      return;
    }
    const size = header.size ?? 0;
    if (bytes + size > maxBytes) {
      skipped += 1;
      stream.resume();
      stream.on('end', () => finish());
      return;
    }
    bytes += size;
    mkdir(path.dirname(target), { recursive: true })
      .then(() => pipeline(stream, createWriteStream(target)))
      .then(() => finish(), finish);
  });
  await pipeline(tar, extract);
  return { bytes, skipped };
}

/** The first regular file of a tar stream (the engine's archive of one path), at most `maxBytes`. */
export async function firstFile(tar: Readable, maxBytes: number): Promise<Buffer | null> {
  const extract = tarStream.extract();
  let found: Buffer | null = null;
  extract.on('entry', (header, stream, next) => {
    // As in extractInto: an early end errors the entry too, and the pipeline rejects with it.
    stream.on('error', () => undefined);
    if (found !== null || header.type !== 'file') {
      stream.resume();
      stream.on('end', () => next());
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    stream.on('data', (data: unknown) => {
      const c = data as Buffer;
      if (size < maxBytes) chunks.push(c.subarray(0, maxBytes - size));
      size += c.length;
    });
    stream.on('end', () => {
      found = Buffer.concat(chunks);
      next();
    });
  });
  await pipeline(tar, extract);
  return found;
}
