import { randomBytes } from 'node:crypto';
import { mkdir, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Agent, AgentOutcome, AgentUsage } from '../agent/agent.js';
import { makeScrub, scrubValue, type Scrub } from '../util/scrub.js';
import { pendingSandbox } from '../sandbox/pending.js';
import { acquireSandbox } from '../sandbox/lease.js';
import { DEFAULT_START_TIMEOUT_SEC } from '../sandbox/start.js';
import type { PreparedEnvironment, Sandbox, SandboxProvider } from '../sandbox/sandbox.js';
import type { Task } from '../task/task.js';
import { CancelledError, EngineLostError, GradingStepError, TermgradeError, errorMessage } from '../util/errors.js';
import { protectionModeOf, type ProtectionRecord } from '../verifier/protection.js';
import { deadlineSignal, nowIso } from '../util/time.js';
import { summarizeTests, type TestResult, type VerifierOutcome } from '../verifier/schema.js';
import { gradeSandbox } from '../verifier/verify.js';
import { ModelError } from '../model/errors.js';
import { ENDPOINT_FAILURE_KINDS, INFRA_ERROR_CLASSES } from './accounting.js';
import type { Phase, PhaseTiming, StepResult, TrialError, TrialErrorClass, TrialResult } from './schema.js';
import { aggregateStepRewards, missesMinimum } from './step-rewards.js';
import { networkFor, phaseNetworks } from '../task/network.js';
import type { NetworkMode } from '../task/schema.js';

export interface TrialTimeouts {
  /** Container start (the image build has the task's own build_timeout_sec). Default 120 s (DEFAULT_START_TIMEOUT_SEC). */
  environmentSec?: number;
  /** Agent setup (installing its tools in the sandbox). Default 600 s. */
  agentSetupSec?: number;
  /** Multipliers on the task's [agent] and [verifier] timeout_sec. Default 1. */
  agentMultiplier?: number;
  verifierMultiplier?: number;
  /** Disk the agent may write in the sandbox, MB; default the task's storage_mb, else 10 GiB. */
  diskLimitMb?: number;
}

export interface TrialOptions {
  task: Task;
  agent: Agent;
  provider: SandboxProvider;
  /** Trial folders are made here: <outDir>/<trialId>/result.json, agent/, verifier/. */
  outDir: string;
  attempt?: number;
  trialId?: string;
  timeouts?: TrialTimeouts;
  /** Values (API keys) scrubbed from everything the trial writes. */
  secrets?: string[];
  /** Environment variables for the agent's commands (ctx.env). */
  agentEnv?: Record<string, string>;
  /** Gets the image; default: the provider builds or finds it (with the agent's layer). */
  prepare?: () => Promise<PreparedEnvironment>;
  /**
   * Gets a started sandbox for the image (a warm one, say); default: the provider starts one.
   * `signal` aborts when the start is given up (its deadline, the trial's cancel).
   */
  start?: (prepared: PreparedEnvironment, signal: AbortSignal) => Promise<Sandbox>;
  /**
   * The network for a task that asks for one (allow_internet / network_mode): an isolated network
   * the user made. Null or absent: every trial runs offline, whatever the task asks.
   */
  network?: string | null;
  /**
   * Takes the sandbox's removal off the trial's path: given, the trial ends once graded and hands
   * over the removal under way (a job frees the slot at once and awaits removals at its end);
   * the result then has no teardown phase. Removal never throws (Sandbox.close).
   */
  removeInBackground?: (removal: Promise<void>) => void;
  /** Called as each phase starts (progress displays, tests that stop a run at a given point). */
  onPhase?: (phase: Phase) => void;
  signal?: AbortSignal;
  /** The task's protected set from admission (its reference solution's grading); absent: the fixed rules only. */
  protection?: ProtectionRecord | null;
  /** Receives the protected set this trial's grading recorded (an oracle trial's: admission). */
  onProtectionRecord?: (record: ProtectionRecord) => void;
}

/** A failure to make the sandbox: the image's build, or else the environment. */
const setupErrorClass = (err: unknown): 'build_failed' | 'environment_error' => (err instanceof TermgradeError && err.code === 'build_failed' ? 'build_failed' : 'environment_error');

/** Waits for a sandbox started behind the agent; records its setup time, or returns its failure. */
async function settleStart(starting: Promise<Sandbox>, from: { iso: string; ms: number; readyIso: string; readyMs: number }, phases: Partial<Record<Phase, PhaseTiming>>): Promise<unknown> {
  try {
    await starting;
    phases.environment_setup = { startedAt: from.iso, finishedAt: from.readyIso, durationMs: from.readyMs - from.ms };
    return null;
  } catch (err) {
    return err ?? new Error('the sandbox did not start');
  }
}

