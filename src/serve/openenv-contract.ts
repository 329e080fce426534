import { z } from 'zod';
import { SafeId } from './ids.js';

/**
 * The OpenEnv face of `serve` (under /openenv): OpenEnv's HTTP environment protocol, as its
 * server defines it: POST /reset and POST /step answer `{observation, reward, done}`, GET /state
 * answers `{episode_id, step_count, ...}`, GET /schema the action, observation and state schemas,
 * GET /health `{status: "healthy"}`. An invalid action is 422 with `{detail: [issues]}`, as there.
 *
 * OpenEnv's stateless HTTP routes make a fresh environment per call; a shell session lives across
 * calls, so here the episode is named: reset answers its `episode_id` in the observation (or takes
 * the one given, a field OpenEnv's reset request has), and step and state name it as an extra
 * field (OpenEnv's step request admits extra fields) or the `X-Episode-Id` header.
 */

/** OpenEnv's reset request (seed, episode_id) plus termgrade's own fields (it admits extras). */
export const OpenEnvResetBody = z.strictObject({
  /** Accepted as OpenEnv defines it; a task's environment is its image, so nothing is seeded. */
  seed: z.number().int().nonnegative().optional(),
  episode_id: SafeId.optional(),
  /** A served task by name, or "auto" (the default): the live curriculum's pick. */
  task: z.string().min(1).default('auto'),
  split: z.enum(['train', 'validation']).optional(),
  policy: z.string().max(200).optional(),
  /** After this many commands the episode is graded and done (default: only on submit). */
  max_steps: z.number().int().positive().max(10_000).optional(),
});

/** An action: a shell command run with bash -lc, or the submission that ends the episode and grades it. */
export const OpenEnvAction = z.union([
  z.strictObject({ command: z.string().min(1).max(1_000_000), metadata: z.record(z.string(), z.unknown()).optional() }),
  z.strictObject({ submit: z.literal(true), metadata: z.record(z.string(), z.unknown()).optional() }),
]);
export type OpenEnvActionT = z.infer<typeof OpenEnvAction>;

/** OpenEnv's step request: the action plus its optional timeout and request id; episode_id is termgrade's. */
export const OpenEnvStepBody = z.strictObject({
  action: z.record(z.string(), z.unknown()),
  timeout_s: z.number().positive().max(3600).optional(),
  request_id: z.string().max(255).optional(),
  episode_id: SafeId.optional(),
});

export const OpenEnvStateQuery = z.strictObject({ episode_id: SafeId.optional() });

/** What an observation holds (OpenEnv's serialisation takes reward and done out of it). */
export const OpenEnvObservation = z.object({
  episode_id: z.string(),
  task: z.string(),
  /** The task's instruction (on reset; null after). */
  instruction: z.string().nullable(),
  /** The command's output, stdout then stderr, middle-truncated when long. */
  output: z.string(),
  exit_code: z.number().int().nullable(),
  timed_out: z.boolean(),
  truncated: z.boolean(),
  /** On the last step: the grade's status (graded | infra | ungraded), error class and tests. */
  grade: z
    .object({
      status: z.string(),
      error_class: z.string().nullable(),
      tests: z.array(z.object({ name: z.string(), status: z.string() })),
    })
    .nullable(),
});
export type OpenEnvObservationT = z.infer<typeof OpenEnvObservation>;

export const OpenEnvState = z.object({
  episode_id: z.string(),
  step_count: z.number().int().nonnegative(),
  task: z.string(),
  served_by: z.enum(['named', 'auto']),
  done: z.boolean(),
  reward: z.number().nullable(),
});

/**
 * OpenEnv's WebSocket route (`/ws`): one connection holds one environment session; the client
 * sends `{type: "reset", data: {reset fields}}`, `{type: "step", data: {action}}`,
 * `{type: "state"}` or `{type: "close"}` and gets `{type: "observation", data: {observation,
 * reward, done}}`, `{type: "state", data: {state}}` or `{type: "error", data: {message, code}}`.
 * Messages admit no extra fields, as there.
 */
export const OpenEnvWsMessage = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('reset'), data: z.record(z.string(), z.unknown()).default({}) }),
  z.strictObject({ type: z.literal('step'), data: z.record(z.string(), z.unknown()) }),
  z.strictObject({ type: z.literal('state') }),
  z.strictObject({ type: z.literal('close') }),
]);
export type OpenEnvWsMessageT = z.infer<typeof OpenEnvWsMessage>;

/** The error codes of OpenEnv's WebSocket route, as its server names them. */
export type OpenEnvWsErrorCode =
  'INVALID_JSON' | 'UNKNOWN_TYPE' | 'VALIDATION_ERROR' | 'EXECUTION_ERROR' | 'CAPACITY_REACHED';

/** Validation issues in OpenEnv's shape (`{loc, msg, type}`), under the location they came from. */
export function openEnvIssues(
  issues: readonly z.core.$ZodIssue[],
  at: string,
): Array<{ loc: string[]; msg: string; type: string }> {
  return issues.map((i) => ({ loc: [at, ...i.path.map(String)], msg: i.message, type: i.code }));
}
