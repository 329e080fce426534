/**
 * TEST DOUBLE. An OpenAI-compatible chat-completions server on loopback that replays scripts
 * deterministically and injects faults on cue. Nothing here is product code: it stands in for
 * vLLM or a hosted API, which are unreachable from this machine.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ScriptedReply {
  content?: string;
  reasoning?: string;
  toolCalls?: Array<{ name: string; arguments: string; id?: string }>;
  finishReason?: 'stop' | 'length' | 'tool_calls' | 'content_filter';
  /** Token counts as the server reports them; a fault can give any JSON value here. */
  usage?: { prompt: unknown; completion: unknown; cached?: unknown };
  /**
   * Return vLLM-style token ids and logprobs with the reply: `true`, counted ids (not a real
   * tokenisation); `'template'`, ids of the conversation as a chat template renders it
   * (templateIds), so consecutive calls' ids line up as a real endpoint's would.
   */
  tokenIds?: boolean | 'template';
}

export type ScriptStep =
  /** `after`: the reply waits until it settles (a test holds a turn back until it has seen what it needs). */
  | { reply: ScriptedReply; delayMs?: number; after?: Promise<unknown> }
  | { fault: 'rate_limit'; retryAfterSec?: number }
  | { fault: 'server_error'; status?: number }
  | { fault: 'hang'; ms: number }
  | { fault: 'malformed' }
  | { fault: 'context_length' }
  | { fault: 'auth' }
  | { fault: 'not_found' }
  | { fault: 'reset' }
  | { fault: 'refusal' }
  /** An error response as a given server words it: any status, any JSON body. */
  | { fault: 'error'; status: number; body: unknown };

/** A script per model name (each with its own cursor), or a function of the request number. */
export type Script = ScriptStep[] | ((index: number, body: ChatRequest) => ScriptStep);

export interface ChatRequest {
  model: string;
  messages: Array<{ role: string; content?: unknown; tool_calls?: unknown }>;
  tools?: unknown[];
  [key: string]: unknown;
}

export interface RecordedRequest {
  headers: IncomingMessage['headers'];
  body: ChatRequest;
  at: number;
}

export class ScriptedModelServer {
  readonly requests: RecordedRequest[] = [];
  private server: Server | null = null;
  private readonly cursors = new Map<string, number>();
  private readonly hanging = new Set<ServerResponse>();

  /**
   * `requireKey`: every request must carry this bearer key (401 otherwise), as hosted APIs do.
   * GET /models lists the scripted model names; with only a '*' script it is a 404, as on a server
   * that has no model listing.
   */
  constructor(
    private readonly scripts: Record<string, Script>,
    private readonly options: { requireKey?: string } = {},
  ) {}

  /** Starts on 127.0.0.1 and returns the base URL (…/v1). */
  async start(): Promise<string> {
    this.server = createServer((req, res) => void this.handle(req, res));
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    const { port } = this.server.address() as AddressInfo;
    return `http://127.0.0.1:${port}/v1`;
  }

  async close(): Promise<void> {
    for (const res of this.hanging) res.destroy();
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  private next(body: ChatRequest): ScriptStep | null {
    const script = this.scripts[body.model] ?? this.scripts['*'];
    if (!script) return null;
    const key = this.scripts[body.model] ? body.model : '*';
    const i = this.cursors.get(key) ?? 0;
    this.cursors.set(key, i + 1);
    if (typeof script === 'function') return script(i, body);
    return script[i] ?? null;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    if (this.options.requireKey && req.headers.authorization !== `Bearer ${this.options.requireKey}`) {
      return send(res, 401, { error: { message: 'Incorrect API key provided', type: 'invalid_request_error' } });
    }
    const names = Object.keys(this.scripts).filter((k) => k !== '*');
    if (req.method === 'GET' && req.url?.endsWith('/models') && names.length) {
      return send(res, 200, {
        object: 'list',
        data: names.map((id) => ({ id, object: 'model', created: 0, owned_by: 'scripted' })),
      });
    }
    if (req.method !== 'POST' || !req.url?.endsWith('/chat/completions'))
      return send(res, 404, { error: { message: `no route ${req.method} ${req.url}` } });
    let body: ChatRequest;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as ChatRequest;
    } catch {
      return send(res, 400, { error: { message: 'request body is not JSON' } });
    }
    this.requests.push({ headers: req.headers, body, at: Date.now() });
    const step = this.next(body);
    if (!step) return send(res, 400, { error: { message: `script for model "${body.model}" is exhausted` } });
    if ('fault' in step) {
      switch (step.fault) {
        case 'rate_limit':
          res.setHeader('retry-after', String(step.retryAfterSec ?? 0));
          return send(res, 429, { error: { message: 'Rate limit reached', type: 'rate_limit_error' } });
        case 'server_error':
          return send(res, step.status ?? 500, { error: { message: 'internal server error' } });
        case 'hang':
          this.hanging.add(res);
          // Unref'd: a reply still hanging when the tests end must not keep their process alive.
          setTimeout(() => {
            this.hanging.delete(res);
            if (!res.destroyed) send(res, 500, { error: { message: 'woke up too late' } });
          }, step.ms).unref();
          return;
        case 'malformed':
          res.writeHead(200, { 'content-type': 'application/json' });
          return void res.end('{"id": "x", "choices": [ {"message": ');
        case 'context_length':
          return send(res, 400, {
            error: {
              message:
                "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens. Please reduce the length of the messages.",
              type: 'invalid_request_error',
              code: 'context_length_exceeded',
            },
          });
        case 'auth':
          // Like some hosted APIs, echo the key back: the harness must scrub it from its records.
          return send(res, 401, {
            error: {
              message: `Incorrect API key provided: ${String(req.headers.authorization ?? '').replace(/^Bearer /, '')}`,
              type: 'invalid_request_error',
            },
          });
        case 'not_found':
          return send(res, 404, {
            error: { message: `The model ${body.model} does not exist`, type: 'invalid_request_error' },
          });
        case 'reset':
          return void req.socket.destroy();
        case 'error':
          // A text body goes as it is (a proxy's HTML page), not as a JSON string.
          if (typeof step.body === 'string' && !res.destroyed) {
            res.writeHead(step.status, { 'content-type': 'text/html' });
            return void res.end(step.body);
          }
          return send(res, step.status, step.body);
        case 'refusal':
          return send(res, 200, {
            id: 'r',
            object: 'chat.completion',
            created: 0,
            model: body.model,
            choices: [
              {
                index: 0,
                finish_reason: 'stop',
                message: { role: 'assistant', content: null, refusal: 'I will not do that.' },
              },
            ],
            usage: { prompt_tokens: 5, completion_tokens: 5, total_tokens: 10 },
          });
      }
    }
    if (step.delayMs) await new Promise((r) => setTimeout(r, step.delayMs));
    if (step.after) await step.after.catch(() => undefined);
    send(res, 200, completion(body, step.reply));
  }
}

