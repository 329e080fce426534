import { WebSocket } from 'ws';

/**
 * TEST DOUBLE. A client of OpenEnv's HTTP environment protocol, written from the protocol (POST
 * /reset and /step answer {observation, reward, done}; GET /state answers {episode_id,
 * step_count, ...}; a bad action is 422), as an OpenEnv HTTP client would use `serve`'s
 * /openenv face. It keeps the episode id the reset observation gives and names it on each call.
 */
export interface StepResult<O = Record<string, any>> {
  observation: O;
  reward: number | null;
  done: boolean;
}

export class OpenEnvHttpError extends Error {
  constructor(
    readonly status: number,
    readonly body: any,
  ) {
    super(`OpenEnv server answered ${status}: ${JSON.stringify(body)}`);
  }
}

export class OpenEnvHttpClient {
  private episodeId: string | null = null;

  constructor(
    /** The environment's base URL, e.g. http://127.0.0.1:PORT/openenv. */
    private readonly baseUrl: string,
    private readonly token: string,
  ) {}

  get episode(): string | null {
    return this.episodeId;
  }

  private async request(method: 'GET' | 'POST', route: string, body?: unknown): Promise<any> {
    const res = await fetch(`${this.baseUrl}${route}`, {
      method,
      headers: {
        authorization: `Bearer ${this.token}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    const json = text ? JSON.parse(text) : null;
    if (!res.ok) throw new OpenEnvHttpError(res.status, json);
    return json;
  }

  async reset(kwargs: Record<string, unknown> = {}): Promise<StepResult> {
    const r = await this.request('POST', '/reset', kwargs);
    this.episodeId = r.observation.episode_id;
    return { observation: r.observation, reward: r.reward ?? null, done: Boolean(r.done) };
  }

  async step(action: Record<string, unknown>, options: { timeout_s?: number } = {}): Promise<StepResult> {
    const r = await this.request('POST', '/step', {
      action,
      ...options,
      ...(this.episodeId ? { episode_id: this.episodeId } : {}),
    });
    return { observation: r.observation, reward: r.reward ?? null, done: Boolean(r.done) };
  }

  async state(): Promise<{ episode_id: string; step_count: number; [k: string]: unknown }> {
    return this.request('GET', `/state${this.episodeId ? `?episode_id=${encodeURIComponent(this.episodeId)}` : ''}`);
  }

  async schema(): Promise<{ action: any; observation: any; state: any }> {
    return this.request('GET', '/schema');
  }

  async health(): Promise<{ status: string }> {
    return this.request('GET', '/health');
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

export class OpenEnvWsClient {
  private readonly waiting: Array<{ resolve: (v: any) => void; reject: (e: Error) => void }> = [];
  private ended: Error | null = null;

  private constructor(readonly socket: WebSocket) {
    socket.on('message', (data) => this.waiting.shift()?.resolve(JSON.parse(String(data))));
    socket.on('close', (code, reason) => {
      this.ended = new Error(`the socket closed (${code} ${String(reason)})`);
      for (const w of this.waiting.splice(0)) w.reject(this.ended);
    });
  }

  /** Connects; an upgrade the server refuses rejects with its HTTP status and error body. */
  static connect(
    baseUrl: string,
    token: string | null,
    options: { headers?: Record<string, string>; origin?: string } = {},
  ): Promise<OpenEnvWsClient> {
    const url = `${baseUrl.replace(/^http/, 'ws')}/ws`;
    const headers = { ...(token === null ? {} : { authorization: `Bearer ${token}` }), ...options.headers };
    const socket = new WebSocket(url, { headers, ...(options.origin ? { origin: options.origin } : {}) });
    return new Promise((resolve, reject) => {
      socket.once('open', () => resolve(new OpenEnvWsClient(socket)));
      // With this listener ws leaves the refused request open: it is ended here once read.
      socket.once('unexpected-response', (req, res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += String(c)));
        res.on('end', () => {
          req.destroy();
          res.destroy();
          reject(new OpenEnvHttpError(res.statusCode ?? 0, text ? JSON.parse(text) : null));
        });
      });
      socket.once('error', reject);
    });
  }

  /** Sends one raw text frame and waits for the answer to it. */
  send(text: string): Promise<{ type: string; data: any }> {
    if (this.ended) return Promise.reject(this.ended);
    return new Promise((resolve, reject) => {
      this.waiting.push({ resolve, reject });
      this.socket.send(text);
    });
  }

  private async call(message: Record<string, unknown>): Promise<any> {
    const r = await this.send(JSON.stringify(message));
    if (r.type === 'error') throw new OpenEnvWsError(r.data);
    return r.data;
  }

  async reset(kwargs: Record<string, unknown> = {}): Promise<StepResult> {
    const d = await this.call({ type: 'reset', data: kwargs });
    return { observation: d.observation, reward: d.reward ?? null, done: Boolean(d.done) };
  }

  async step(action: Record<string, unknown>): Promise<StepResult> {
    const d = await this.call({ type: 'step', data: action });
    return { observation: d.observation, reward: d.reward ?? null, done: Boolean(d.done) };
  }

  async state(): Promise<{ episode_id: string | null; step_count: number; [k: string]: unknown }> {
    return this.call({ type: 'state' });
  }

  /** OpenEnv's close: the message, then the server closes the socket; resolves once it is closed. */
  async close(): Promise<void> {
    if (this.ended) return;
    const closed = new Promise<void>((resolve) => this.socket.once('close', () => resolve()));
    this.socket.send(JSON.stringify({ type: 'close' }));
    await closed;
  }
}
