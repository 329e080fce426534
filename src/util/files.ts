import { readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { ifMissing } from './errors.js';

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
