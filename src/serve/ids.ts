import path from 'node:path';
import { z } from 'zod';

/**
 * Identifiers a client gives or uses (episode_id, the trainer's session_id, a session in a URL) are
 * names, never paths: a letter or digit, then up to 127 letters, digits, dots, dashes or
 * underscores. "." and ".." cannot match (they do not start with a letter or digit), nor can a
 * slash, a backslash, a NUL or an empty string.
 */
export const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
export const ID_RULE = 'a letter or digit, then up to 127 letters, digits, ".", "-" or "_"';

export function isSafeId(id: string): boolean {
  return ID_PATTERN.test(id);
}

export const SafeId = z.string().regex(ID_PATTERN, `must be ${ID_RULE}`);

/**
 * The folder `<parent>/<id>`, refused unless it is a direct child of parent: the only folders the
 * server writes, empties or removes are ones it names this way.
 */
export function childDir(parent: string, id: string): string {
  const dir = path.resolve(parent, id);
  if (!isSafeId(id) || path.dirname(dir) !== path.resolve(parent))
    throw new Error(`"${id}" is not a name the server makes folders for (${ID_RULE})`);
  return dir;
}
