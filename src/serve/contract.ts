import { z } from 'zod';
import { knownAgents } from '../agent/registry.js';

/**
 * The HTTP contract `termgrade serve` keeps with RL trainers (fields may be added, never changed).
 * Request bodies are validated here; responses are typed here. Errors are always
 * `{"error": {"code", "message"}}` with one of the statuses below.
 */
export const ERROR_STATUS = {
  bad_request: 400,
  unauthorized: 401,
  not_found: 404,
  conflict: 409,
  gone: 410,
  over_capacity: 429,
  unavailable: 503,
} as const;
export type ServeErrorCode = keyof typeof ERROR_STATUS;

export class ServeError extends Error {
  constructor(
    readonly code: ServeErrorCode,
    message: string,
    /** Seconds a client should wait before trying again (429, 503). */
    readonly retryAfterSec?: number,
  ) {
    super(message);
  }
}

export const CreateSessionBody = z.strictObject({
  task: z.string().min(1),
  /** The trainer's label for the policy that will act (kept with the grade for drift). */
  policy: z.string().max(200).optional(),
});

export const ExecBody = z.strictObject({
  command: z.string().min(1).max(1_000_000),
  timeout_sec: z.number().positive().max(3600).default(180),
});

export const ModelBody = z.looseObject({
  base_url: z.string().url(),
  model: z.string().min(1),
  api_key_env: z.string().optional(),
  temperature: z.number().min(0).optional(),
  top_p: z.number().gt(0).max(1).optional(),
  max_tokens: z.number().int().positive().optional(),
  extra_body: z.record(z.string(), z.unknown()).optional(),
});

export const EpisodeBody = z.strictObject({
  task: z.string().min(1),
  /** A registered agent: bash-tool, terminus, or one the server loaded (serve --agent-import-path). */
  agent: z.string().min(1).refine((name) => knownAgents().includes(name), { message: 'unknown agent (known: bash-tool, terminus, and any the server loaded)' }),
  model: ModelBody,
  /** The trainer's session id: sent on every model call (header and body) so its gateway can match tokens. */
  session_id: z.string().max(200).optional(),
  /** Makes the call idempotent: the same id returns the same episode. */
  episode_id: z.string().min(1).max(200).optional(),
  max_turns: z.number().int().positive().max(1000).optional(),
  policy: z.string().max(200).optional(),
});

/** The bash tool a session offers (the same schema the bash-tool scaffold gives its model). */
export const SESSION_TOOLS = [
  {
    type: 'function',
    function: {
      name: 'bash',
      description: 'Run a command with bash -lc in the task environment and return its exit code and output.',
      parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] },
    },
  },
];

/** What a grade says, whichever level produced it. `reward` is null for infrastructure failures. */
export interface Grade {
  reward: number | null;
  /** graded | infra | ungraded (see the accounting policy). */
  status: string;
  error_class: string | null;
  metrics: { acc: number | null; pass_rate: number | null; tests_passed: number; tests_total: number };
  tests: Array<{ name: string; status: string }>;
}
