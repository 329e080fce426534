/** A run of a slot that was discarded and run again: why, and the sandbox time it took. */
export interface RetriedAttempt {
  class: string;
  message: string;
  durationMs: number;
}

/** Reads retry_reasons_json: objects, or the "class: message" strings of older stores (no time). */
export function parseRetries(json: string | null | undefined): RetriedAttempt[] {
  const list = JSON.parse(json || '[]') as Array<string | RetriedAttempt>;
  return list.map((r) => (typeof r === 'string' ? { class: r.split(':')[0]!.trim(), message: r, durationMs: 0 } : r));
}
