import type { Grade } from '../../src/serve/contract.js';
import type { TaskView } from '../../src/serve/curriculum.js';
import type { TokenStream, TokenTurn } from '../../src/serve/token-stream.js';

/**
 * A reply of serve's HTTP API as the tests read it: the fields its routes answer with (a session, an
 * exec, a grade, an episode, a group, the curriculum, an error), all in one type, each typed as
 * present. A test reads the fields of the route it called and asserts on them; one the route does
 * not send reads as undefined and fails that assertion. What src types (a grade, a curriculum row)
 * comes from src.
 */
export interface ServeReply extends Grade {
  ok: boolean;
  error: { code: string; message: string };
  // A session.
  session_id: string;
  task: string;
  served_by: 'named' | 'auto';
  instruction: string;
  tools: Array<{ type: string; function: { name: string } }>;
  // An exec.
  output: string;
  exit_code: number | null;
  timed_out: boolean;
  truncated: boolean;
  // An episode.
  episode_id: string;
  turns: Array<TokenTurn & Record<string, unknown>>;
  messages: Array<{ role: string; content?: unknown } & Record<string, unknown>>;
  token_stream: TokenStream | null;
  token_stream_problem: string | null;
  // A group of sessions or episodes.
  group_id: string;
  kind: string;
  done: boolean;
  rewards: Array<number | null>;
  statuses: string[];
  sessions: Array<{ session_id: string; task: string }>;
  episodes: ServeReply[];
  // /healthz.
  live: number;
  warm: { held: number; started_warm: number; started_cold: number; warm_failed: number };
  // The curriculum.
  band: [number, number];
  tasks: TaskView[];
}

/** A JSON call to a running `serve` with its token: the status and the parsed body (null when empty). */
export type ServeCall = (method: string, url: string, body?: unknown) => Promise<{ status: number; json: ServeReply }>;

/** `serveCall(() => server)`: calls whichever server the getter gives (a test may restart it). */
export function serveCall(server: () => { url: string; token: string | null }): ServeCall {
  return async (method, url, body) => {
    const { url: base, token } = server();
    const res = await fetch(`${base}${url}`, {
      method,
      headers: {
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, json: (text ? JSON.parse(text) : null) as ServeReply };
  };
}
