import type { WebSocket } from '@fastify/websocket';
import { ServeError } from './contract.js';
import { STEP_TIMEOUT_SEC, type OpenEnvEpisodes, type OpenEnvResult } from './openenv.js';
import {
  OpenEnvAction,
  OpenEnvResetBody,
  OpenEnvWsMessage,
  openEnvIssues,
  type OpenEnvWsErrorCode,
  type OpenEnvWsMessageT,
} from './openenv-contract.js';
import type { z } from 'zod';
import { causeOf, log } from '../util/log.js';

type Reply = { type: 'observation' | 'state' | 'error'; data: Record<string, unknown> };

function wsError(code: OpenEnvWsErrorCode, message: string, extra: Record<string, unknown> = {}): Reply {
  return { type: 'error', data: { message, code, ...extra } };
}

/** A message's JSON value, or why it is not JSON (answered with INVALID_JSON). */
function decode(raw: string): { value: unknown } | { invalid: string } {
  try {
    return { value: JSON.parse(raw) };
  } catch (err) {
    return { invalid: `Invalid JSON: ${(err as Error).message}` };
  }
}

/**
 * One OpenEnv WebSocket connection: it holds at most one episode at a time (a reset ends the one
 * before it), over the same OpenEnvEpisodes the HTTP face uses. Messages are handled one after
 * another in the order they came, as OpenEnv's server does; when the socket closes (a "close"
 * message, the client going away, the server stopping) the running episode ends and its sandbox
 * is removed, after any message still being handled (so a reset under way cannot leave one).
 */
export class OpenEnvWsConnection {
  private episode: string | null = null;
  private closed = false;
  private queue: Promise<void> = Promise.resolve();

  constructor(
    private readonly episodes: OpenEnvEpisodes,
    private readonly socket: WebSocket,
  ) {
    socket.on('message', (data, isBinary) => {
      const raw = isBinary ? null : String(data);
      this.enqueue(() => this.handle(raw));
    });
    socket.on('close', () => {
      this.closed = true;
      this.enqueue(() => this.release());
    });
  }

  /** Runs work after what is queued; a failure is reported and does not stop what comes after (the release). */
  private enqueue(work: () => Promise<void>): void {
    this.queue = this.queue.then(work).catch((err: unknown) => {
      log.warn('OpenEnv WebSocket message failed', { cause: causeOf(err) });
    });
  }

  /** Settles once every message has been answered and the episode (if any) released. */
  get settled(): Promise<void> {
    return this.queue;
  }

  private async handle(raw: string | null): Promise<void> {
    if (this.closed) return;
    if (raw === null)
      return void this.send(wsError('INVALID_JSON', 'Invalid JSON: a binary frame; messages are JSON text'));
    const decoded = decode(raw);
    if ('invalid' in decoded) return void this.send(wsError('INVALID_JSON', decoded.invalid));
    const type = (decoded.value as { type?: unknown } | null)?.type;
    if (!['reset', 'step', 'state', 'close'].includes(type as string)) {
      return void this.send(wsError('UNKNOWN_TYPE', `Unknown message type: ${typeof type === 'string' ? type : ''}`));
    }
    const msg = OpenEnvWsMessage.safeParse(decoded.value);
    if (!msg.success)
      return void this.send(
        wsError('VALIDATION_ERROR', 'Invalid message', { errors: openEnvIssues(msg.error.issues, 'body') }),
      );
    if (msg.data.type === 'close') {
      this.socket.close(1000, 'closed by the client');
      return;
    }
    this.send(await this.answer(msg.data));
  }

  /** The reply to reset, step or state; a refusal from the episode layer as OpenEnv's error shape. */
  private async answer(msg: Exclude<OpenEnvWsMessageT, { type: 'close' }>): Promise<Reply> {
    try {
      if (msg.type === 'state')
        return {
          type: 'state',
          data: this.episode ? this.episodes.state(this.episode) : { episode_id: null, step_count: 0 },
        };
      if (msg.type === 'reset') {
        const body = OpenEnvResetBody.safeParse(msg.data);
        if (!body.success)
          return wsError('VALIDATION_ERROR', 'Invalid message', { errors: openEnvIssues(body.error.issues, 'data') });
        return { type: 'observation', data: { ...(await this.reset(body.data)) } };
      }
      const action = OpenEnvAction.safeParse(msg.data);
      if (!action.success)
        return wsError('VALIDATION_ERROR', 'Invalid message', { errors: openEnvIssues(action.error.issues, 'data') });
      if (!this.episode) return wsError('EXECUTION_ERROR', 'no episode on this connection: send a reset first');
      return {
        type: 'observation',
        data: { ...(await this.episodes.step(this.episode, action.data, STEP_TIMEOUT_SEC)) },
      };
    } catch (err) {
      if (!(err instanceof ServeError)) return wsError('EXECUTION_ERROR', `internal error: ${(err as Error).message}`);
      return wsError(err.code === 'over_capacity' ? 'CAPACITY_REACHED' : 'EXECUTION_ERROR', err.message);
    }
  }

  private async reset(body: z.infer<typeof OpenEnvResetBody>): Promise<OpenEnvResult> {
    // One episode per connection: the one before ends (its sandbox removed) before another starts.
    if (this.episode) await this.episodes.close(this.episode);
    this.episode = null;
    const result = await this.episodes.reset(body);
    this.episode = result.observation.episode_id;
    // Were the socket closed meanwhile, release() is queued behind this and removes the sandbox.
    return result;
  }

  private send(reply: Reply): void {
    if (this.socket.readyState === this.socket.OPEN) this.socket.send(JSON.stringify(reply));
  }

  private async release(): Promise<void> {
    const id = this.episode;
    this.episode = null;
    if (!id) return;
    try {
      await this.episodes.close(id);
    } catch (err) {
      // No client is left to tell: the operator is, and the session's idle expiry removes the sandbox.
      log.warn('OpenEnv episode could not be ended on close', { episode: id, cause: causeOf(err) });
    }
  }
}
