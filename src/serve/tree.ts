import { z } from 'zod';
import type { Grade } from './contract.js';
import { treeStreams, type TokenTurn } from './token-stream.js';

/**
 * The answer of a tree-shaped episode (`"branch"` on /v1/episodes or a group's episode), defined
 * once here and checked before it is recorded or sent: the shared prefix once (its turns, messages
 * and token stream), then each branch's own part and its grade, and the GRPO accounting of the
 * branch point. Pure: the runner (tree-episode.ts) reads the records and hands them over.
 */

const TokenStreamSchema = z.object({
  ids: z.array(z.number().int()),
  loss_mask: z.array(z.number().int()),
  logprobs: z.array(z.number().nullable()),
});

/** A model call in a tree: no prompt ids (every prompt token is in the prefix's stream or the branch's own). */
const TreeTurnSchema = z.object({
  prompt_tokens: z.number().nullable(),
  completion_tokens: z.number().nullable(),
  completion_token_ids: z.array(z.number().int()).nullable(),
  logprobs: z.array(z.number()).nullable(),
});

/** Model calls and tokens of one part of a tree (the prefix, or one branch's own turns). */
const PartUsageSchema = z.object({
  turns: z.number().int(),
  prompt_tokens: z.number().nullable(),
  completion_tokens: z.number().nullable(),
});

const GradeSchema = z.object({
  reward: z.number().nullable(),
  status: z.string(),
  error_class: z.string().nullable(),
  metrics: z.object({
    acc: z.number().nullable(),
    pass_rate: z.number().nullable(),
    tests_passed: z.number(),
    tests_total: z.number(),
  }),
  tests: z.array(z.object({ name: z.string(), status: z.string() })),
  protection: z.enum(['admission', 'rules']),
  admission: z.object({ checksum: z.string(), recorded_at: z.string(), file: z.string().nullable() }).nullable(),
});

export const TreeBranchSchema = GradeSchema.extend({
  /** `<episode_id>.b<j>`: also the branch's trial folder and its grade's id in grades.jsonl. */
  episode_id: z.string(),
  exit_reason: z.string(),
  /** The branch's own messages (after the prefix's). */
  messages: z.array(z.unknown()),
  turns: z.array(TreeTurnSchema),
  /** The branch's own part of the stream: what follows the prefix's stream. */
  token_stream: TokenStreamSchema.nullable(),
  token_stream_problem: z.string().nullable(),
  usage: PartUsageSchema,
  timings: z.record(z.string(), z.number().nullable()),
});

/** GRPO's accounting of a branch point: whether its branches' rewards can teach anything. */
export const BranchPointSchema = z.object({
  /** The prefix's turns the branches continue after. */
  after_turn: z.number().int(),
  episode_ids: z.array(z.string()),
  rewards: z.array(z.number().nullable()),
  statuses: z.array(z.string()),
  /** Branches graded (the others failed for infrastructure: no reward). */
  graded: z.number().int(),
  /** Every branch graded with the same reward (no advantage to learn from); null unless all were graded. */
  all_same: z.boolean().nullable(),
  all_zero: z.boolean().nullable(),
  all_one: z.boolean().nullable(),
});

export const TreeAnswerSchema = z.object({
  episode_id: z.string(),
  task: z.string(),
  served_by: z.enum(['named', 'auto']),
  kind: z.literal('tree'),
  /** The branch point as asked. */
  branch: z.object({ n: z.number().int(), at_turn: z.number().int().optional(), at_command: z.string().optional() }),
  /** The prefix reached its branch point (false: the agent ended first; its branches have no turns of their own). */
  reached: z.boolean(),
  prefix: z.object({
    messages: z.array(z.unknown()),
    turns: z.array(TreeTurnSchema),
    token_stream: TokenStreamSchema.nullable(),
    token_stream_problem: z.string().nullable(),
    usage: PartUsageSchema,
  }),
  branches: z.array(TreeBranchSchema),
  branch_points: z.array(BranchPointSchema),
  rewards: z.array(z.number().nullable()),
  statuses: z.array(z.string()),
  /** What the fork carried into every branch; null when the prefix failed before it. */
  fork: z
    .object({
      services: z.array(
        z.object({ command: z.array(z.string()), ports: z.array(z.number()), sockets: z.array(z.string()) }),
      ),
      not_carried: z.array(z.string()),
      frozen_ms: z.number().nullable(),
    })
    .nullable(),
  /** Why no branch ran (the prefix failed: every branch carries that failure's grade); null otherwise. */
  prefix_error: z.string().nullable(),
});
export type TreeAnswer = z.infer<typeof TreeAnswerSchema>;
export type TreeBranch = z.infer<typeof TreeBranchSchema>;

