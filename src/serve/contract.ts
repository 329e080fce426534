import { z } from 'zod';
import { knownAgents } from '../agent/registry.js';
import { SafeId } from './ids.js';

/**
 * The HTTP contract `termgrade serve` keeps with RL trainers (fields may be added, never changed).
 * Request bodies are validated here; responses are typed here. Errors are always
 * `{"error": {"code", "message"}}` with one of the statuses below.
 */
export const ERROR_STATUS = {
  bad_request: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  gone: 410,
  // A request body over serve's limit (BODY_LIMIT_BYTES).
  too_large: 413,
  over_capacity: 429,
  not_implemented: 501,
  unavailable: 503,
} as const;
export type ServeErrorCode = keyof typeof ERROR_STATUS;

/** The largest request body serve reads (a step's command and files are far smaller). */
export const BODY_LIMIT_BYTES = 2 * 1024 * 1024;

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

/** `"auto"`: the live curriculum picks the task for the policy (see curriculum.ts). */
export const AUTO = 'auto';

/** Which split `"task": "auto"` picks from (default: train when a selection is served, else every task). */
const SplitField = z.enum(['train', 'validation']).optional();

export const CreateSessionBody = z.strictObject({
  task: z.string().min(1),
  split: SplitField,
  /** The trainer's label for the policy that will act (kept with the grade for drift). */
  policy: z.string().max(200).optional(),
});

export const ExecBody = z.strictObject({
  command: z.string().min(1).max(1_000_000),
  timeout_sec: z.number().positive().max(3600).default(180),
});

/**
 * An episode's model: one the server serves, by name (`serve --model` / `--model-config`), with the
 * sampling settings the client chooses. The endpoint and the key variable are the server's: a
 * client may repeat them (older clients sent them) but never choose them.
 */
export const ModelBody = z.looseObject({
  /** A served model's name (may be left out when the server serves one). */
  model: z.string().min(1).max(200).optional(),
  base_url: z.string().max(2000).optional(),
  api_key_env: z.string().max(200).optional(),
  temperature: z.number().min(0).optional(),
  top_p: z.number().gt(0).max(1).optional(),
  max_tokens: z.number().int().positive().optional(),
  extra_body: z.record(z.string(), z.unknown()).optional(),
  /** Seconds per model request, at most the server's (a dead endpoint fails sooner). */
  request_timeout_sec: z.number().positive().optional(),
  /** Retries of a failed model request, at most the server's (0: fail at the first error). */
  max_retries: z.number().int().nonnegative().optional(),
});

/** Bundled agents that do not act for a policy: refused by the episode routes. */
const NOT_POLICIES = ['oracle', 'nop'];

/** A valid JavaScript regular expression (a branch condition's pattern). */
const Pattern = z
  .string()
  .min(1)
  .max(500)
  .refine(
    (p) => {
      try {
        new RegExp(p);
        return true;
      } catch {
        return false; // the refinement's message says what is wrong
      }
    },
    { error: 'not a valid regular expression' },
  );

/**
 * A tree-shaped episode: the agent runs to its branch point, after turn `at_turn` or after the
 * first turn that ran a command matching `at_command`, then its sandbox and its conversation are
 * forked into `n` branches, each run to the end and graded.
 */
export const BranchBody = z
  .strictObject({
    n: z.number().int().min(1).max(64),
    at_turn: z.number().int().positive().max(1000).optional(),
    at_command: Pattern.optional(),
  })
  .refine((b) => (b.at_turn === undefined) !== (b.at_command === undefined), {
    error: 'give the branch point as at_turn or at_command (one of them)',
  });

export const EpisodeBody = z.strictObject({
  task: z.string().min(1),
  split: SplitField,
  /**
   * A registered agent that acts for a policy: bash-tool, terminus, or one the server loaded (serve
   * --agent-import-path). Never oracle (it runs the task's own solution: a reward 1 no policy
   * earned would reach the curriculum and grades.jsonl) nor nop.
   */
  agent: z
    .string()
    .min(1)
    .refine((name) => !NOT_POLICIES.includes(name), {
      error:
        'oracle and nop are not policies: an episode is run by a model agent (bash-tool, terminus, or a loaded one)',
    })
    .refine((name) => knownAgents().includes(name), {
      error: 'unknown agent (known: bash-tool, terminus, and any the server loaded)',
    }),
  model: ModelBody.default({}),
  /** The trainer's session id: sent on every model call (header and body) so its gateway can match tokens. */
  session_id: SafeId.optional(),
  /** Makes the call idempotent: the same id returns the same episode, while it runs and from disk after. */
  episode_id: SafeId.optional(),
  max_turns: z.number().int().positive().max(1000).optional(),
  policy: z.string().max(200).optional(),
  /** Branch the episode into a tree (answered as TreeAnswer); see BranchBody. */
  branch: BranchBody.optional(),
});

