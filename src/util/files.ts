import { existsSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { readdir, readFile, rename, rm, rmdir, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ifMissing } from './errors.js';

/**
 * Writes `text` to `file` whole: a reader sees the old file or the new one, never half of one. The
 * temporary name is unique per write, so two writers of the same file (two slots of one task saving
 * its admission record at once) cannot rename each other's temporary away.
 */
export async function writeFileAtomic(file: string, text: string): Promise<void> {
  const tmp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  await writeFile(tmp, text);
  await rename(tmp, file);
}

/** Whether anything exists at `p`. */
export async function exists(p: string): Promise<boolean> {
  return (await ifMissing(stat(p), null)) !== null;
}

/** A file's text, or null when it is not there: for optional files (one that cannot be read fails). */
export async function readTextIfThere(file: string): Promise<string | null> {
  return ifMissing(readFile(file, 'utf8'), null);
}

/** Every file called `name` below `dir`, at any depth (trial folders' result.json, say). */
export async function* filesNamed(dir: string, name: string): AsyncGenerator<string> {
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) yield* filesNamed(p, name);
    else if (e.name === name) yield p;
  }
}

/** A JSON file's value, or null when it is missing or not JSON (a trial folder's optional files). */
export async function readJsonIfThere(file: string): Promise<unknown> {
  const text = await readTextIfThere(file);
  try {
    return text === null ? null : JSON.parse(text);
  } catch {
    // Not JSON (a file cut short by a crash): the same as absent, as the doc says.
    return null;
  }
}

/** The outermost folder on the way to `dir` that does not exist yet (what making `dir` creates), or null when `dir` exists. */
export function outermostMissing(dir: string): string | null {
  let missing: string | null = null;
  for (let d = path.resolve(dir); !existsSync(d); d = path.dirname(d)) {
    missing = d;
    if (path.dirname(d) === d) break;
  }
  return missing;
}

/**
 * Undoes making `dir`: removes it with what it holds, then each parent up to `made` (from
 * outermostMissing, before `dir` was made) while it is empty, so a failed command leaves the
 * folders it created behind it as they were and never touches one another process filled meanwhile.
 */
export async function removeMade(dir: string, made: string): Promise<void> {
  await rm(dir, { recursive: true, force: true });
  const top = path.resolve(made);
  for (let d = path.dirname(path.resolve(dir)); d.length >= top.length && d.startsWith(top); d = path.dirname(d)) {
    if (
      !(await rmdir(d).then(
        () => true,
        // A folder that is not empty (it holds what others made) or already gone ends the walk.
        () => false,
      ))
    )
      break;
    if (d === top) break;
  }
}
