import websocket from '@fastify/websocket';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { parse } from '../app.js';
import type { ServeContext } from '../context.js';
import { OpenEnvEpisodes, STEP_TIMEOUT_SEC } from '../openenv.js';
import {
  OpenEnvAction,
  OpenEnvObservation,
  OpenEnvResetBody,
  OpenEnvState,
  OpenEnvStateQuery,
  OpenEnvStepBody,
  openEnvIssues,
} from '../openenv-contract.js';
import { isSafeId } from '../ids.js';
import { OpenEnvWsConnection } from '../openenv-ws.js';

/** Where the OpenEnv face is mounted: an OpenEnv client's base URL is `<server>/openenv`. */
export const OPENENV_PREFIX = '/openenv';

/** The largest WebSocket message taken: the HTTP face's body limit. */
const WS_MAX_MESSAGE_BYTES = 2 * 1024 * 1024;

/** The episode a step or state call names: the body's or query's episode_id, else the X-Episode-Id header. */
function episodeOf(req: FastifyRequest, given: string | undefined): string | undefined {
  const header = req.headers['x-episode-id'];
  const fromHeader = typeof header === 'string' && isSafeId(header) ? header : undefined;
  return given ?? fromHeader;
}

/** OpenEnv's HTTP environment protocol (see openenv-contract.ts), behind the same token as the rest. */
export function registerOpenEnvRoutes(app: FastifyInstance, ctx: ServeContext): void {
  const episodes = new OpenEnvEpisodes(ctx);
  const p = OPENENV_PREFIX;
  app.get(`${p}/health`, async () => ({ status: 'healthy' }));
  app.get(`${p}/metadata`, async () => ({
    name: 'termgrade',
    description: "Terminal tasks in Docker sandboxes: a shell command per step, graded by the task's tests on submit.",
  }));
  app.get(`${p}/schema`, async () => ({
    action: z.toJSONSchema(OpenEnvAction),
    observation: z.toJSONSchema(OpenEnvObservation),
    state: z.toJSONSchema(OpenEnvState),
  }));
  app.post(`${p}/reset`, async (req) => episodes.reset(parse(OpenEnvResetBody, req.body)));
  app.post(`${p}/step`, async (req, reply) => {
    const body = parse(OpenEnvStepBody, req.body);
    const action = OpenEnvAction.safeParse(body.action);
    // As OpenEnv's server answers an action that does not fit the environment's action schema.
    if (!action.success) return reply.code(422).send({ detail: openEnvIssues(action.error.issues, 'action') });
    return episodes.step(episodeOf(req, body.episode_id) ?? '', action.data, body.timeout_s ?? STEP_TIMEOUT_SEC);
  });
  app.get(`${p}/state`, async (req) =>
    episodes.state(episodeOf(req, parse(OpenEnvStateQuery, req.query).episode_id) ?? ''),
  );
  // The plugin loads with the server (listen awaits it); its failure fails the start.
  void app.register(async (scope) => {
    await scope.register(websocket, { options: { maxPayload: WS_MAX_MESSAGE_BYTES } });
    // OpenEnv's stock client keeps its episode over `<base>/ws`; the upgrade request goes through
    // the same host check and bearer token as every other route (createApp's onRequest hook).
    scope.get(`${p}/ws`, { websocket: true }, (socket) => {
      new OpenEnvWsConnection(episodes, socket);
    });
  });
}
