/**
 * Replaces every occurrence of each secret (API keys) with a marker. Applied to everything a trial
 * writes and records, so a key echoed back in an error message or typed into a terminal never
 * lands on disk or in the store. A key is also looked for in the forms text gives it on its way:
 * JSON-escaped (once and twice: a JSON string inside JSON), URL-encoded, and base64.
 */
export type Scrub = (text: string) => string;

export const REDACTED = '[REDACTED]';

function forms(secret: string): string[] {
  const json = JSON.stringify(secret).slice(1, -1);
  const json2 = JSON.stringify(json).slice(1, -1);
  const url = encodeURIComponent(secret);
  const b64 = Buffer.from(secret).toString('base64').replace(/=+$/, '');
  return [...new Set([secret, json, json2, url, JSON.stringify(url).slice(1, -1), b64])];
}

export function makeScrub(secrets: Array<string | null | undefined>): Scrub {
  const list = secrets.filter((s): s is string => typeof s === 'string' && s.length >= 6).flatMap(forms);
  // Longest first, so a form that contains another is replaced whole.
  list.sort((a, b) => b.length - a.length);
  if (list.length === 0) return (t) => t;
  return (text) => list.reduce((acc, s) => (acc.includes(s) ? acc.split(s).join(REDACTED) : acc), text);
}

/** A copy of a JSON-able value with every secret scrubbed from every string in it. */
export function scrubValue<T>(value: T, scrub: Scrub): T {
  return JSON.parse(scrub(JSON.stringify(value))) as T;
}
