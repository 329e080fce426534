import { readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';

/** Whether anything exists at `p`. */
export async function exists(p: string): Promise<boolean> {
  return (await stat(p).catch(() => null)) !== null;
}

/** A file's text, or null when it is not there (or not readable): for optional files. */
export async function readTextIfThere(file: string): Promise<string | null> {
  try {
    return await readFile(file, 'utf8');
  } catch {
    return null;
  }
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
    return null;
  }
}
