import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { BuildError } from '../sandbox/docker/image.js';
import { clipMessage } from '../util/clip.js';
import { createAgent, loadAgentModule, loadPrices } from '../agent/registry.js';
import { loadTask } from '../task/load.js';
import { runTrial } from '../trial/run.js';
import { TermgradeError } from '../util/errors.js';
import { createProvider } from '../sandbox/registry.js';
import { EXIT, handleSignals } from './signals.js';
import { warnAboutTasks } from './format.js';
import { resolveBuildNetwork } from '../sandbox/docker/build-network.js';
import { asGraded } from '../verifier/toolchain/plan.js';
import { admissionStore } from '../verifier/protection-store.js';
import { trialAdmission } from '../trial/admission.js';
import { runBranchedTrial, type BranchedTrial } from '../trial/branch.js';

export interface RunTrialFlags {
  buildNetwork?: string;
  agent?: string;
  agentImportPath?: string;
  out: string;
  /** --admission-dir: where the task's admission record is looked up (see admissionStore). */
  admissionDir?: string;
  timeoutMultiplier: number;
  grading?: 'evidence' | 'harbor';
  json?: boolean;
  model?: string;
  baseUrl?: string;
  apiKeyEnv: string;
  temperature?: number;
  topP?: number;
  maxTokens?: number;
  extraBody?: string;
  requestTimeout?: number;
  contextWindow?: number;
  maxTurns?: number;
  prices?: string;
  /** A tree: branch after this turn into `branches` (both or neither). */
  branchAt?: number;
  branches?: number;
}

const round3 = (v: number): number => Math.round(v * 1000) / 1000;

/** The model the flags name (with --extra-body parsed and its price looked up), or none. */
async function modelFromFlags(flags: RunTrialFlags) {
  let extraBody: Record<string, unknown> = {};
  if (flags.extraBody) {
    try {
      extraBody = JSON.parse(flags.extraBody) as Record<string, unknown>;
    } catch {
      // Not JSON: the one failure JSON.parse has.
      throw new TermgradeError('usage', '--extra-body must be a JSON object');
    }
  }
  const prices = await loadPrices(flags.prices);
  return flags.model && flags.baseUrl
    ? {
        baseUrl: flags.baseUrl,
        model: flags.model,
        apiKeyEnv: flags.apiKeyEnv,
        temperature: flags.temperature,
        topP: flags.topP,
        maxTokens: flags.maxTokens,
        extraBody,
        requestTimeoutSec: flags.requestTimeout,
        contextWindow: flags.contextWindow,
        price: prices[flags.model],
      }
    : undefined;
}

/** The trial's result as text: reward, tests, rewards, steps and where its folder is. */
function printTrialResult(
  taskName: string,
  agent: { name: string; model: string | null },
  result: Awaited<ReturnType<typeof runTrial>>,
  out: string,
): void {
  const s = result.testsSummary;
  const failed = result.tests
    .filter((t) => t.status === 'failed' || t.status === 'error')
    .map((t) => `\n  ${t.name}${t.message ? `: ${clipMessage(t.message)}` : ''}`);
  process.stdout.write(
    `${taskName} / ${agent.name}${agent.model ? ` (${agent.model})` : ''}: reward ${result.reward ?? 'none'} (${s.passed}/${s.total} tests passed)` +
      `, ${result.turns} turns, ended: ${result.exitReason}` +
      `${result.error ? `, ${result.error.class}: ${result.error.message}` : ''}\n` +
      (failed.length ? `failed tests:${failed.join('')}\n` : '') +
      (Object.keys(result.rewards).some((k) => k !== 'reward')
        ? `rewards: ${Object.entries(result.rewards)
            .map(([k, v]) => `${k} ${round3(v)}`)
            .join(', ')}\n`
        : '') +
      result.steps
        .map(
          (st) =>
            `step ${st.name}: reward ${st.reward === null ? 'none' : round3(st.reward)}${st.contributes ? '' : ' (not counted)'}${st.stoppedTrial ? ' (missed its min_reward: the trial stopped here)' : ''}${st.error ? `, ${st.error.class}` : ''}\n`,
        )
        .join('') +
      (result.taskVersion || result.dataset
        ? `task version ${result.taskVersion ?? '-'}${result.dataset ? `, dataset ${result.dataset.name ?? '-'} ${result.dataset.version ?? '-'}` : ''}\n`
        : '') +
      `graded against: ${result.admission ? `the admission record ${result.admission.file ?? '(given in memory)'} (recorded ${result.admission.recordedAt})` : 'the fixed rules only (no admission record for this task content: check it first)'}\n` +
      `trial folder: ${path.join(path.resolve(out), result.trialId)}\n`,
  );
}

