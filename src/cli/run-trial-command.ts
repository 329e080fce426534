import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { BuildError } from '../sandbox/docker/image.js';
import { clipMessage } from '../util/clip.js';
import { createAgent, loadAgentModule, loadPrices, loadTask, runTrial, TermgradeError } from '../index.js';
import { createProvider } from '../sandbox/registry.js';
import { EXIT, handleSignals } from './signals.js';
import { warnAboutTasks } from './format.js';
import { resolveBuildNetwork } from '../sandbox/docker/build-network.js';
import { asGraded } from '../verifier/toolchain/plan.js';
import { admissionStore } from '../verifier/protection-store.js';
import { trialAdmission } from '../trial/admission.js';

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
}

const round3 = (v: number): number => Math.round(v * 1000) / 1000;

/** The model the flags name (with --extra-body parsed and its price looked up), or none. */
async function modelFromFlags(flags: RunTrialFlags) {
  let extraBody: Record<string, unknown> = {};
  if (flags.extraBody) {
    try {
      extraBody = JSON.parse(flags.extraBody) as Record<string, unknown>;
    } catch {
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

export async function runTrialCommand(taskDir: string, flags: RunTrialFlags): Promise<number> {
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
    const result = await runTrial({
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
    });
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
