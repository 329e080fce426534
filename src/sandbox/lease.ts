import type { Task } from '../task/task.js';
import type { PreparedEnvironment, Sandbox, SandboxProvider } from './sandbox.js';
import { DEFAULT_START_TIMEOUT_SEC, startSandbox, type OwnedStartOptions } from './start.js';

export interface AcquireOptions extends Omit<OwnedStartOptions, 'deadlineMs'> {
  provider: SandboxProvider;
  task: Task;
  /**
   * The task's image: prepared already, a function that prepares it (a caller keeping the build's
   * log), or absent: the provider prepares it under `signal`.
   */
  prepare?: PreparedEnvironment | (() => Promise<PreparedEnvironment>);
  /** The start's deadline, ms; default DEFAULT_START_TIMEOUT_SEC. null: none (a start kept warm, its taker sets one). */
  deadlineMs?: number | null;
}

/** A started sandbox and the duty to close it: `close` is idempotent, never throws, and may be called on every path. */
export interface SandboxLease {
  readonly sandbox: Sandbox;
  readonly prepared: PreparedEnvironment;
  close(): Promise<void>;
}

/**
 * The one way a sandbox's life begins: the image prepared (unless given), the sandbox started
 * within its deadline and made ready (/logs/agent and /logs/verifier), and handed over as a lease.
 * Every way it can fail closes what it made here (see startSandbox): a deadline passed or a cancel
 * while the engine is starting abandons the start and removes its sandbox when it arrives.
 * Throws BuildError from the preparation, `environment_error` at the deadline or when the sandbox
 * cannot be made ready, CancelledError on `signal`.
 */
export async function acquireSandbox(options: AcquireOptions): Promise<SandboxLease> {
  const { provider, task, prepare, deadlineMs, ...start } = options;
  const prepared =
    prepare === undefined
      ? await provider.prepare(task, { signal: options.signal })
      : typeof prepare === 'function'
        ? await prepare()
        : prepare;
  const sandbox = await startSandbox(provider, task, prepared, {
    ...start,
    deadlineMs: deadlineMs === null ? undefined : (deadlineMs ?? DEFAULT_START_TIMEOUT_SEC * 1000),
  });
  let closing: Promise<void> | null = null;
  return {
    sandbox,
    prepared,
    // Memoised: a backend whose own close is not idempotent is still closed once.
    close: () => (closing ??= sandbox.close()),
  };
}

/** `work` on a sandbox acquired for it, closed however `work` ends. */
export async function withSandbox<T>(options: AcquireOptions, work: (sandbox: Sandbox) => Promise<T>): Promise<T> {
  const lease = await acquireSandbox(options);
  try {
    return await work(lease.sandbox);
  } finally {
    await lease.close();
  }
}
