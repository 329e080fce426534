import { TermgradeError } from '../util/errors.js';

/**
 * Model-call failures by what should happen next:
 * - retried inside the trial with backoff: rate_limit, overloaded, transient (network, 5xx, garbage);
 * - handled by the agent: context_length (summarise or end), length (output cut: ask for less);
 * - fatal, never retried: auth, not_found, refusal, bad_request;
 * - timeout: one request exceeded the client timeout (retried like transient).
 */
export type ModelErrorKind = 'rate_limit' | 'overloaded' | 'transient' | 'timeout' | 'context_length' | 'auth' | 'not_found' | 'refusal' | 'bad_request';

export const RETRYABLE: ReadonlySet<ModelErrorKind> = new Set(['rate_limit', 'overloaded', 'transient', 'timeout']);

export class ModelError extends TermgradeError {
  constructor(
    readonly kind: ModelErrorKind,
    message: string,
    readonly status: number | null = null,
    /** Seconds the server asked us to wait (Retry-After), when it said. */
    readonly retryAfterSec: number | null = null,
    readonly attempts = 1,
  ) {
    super(`model_${kind}`, message);
    this.name = 'ModelError';
  }
}

const CONTEXT_PATTERNS = /context length|context window|maximum context|too many tokens|prompt is too long|reduce the length/i;

/** Classifies an HTTP status and body message. */
export function classifyStatus(status: number, message: string): ModelErrorKind {
  if (status === 429) return 'rate_limit';
  if (status === 503 || status === 529) return 'overloaded';
  if (status >= 500) return 'transient';
  if (status === 401 || status === 403) return 'auth';
  if (status === 404) return 'not_found';
  if ((status === 400 || status === 413 || status === 422) && CONTEXT_PATTERNS.test(message)) return 'context_length';
  if (status === 408 || status === 409) return 'transient';
  return 'bad_request';
}