/** Disk an agent may write on top of its image: the task's storage_mb, else this default. */
export const DEFAULT_DISK_LIMIT_MB = 10 * 1024;

function diskLimitMb(task: Task, t: TrialTimeouts): number {
  const env = task.config.environment;
  return t.diskLimitMb ?? env.storage_mb ?? env.storage ?? DEFAULT_DISK_LIMIT_MB;
}

/**
 * Polls the sandbox's disk use while the agent works and aborts the agent once it passes the
 * limit: an agent must not fill the host's disk. Checked every few seconds (the engine walks the
 * sandbox's files to answer), so a fast writer can pass the limit by a few seconds' worth.
 */
function watchDisk(sandbox: Sandbox, limitMb: number, everyMs = 5000): { signal: AbortSignal; over: () => boolean; message: () => string; stop: () => void } {
  const ctl = new AbortController();
  let used = 0;
  let busy = false;
  const timer = setInterval(() => {
    if (busy) return;
    busy = true;
    sandbox
      .diskUsage()
      .then((bytes) => {
        if (bytes !== null && bytes > limitMb * 1024 * 1024 && !ctl.signal.aborted) {
          used = bytes;
          ctl.abort();
        }
      })
      .catch(() => undefined)
      .finally(() => {
        busy = false;
      });
  }, everyMs);
  return {
    signal: ctl.signal,
    over: () => ctl.signal.aborted,
    message: () => `the agent wrote ${Math.round(used / 1024 / 1024)} MB to the sandbox's disk, over its limit of ${limitMb} MB; it was stopped and its work graded`,
    stop: () => clearInterval(timer),
  };
}

export function newTrialId(task: Task, agent: string, attempt: number): string {
  const safe = task.name.replace(/[^A-Za-z0-9._-]+/g, '-').slice(0, 60);
  return `${safe}__${agent}__${attempt}__${randomBytes(4).toString('hex')}`;
}

async function writeJsonAtomic(file: string, data: unknown, scrub: Scrub): Promise<void> {
  const tmp = `${file}.${process.pid}.tmp`;
  await writeFile(tmp, `${scrub(JSON.stringify(data, null, 2))}\n`);
  await rename(tmp, file);
}

/**
 * One trial: environment setup, agent setup, agent run, verification, teardown; each timed, each
 * bounded. The agent's timeout or crash is recorded and the sandbox is still verified; teardown
 * happens on every path. Never throws for a trial outcome: the result says what happened.
 */
