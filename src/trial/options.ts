import type { Agent, AgentContext, AgentPause } from '../agent/agent.js';
import type { PreparedEnvironment, Sandbox, SandboxProvider, SnapshotBounds } from '../sandbox/sandbox.js';
import type { Task } from '../task/task.js';
import type { GradingPolicy } from '../verifier/evidence.js';
import type { ProtectionRecord } from '../verifier/protection.js';
import type { Phase, TrialResult } from './schema.js';

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
  /**
   * How the reward is held against the tests' own evidence: `evidence` (default) grades a pass the
   * tests' reports do not support 0; `harbor` lets the reward file's number stand (recorded on the trial).
   */
  grading?: GradingPolicy;
  /** The file `protection` was read from (ProtectionStore.find), named on the result's `admission`. */
  admissionFile?: string | null;
  /** Receives the protected set this trial's grading recorded (an oracle trial's: admission). */
  onProtectionRecord?: (record: ProtectionRecord) => void;
  /**
   * What grading takes on at most from the sandbox's files (SnapshotBounds; each default when
   * absent). The byte bound is the trial's disk limit (diskLimitMb) unless given here.
   */
  gradingBounds?: SnapshotBounds;
  /** A tree's prefix (trial/branch.ts): handed to the agent, which pauses when this says so. */
  pauseWhen?: AgentContext['pauseWhen'];
  /** A tree's branch (trial/branch.ts): the agent continues this paused run instead of starting. */
  resumeFrom?: AgentPause;
  /** A tree's branch: recorded on the result as `branch` (the prefix trial it continues). */
  branchOf?: NonNullable<TrialResult['branch']>;
}