/** A tree's branches as text: each branch's trial and reward, then the rewards and where the prefix is. */
function printTree(tree: BranchedTrial, out: string): void {
  const dir = (id: string): string => path.join(path.resolve(out), id);
  if (tree.failed) {
    const e = tree.failed.error;
    process.stdout.write(
      `no branches: the prefix failed before its fork${e ? ` (${e.class}: ${e.message})` : ''}\ntrial folder: ${dir(tree.prefixId)}\n`,
    );
    return;
  }
  const rewards = tree.branches.map((r) => r.reward);
  process.stdout.write(
    (tree.reached
      ? `forked after turn ${tree.prefixTurns} into ${tree.branches.length} branches`
      : `the agent ended at turn ${tree.prefixTurns}, before its branch point: ${tree.branches.length} branches graded on its end`) +
      `${tree.fork?.services.length ? ` (services carried: ${tree.fork.services.map((s) => s.command.join(' ')).join('; ')})` : ''}\n` +
      tree.branches
        .map(
          (r, j) =>
            `branch ${j} ${r.trialId}: reward ${r.reward ?? 'none'} (${r.testsSummary.passed}/${r.testsSummary.total} tests passed), ${r.turns} turns in all, ended: ${r.exitReason}${r.error ? `, ${r.error.class}: ${r.error.message}` : ''}\n`,
        )
        .join('') +
      `rewards: ${rewards.map((x) => x ?? 'none').join(' ')}${rewards.every((x) => x !== null && x === rewards[0]) ? ' (all the same: no advantage to learn from)' : ''}\n` +
      `prefix folder: ${dir(tree.prefixId)} (tree.json lists the branches; each branch's result.json names the prefix under "branch")\n`,
  );
}

export async function runTrialCommand(taskDir: string, flags: RunTrialFlags): Promise<number> {
  if ((flags.branchAt === undefined) !== (flags.branches === undefined))
    throw new TermgradeError(
      'usage',
      '--branch-at and --branches go together (the turn to branch after, and how many branches)',
    );
  // run-trial runs offline: a verifier that fetches its tools gets the offline toolchain where it serves.
  const task = await asGraded(await loadTask(taskDir), null);
  warnAboutTasks([task]);
  const store = admissionStore({ admissionDir: flags.admissionDir });
  const model = await modelFromFlags(flags);
  const loaded = flags.agentImportPath ? await loadAgentModule(flags.agentImportPath) : null;
  const { agent, secrets } = createAgent({ name: flags.agent ?? loaded ?? 'oracle', model, maxTurns: flags.maxTurns });
  // Graded against the task's admission record as `run` grades (the same store, the same lookup);
  // an oracle trial of a task with none records it, as in `run`.
  const admission = await trialAdmission(store, task, agent.name);
  const provider = createProvider({
    backend: 'docker',
    engines: [],
    buildNetwork: resolveBuildNetwork(flags.buildNetwork),
  });
  await provider.ping();
  const signals = handleSignals(provider, (m) => process.stderr.write(`${m}\n`));
  // A failed build's log is kept beside the trial folders, and its path printed: the error line
  // alone rarely says which step failed.
  let buildLog: string | null = null;
  const prepare = async (): ReturnType<typeof provider.prepare> => {
    try {
      return await provider.prepare(task, { signal: signals.signal, agentLayer: agent.imageLayer });
    } catch (err) {
      if (err instanceof BuildError && err.log) {
        buildLog = path.join(
          path.resolve(flags.out),
          'builds',
          `${task.name}-${new Date().toISOString().replace(/[:.]/g, '-')}.log`,
        );
        await mkdir(path.dirname(buildLog), { recursive: true });
        await writeFile(buildLog, err.log);
      }
      throw err;
    }
  };
  try {
    const options = {
      task,
      agent,
      provider,
      prepare,
      outDir: path.resolve(flags.out),
      ...admission.options,
      timeouts: { agentMultiplier: flags.timeoutMultiplier, verifierMultiplier: flags.timeoutMultiplier },
      signal: signals.signal,
      secrets,
      grading: flags.grading,
    };
    if (flags.branchAt !== undefined) {
      const tree = await runBranchedTrial(options, { n: flags.branches!, atTurn: flags.branchAt });
      for (const r of tree.failed ? [tree.failed] : tree.branches) await admission.keep(r);
      if (flags.json) process.stdout.write(`${JSON.stringify(tree)}\n`);
      else printTree(tree, flags.out);
      return signals.exitCode() ?? (tree.branches.some((r) => r.passed) ? EXIT.ok : EXIT.rejected);
    }
    const result = await runTrial(options);
    await admission.keep(result);
    if (buildLog) process.stderr.write(`termgrade: the image build failed; its log: ${String(buildLog)}\n`);
    if (flags.json) process.stdout.write(`${JSON.stringify(result)}\n`);
    else printTrialResult(task.name, agent, result, flags.out);
    return signals.exitCode() ?? (result.passed ? EXIT.ok : EXIT.rejected);
  } finally {
    await provider.closeAll();
    signals.dispose();
  }
}
