/**
 * Replaces every occurrence of each secret (API keys) with a marker. Applied to everything a trial
 * writes, so a key echoed back in an error message or typed into a terminal never lands on disk.
 */
export type Scrub = (text: string) => string;

export function makeScrub(secrets: Array<string | null | undefined>): Scrub {
  const list = secrets.filter((s): s is string => typeof s === 'string' && s.length >= 6);
  if (list.length === 0) return (t) => t;
  return (text) => list.reduce((acc, s) => acc.split(s).join('[REDACTED]'), text);
}
