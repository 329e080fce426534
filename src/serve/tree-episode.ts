import path from 'node:path';
import type { z } from 'zod';
import type { Agent } from '../agent/agent.js';
import { branchTrialId, runBranchedTrial, type BranchedTrial } from '../trial/branch.js';
import type { TrialOptions } from '../trial/options.js';
import type { TrialResult } from '../trial/schema.js';
import { TermgradeError } from '../util/errors.js';
import { readJsonIfThere, writeFileAtomic } from '../util/files.js';
import { ServeError, type BranchBody, type Grade } from './contract.js';
import { recordedTurns } from './recorded-turns.js';
import { gradeOf } from './grade.js';
import type { ServedBy } from './sessions.js';
import { branchPointOf, treeParts, TreeAnswerSchema, type TreeAnswer } from './tree.js';

/** What a tree-shaped episode is run with (EpisodeRunner hands it over). */
export interface TreeEpisode {
  id: string;
  /** The prefix's trial options (the episode's agent, the admission record, the timeouts). */
  options: TrialOptions;
  /** Keeps what a trial's grading recorded (trialAdmission's keep), for each branch. */
  keep: (r: TrialResult) => Promise<void>;
  branch: z.infer<typeof BranchBody>;
  /** The agent continuing branch j (its model calls name the branch: the trainer's session id + `.b<j>`). */
  branchAgent: (j: number) => Agent;
  servedBy: ServedBy;
  /** Each branch's grade, as any rollout's (the curriculum, grades.jsonl, the group's book). */
  grade: (branchId: string, grade: Grade) => void;
}

const gradeOfTrial = (r: TrialResult): Grade => gradeOf(r.reward, r.error?.class ?? null, r.tests, r);

/**
 * A tree-shaped episode: the prefix run to its branch point, forked n ways (runBranchedTrial),
 * each branch run and graded as a trial `<id>.b<j>`; each branch's grade is given like any
 * episode's; the answer (TreeAnswer) is recorded in the prefix's folder, so the same id is
 * answered from it later. A prefix that failed before its fork (no sandbox, the endpoint, the
 * fork refused) gives every branch its failure's grade.
 */
export async function runTreeEpisode(t: TreeEpisode): Promise<TreeAnswer> {
  const at = t.branch.at_command === undefined ? {} : { atCommand: new RegExp(t.branch.at_command) };
  let tree: BranchedTrial;
  try {
    tree = await runBranchedTrial(t.options, {
      n: t.branch.n,
      atTurn: t.branch.at_turn,
      ...at,
      branchAgent: t.branchAgent,
    });
  } catch (err) {
    if (err instanceof TermgradeError && err.code === 'usage') throw new ServeError('bad_request', err.message);
    throw err;
  }
  const ids = Array.from({ length: t.branch.n }, (_, j) => branchTrialId(tree.prefixId, j));
  const results = tree.failed ? ids.map(() => tree.failed!) : tree.branches;
  for (const r of results) await t.keep(r);
  const grades = results.map(gradeOfTrial);
  grades.forEach((g, j) => t.grade(ids[j]!, g));
  const answer = await treeAnswer(t, tree, ids, results, grades);
  const file = path.join(t.options.outDir, tree.prefixId, 'episode.json');
  await writeFileAtomic(file, JSON.stringify(answer));
  return answer;
}

/** The answer from the trials' records: the prefix's turns and messages once, each branch's own. */
async function treeAnswer(
  t: TreeEpisode,
  tree: BranchedTrial,
  ids: string[],
  results: TrialResult[],
  grades: Grade[],
): Promise<TreeAnswer> {
  const dirOf = (id: string): string => path.join(t.options.outDir, id);
  const part = async (id: string) => ({
    turns: await recordedTurns(dirOf(id)),
    messages: ((await readJsonIfThere(path.join(dirOf(id), 'agent', 'messages.json'))) ?? []) as unknown[],
  });
  const prefix = await part(tree.prefixId);
  const own = tree.failed ? ids.map(() => prefix) : await Promise.all(ids.map(part));
  const parts = treeParts(prefix, own);
  return TreeAnswerSchema.parse({
    episode_id: t.id,
    task: t.options.task.name,
    served_by: t.servedBy,
    kind: 'tree',
    branch: t.branch,
    reached: tree.reached,
    prefix: parts.prefix,
    branches: ids.map((id, j) => ({
      episode_id: id,
      ...grades[j]!,
      exit_reason: results[j]!.exitReason,
      ...parts.branches[j]!,
      timings: Object.fromEntries(
        Object.entries(results[j]!.phases).map(([k, v]) => [k, v ? v.durationMs / 1000 : null]),
      ),
    })),
    branch_points: [branchPointOf(tree.prefixTurns, ids, grades)],
    rewards: grades.map((g) => g.reward),
    statuses: grades.map((g) => g.status),
    fork: tree.fork && {
      services: tree.fork.services.map((s) => ({ command: s.command, ports: s.ports, sockets: s.sockets })),
      not_carried: tree.fork.notCarried,
      frozen_ms: tree.fork.frozenMs,
    },
    prefix_error: tree.failed ? `${tree.failed.error?.class ?? 'error'}: ${tree.failed.error?.message ?? ''}` : null,
  });
}
