/** Quotes a string for a POSIX shell: single quotes, with embedded ones closed and escaped. */
export function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}
