import type { Task } from '../task/task.js';
import type { CapturedOutput } from './capture.js';

export interface ExecOptions {
  cwd?: string;
  env?: Record<string, string>;
  user?: string;
  /** Seconds; on expiry the command's whole process group is killed and `timedOut` is set. */
  timeoutSec?: number;
  /** Bytes of stdout (and, separately, stderr) kept: head and tail halves. Default 2 MiB. */
  maxOutputBytes?: number;
  /** Aborting kills the command like a timeout, then rejects with CancelledError. */
  signal?: AbortSignal;
}

export interface ExecResult {
  /** null when the command was killed for its timeout. */
  exitCode: number | null;
  stdout: CapturedOutput;
  stderr: CapturedOutput;
  timedOut: boolean;
  durationMs: number;
}

export interface FileEntry {
  /** Absolute path inside the sandbox. */
  path: string;
  /** File content; omit for a directory. */
  content?: string | Buffer;
  mode?: number;
}

/**
 * A persistent shell in the sandbox for an agent's own short helper commands (tmux send-keys,
 * capture-pane): no process start per call, so a call costs milliseconds, not an engine round
 * trip. Not for agent-chosen commands, which go through `exec` (fresh, bounded, killable).
 */
export interface Shell {
  /** Runs `command` (stdout and stderr together); rejects if the shell died or `timeoutSec` passed. */
  run(command: string, options?: { timeoutSec?: number }): Promise<{ output: string; exitCode: number }>;
}

/**
 * A running, isolated machine for one trial. The contract every backend keeps:
 * - `exec` returns when the command's own process exits, even if a child it left in the background
 *   still holds its stdout; output is bounded (head and tail kept, the rest counted), never blocks
 *   the command, and a timeout kills the command's process group and still returns a result.
 * - `exec` rejects only for infrastructure failures (sandbox gone, engine error) or cancellation;
 *   a failing command is a result with its exit code.
 * - `close` is idempotent, never throws, and removes everything the sandbox created.
 */
export interface Sandbox {
  readonly id: string;
  /** An argv array is run as is; a string is run by `/bin/sh -c`. */
  exec(command: string | string[], options?: ExecOptions): Promise<ExecResult>;
  /** A persistent helper shell (opened on first use, reopened if it died). */
  shell(): Promise<Shell>;
  /** Copies the contents of a host folder into `destDir` (created if missing). */
  copyIn(hostDir: string, destDir: string): Promise<void>;
  /** Writes files and folders given in memory. */
  putFiles(entries: FileEntry[]): Promise<void>;
  /** Copies a sandbox folder's contents into a host folder; at most `maxBytes` in all. */
  copyOut(srcDir: string, hostDir: string, options?: { maxBytes?: number }): Promise<void>;
  close(): Promise<void>;
}

export interface PrepareOptions {
  signal?: AbortSignal;
  /**
   * Dockerfile lines an agent needs on top of the task's image (installing tmux, say): built
   * into a derived image at prepare time, with the network, so trials stay offline.
   */
  agentLayer?: string;
  /** Receives build output lines as they come. */
  onLog?: (line: string) => void;
}

export interface PreparedEnvironment {
  image: string;
  /** True when the image was already there and nothing was built. */
  cached: boolean;
  durationMs: number;
  log: string;
}

export interface StartOptions {
  signal?: AbortSignal;
  /** Extra labels for finding the sandbox later (job, trial). */
  labels?: Record<string, string>;
}

/** Makes sandboxes for tasks: builds (or finds) the task's image once, then starts containers from it. */
export interface SandboxProvider {
  readonly name: string;
  prepare(task: Task, options?: PrepareOptions): Promise<PreparedEnvironment>;
  start(task: Task, prepared: PreparedEnvironment, options?: StartOptions): Promise<Sandbox>;
  /** Closes every sandbox this provider has open (used on Ctrl-C / SIGTERM). */
  closeAll(): Promise<void>;
}
