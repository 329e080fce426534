import { readFile } from 'node:fs/promises';
import { TermgradeError, readFailure } from '../util/errors.js';

/**
 * A file of task names (a split, a held-out list): one per line with # comments, or a JSON array.
 * `what` names the file's role in the error when it cannot be read.
 */
export async function readTaskList(file: string, what = 'task list'): Promise<Set<string>> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new TermgradeError('bad_input', `${file}: cannot read the ${what} (${readFailure(err)})`);
  }
  if (text.trim().startsWith('[')) {
    try {
      return new Set((JSON.parse(text) as unknown[]).map(String));
    } catch (err) {
      throw new TermgradeError(
        'bad_input',
        `${file}: the ${what} looks like JSON but is not: ${(err as Error).message}`,
      );
    }
  }
  return new Set(
    text
      .split('\n')
      .map((l) => l.replace(/#.*/, '').trim())
      .filter(Boolean),
  );
}