/** A model call as the episode's trajectory recorded it. */
export interface RecordedTurn extends TokenTurn {
  prompt_tokens: number | null;
  completion_tokens: number | null;
}

/** The branch point's accounting from its branches' grades, by GroupBook's rule: all graded, or none of the all-same flags. */
export function branchPointOf(afterTurn: number, ids: string[], grades: Grade[]): z.infer<typeof BranchPointSchema> {
  const graded = grades.filter((g) => g.status === 'graded');
  const complete = grades.length > 0 && graded.length === grades.length;
  const rewards = grades.map((g) => g.reward);
  return {
    after_turn: afterTurn,
    episode_ids: ids,
    rewards,
    statuses: grades.map((g) => g.status),
    graded: graded.length,
    all_same: complete ? rewards.every((r) => r === rewards[0]) : null,
    all_zero: complete ? graded.every((g) => g.metrics.acc === 0) : null,
    all_one: complete ? graded.every((g) => g.metrics.acc === 1) : null,
  };
}

const treeTurn = (t: RecordedTurn): z.infer<typeof TreeTurnSchema> => ({
  prompt_tokens: t.prompt_tokens,
  completion_tokens: t.completion_tokens,
  completion_token_ids: t.completion_token_ids,
  logprobs: t.logprobs,
});

const sum = (xs: Array<number | null>): number | null =>
  xs.some((x) => x === null) ? null : xs.reduce<number>((a, x) => a + x!, 0);

const usageOf = (turns: RecordedTurn[]): z.infer<typeof PartUsageSchema> => ({
  turns: turns.length,
  prompt_tokens: sum(turns.map((t) => t.prompt_tokens)),
  completion_tokens: sum(turns.map((t) => t.completion_tokens)),
});

/** The prefix's part and each branch's own part (streams by the episodes' rule: treeStreams). */
export function treeParts(
  prefix: { turns: RecordedTurn[]; messages: unknown[] },
  branches: Array<{ turns: RecordedTurn[]; messages: unknown[] }>,
): {
  prefix: TreeAnswer['prefix'];
  branches: Array<Pick<TreeBranch, 'messages' | 'turns' | 'token_stream' | 'token_stream_problem' | 'usage'>>;
} {
  const n = prefix.turns.length;
  const own = branches.map((b) => b.turns.slice(n));
  const withIds = (turns: RecordedTurn[]): boolean => turns.some((t) => t.completion_token_ids !== null);
  const streams = treeStreams(prefix.turns, own);
  return {
    prefix: {
      messages: prefix.messages,
      turns: prefix.turns.map(treeTurn),
      token_stream: withIds(prefix.turns) ? streams.prefix.stream : null,
      token_stream_problem: withIds(prefix.turns) ? streams.prefix.problem : null,
      usage: usageOf(prefix.turns),
    },
    branches: branches.map((b, j) => {
      const any = withIds(prefix.turns) || withIds(own[j]!);
      return {
        messages: b.messages.slice(prefix.messages.length),
        turns: own[j]!.map(treeTurn),
        token_stream: any ? streams.branches[j]!.stream : null,
        token_stream_problem: any ? streams.branches[j]!.problem : null,
        usage: usageOf(own[j]!),
      };
    }),
  };
}
