import type { Task } from '../task/task.js';
import { CancelledError, TermgradeError } from '../util/errors.js';
import { deadlineSignal } from '../util/time.js';
import type { PreparedEnvironment, Sandbox, SandboxProvider, StartOptions } from './sandbox.js';

/** How long a sandbox may take to start, /logs made, when the caller does not say. */
export const DEFAULT_START_TIMEOUT_SEC = 120;

export interface OwnedStartOptions extends Omit<StartOptions, 'signal'> {
  /** The start's deadline, ms (the start and the /logs folders); none when absent (a start kept warm: its taker sets one). */
  deadlineMs?: number;
  /** Cancels the start (a job stopping, a session deleted). */
  signal?: AbortSignal;
  /**
   * A start made elsewhere (a warm container being claimed), given the start's own signal: it
   * aborts at the deadline or the caller's cancel. Default: the provider starts one.
   */
  start?: (signal: AbortSignal) => Promise<Sandbox>;
}

/** Settles with `work`, or rejects as soon as `signal` aborts; `work` settling later is handed to `late`. */
export function untilAborted<T>(work: Promise<T>, signal: AbortSignal, late: (value: T) => void): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let done = false;
    const onAbort = (): void => {
      if (done) return;
      done = true;
      reject(new CancelledError('sandbox start'));
    };
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        if (done) return late(value);
        done = true;
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        if (done) return;
        done = true;
        reject(err);
      },
    );
  });
}

/**
 * Starts a sandbox and owns it until it is handed over ready (started, /logs/agent and
 * /logs/verifier made): the one place `run`, the warm pool, `serve` and the probes start one. On
 * every way it can fail, the sandbox is closed here: a /logs that cannot be made, a cancel, and a
 * deadline passed, when the start is abandoned (the provider is told through the signal, so a
 * pool frees its slot at once) and a sandbox that arrives after all is closed as it arrives.
 * Rejects with `environment_error` at the deadline, CancelledError on the caller's cancel.
 */
export async function startSandbox(
  provider: SandboxProvider,
  task: Task,
  prepared: PreparedEnvironment,
  options: OwnedStartOptions = {},
): Promise<Sandbox> {
  const { deadlineMs, signal: parent, start, ...startOptions } = options;
  const deadline = deadlineMs === undefined ? null : deadlineSignal(parent, deadlineMs);
  const signal = deadline?.signal ?? parent ?? new AbortController().signal;
  const failure = (err: unknown): unknown => {
    if (deadline?.timedOut())
      return new TermgradeError('environment_error', `container did not start within ${deadlineMs! / 1000} s`, {
        cause: err,
      });
    if (parent?.aborted) return err instanceof CancelledError ? err : new CancelledError('sandbox start');
    return err;
  };
  let pending: Promise<Sandbox>;
  try {
    pending = start ? start(signal) : provider.start(task, prepared, { ...startOptions, signal });
  } catch (err) {
    deadline?.clear();
    throw failure(err);
  }
  let box: Sandbox | null = null;
  try {
    box = await untilAborted(pending, signal, (late) => void late.close());
    const made = await box.exec(['mkdir', '-p', '/logs/agent', '/logs/verifier'], { signal });
    if (signal.aborted) throw new CancelledError('sandbox start');
    if (made.exitCode !== 0)
      throw new TermgradeError('environment_error', `cannot create /logs in the sandbox: ${made.stderr.text.trim()}`);
    return box;
  } catch (err) {
    await box?.close();
    throw failure(err);
  } finally {
    deadline?.clear();
  }
}