/**
 * What every episode of a group run by the server shares (the episode's fields but its task and
 * ids); `session_ids`, when given, is one trainer session id per episode, in order.
 */
export const GroupEpisode = EpisodeBody.pick({ agent: true, model: true, max_turns: true, branch: true }).extend({
  session_ids: z.array(SafeId).optional(),
});

/**
 * n rollouts of one task at once (a GRPO group), on `task` or the curriculum's pick: n sessions the
 * trainer drives, or, with `episode`, n episodes the server runs against a served model. A
 * `group_id` makes the call idempotent: an episode group's episodes are `<group_id>.<i>`; with
 * `member: true` (sessions only) each call with that id answers one member session of the one
 * group, for trainers whose n rollouts of a prompt each ask for their own (verl's agent loops).
 */
export const CreateGroupBody = z
  .strictObject({
    task: z.string().min(1),
    split: SplitField,
    n: z.number().int().min(1).max(256),
    policy: z.string().max(200).optional(),
    episode: GroupEpisode.optional(),
    member: z.literal(true).optional(),
    // Short enough that "<group_id>.<i>" is still a safe id.
    group_id: SafeId.refine((id) => id.length <= 120, 'at most 120 characters').optional(),
    /** A live session to branch: the group is n forks of it (its task, or "auto" for it). */
    from_session: SafeId.optional(),
  })
  .superRefine((b, ctx) => {
    if (b.from_session !== undefined && (b.episode || b.member || b.group_id !== undefined))
      ctx.addIssue({
        code: 'custom',
        path: ['from_session'],
        message: 'a group of forks takes no episode, member or group_id',
      });
    if (b.group_id !== undefined && !b.episode && !b.member)
      ctx.addIssue({
        code: 'custom',
        path: ['group_id'],
        message: 'only a group of episodes or a member call takes a group_id',
      });
    if (b.member && (b.episode || b.group_id === undefined))
      ctx.addIssue({ code: 'custom', path: ['member'], message: 'a member call names a group_id and no episode' });
    const ids = b.episode?.session_ids;
    if (ids && ids.length !== b.n)
      ctx.addIssue({
        code: 'custom',
        path: ['episode', 'session_ids'],
        message: `${ids.length} session ids for ${b.n} episodes`,
      });
  });

/** n continuations of a live session (POST /v1/sessions/{id}/fork). */
export const ForkBody = z.strictObject({ n: z.number().int().min(1).max(256) });

export const CurriculumQuery = z.strictObject({ policy: z.string().max(200).optional() });

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

/**
 * One session as every route gives it (POST /v1/sessions, each member of a group, each child of a
 * fork): the same fields everywhere, so a client reads one shape. `forked_from` is the parent
 * session's id for a fork's child, else null; a child keeps its parent's `served_by`.
 */
export const SessionAnswerSchema = z.strictObject({
  session_id: z.string(),
  task: z.string(),
  instruction: z.string(),
  tools: z.array(z.unknown()),
  expires_at: z.iso.datetime(),
  served_by: z.enum(['named', 'auto']),
  forked_from: z.string().nullable(),
});
export type SessionAnswer = z.infer<typeof SessionAnswerSchema>;

/** What a grade says, whichever level produced it. `reward` is null for infrastructure failures. */
export interface Grade {
  reward: number | null;
  /** graded | infra | ungraded (see the accounting policy). */
  status: string;
  error_class: string | null;
  metrics: { acc: number | null; pass_rate: number | null; tests_passed: number; tests_total: number };
  tests: Array<{ name: string; status: string }>;
  /** How the grade was protected: `admission` (the task's admission record), or `rules` (the fixed rules only). */
  protection: 'admission' | 'rules';
  /** The admission record the grade used (null with the fixed rules only), as a trial's result names it. */
  admission: { checksum: string; recorded_at: string; file: string | null } | null;
}
