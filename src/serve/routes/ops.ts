import type { FastifyInstance } from 'fastify';
import { ServeError } from '../contract.js';
import type { ServeContext } from '../context.js';

/** /healthz (no token: the engine's health) and /metrics (Prometheus text). */
export function registerOpsRoutes(app: FastifyInstance, ctx: ServeContext): void {
  app.get('/healthz', async () => {
    const h = await ctx.provider.health();
    if (!h.ok) throw new ServeError('unavailable', `sandbox engine unavailable: ${h.detail}`, 10);
    const { warm } = ctx.sessions;
    return {
      ok: true,
      engine: h.detail,
      live: ctx.sessions.live(),
      warm: {
        held: warm.held(),
        started_warm: warm.counters.warm,
        started_cold: warm.counters.cold,
        warm_failed: warm.counters.warmFailed,
      },
    };
  });
  app.get('/metrics', async (_req, reply) =>
    reply.type('text/plain; version=0.0.4').send(`${metricLines(ctx).join('\n')}\n`),
  );
}

function metricLines(ctx: ServeContext): string[] {
  const { sessions, episodes } = ctx;
  return [
    '# HELP termgrade_sandboxes_live Sandboxes alive now (sessions and episodes).',
    '# TYPE termgrade_sandboxes_live gauge',
    `termgrade_sandboxes_live ${sessions.live()}`,
    '# HELP termgrade_sandboxes_warm Started, never-used sandboxes kept ready (--warm).',
    '# TYPE termgrade_sandboxes_warm gauge',
    `termgrade_sandboxes_warm ${sessions.warm.held()}`,
    '# HELP termgrade_session_starts_total Session sandboxes by how they started: claimed warm, or cold.',
    '# TYPE termgrade_session_starts_total counter',
    `termgrade_session_starts_total{kind="warm"} ${sessions.warm.counters.warm}`,
    `termgrade_session_starts_total{kind="cold"} ${sessions.warm.counters.cold}`,
    '# HELP termgrade_warm_failures_total Warm sandboxes that failed when claimed (the session started cold).',
    '# TYPE termgrade_warm_failures_total counter',
    `termgrade_warm_failures_total ${sessions.warm.counters.warmFailed}`,
    '# TYPE termgrade_sessions_created_total counter',
    `termgrade_sessions_created_total ${sessions.counters.created}`,
    '# TYPE termgrade_sessions_verified_total counter',
    `termgrade_sessions_verified_total ${sessions.counters.verified}`,
    '# TYPE termgrade_sessions_expired_total counter',
    `termgrade_sessions_expired_total ${sessions.counters.expired}`,
    '# TYPE termgrade_episodes_started_total counter',
    `termgrade_episodes_started_total ${episodes.counters.started}`,
    '# HELP termgrade_episodes_running Episodes running now (finished ones are answered from disk).',
    '# TYPE termgrade_episodes_running gauge',
    `termgrade_episodes_running ${episodes.inMemory()}`,
    '# TYPE termgrade_grades_recorded_total counter',
    `termgrade_grades_recorded_total ${ctx.recorded()}`,
    '# TYPE termgrade_errors_total counter',
    ...[...sessions.counters.errors].map(([cls, n]) => `termgrade_errors_total{class="${cls}"} ${n}`),
  ];
}
