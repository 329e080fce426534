import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import type { AgentOutcome, AgentUsage } from '../agent/agent.js';
import type { PreparedEnvironment, Sandbox } from '../sandbox/sandbox.js';
import { phaseNetworks } from '../task/network.js';
import type { Task } from '../task/task.js';
import { CancelledError } from '../util/errors.js';
import { causeOf, createLogger, type Logger } from '../util/log.js';
import { makeScrub, type Scrub } from '../util/scrub.js';
import { nowIso } from '../util/time.js';
import type { TestResult, VerifierOutcome } from '../verifier/schema.js';
import type { TrialOptions, TrialTimeouts } from './options.js';
import type { Phase, PhaseTiming, StepResult, TrialError, TrialErrorClass, TrialResult } from './schema.js';

/** When the sandbox's start began and when it was ready (a start behind a model-first agent ends late). */
export interface SetupTimes {
  iso: string;
  ms: number;
  readyIso: string;
  readyMs: number;
}

/** Everything a trial's phases share: what they were given, what they made, and what went wrong. */
export interface TrialState {
  readonly options: TrialOptions;
  readonly task: Task;
  readonly attempt: number;
  readonly trialId: string;
  readonly trialDir: string;
  readonly agentLogs: string;
  readonly verifierLogs: string;
  readonly timeouts: TrialTimeouts;
  readonly startedAt: string;
  readonly t0: number;
  readonly phases: Partial<Record<Phase, PhaseTiming>>;
  readonly errors: TrialError[];
  readonly scrub: Scrub;
  /** The trial's own log, `trial.log` in its folder (as Harbor's trial keeps one): each phase, each error, the end. */
  readonly log: Logger;
  readonly usage: AgentUsage;
  prepared: PreparedEnvironment | null;
  sandbox: Sandbox | null;
  /** With a model-first agent: the start still under way when the agent began. */
  startingSandbox: Promise<Sandbox> | null;
  readonly setupTimes: SetupTimes;
  outcome: AgentOutcome | null;
  exitReason: TrialResult['exitReason'];
  verdict: VerifierOutcome | null;
  /** The model endpoint failed (after its own retries): the trial says nothing about the model. */
  endpointFailed: boolean;
  /** A step's grading or network switch the engine failed: the trial carries no reward. */
  infraFailed: boolean;
  readonly stepResults: StepResult[];
  readonly stepTests: TestResult[];
  readonly stepVerdicts: VerifierOutcome[];
  readonly networks: ReturnType<typeof phaseNetworks>;
  /** The network the sandbox starts on, and the one it is on now. */
  readonly startNetwork: string | null;
  onNetwork: string | null;
}

export function newTrialId(task: Task, agent: string, attempt: number): string {
  const safe = task.name.replace(/[^A-Za-z0-9._-]+/g, '-').slice(0, 60);
  return `${safe}__${agent}__${attempt}__${randomBytes(4).toString('hex')}`;
}

/**
 * The trial's folders made (a folder already there is the remains of a run that died before
 * recording it: it starts clean) and its state opened; the trial's clock starts here.
 */
export async function openTrial(options: TrialOptions): Promise<TrialState> {
  const { task, agent } = options;
  const attempt = options.attempt ?? 0;
  const trialId = options.trialId ?? newTrialId(task, agent.name, attempt);
  const trialDir = path.join(options.outDir, trialId);
  const agentLogs = path.join(trialDir, 'agent');
  const verifierLogs = path.join(trialDir, 'verifier');
  await rm(trialDir, { recursive: true, force: true });
  await mkdir(agentLogs, { recursive: true });
  await mkdir(verifierLogs, { recursive: true });
  const networks = phaseNetworks(task.config);
  // The sandbox starts on the user's network when any phase may use it (a sandbox started on none
  // can never be given one); each phase then gets its own (setPhaseNetwork).
  const anyPublic = networks.environment === 'public' || networks.agent === 'public' || networks.verifier === 'public';
  const startNetwork = anyPublic ? (options.network ?? null) : null;
  const scrub = makeScrub(options.secrets ?? []);
  // JSON lines only (never the terminal: a job runs many trials at once), scrubbed like every record.
  const log = createLogger({ level: 'debug', file: path.join(trialDir, 'trial.log'), scrub, stream: null });
  log.info('trial opened', { trial: trialId, task: task.name, agent: agent.name, model: agent.model, attempt });
  return {
    options,
    task,
    attempt,
    trialId,
    trialDir,
    agentLogs,
    verifierLogs,
    timeouts: options.timeouts ?? {},
    startedAt: nowIso(),
    t0: performance.now(),
    phases: {},
    errors: [],
    scrub,
    log,
    usage: { turns: 0, tokens: null, costUsd: null },
    prepared: null,
    sandbox: null,
    startingSandbox: null,
    setupTimes: { iso: '', ms: 0, readyIso: '', readyMs: 0 },
    outcome: null,
    exitReason: 'not_run',
    verdict: null,
    endpointFailed: false,
    infraFailed: false,
    stepResults: [],
    stepTests: [],
    stepVerdicts: [],
    networks,
    startNetwork,
    onNetwork: startNetwork,
  };
}

export function fail(state: TrialState, cls: TrialErrorClass, phase: Phase, message: string): void {
  state.errors.push({ class: cls, message, phase });
  state.log.error(message, { class: cls, phase });
}

/** A cancel: the error says so, or the trial's signal has aborted. */
export const cancelled = (state: TrialState, err: unknown): boolean =>
  err instanceof CancelledError || (state.options.signal?.aborted ?? false);

/**
 * Runs one phase, announced and timed; a phase run again (a multi-step task's agent runs and
 * gradings) sums its time from its first start.
 */
export async function timed<T>(state: TrialState, phase: Phase, work: () => Promise<T>): Promise<T> {
  state.options.onPhase?.(phase);
  const s = nowIso();
  const p0 = performance.now();
  state.log.info(`${phase} started`, { phase });
  // Whether the phase threw, and what: a thrown value may itself be falsy.
  let failed: { err: unknown } | null = null;
  try {
    return await work();
  } catch (err) {
    failed = { err };
    throw err;
  } finally {
    state.log[failed ? 'error' : 'info'](`${phase} ${failed ? 'threw' : 'ended'}`, {
      phase,
      duration_ms: Math.round(performance.now() - p0),
      ...(failed ? { cause: causeOf(failed.err) } : {}),
    });
    const before = state.phases[phase];
    const ms = performance.now() - p0;
    state.phases[phase] = before
      ? { startedAt: before.startedAt, finishedAt: nowIso(), durationMs: before.durationMs + ms }
      : { startedAt: s, finishedAt: nowIso(), durationMs: ms };
  }
}