function send(res: ServerResponse, status: number, body: unknown): void {
  if (res.destroyed) return;
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

function completion(req: ChatRequest, r: ScriptedReply): unknown {
  const text = r.content ?? '';
  // Counts for token ids come from sane values; what is reported may be anything the script says.
  const promptTokens =
    typeof r.usage?.prompt === 'number' && r.usage.prompt >= 0
      ? r.usage.prompt
      : Math.ceil(JSON.stringify(req.messages).length / 4);
  const completionTokens =
    typeof r.usage?.completion === 'number' && r.usage.completion >= 0
      ? r.usage.completion
      : Math.max(1, Math.ceil((text.length + JSON.stringify(r.toolCalls ?? []).length) / 4));
  const reported = { prompt: r.usage?.prompt ?? promptTokens, completion: r.usage?.completion ?? completionTokens };
  const ids = (n: number, base: number): number[] => Array.from({ length: n }, (_, i) => base + i);
  return {
    id: `chatcmpl-scripted-${Date.now()}`,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model: req.model,
    ...(r.tokenIds
      ? { prompt_token_ids: r.tokenIds === 'template' ? promptIds(req.messages) : ids(promptTokens, 1000) }
      : {}),
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: r.toolCalls?.length && !r.content ? null : text,
          ...(r.reasoning ? { reasoning_content: r.reasoning } : {}),
          ...(r.toolCalls?.length
            ? {
                tool_calls: r.toolCalls.map((t, i) => ({
                  id: t.id ?? `call_${i}_${Date.now()}`,
                  type: 'function',
                  function: { name: t.name, arguments: t.arguments },
                })),
              }
            : {}),
        },
        finish_reason: r.finishReason ?? (r.toolCalls?.length ? 'tool_calls' : 'stop'),
        ...(r.tokenIds
          ? withLogprobs(
              r.tokenIds === 'template'
                ? assistantIds({
                    role: 'assistant',
                    content: text,
                    tool_calls: r.toolCalls?.map((t) => ({ function: t })),
                  })
                : ids(completionTokens, 5000),
            )
          : {}),
      },
    ],
    usage: {
      prompt_tokens: reported.prompt,
      completion_tokens: reported.completion,
      total_tokens: promptTokens + completionTokens,
      prompt_tokens_details: { cached_tokens: r.usage?.cached ?? 0 },
    },
  };
}

function withLogprobs(tokenIds: number[]): Record<string, unknown> {
  return {
    token_ids: tokenIds,
    logprobs: {
      content: tokenIds.map((id, i) => ({ token: `t${id}`, logprob: -0.01 * (i + 1), bytes: null, top_logprobs: [] })),
    },
  };
}

/** A chat template in ids: a role header, the text's code points, an end mark per message. */
const ROLE_IDS: Record<string, number> = { system: 200_001, user: 200_002, assistant: 200_003, tool: 200_004 };
const END_ID = 200_000;

function textIds(text: string): number[] {
  return Array.from(text, (ch) => ch.codePointAt(0)!);
}

/** What a message says as the template renders it: content, then each tool call's name and arguments. */
function messageText(m: { content?: unknown; tool_calls?: unknown }): string {
  const content = typeof m.content === 'string' ? m.content : m.content == null ? '' : JSON.stringify(m.content);
  const calls = (Array.isArray(m.tool_calls) ? m.tool_calls : []) as Array<{
    function?: { name?: string; arguments?: string };
  }>;
  return content + calls.map((c) => `<call ${c.function?.name ?? ''}>${c.function?.arguments ?? ''}</call>`).join('');
}

/** The ids a model produces for an assistant message: its text, then the end mark. */
export function assistantIds(m: { role: string; content?: unknown; tool_calls?: unknown }): number[] {
  return [...textIds(messageText(m)), END_ID];
}

/** The prompt ids of a conversation: every message rendered, then the assistant's header. */
export function promptIds(messages: ChatRequest['messages']): number[] {
  const out: number[] = [];
  for (const m of messages) {
    out.push(ROLE_IDS[m.role] ?? 200_009);
    out.push(...(m.role === 'assistant' ? assistantIds(m) : [...textIds(messageText(m)), END_ID]));
  }
  out.push(ROLE_IDS.assistant!);
  return out;
}
