import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify';
import type { z } from 'zod';
import { tokenEquals } from '../util/net.js';
import type { HostCheck } from '../util/host-check.js';
import { BODY_LIMIT_BYTES, ERROR_STATUS, ServeError } from './contract.js';

/** The error shape of every route: `{"error": {"code", "message"}}` with the code's status. */
export function send(reply: FastifyReply, err: ServeError): FastifyReply {
  if (err.retryAfterSec !== undefined) reply.header('retry-after', String(err.retryAfterSec));
  return reply.code(ERROR_STATUS[err.code]).send({ error: { code: err.code, message: err.message } });
}

/** A request body or query validated by its schema; the first problem named by its field (400). */
export function parse<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  const r = schema.safeParse(body ?? {});
  if (!r.success) {
    const i = r.error.issues[0]!;
    throw new ServeError('bad_request', `${i.path.join('.') || 'body'}: ${i.message}`);
  }
  return r.data;
}

function tokenMatches(header: string | undefined, token: string): boolean {
  return tokenEquals(/^Bearer (.+)$/.exec(header ?? '')?.[1] ?? '', token);
}

/**
 * The fastify instance every face of `serve` is mounted on: JSON parsing that reads an empty body
 * as an empty request, errors in the contract's shape, and the host check and bearer token on
 * every route but /healthz.
 */
export function createApp(hostCheck: HostCheck, token: string): FastifyInstance {
  const app = Fastify({ logger: false, bodyLimit: BODY_LIMIT_BYTES });
  // A JSON content type with no body (POST .../verify from many clients) is an empty request, not an error.
  const json = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (req, body, done) =>
    body === '' ? done(null, undefined) : json(req, body as string, done),
  );
  app.setErrorHandler((err, _req, reply) => {
    if (err instanceof ServeError) return send(reply, err);
    const e = err as { statusCode?: number; code?: string; message: string };
    if (e.statusCode === 413)
      return send(
        reply,
        new ServeError('too_large', `the request body is over serve's limit of ${BODY_LIMIT_BYTES} bytes`),
      );
    if (e.statusCode && e.statusCode >= 400 && e.statusCode < 500)
      return send(reply, new ServeError('bad_request', e.message));
    return send(reply, new ServeError('unavailable', `internal error: ${e.message}`, 5));
  });
  app.setNotFoundHandler((req, reply) => send(reply, new ServeError('not_found', `no route ${req.method} ${req.url}`)));
  app.addHook('onRequest', async (req, reply) => {
    // A refused WebSocket upgrade is answered on a socket no HTTP server owns: closed once answered.
    if (req.headers.upgrade) reply.raw.once('finish', () => req.raw.socket.destroy());
    const refused = hostCheck.refusal(req.headers.host, req.headers.origin);
    if (refused) return send(reply, new ServeError('forbidden', refused));
    if (req.url === '/healthz') return;
    if (!tokenMatches(req.headers.authorization, token))
      return send(reply, new ServeError('unauthorized', 'missing or wrong bearer token'));
  });
  return app;
}
