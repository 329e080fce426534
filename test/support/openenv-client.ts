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
      headers: { authorization: `Bearer ${this.token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
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
    const r = await this.request('POST', '/step', { action, ...options, ...(this.episodeId ? { episode_id: this.episodeId } : {}) });
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
