import type { Task } from '../task/task.js';
import type { CapturedOutput } from './capture.js';

/**
 * The PATH of the harness's own programs in a sandbox (the exec wrapper's setsid, mkdir, chmod, wc,
 * cat, head, tail, rm; grading's rm, mkdir, ls, bash): the system folders only, where the tamper
 * scan flags any change to an existing program and any added one of these names. The agent may
 * have put a program of the same name earlier on the image's PATH (a venv's bin,
 * /usr/local/go/bin); the command itself still runs with the PATH it was given.
 */
export const SYSTEM_PATH = '/usr/sbin:/usr/bin:/sbin:/bin';

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
  /**
   * Record the files the command and its children execute, open and look up (`ExecResult.trace`),
   * from outside the sandbox. A backend that cannot leaves `trace` undefined and runs the command as usual.
   */
  trace?: boolean;
}

export interface ExecResult {
  /** null when the command was killed for its timeout. */
  exitCode: number | null;
  stdout: CapturedOutput;
  stderr: CapturedOutput;
  timedOut: boolean;
  durationMs: number;
  /** With `trace`: strace's log of the command's file and process calls; undefined when not traced. */
  trace?: string;
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
 * What an agent works with in a trial's sandbox: commands, files, a helper shell. The contract
 * every backend keeps:
 * - `exec` returns when the command's own process exits, even if a child it left in the background
 *   still holds its stdout; output is bounded (head and tail kept, the rest counted), never blocks
 *   the command, and a timeout kills the command's process group and still returns a result.
 * - `exec` rejects only for infrastructure failures (sandbox gone, engine error) or cancellation;
 *   a failing command is a result with its exit code.
 * - `close` is idempotent, never throws, and removes everything the sandbox created.
 */
export interface AgentSandbox {
  readonly id: string;
  /** The engine of a pool it runs on; unset on a single engine. */
  readonly engine?: string;
  /** An argv array is run as is; a string is run by `/bin/sh -c`. */
  exec(command: string | string[], options?: ExecOptions): Promise<ExecResult>;
  /** A persistent helper shell (opened on first use, reopened if it died). */
  shell(): Promise<Shell>;
  /**
   * Copies the contents of a host folder into `destDir` (created if missing). `trusted` copies
   * through the backend itself, using no program inside the sandbox (the agent may have replaced
   * them): the verifier's tests travel this way.
   */
  copyIn(hostDir: string, destDir: string, options?: CopyOptions): Promise<void>;
  /** Writes files and folders given in memory. */
  putFiles(entries: FileEntry[]): Promise<void>;
  /**
   * Copies a sandbox folder's contents into a host folder; at most `maxBytes` in all. What passes
   * the limit is left out, or, with `whole`, the copy throws CopyLimitError (a caller that must
   * not keep a part as if it were all).
   */
  copyOut(
    srcDir: string,
    hostDir: string,
    options?: CopyOptions & { maxBytes?: number; whole?: boolean },
  ): Promise<void>;
  /** One file's content read by the backend (no program in the sandbox runs); null if absent. */
  readFile(path: string, maxBytes: number): Promise<Buffer | null>;
  close(): Promise<void>;
}

/**
 * A running, isolated machine for one trial: what an agent works with, and what grading and the
 * trial around it need (a frozen snapshot to grade, the verifier's end, the agent's changes and
 * disk use, a phase's network). A backend implements as little of it as src/sandbox/backend.ts
 * asks (BackendSandbox); the rest has defaults there, built on its commands and files.
 */
export interface Sandbox extends AgentSandbox {
  /** Filesystem changes since the sandbox started from its image (tamper detection, disk use). */
  changes(): Promise<FsChange[]>;
  /** Bytes the sandbox has written on top of its image, or null when the backend cannot tell. */
  diskUsage(): Promise<number | null>;
  /**
   * The sandbox's filesystem frozen at one moment (its processes paused while it is taken, then
   * running on: a service the agent started keeps answering). Grading reads and runs in this,
   * never in the live sandbox. Throws ScanLimitError or DiskLimitError when the files pass
   * `bounds` (nothing of them kept: the sandbox's content decided it), GradingStepError when the
   * content broke the copy, otherwise for infrastructure failures only.
   */
  snapshot(options?: SnapshotOptions): Promise<SandboxSnapshot>;
  /**
   * Ends every process and leaves the sandbox stopped: nothing in it runs any more, and its files
   * can still be copied out (trusted) and read. Used on a verifier's sandbox once its tests ended,
   * so nothing they left running can rewrite a reward while it is read.
   */
  stop(): Promise<void>;
  /**
   * Puts the sandbox on `network` (an isolated network the user made) or on none (loopback only),
   * for the next phase of a trial: Harbor's per-phase network policy. A verifier's sandbox shares
   * this one's network, so it follows. A sandbox started on no network cannot be given one later.
   */
  setNetwork(network: string | null): Promise<void>;
  /**
   * Branches this live sandbox into `n` new ones (present when the provider reports
   * `capabilities.fork`). Each child starts from this sandbox's files at one moment (its processes
   * frozen while they are copied, then running on, untouched), from the same image with the same
   * limits and network, and none shares files, processes or network with another. Of the
   * processes, every service (a process holding a listening socket) is started again in every
   * child by its recorded command line, working folder, user and environment, and is listening
   * there before the children are handed out; nothing else is carried (SandboxFork says what was
   * left). All or none: ForkError when the sandbox's state cannot be carried as promised (a
   * service that does not listen again, files past the bounds), `environment_error` when the
   * engine fails; either way no child is left. The caller closes each child.
   */
  fork?(n: number, options?: ForkOptions): Promise<SandboxFork>;
}

export interface ForkOptions {
  signal?: AbortSignal;
  /** Labels added to child `i` (0-based), over the parent's own. */
  labels?: (i: number) => Record<string, string>;
  /** What the parent's files may hold at most (as for a snapshot: the disk limit, the copy's time). */
  bounds?: SnapshotBounds;
}

/** A service of the parent's, started again in every child of a fork. */
export interface ForkedService {
  /** Its command line, as recorded (argv). */
  command: string[];
  cwd: string;
  /** uid:gid it ran as. */
  user: string;
  /** TCP and UDP ports it listened on, and unix socket paths: each listens again in every child. */
  ports: number[];
  sockets: string[];
}

/** What a fork made: the children (in order) and what each got of the parent's processes. */
export interface SandboxFork {
  children: Sandbox[];
  services: ForkedService[];
  /** Command lines of the parent's other processes, which no child has (a shell, a job in the background). */
  notCarried: string[];
  /** Milliseconds the parent was frozen (its one copy), and the whole fork took; where the backend can tell. */
  frozenMs?: number;
  totalMs?: number;
}

/**
 * A fork that cannot give what it promises (a service that does not listen again in a child, the
 * parent's files past their bounds, processes that would not freeze): no child was made.
 */
export class ForkError extends Error {}

/** Changes in a snapshot past this count are not scanned: the scan fails closed (see ScanLimitError). */
export const MAX_SCANNED_CHANGES = 200_000;

/**
 * The agent's final filesystem, frozen, as the grader sees it. Everything here is read by the
 * backend (no program in the sandbox takes part), and nothing the agent left running can change it.
 */
export interface SandboxSnapshot {
  /**
   * Every path the snapshot differs in from the image (a name that is not UTF-8 escaped, see
   * names.ts). Throws ScanLimitError past the bound (a list cut short would let a change hide
   * behind a flood of others), ScanIncompleteError when the walk cannot be completed.
   */
  changes(): Promise<FsChange[]>;
  /**
   * The environment the verifier's commands start with (PATH, say), as the backend configured the
   * sandbox: nothing a process in it can change. Read before anything runs from the snapshot.
   */
  env(): Promise<Record<string, string>>;
  /** A file of the snapshot (at most maxBytes), read by the backend; null if absent or not a file. */
  readFile(path: string, maxBytes: number): Promise<Buffer | null>;
  /**
   * A new sandbox started from the snapshot for the verifier: it shares the original sandbox's
   * network (localhost services the agent left running answer) but none of its processes, files
   * or signals, so nothing the agent left running can write, signal or trace the tests. When the
   * original sandbox is no longer running, it has no network but loopback. It starts with /tests
   * holding exactly the `tests` folders' files and /logs/verifier an empty
   * folder, whatever the agent left at either (see prepareFoldersInside for backends that must do
   * it with commands). Asked after the scan: changes() and readFile() answer for the snapshot as
   * the agent left it, before these folders were made.
   */
  startVerifier(options: VerifierStartOptions): Promise<Sandbox>;
  /**
   * Present when the snapshot was taken with `verifier` and the backend can run that command as
   * the verifier sandbox's own process (no command sent into it, nothing left to end: the sandbox
   * stops when the command ends, every process it started with it). Same sandbox, folders and
   * isolation as startVerifier; answers with the sandbox stopped, its files readable (copyOut,
   * trusted). A timeout ends every process and answers `timedOut`; an abort throws
   * CancelledError. A failure before the command starts (folders, start) is thrown as
   * GradingStepError (the sandbox's content may be at fault); one while it runs is thrown as the
   * engine gave it (infrastructure, as a failed exec is). Use one of startVerifier and runVerifier
   * per snapshot.
   */
  runVerifier?(options: VerifierStartOptions & { timeoutSec: number }): Promise<VerifierRun>;
  /** Removes what the snapshot holds (an image, say). Idempotent, never throws. */
  discard(): Promise<void>;
}

export interface SnapshotOptions {
  signal?: AbortSignal;
  /** What grading takes on at most (see SnapshotBounds); each default when absent. */
  bounds?: SnapshotBounds;
  /** The verifier's whole work as one shell command, when the caller needs nothing else of it (see runVerifier). */
  verifier?: VerifierCommand;
  /**
   * Ports the tests bind (admission saw them bind each): a backend that can see the agent's
   * sockets refuses to start the verifier while an agent process holds one (GradingStepError).
   */
  ports?: number[];
}

export interface VerifierCommand {
  /** Run by /bin/sh -c in the verifier's sandbox. */
  command: string;
  /** Added to the sandbox's configured environment for it. */
  env: Record<string, string>;
}

/** A verifier run to its end by runVerifier. */
export interface VerifierRun {
  /** The verifier's sandbox, stopped. */
  box: Sandbox;
  /** null when it was ended for its timeout. */
  exitCode: number | null;
  timedOut: boolean;
  durationMs: number;
}

export interface VerifierStartOptions {
  /** Folders on this machine copied to /tests in order, a later one's files over an earlier one's (a step's tests over the task's). */
  tests: string[];
  /** The verifier's environment, for the commands that prepare the folders where the backend runs any. */
  env?: Record<string, string>;
  signal?: AbortSignal;
}

/** A `whole` copy out of a sandbox that passed its limit: nothing of it is to be kept. */
export class CopyLimitError extends Error {
  constructor(
    readonly srcDir: string,
    readonly maxBytes: number,
  ) {
    super(`${srcDir} holds more than ${maxBytes} bytes, the most copied out`);
  }
}

/**
 * A change list that could not be read whole (too many changes, a path the walk could not
 * follow): the sandbox's content decided it, and the grade fails closed (tampering).
 */
export class ScanIncompleteError extends Error {}

/** Too many changes to list: a list cut short would let a change hide behind a flood of others. */
export class ScanLimitError extends ScanIncompleteError {
  constructor(
    readonly found: number,
    readonly limit = MAX_SCANNED_CHANGES,
  ) {
    super(
      `the sandbox's filesystem has more than ${limit} changed paths; a scan cut short could miss one, so the grade fails closed`,
    );
  }
}

/**
 * The agent's files at the end of its turn passed its disk limit (bytes as the engine counts a
 * container's size): they are not copied for grading, and the grade is 0 (disk_limit).
 */
export class DiskLimitError extends Error {
  constructor(
    readonly found: number,
    readonly limit: number,
  ) {
    const mb = (n: number): number => Math.round(n / 1024 / 1024);
    super(
      `the agent's files held more than ${mb(found)} MB at the end of its turn, over its disk limit of ${mb(limit)} MB; they were not copied for its verifier`,
    );
  }
}

/**
 * What grading takes on at most from a sandbox's files, checked before they are copied (the copy
 * stops at the first bound passed, the agent's processes frozen meanwhile).
 */
export interface SnapshotBounds {
  /** Paths the scan lists; more is ScanLimitError. Default MAX_SCANNED_CHANGES. */
  maxChanges?: number;
  /** Bytes the agent wrote on top of the image (its disk limit); more is DiskLimitError. Default DEFAULT_DISK_LIMIT_MB. */
  maxBytes?: number;
  /** Seconds the copy may take, its measuring included; longer fails the step (grading_blocked). Default DEFAULT_COPY_TIMEOUT_SEC. */
  copyTimeoutSec?: number;
}

/** Disk an agent may write on top of its image when its task says nothing (storage_mb). */
export const DEFAULT_DISK_LIMIT_MB = 10 * 1024;

/** Disk an agent may write on top of a task's image: the task's storage_mb, else DEFAULT_DISK_LIMIT_MB. */
export function taskDiskLimitMb(task: Task): number {
  const env = task.config.environment;
  return env.storage_mb ?? env.storage ?? DEFAULT_DISK_LIMIT_MB;
}

/**
 * Seconds a snapshot's copy may take: well past the slowest copy within the other bounds (200,000
 * files took 87 s on a loaded 2-core machine; 10 GiB at 200 MB/s takes 50 s). A backstop for slow
 * storage, not a bound an honest sandbox meets.
 */
export const DEFAULT_COPY_TIMEOUT_SEC = 300;

export interface CopyOptions {
  trusted?: boolean;
}

/** One path the sandbox's filesystem differs in from its image. */
export interface FsChange {
  path: string;
  kind: 'added' | 'changed' | 'deleted';
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
  /** Build the task's Dockerfile even when it names a prebuilt image that is available. */
  forceBuild?: boolean;
}

/**
 * Which image a trial ran on: the task's prebuilt image (`docker_image`), one built from its
 * Dockerfile, or one built because the named prebuilt image could not be had.
 */
export type ImageSource = 'prebuilt' | 'dockerfile' | 'dockerfile-fallback';

export interface PreparedEnvironment {
  image: string;
  /** The engine's id of the image (content-addressed): what a trial really ran on. */
  imageId?: string | null;
  source: ImageSource;
  /** True when the image was already there and nothing was built. */
  cached: boolean;
  durationMs: number;
  log: string;
}

export interface StartOptions {
  signal?: AbortSignal;
  /** Extra labels for finding the sandbox later (job, trial). */
  labels?: Record<string, string>;
  /**
   * The network the sandbox joins. Default none: no interface but loopback. A name is an isolated
   * network the user made (never the host's own namespace); the provider refuses one it lacks.
   */
  network?: string | null;
  /** No trial waits on this start yet (a container kept ready): the engine may serve others first. */
  background?: boolean;
}

/** What a provider reports of its engine. */
export interface ProviderHealth {
  ok: boolean;
  /** Engine version and the like, or why it is unreachable. */
  detail: string;
}

/**
 * What a backend can do, declared (never assumed by a caller); the self-check skips, naming the
 * capability, each check a backend lacks the means for. Other optional parts tell their absence
 * themselves: `ExecResult.trace` undefined (cannot trace), `diskUsage()` null (cannot tell),
 * `SandboxSnapshot.runVerifier` absent (the verifier is started, then sent its command).
 */
export interface ProviderCapabilities {
  /** Commands run in a real POSIX shell with coreutils and /proc (exec, timeouts, process groups). */
  commands: boolean;
  /** A sandbox has no network but loopback unless it is given a named isolated network. */
  networkIsolation: boolean;
  /** A live sandbox can be branched into several (Sandbox.fork); its services are carried, no other process. */
  fork: boolean;
}

/**
 * Makes sandboxes for tasks: builds (or finds) the task's image once, then starts containers from
 * it. A new backend implements BackendProvider (src/sandbox/backend.ts: prepare and start, the
 * rest has defaults), registers with registerBackend (sandbox/registry.ts, or from outside the
 * package), and passes `termgrade selfcheck` (src/selfcheck/). Errors are TermgradeErrors with the
 * code named here; CancelledError whenever a caller's signal aborted the call.
 */
export interface SandboxProvider {
  readonly name: string;
  /** What this backend can do (see ProviderCapabilities). */
  readonly capabilities: ProviderCapabilities;
  /** Sandboxes it holds at once (an engine pool's capacities), when it has such a limit. */
  readonly capacity?: number;
  /**
   * Builds or finds the task's image. Throws BuildError (code `build_failed`) with the build's log
   * when it cannot be had; CancelledError on `signal`.
   */
  prepare(task: Task, options?: PrepareOptions): Promise<PreparedEnvironment>;
  /**
   * Starts a sandbox from a prepared image. Throws `environment_error` when the engine cannot
   * start it, `bad_input` for a network it refuses (see checkNetwork), CancelledError on `signal`;
   * on any failure nothing it made is left behind. Callers start through acquireSandbox (lease.ts).
   */
  start(task: Task, prepared: PreparedEnvironment, options?: StartOptions): Promise<Sandbox>;
  /** Closes every sandbox this provider has open (used on Ctrl-C / SIGTERM). Never throws. */
  closeAll(): Promise<void>;
  /** Whether the engine answers; never throws. */
  health(): Promise<ProviderHealth>;
  /**
   * Asked once by every command before work starts. Throws `engine_unavailable` when no engine
   * answers; returns a warning per part that does not (a pool's lost engine), none when all do.
   */
  ping(): Promise<string[]>;
  /**
   * Whether `name` is a network trials may join: an isolated one the user made, never the host's.
   * Throws `bad_input` naming the problem (absent, host/none/default, an address the host holds).
   */
  checkNetwork(name: string): Promise<void>;
  /**
   * Removes sandboxes left by termgrade processes that are gone (a crash, kill -9); `all` removes
   * every sandbox termgrade made. Never touches what a live process owns, image builds included.
   * Returns how many were removed; throws `engine_unavailable` when the engine does not answer.
   */
  cleanup(options?: { all?: boolean }): Promise<number>;
}
