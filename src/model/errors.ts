import { TermgradeError } from '../util/errors.js';

/**
 * Model-call failures by what should happen next:
 * - retried inside the trial with backoff: rate_limit, overloaded, transient (network, 5xx, garbage);
 * - handled by the agent: context_length (summarise or end), length (output cut: ask for less);
 * - fatal, never retried: auth, not_found, refusal, bad_request;
 * - timeout: one request exceeded the client timeout (retried like transient).
 */
export type ModelErrorKind =
  | 'rate_limit'
  | 'overloaded'
  | 'transient'
  | 'timeout'
  | 'context_length'
  | 'auth'
  | 'not_found'
  | 'refusal'
  | 'bad_request';

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

/**
 * A full context, in the words each server uses. A full context is the agent's own limit (its
 * history outgrew the model's window): the agent summarises or ends, and the trial is graded. It
 * is never an endpoint outage, whichever server says it and whatever status it says it with.
 */
const CONTEXT_FULL_WORDS: readonly RegExp[] = [
  // OpenAI, vLLM, SGLang: "This model's maximum context length is 8192 tokens. However, ...";
  // SGLang: "Requested token count exceeds the model's maximum context length of 64000 tokens."
  /maximum context length/i,
  // vLLM: "The decoder prompt (length 9000) is longer than the maximum model length of 8192."
  /longer than the maximum model length/i,
  // SGLang (and vLLM-based servers): "The input (61709 tokens) is longer than the model's context length (40960 tokens)."
  /longer than the model'?s context length/i,
  // SGLang: "Input length (160062 tokens) exceeds the maximum allowed length (59862 tokens)."
  /exceeds? the maximum (allowed length|context length|number of tokens)/i,
  // vLLM without max_tokens: the room left for the reply is negative ("max_tokens must be at least 1, got -186.").
  /max_tokens must be at least 1, got -\d/i,
  // llama.cpp: "the request exceeds the available context size, try increasing it",
  // "request (4476 tokens) exceeds the available context size (4096 tokens)"; older: "Context size has been exceeded."
  /exceeds the available context size/i,
  /context size has been exceeded/i,
  // TGI: "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. Given: ...",
  // "Input validation error: `inputs` must have less than 2048 tokens. Given: 2222".
  /`inputs` tokens \+ `max_new_tokens` must be <=/i,
  /`inputs` must have less than \d+ tokens/i,
  // Anthropic and Anthropic-compatible: "prompt is too long: 208656 tokens > 200000 maximum",
  // "input length and `max_tokens` exceed context limit: 188059 + 20000 > 200000".
  /prompt is too long/i,
  /exceed context limit/i,
  // Wordings shared by many servers and proxies.
  /context length|context window|too many tokens|reduce the length/i,
];

/** Error codes and types that name a full context: OpenAI's code, llama.cpp's type. */
const CONTEXT_FULL_CODES: ReadonlySet<string> = new Set(['context_length_exceeded', 'exceed_context_size_error']);

/** What an error response said besides its status: its message, and its code and type when it gave them. */
export interface ErrorDetail {
  message: string;
  code?: unknown;
  type?: unknown;
}

export function isContextFull(detail: ErrorDetail): boolean {
  if ([detail.code, detail.type].some((v) => typeof v === 'string' && CONTEXT_FULL_CODES.has(v.toLowerCase())))
    return true;
  return CONTEXT_FULL_WORDS.some((re) => re.test(detail.message));
}

/**
 * Statuses a full context comes with: 400 from most servers, 422 from some (TGI: 422; 413 is one
 * whatever it says, see classifyStatus),
 * and 500 from llama.cpp builds that report it as a server error. Other 5xx come from what stands
 * in front of the server (gateways, proxies): those stay outages.
 */
const CONTEXT_STATUSES: ReadonlySet<number> = new Set([400, 422, 500]);

/** Classifies an HTTP status and what the body said. */
export function classifyStatus(status: number, detail: ErrorDetail | string): ModelErrorKind {
  const d = typeof detail === 'string' ? { message: detail } : detail;
  // 413: the request is too large for the server or a proxy in front of it, whatever words come
  // with it (nginx's HTML page says none of the above). The request is the agent's own transcript
  // and grows only with it: the same limit as a full context, so the agent's own, and graded.
  if (status === 413) return 'context_length';
  if (CONTEXT_STATUSES.has(status) && isContextFull(d)) return 'context_length';
  if (status === 429) return 'rate_limit';
  if (status === 503 || status === 529) return 'overloaded';
  if (status >= 500) return 'transient';
  if (status === 401 || status === 403) return 'auth';
  if (status === 404) return 'not_found';
  if (status === 408 || status === 409) return 'transient';
  return 'bad_request';
}
