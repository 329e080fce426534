import OpenAI, { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from 'openai';
import type { ChatCompletionMessageParam, ChatCompletionTool } from 'openai/resources/chat/completions';
import { CancelledError } from '../util/errors.js';
import { hideInLogs } from '../util/log.js';
import { sleep } from '../util/time.js';
import { costUsd, type ModelConfig } from './config.js';
import { classifyStatus, ModelError, RETRYABLE } from './errors.js';

export type Message = ChatCompletionMessageParam;
export type Tool = ChatCompletionTool;

export interface ToolCall {
  id: string;
  name: string;
  /** JSON text, as the model wrote it. */
  arguments: string;
}

export interface Usage {
  prompt: number;
  cached: number;
  completion: number;
}

/** One model call, after retries: what came back and what it cost. */
export interface Completion {
  content: string;
  reasoning: string | null;
  toolCalls: ToolCall[];
  finishReason: string;
  usage: Usage;
  latencyMs: number;
  costUsd: number | null;
  /** Retries this call needed, and why (rate limit, 5xx, ...). */
  retries: Array<{ kind: string; waitMs: number }>;
  /** Characters cut from an over-long reply (see MAX_REPLY_CHARS); 0 almost always. */
  truncatedChars: number;
  /** vLLM's extensions, kept for RL: present only when the server returned them. */
  promptTokenIds: number[] | null;
  completionTokenIds: number[] | null;
  logprobs: number[] | null;
}

export interface CompleteOptions {
  messages: Message[];
  tools?: Tool[];
  signal?: AbortSignal;
}

/**
 * The most of one reply's text (content, reasoning, each tool call's arguments) that is kept. A
 * model that writes megabytes in one turn would otherwise fill the trial's folder and the next
 * prompt; the cut is counted in `truncatedChars` and shows in the transcript.
 */
export const MAX_REPLY_CHARS = 256 * 1024;

function bounded(text: string, cut: { chars: number }): string {
  if (typeof text !== 'string') text = String(text);
  if (text.length <= MAX_REPLY_CHARS) return text;
  cut.chars += text.length - MAX_REPLY_CHARS;
  return `${text.slice(0, MAX_REPLY_CHARS)}\n[... ${text.length - MAX_REPLY_CHARS} characters of this reply cut by termgrade ...]`;
}

/** A usage field: absent is 0; anything but a whole number >= 0 is a malformed response. */
function tokenCount(value: unknown, field: string): number {
  if (value === undefined || value === null) return 0;
  if (typeof value === 'number' && Number.isInteger(value) && value >= 0) return value;
  throw new ModelError(
    'transient',
    `malformed response: ${field} is ${JSON.stringify(value).slice(0, 40)}, not a token count`,
  );
}

function toModelError(err: unknown, timeoutSec: number): ModelError {
  if (err instanceof ModelError) return err;
  if (err instanceof APIConnectionTimeoutError) return new ModelError('timeout', `no answer within ${timeoutSec} s`);
  if (err instanceof APIConnectionError) return new ModelError('transient', `connection failed: ${err.message}`);
  if (err instanceof APIError && typeof err.status === 'number') {
    const header = (err.headers as { get?: (name: string) => string | null } | undefined)?.get?.('retry-after');
    const retryAfter = header === null || header === undefined || header.trim() === '' ? Number.NaN : Number(header);
    const kind = classifyStatus(err.status, { message: err.message, code: err.code, type: err.type });
    return new ModelError(
      kind,
      `HTTP ${err.status}: ${err.message}`,
      err.status,
      Number.isFinite(retryAfter) && retryAfter >= 0 ? retryAfter : null,
    );
  }
  // A 200 with a body that is not a completion (malformed JSON, missing fields): a server hiccup.
  return new ModelError('transient', `unreadable response: ${err instanceof Error ? err.message : String(err)}`);
}

/**
 * The SDK reads an error's words from the body's `error` object only. Servers that put them
 * elsewhere would leave just "400 status code (no body)": vLLM before 0.10.1 and SGLang send
 * `{object: "error", message, type, code}`, TGI sends `{error: "text", error_type}`. Those are
 * lifted into the `error` object, so their words (a full context, say) are read like OpenAI's.
 */
class Endpoint extends OpenAI {
  protected override makeStatusError(
    status: number,
    error: object,
    message: string | undefined,
    headers: Headers,
  ): APIError {
    const body = error as Record<string, unknown> | undefined;
    if (body && typeof body === 'object' && !Array.isArray(body)) {
      if (body.error === undefined && typeof body.message === 'string')
        return super.makeStatusError(status, { error: body }, message, headers);
      if (typeof body.error === 'string')
        return super.makeStatusError(
          status,
          { error: { message: body.error, type: body.error_type } },
          message,
          headers,
        );
    }
    return super.makeStatusError(status, error, message, headers);
  }
}

/**
 * A chat-completions client for one model configuration. Transient failures are retried here,
 * inside the trial, with exponential backoff and jitter (or the server's Retry-After); fatal ones
 * are thrown at once. The API key is read from the environment at construction and never leaves
 * this object.
 */
export class ModelClient {
  private readonly client: OpenAI;
  private readonly random: () => number;

  constructor(
    readonly config: ModelConfig,
    options: { random?: () => number } = {},
  ) {
    this.client = new Endpoint({
      baseURL: config.baseUrl,
      apiKey: process.env[config.apiKeyEnv] ?? 'none',
      timeout: config.requestTimeoutSec * 1000,
      maxRetries: 0, // ours, below: classified, bounded, abortable
      defaultHeaders: config.headers,
    });
    this.random = options.random ?? Math.random;
    hideInLogs(this.secret());
  }

  /** The key's value, so recorders can scrub it from anything they write. */
  secret(): string | null {
    return process.env[this.config.apiKeyEnv] || null;
  }

  async complete(options: CompleteOptions): Promise<Completion> {
    const c = this.config;
    const retries: Completion['retries'] = [];
    for (let attempt = 0; ; attempt++) {
      const started = performance.now();
      try {
        const body = {
          model: c.model,
          messages: options.messages,
          ...(options.tools?.length ? { tools: options.tools } : {}),
          ...(c.temperature !== undefined ? { temperature: c.temperature } : {}),
          ...(c.topP !== undefined ? { top_p: c.topP } : {}),
          ...(c.maxTokens !== undefined ? { max_tokens: c.maxTokens } : {}),
          ...c.extraBody,
        };
        // A child signal per request: the SDK leaves a listener on the signal it is given, and an
        // episode's signal lives for hundreds of calls.
        const child = new AbortController();
        const onAbort = (): void => child.abort();
        options.signal?.addEventListener('abort', onAbort, { once: true });
        try {
          const resp = await this.client.chat.completions.create(
            body as OpenAI.ChatCompletionCreateParamsNonStreaming,
            { signal: child.signal },
          );
          return this.read(resp, performance.now() - started, retries);
        } finally {
          options.signal?.removeEventListener('abort', onAbort);
        }
      } catch (err) {
        if (err instanceof APIUserAbortError || options.signal?.aborted) throw new CancelledError('model call');
        const e = toModelError(err, c.requestTimeoutSec);
        if (!RETRYABLE.has(e.kind) || attempt >= c.maxRetries) {
          throw new ModelError(
            e.kind,
            `${e.message}${attempt > 0 ? ` (after ${attempt + 1} attempts)` : ''}`,
            e.status,
            e.retryAfterSec,
            attempt + 1,
          );
        }
        const backoff = Math.min(c.backoffMaxSec, c.backoffBaseSec * 2 ** attempt) * (0.5 + this.random() / 2);
        const waitMs = 1000 * Math.min(c.backoffMaxSec, e.retryAfterSec ?? backoff);
        retries.push({ kind: e.kind, waitMs });
        await sleep(waitMs, options.signal, 'model call');
      }
    }
  }

  private read(resp: OpenAI.ChatCompletion, latencyMs: number, retries: Completion['retries']): Completion {
    const choice = resp.choices?.[0];
    if (!choice || !choice.message) throw new ModelError('transient', 'response has no choices');
    const msg = choice.message as OpenAI.ChatCompletionMessage & {
      reasoning_content?: string | null;
      refusal?: string | null;
    };
    if (msg.refusal || choice.finish_reason === 'content_filter') {
      throw new ModelError('refusal', `the model refused: ${msg.refusal ?? 'content filter'}`);
    }
    const u = resp.usage;
    const usage: Usage = {
      prompt: tokenCount(u?.prompt_tokens, 'usage.prompt_tokens'),
      cached: tokenCount(u?.prompt_tokens_details?.cached_tokens, 'usage.prompt_tokens_details.cached_tokens'),
      completion: tokenCount(u?.completion_tokens, 'usage.completion_tokens'),
    };
    const ext = resp as unknown as { prompt_token_ids?: number[] };
    const extChoice = choice as unknown as { prompt_token_ids?: number[]; token_ids?: number[] };
    const logprobs = choice.logprobs?.content?.map((t) => t.logprob) ?? null;
    const cut = { chars: 0 };
    return {
      content: bounded(msg.content ?? '', cut),
      reasoning: msg.reasoning_content == null ? null : bounded(msg.reasoning_content, cut),
      toolCalls: (msg.tool_calls ?? []).flatMap((t) =>
        t.type === 'function'
          ? [
              {
                id: String(t.id),
                name: String(t.function.name),
                arguments: bounded(String(t.function.arguments ?? ''), cut),
              },
            ]
          : [],
      ),
      truncatedChars: cut.chars,
      finishReason: choice.finish_reason ?? 'stop',
      usage,
      latencyMs,
      costUsd: costUsd(this.config.price, usage),
      retries,
      promptTokenIds: ext.prompt_token_ids ?? extChoice.prompt_token_ids ?? null,
      completionTokenIds: extChoice.token_ids ?? null,
      logprobs,
    };
  }
}
