import { WebSocket } from 'ws';

/**
 * TEST DOUBLE. A client of OpenEnv's HTTP environment protocol, written from the protocol (POST
 * /reset and /step answer {observation, reward, done}; GET /state answers {episode_id,
 * step_count, ...}; a bad action is 422), as an OpenEnv HTTP client would use `serve`'s
 * /openenv face. It keeps the episode id the reset observation gives and names it on each call.
 */
export interface StepResult<O = Record<string, unknown>> {
  observation: O;
  reward: number | null;
  done: boolean;
}

/**
 * A refusal's JSON body: OpenEnv's 422 (`{detail: [issues]}`) or the server's own error
 * (`{error: {code, message}}`), both typed as present: a test reads the one its case gets, and the
 * other reads as undefined and fails it (null: an empty body).
 */
export interface HttpErrorBody {
  detail: Array<{ loc: Array<string | number>; msg: string; type: string }>;
  error: { code: string; message: string };
}

/** A JSON Schema as /schema answers it, as far as a client looks into one. */
export interface JsonSchema {
  properties: Record<string, unknown>;
  [k: string]: unknown;
}

/** The reset and step answers' wire shape. */
interface WireStep<O> {
  observation: O;
  reward?: number | null;
  done?: boolean;
}

export class OpenEnvHttpError extends Error {
  constructor(
    readonly status: number,
    readonly body: HttpErrorBody,
  ) {
    super(`OpenEnv server answered ${status}: ${JSON.stringify(body)}`);
  }
}

/** `O`: the observation's fields as the environment defines them (the protocol leaves them open). */
export class OpenEnvHttpClient<O extends { episode_id?: unknown } = Record<string, unknown>> {
  private episodeId: string | null = null;

  constructor(
    /** The environment's base URL, e.g. http://127.0.0.1:PORT/openenv. */
    private readonly baseUrl: string,
    private readonly token: string,
  ) {}

  get episode(): string | null {
    return this.episodeId;
  }

