import type { ModelConfig } from '../model/config.js';
import type { SandboxProvider } from '../sandbox/sandbox.js';
import type { TrialTimeouts } from '../trial/options.js';
import type { ProtectionStore } from '../verifier/protection-store.js';
import type { ProbeLevel } from './probes.js';
import type { CheckedTask } from './schema.js';

/**
 * Where a resumable check keeps its verdicts (`check --job NAME`): the job store's
 * checked_tasks table (store/store.ts's JobStore is one). Declared here, by the check that needs
 * it, so the check stays below the store it writes to.
 */
export interface CheckedTaskLog {
  /** The verdicts already recorded, by the task's resolved path. */
  checkedTasks(): Map<string, unknown>;
  /** Records one task's verdict whole (written at once, so a killed check resumes). */
  recordChecked(task: CheckedTask): void;
}

export interface CheckOptions {
  provider: SandboxProvider;
  /** Trial folders and build logs go here. */
  outDir: string;
  /** Oracle runs per task (>= 1); disagreement between them is `flaky`. */
  repeat?: number;
  concurrency?: number;
  timeouts?: TrialTimeouts;
  /** Build each task's Dockerfile even when it names an available prebuilt image. */
  forceBuild?: boolean;
  /**
   * Probes for exploitable tasks, run on tasks that pass the admission rule: none; fast
   * (reward_forgeable, solution_leaked, verifier_nondeterministic, duplicate); all (also weak_tests,
   * which reruns the solution many times, and reward_hackable, which plays the published reward
   * hacks on the files the tests run or import). Default fast; synth uses all.
   */
  probes?: ProbeLevel;
  /** A model that reviews each loadable task against the rubric (advisory, recorded as `review`). */
  review?: ModelConfig;
  /**
   * Grade verifiers that fetch their tools (Terminal-Bench 2's test.sh) with termgrade's offline
   * toolchain where it serves what they ask for (default true). A verifier it cannot serve, or
   * every one when false, that fails for want of the network is rejected as verifier_needs_network.
   */
  verifierToolchain?: boolean;
  /**
   * A folder of wheels (`check --verifier-wheels`): a `-w` requirement the toolchain lacks is served
   * from its wheel here before Debian's package is tried.
   */
  verifierWheels?: string;
  /**
   * A network for tasks that ask for the internet (`check --network NAME`): their trials join it,
   * with run --network's isolation rules, and their verifier fetches its own tools (no toolchain).
   * Tasks that do not ask stay offline.
   */
  network?: string;
  /**
   * A durable record (`check --job NAME`): tasks it already holds are not checked again, and each
   * task's verdict is written to it whole as soon as the task is done, so a killed check resumes.
   */
  store?: CheckedTaskLog;
  /**
   * Where each admitted task's protected set is kept (what its verifier executes, loads and
   * reads when it grades the reference solution): later trials of the task are scanned against it.
   */
  protection?: ProtectionStore;
  signal?: AbortSignal;
  onEvent?: (event: CheckEvent) => void;
}

export type CheckEvent =
  | { type: 'task-start'; path: string }
  | { type: 'phase'; path: string; phase: 'build' | 'oracle' | 'nop' | 'probes'; run?: number }
  | { type: 'task-done'; task: CheckedTask };
