import { CancelledError, TermgradeError, type ErrorCode } from './errors.js';

export const nowIso = (): string => new Date().toISOString();

/**
 * The longest delay a Node timer holds (2^31 - 1 ms, about 24.8 days); a longer one fires at once.
 * Timeouts are validated against it where they enter (task.toml, job files, flags), and clamped
 * here for products of a timeout and a multiplier.
 */
export const MAX_TIMER_MS = 2_147_483_647;
export const MAX_TIMEOUT_SEC = Math.floor(MAX_TIMER_MS / 1000);
const clampMs = (ms: number): number => Math.min(Math.max(0, ms), MAX_TIMER_MS);

/** Waits `ms`; rejects with CancelledError(`what`) as soon as `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal, what = 'wait'): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(new CancelledError(what));
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, clampMs(ms));
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(new CancelledError(what));
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * Rejects with `code` when `work` takes longer than `ms`. The work itself is not stopped (give it
 * the same deadline through a signal where it can stop); this only bounds how long we wait.
 */
export async function withTimeout<T>(work: Promise<T>, ms: number, code: ErrorCode, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new TermgradeError(code, message)), clampMs(ms));
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** An AbortSignal that fires at `ms` or when `parent` aborts; `timedOut()` tells which. */
export function deadlineSignal(
  parent: AbortSignal | undefined,
  ms: number,
): { signal: AbortSignal; timedOut: () => boolean; clear: () => void } {
  const ctl = new AbortController();
  let fired = false;
  const timer = setTimeout(() => {
    fired = true;
    ctl.abort();
  }, clampMs(ms));
  const signal = parent ? AbortSignal.any([parent, ctl.signal]) : ctl.signal;
  return { signal, timedOut: () => fired, clear: () => clearTimeout(timer) };
}