export async function runTrial(options: TrialOptions): Promise<TrialResult> {
  const { task, agent, provider, signal } = options;
  const attempt = options.attempt ?? 0;
  const trialId = options.trialId ?? newTrialId(task, agent.name, attempt);
  const trialDir = path.join(options.outDir, trialId);
  const agentLogs = path.join(trialDir, 'agent');
  const verifierLogs = path.join(trialDir, 'verifier');
  // A folder already there is the remains of a run that died before recording it: start clean.
  await rm(trialDir, { recursive: true, force: true });
  await mkdir(agentLogs, { recursive: true });
  await mkdir(verifierLogs, { recursive: true });
  const t = options.timeouts ?? {};

  const startedAt = nowIso();
  const t0 = performance.now();
  const phases: Partial<Record<Phase, PhaseTiming>> = {};
  const errors: TrialError[] = [];
  const fail = (cls: TrialErrorClass, phase: Phase, message: string): void => {
    errors.push({ class: cls, message, phase });
  };
  const timed = async <T>(phase: Phase, work: () => Promise<T>): Promise<T> => {
    options.onPhase?.(phase);
    const s = nowIso();
    const p0 = performance.now();
    try {
      return await work();
    } finally {
      // A phase run again (a multi-step task's agent runs and gradings): from its first start, time summed.
      const before = phases[phase];
      const ms = performance.now() - p0;
      phases[phase] = before ? { startedAt: before.startedAt, finishedAt: nowIso(), durationMs: before.durationMs + ms } : { startedAt: s, finishedAt: nowIso(), durationMs: ms };
    }
  };
  const cancelled = (err: unknown): boolean => err instanceof CancelledError || (signal?.aborted ?? false);

  const scrub = makeScrub(options.secrets ?? []);
  const usage: AgentUsage = { turns: 0, tokens: null, costUsd: null };
  let prepared: PreparedEnvironment | null = null;
  let sandbox: Sandbox | null = null;
  /** With a model-first agent: the start still under way when the agent began. */
  let startingSandbox: Promise<Sandbox> | null = null;
  let outcome: AgentOutcome | null = null;
  let exitReason: TrialResult['exitReason'] = 'not_run';
  let verdict: VerifierOutcome | null = null;
  // The model endpoint failed (after its own retries): the trial says nothing about the model.
  let endpointFailed = false;

  const setupStarted = { iso: '', ms: 0, readyIso: '', readyMs: 0 };
  // A step's grading or network switch the engine failed: the trial carries no reward.
  let infraFailed = false;
  const stepResults: StepResult[] = [];
  const stepTests: TestResult[] = [];
  const stepVerdicts: VerifierOutcome[] = [];
  const networks = phaseNetworks(task.config);
  // The sandbox starts on the user's network when any phase may use it (a sandbox started on none
  // can never be given one); each phase then gets its own (setPhaseNetwork).
  const anyPublic = networks.environment === 'public' || networks.agent === 'public' || networks.verifier === 'public';
  const startNetwork = anyPublic ? (options.network ?? null) : null;
  let onNetwork: string | null = startNetwork;
  try {
    await timed('environment_setup', async () => {
      setupStarted.iso = nowIso();
      setupStarted.ms = performance.now();
      try {
        prepared = await (options.prepare ? options.prepare() : provider.prepare(task, { signal, agentLayer: agent.imageLayer }));
        const ready = prepared;
        // acquireSandbox owns the start: at its deadline it is given up and its sandbox closed.
        const starting = acquireSandbox({
          provider,
          task,
          prepare: ready,
          deadlineMs: (t.environmentSec ?? DEFAULT_START_TIMEOUT_SEC) * 1000,
          signal,
          labels: { 'io.termgrade.trial': trialId },
          network: startNetwork,
          start: options.start ? (startSignal) => options.start!(ready, startSignal) : undefined,
        }).then(({ sandbox: box }) => {
          setupStarted.readyIso = nowIso();
          setupStarted.readyMs = performance.now();
          return box;
        });
        if (agent.modelFirst) {
          // The agent begins with a model call: it starts now, the sandbox catches up.
          startingSandbox = starting;
          sandbox = pendingSandbox(starting);
        } else sandbox = await starting;
      } catch (err) {
        if (cancelled(err)) throw err;
        fail(setupErrorClass(err), 'environment_setup', errorMessage(err));
      }
    });
    const box = sandbox as Sandbox | null;
    if (box) {
      const ctx = { sandbox: box, task, logsDir: agentLogs, scrub, usage, sessionId: trialId, env: options.agentEnv ?? {} };
      // Each phase's network (Harbor's per-phase policy): the baseline until the agent runs.
      const setPhaseNetwork = async (mode: NetworkMode, phase: Phase): Promise<boolean> => {
        const want = networkFor(mode, startNetwork);
        if (want === onNetwork) return true;
        try {
          await box.setNetwork(want);
          onNetwork = want;
          return true;
        } catch (err) {
          if (cancelled(err)) throw err;
          fail('environment_error', phase, `the sandbox could not be put on the ${phase} phase's network (${mode}): ${errorMessage(err)}`);
          return false;
        }
      };
      const setupOk = await timed('agent_setup', async () => {
        if (!(await setPhaseNetwork(networks.environment, 'agent_setup'))) return false;
        const deadline = deadlineSignal(signal, (t.agentSetupSec ?? 600) * 1000);
        try {
          await agent.setup({ ...ctx, signal: deadline.signal });
          return true;
        } catch (err) {
          if (signal?.aborted) throw new CancelledError('trial');
          fail('agent_setup_error', 'agent_setup', deadline.timedOut() ? `agent setup timed out` : errorMessage(err));
          return false;
        } finally {
          deadline.clear();
        }
      });
      /** The agent on one instruction (the task's, or a step's); its end recorded, never thrown for an outcome. */
      const runAgent = (view: Task, logsDir: string, label: string): Promise<void> =>
        timed('agent_run', async () => {
          if (!(await setPhaseNetwork(networks.agent, 'agent_run'))) {
            infraFailed = true;
            return;
          }
          const timeoutSec = view.config.agent.timeout_sec * (t.agentMultiplier ?? 1);
          const disk = watchDisk(box, diskLimitMb(task, t));
          const deadline = deadlineSignal(AbortSignal.any([...(signal ? [signal] : []), disk.signal]), timeoutSec * 1000);
          try {
            outcome = await agent.run({ ...ctx, task: view, logsDir, signal: deadline.signal });
            exitReason = outcome.exitReason;
            if (disk.over()) throw new Error('disk limit');
            if (outcome.exitReason === 'agent_error') fail('agent_error', 'agent_run', label + (outcome.message ?? 'agent failed'));
            if (outcome.exitReason === 'model_error') {
              endpointFailed = ENDPOINT_FAILURE_KINDS.has(outcome.modelErrorKind ?? '');
              fail(endpointFailed ? 'model_unavailable' : 'model_error', 'agent_run', label + (outcome.message ?? 'model call failed'));
            }
          } catch (err) {
            if (signal?.aborted) throw new CancelledError('trial');
            if (disk.over()) {
              exitReason = 'agent_error';
              fail('disk_limit', 'agent_run', label + disk.message());
            } else if (err instanceof ModelError && ENDPOINT_FAILURE_KINDS.has(err.kind) && !deadline.timedOut()) {
              exitReason = 'model_error';
              endpointFailed = true;
              fail('model_unavailable', 'agent_run', `${label}${err.kind}: ${err.message}`);
            } else if (deadline.timedOut()) {
              exitReason = 'agent_timeout';
              fail('agent_timeout', 'agent_run', `${label}agent did not finish within ${timeoutSec} s`);
            } else {
              exitReason = 'agent_error';
              fail('agent_error', 'agent_run', label + errorMessage(err));
            }
          } finally {
            deadline.clear();
            disk.stop();
          }
        });
      /** One grading on the protected path (snapshot, scan, fresh verifier sandbox); null when the engine failed it. */
      const grade = (view: Task, dirs: { logs: string; artifacts: string }, testsDirs: string[] | undefined, timeoutSec: number, label: string): Promise<VerifierOutcome | null> =>
        timed('verification', async () => {
          if (!(await setPhaseNetwork(networks.verifier, 'verification'))) return null;
          try {
            const grading = { hostLogsDir: dirs.logs, hostArtifactsDir: dirs.artifacts, testsDirs, timeoutSec: timeoutSec * (t.verifierMultiplier ?? 1), signal, protection: options.protection ?? null, onRecord: options.onProtectionRecord };
            const v = await gradeSandbox(box, view, grading, provider);
            if (v.error) fail(v.error.class, 'verification', label + v.error.message);
            return v;
          } catch (err) {
            if (cancelled(err)) throw err;
            // The engine failed while grading: a lost engine's trial runs again elsewhere.
            const lost = err instanceof GradingStepError ? err.cause instanceof EngineLostError : err instanceof EngineLostError;
            fail(lost ? 'environment_error' : 'verifier_crash', 'verification', label + errorMessage(err));
            return null;
          }
        });
      // A sandbox started behind the agent's first model call: its setup phase is the time until
      // it was ready (overlapping the agent's run); a start that failed is the environment's
      // failure, whatever the agent made of it, and there is nothing to grade.
      const settled = async (): Promise<boolean> => {
        const startFailure = startingSandbox ? await settleStart(startingSandbox, setupStarted, phases) : null;
        startingSandbox = null;
        if (startFailure) fail(setupErrorClass(startFailure), 'environment_setup', errorMessage(startFailure));
        return !startFailure;
      };
      if (setupOk && !(task.steps?.length)) {
        await runAgent(task, agentLogs, '');
        // Graded whatever way the agent ended: partial work counts. Not when the model endpoint
        // failed: that trial carries no reward at all (infrastructure), and is retried.
        if ((await settled()) && !endpointFailed && !infraFailed) verdict = await grade(task, { logs: verifierLogs, artifacts: path.join(trialDir, 'artifacts') }, undefined, task.config.verifier.timeout_sec, '');
      } else if (setupOk) {
        // A multi-step task: each step's instruction in turn in the one sandbox, each graded on
        // the protected path (its own snapshot and verifier sandbox), the agent going on in its
        // sandbox; the trial stops after a step that misses its min_reward.
        for (const step of task.steps!) {
          const s0 = performance.now();
          const label = `step "${step.name}": `;
          const stepDir = path.join(trialDir, 'steps', step.name);
          const view: Task = { ...task, instruction: step.instruction, solutionDir: step.solutionDir, config: { ...task.config, agent: { ...task.config.agent, timeout_sec: step.config.agent.timeout_sec ?? task.config.agent.timeout_sec } } };
          const errorsBefore = errors.length;
          await mkdir(path.join(stepDir, 'agent'), { recursive: true });
          await mkdir(path.join(stepDir, 'verifier'), { recursive: true });
          await runAgent(view, path.join(stepDir, 'agent'), label);
          if (!(await settled()) || endpointFailed || infraFailed) break;
          const v = await grade(view, { logs: path.join(stepDir, 'verifier'), artifacts: path.join(stepDir, 'artifacts') }, step.testsDirs, step.config.verifier.timeout_sec ?? task.config.verifier.timeout_sec, label);
          if (v === null || v.reward === null) infraFailed = true;
          const stopped = !infraFailed && missesMinimum(step.config.min_reward, v?.reward ?? null, v?.rewards ?? {});
          stepResults.push({
            name: step.name,
            reward: v?.reward ?? null,
            rewards: v?.rewards ?? {},
            contributes: step.config.contributes_to_reward,
            stoppedTrial: stopped,
            exitReason,
            error: errors.slice(errorsBefore)[0] ?? null,
            testsSummary: summarizeTests(v?.tests ?? []),
            collected: v?.collected ?? null,
            durationMs: performance.now() - s0,
          });
          for (const test of v?.tests ?? []) stepTests.push({ ...test, name: `${step.name}/${test.name}` });
          if (v) stepVerdicts.push(v);
          if (infraFailed || stopped) break;
        }
        const total = aggregateStepRewards(task.config.multi_step_reward_strategy ?? 'mean', stepResults.map((r) => ({ rewards: r.reward === null ? null : r.rewards, contributes: r.contributes })));
        if (!infraFailed && !endpointFailed && stepVerdicts.length > 0) {
          const last = stepVerdicts[stepVerdicts.length - 1]!;
          verdict = {
            ...last,
            reward: total?.reward ?? 0,
            rewards: total?.rewards ?? {},
            tests: stepTests,
            tampering: stepVerdicts.flatMap((x) => x.tampering),
            findings: stepVerdicts.flatMap((x) => x.findings ?? []),
            error: null,
            collected: undefined,
          };
        }
      }
    }
  } catch (err) {
    fail(cancelled(err) ? 'cancelled' : 'internal_error', 'teardown', errorMessage(err));
  } finally {
    const box = sandbox as Sandbox | null;
    if (box && options.removeInBackground) options.removeInBackground(box.close());
    else if (box) await timed('teardown', () => box.close());
  }

  const v = verdict as VerifierOutcome | null;
  const reward = v?.reward ?? null;
  // Without a reward, the error that explains it leads: infrastructure first, then the verifier's.
  const primary = reward !== null ? errors[0] : (errors.find((e) => e.class === 'cancelled') ?? errors.find((e) => INFRA_ERROR_CLASSES.has(e.class)) ?? errors.find((e) => e.phase === 'verification') ?? errors[0]);
  const result: TrialResult = {
    schemaVersion: 1,
    trialId,
    task: { name: task.name, path: task.path, checksum: task.checksum },
    agent: { name: agent.name, model: agent.model },
    attempt,
    reward,
    rewards: v?.rewards ?? {},
    passed: reward !== null && reward >= 1,
    steps: stepResults,
    taskVersion: task.version ?? null,
    dataset: task.dataset ?? null,
    collected: v?.collected ?? null,
    tests: v?.tests ?? [],
    testsSource: v?.testsSource ?? 'none',
    testsSourceCounts: v?.testsSourceCounts ?? {},
    testsSummary: summarizeTests(v?.tests ?? []),
    error: primary ?? null,
    errors,
    exitReason,
    turns: usage.turns,
    tokens: usage.tokens,
    costUsd: usage.costUsd,
    tampering: v?.tampering ?? [],
    protection: v?.protection ?? protectionModeOf(options.protection),
    findings: v?.findings ?? [],
    image: (prepared as PreparedEnvironment | null)?.image ?? null,
    imageSource: (prepared as PreparedEnvironment | null)?.source ?? null,
    imageId: (prepared as PreparedEnvironment | null)?.imageId ?? null,
    imageCached: (prepared as PreparedEnvironment | null)?.cached ?? null,
    engine: (sandbox as Sandbox | null)?.engine ?? null,
    phases,
    startedAt,
    finishedAt: nowIso(),
    durationMs: performance.now() - t0,
  };
  // What is returned is what is recorded (the store, listings): scrubbed the same way.
  const clean = scrubValue(result, scrub);
  await writeJsonAtomic(path.join(trialDir, 'result.json'), clean, scrub);
  return clean;
}