  private async request(method: 'GET' | 'POST', route: string, body?: unknown): Promise<unknown> {
    const res = await fetch(`${this.baseUrl}${route}`, {
      method,
      headers: {
        authorization: `Bearer ${this.token}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    const json: unknown = text ? JSON.parse(text) : null;
    if (!res.ok) throw new OpenEnvHttpError(res.status, json as HttpErrorBody);
    return json;
  }

  async reset(kwargs: Record<string, unknown> = {}): Promise<StepResult<O>> {
    const r = (await this.request('POST', '/reset', kwargs)) as WireStep<O>;
    this.episodeId = typeof r.observation.episode_id === 'string' ? r.observation.episode_id : null;
    return { observation: r.observation, reward: r.reward ?? null, done: Boolean(r.done) };
  }

  async step(action: Record<string, unknown>, options: { timeout_s?: number } = {}): Promise<StepResult<O>> {
    const r = (await this.request('POST', '/step', {
      action,
      ...options,
      ...(this.episodeId ? { episode_id: this.episodeId } : {}),
    })) as WireStep<O>;
    return { observation: r.observation, reward: r.reward ?? null, done: Boolean(r.done) };
  }

  async state(): Promise<{ episode_id: string; step_count: number; [k: string]: unknown }> {
    return (await this.request(
      'GET',
      `/state${this.episodeId ? `?episode_id=${encodeURIComponent(this.episodeId)}` : ''}`,
    )) as { episode_id: string; step_count: number };
  }

  async schema(): Promise<{ action: JsonSchema; observation: JsonSchema; state: JsonSchema }> {
    return (await this.request('GET', '/schema')) as { action: JsonSchema; observation: JsonSchema; state: JsonSchema };
  }

  async health(): Promise<{ status: string }> {
    return (await this.request('GET', '/health')) as { status: string };
  }
}

/**
 * TEST DOUBLE. A client of OpenEnv's WebSocket route, written from the protocol: it connects to
 * `<base>/ws` (http -> ws), sends `{type: "reset", data: {kwargs}}`, `{type: "step", data:
 * {action}}`, `{type: "state"}` and `{type: "close"}`, and reads one answer per message in order:
 * `{type: "observation" | "state", data}` or `{type: "error", data: {message, code}}`. The token
 * goes as a header on the upgrade request.
 */
export class OpenEnvWsError extends Error {
  constructor(readonly data: { message: string; code: string; [k: string]: unknown }) {
    super(`Server error: ${data.message} (code: ${data.code})`);
  }
}

/**
 * An answer frame: `{type, data}`, data an observation's, a state's or an error's fields (an
 * error's typed as present: a test reads them on an error frame).
 */
export interface WsAnswer {
  type: string;
  data: Record<string, unknown> & { message: string; code: string };
}

/** `O`: the observation's fields as the environment defines them (the protocol leaves them open). */
export class OpenEnvWsClient<O = Record<string, unknown>> {
  private readonly waiting: Array<{ resolve: (v: WsAnswer) => void; reject: (e: Error) => void }> = [];
  private ended: Error | null = null;

  private constructor(readonly socket: WebSocket) {
    socket.on('message', (data) => this.waiting.shift()?.resolve(JSON.parse(String(data))));
    socket.on('close', (code, reason) => {
      this.ended = new Error(`the socket closed (${code} ${String(reason)})`);
      for (const w of this.waiting.splice(0)) w.reject(this.ended);
    });
  }

  /** Connects; an upgrade the server refuses rejects with its HTTP status and error body. */
  static connect<O = Record<string, unknown>>(
    baseUrl: string,
    token: string | null,
    options: { headers?: Record<string, string>; origin?: string } = {},
  ): Promise<OpenEnvWsClient<O>> {
    const url = `${baseUrl.replace(/^http/, 'ws')}/ws`;
    const headers = { ...(token === null ? {} : { authorization: `Bearer ${token}` }), ...options.headers };
    const socket = new WebSocket(url, { headers, ...(options.origin ? { origin: options.origin } : {}) });
    return new Promise((resolve, reject) => {
      socket.once('open', () => resolve(new OpenEnvWsClient<O>(socket)));
      // With this listener ws leaves the refused request open: it is ended here once read.
      socket.once('unexpected-response', (req, res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += String(c)));
        res.on('end', () => {
          req.destroy();
          res.destroy();
          reject(new OpenEnvHttpError(res.statusCode ?? 0, (text ? JSON.parse(text) : null) as HttpErrorBody));
        });
      });
      socket.once('error', reject);
    });
  }

  /** Sends one raw text frame and waits for the answer to it. */
  send(text: string): Promise<WsAnswer> {
    if (this.ended) return Promise.reject(this.ended);
    return new Promise((resolve, reject) => {
      this.waiting.push({ resolve, reject });
      this.socket.send(text);
    });
  }

  private async call(message: Record<string, unknown>): Promise<unknown> {
    const r = await this.send(JSON.stringify(message));
    if (r.type === 'error') throw new OpenEnvWsError(r.data);
    return r.data;
  }

  async reset(kwargs: Record<string, unknown> = {}): Promise<StepResult<O>> {
    const d = (await this.call({ type: 'reset', data: kwargs })) as WireStep<O>;
    return { observation: d.observation, reward: d.reward ?? null, done: Boolean(d.done) };
  }

  async step(action: Record<string, unknown>): Promise<StepResult<O>> {
    const d = (await this.call({ type: 'step', data: action })) as WireStep<O>;
    return { observation: d.observation, reward: d.reward ?? null, done: Boolean(d.done) };
  }

  async state(): Promise<{ episode_id: string | null; step_count: number; [k: string]: unknown }> {
    return (await this.call({ type: 'state' })) as { episode_id: string | null; step_count: number };
  }

  /** OpenEnv's close: the message, then the server closes the socket; resolves once it is closed. */
  async close(): Promise<void> {
    if (this.ended) return;
    const closed = new Promise<void>((resolve) => this.socket.once('close', () => resolve()));
    this.socket.send(JSON.stringify({ type: 'close' }));
    await closed;
  }
}
