import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';

/** Writes a benchmark's task folder from relative path -> content (everything executable). */
export async function writeTask(dir: string, files: Record<string, string>): Promise<void> {
  for (const [rel, text] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(dir, rel)), { recursive: true });
    await writeFile(path.join(dir, rel), text, { mode: 0o755 });
  }
}
