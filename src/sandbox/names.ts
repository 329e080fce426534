/**
 * File names are bytes: Linux allows any but `/` and NUL, and an agent can make a name that is not
 * valid UTF-8 (`mkdir "$(printf '\377\376')"`). Code that walks a sandbox's files keeps names as
 * Buffers (a name decoded to a string and encoded back is another name: the file is not found by
 * it) and turns them into text only to report them, with this.
 */
const strict = new TextDecoder('utf-8', { fatal: true });

function decodes(bytes: Buffer): boolean {
  try {
    strict.decode(bytes);
    return true;
  } catch {
    // The one failure decode() has: not valid UTF-8.
    return false;
  }
}

/**
 * A name (or a path) as text: itself when it is valid UTF-8; else its valid characters kept, each
 * byte that is not part of one written `\xHH`, and `\` written `\\` (so the escaped form reads
 * back to one byte sequence only). Such a text names no file: it is for reports and rules.
 */
export function nameText(bytes: Buffer): string {
  if (decodes(bytes)) return bytes.toString('utf8');
  let out = '';
  for (let i = 0; i < bytes.length;) {
    // The character starting here: the shortest prefix that decodes (one character, 1 to 4 bytes;
    // a lead byte without its continuation bytes does not decode).
    let len = 0;
    for (let n = 1; n <= Math.min(4, bytes.length - i) && len === 0; n++)
      if (decodes(bytes.subarray(i, i + n))) len = n;
    if (len === 0) {
      out += `\\x${bytes[i]!.toString(16).padStart(2, '0')}`;
      i += 1;
    } else {
      const ch = bytes.subarray(i, i + len).toString('utf8');
      out += ch === '\\' ? '\\\\' : ch;
      i += len;
    }
  }
  return out;
}
