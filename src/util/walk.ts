import { createHash } from 'node:crypto';
import { lstat, readdir, readFile, readlink, realpath } from 'node:fs/promises';
import path from 'node:path';
import { errnoOf, isMissing } from './errors.js';

export interface WalkedFile {
  /** Path relative to the walked root, with forward slashes. */
  rel: string;
  abs: string;
  kind: 'file' | 'dir' | 'symlink';
  mode: number;
}

/** Every entry below `root`, sorted by relative path, symlinks reported (not followed). */
export async function walk(root: string): Promise<WalkedFile[]> {
  const out: WalkedFile[] = [];
  async function visit(dir: string): Promise<void> {
    const entries = await readdir(dir, { withFileTypes: true });
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const e of entries) {
      const abs = path.join(dir, e.name);
      const st = await lstat(abs);
      const rel = path.relative(root, abs).split(path.sep).join('/');
      if (st.isSymbolicLink()) out.push({ rel, abs, kind: 'symlink', mode: st.mode });
      else if (st.isDirectory()) {
        out.push({ rel, abs, kind: 'dir', mode: st.mode });
        await visit(abs);
      } else if (st.isFile()) out.push({ rel, abs, kind: 'file', mode: st.mode });
    }
  }
  await visit(root);
  return out;
}

/** True when `child` is `parent` or lies inside it (both absolute, already resolved). */
export function isInside(parent: string, child: string): boolean {
  const rel = path.relative(parent, child);
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
}

/** Resolves a symlink's final target; null when it dangles (or loops); any other failure is thrown. */
export async function symlinkTarget(abs: string): Promise<string | null> {
  try {
    return await realpath(abs);
  } catch (err) {
    if (isMissing(err) || errnoOf(err) === 'ELOOP') return null;
    throw err;
  }
}

/**
 * Content hash of a folder: relative paths, the executable bit, symlink targets and bytes.
 * Timestamps and owners are left out so a fresh clone hashes the same as a warm checkout.
 */
export async function hashTree(root: string, extra = ''): Promise<string> {
  const h = createHash('sha256');
  h.update(`termgrade-tree-v1\0${extra}\0`);
  for (const f of await walk(root)) {
    h.update(`${f.kind}\0${f.rel}\0${f.mode & 0o111 ? 'x' : '-'}\0`);
    if (f.kind === 'file') h.update(await readFile(f.abs));
    else if (f.kind === 'symlink') h.update(await readlink(f.abs));
    h.update('\0');
  }
  return h.digest('hex');
}
