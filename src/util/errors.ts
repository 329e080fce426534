/**
 * A command's exit codes, the same for every command; the README's table is rendered from these
 * and ERROR_CODES (test/exit-codes.test.ts checks it).
 */
export const EXIT = {
  ok: 0,
  rejected: 1,
  usage: 2,
  engine: 3,
  internal: 4,
  store: 5,
  sigint: 130,
  sigterm: 143,
} as const;

/** What each exit code says, for the README's table. */
export const EXIT_MEANS: Record<keyof typeof EXIT, string> = {
  ok: 'success',
  rejected: 'a task rejected, a trial failed or slots left (budget)',
  usage: 'bad usage or input: one line naming the file or flag and the problem, never a stack trace',
  engine:
    'a service termgrade needs does not answer or failed: no Docker engine, engines lost, the generator model down (synth: run the same command again to resume)',
  internal: 'internal error: one line, and the file the full trace was written to',
  store: 'the store cannot be written (disk full, read-only); a damaged store given to read is bad input, 2',
  sigint: 'interrupted by SIGINT (every container removed)',
  sigterm: 'terminated by SIGTERM (every container removed)',
};

/**
 * Every TermgradeError code and the exit code of a command it ends: the one table the CLI maps by.
 * A new code is added here first (the type of `TermgradeError.code` is its keys).
 */
export const ERROR_CODES = {
  usage: 'usage',
  bad_input: 'usage',
  invalid_task: 'usage',
  job_busy: 'usage',
  store_corrupt: 'usage',
  engine_unavailable: 'engine',
  environment_error: 'engine',
  build_failed: 'rejected',
  grading_step: 'internal',
  agent_error: 'internal',
  cancelled: 'sigint',
  store_error: 'store',
  store_full: 'store',
  store_readonly: 'store',
  model_rate_limit: 'engine',
  model_overloaded: 'engine',
  model_transient: 'engine',
  model_timeout: 'engine',
  model_context_length: 'usage',
  model_auth: 'usage',
  model_not_found: 'usage',
  model_refusal: 'usage',
  model_bad_request: 'usage',
} as const satisfies Record<string, keyof typeof EXIT>;

export type ErrorCode = keyof typeof ERROR_CODES;

/** The exit code of a command that ends with `code`. */
export const exitCodeOf = (code: ErrorCode): number => EXIT[ERROR_CODES[code]];

/**
 * One error base with a stable code, so callers branch on `code`, never on message text.
 * The message always names what failed and where (file, task, container) in words a user can act on.
 */
export class TermgradeError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'TermgradeError';
  }
}

/** A task folder that cannot be used: names the task, the file and the problem. */
export class TaskError extends TermgradeError {
  constructor(
    readonly taskPath: string,
    readonly file: string,
    readonly problem: string,
  ) {
    super('invalid_task', `task ${taskPath}: ${file}: ${problem}`);
    this.name = 'TaskError';
  }
}

/**
 * The engine a sandbox ran on stopped answering (or was lost from a pool): the infrastructure's
 * failure, never the sandbox content's, whatever step it broke.
 */
export class EngineLostError extends TermgradeError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('environment_error', message, options);
    this.name = 'EngineLostError';
  }
}

/** Whether `err` or anything in its chain of causes is a lost engine (the one test of it). */
export function isEngineLost(err: unknown): boolean {
  for (let e: unknown = err; e instanceof Error; e = e.cause) if (e instanceof EngineLostError) return true;
  return false;
}

/**
 * A step of grading failed after the agent's turn (the verifier's sandbox did not start, its
 * folders could not be made, the tests could not be copied in). Whether the sandbox's content or
 * the engine is at fault is decided by whoever can ask the engine (see runTrial).
 */
export class GradingStepError extends TermgradeError {
  constructor(
    readonly step: string,
    cause: unknown,
  ) {
    super('grading_step', `${step}: ${errorMessage(cause)}`, { cause });
    this.name = 'GradingStepError';
  }
}

/**
 * `work` as a step of grading: a failure becomes GradingStepError naming the step (a cancel, or a
 * step error already named, passes through as it is).
 */
export async function gradingStep<T>(name: string, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (err instanceof CancelledError || err instanceof GradingStepError) throw err;
    throw new GradingStepError(name, err);
  }
}

/** Raised when work is cancelled through an AbortSignal (Ctrl-C, SIGTERM, a budget). */
export class CancelledError extends TermgradeError {
  constructor(what = 'operation') {
    super('cancelled', `${what} was cancelled`);
    this.name = 'CancelledError';
  }
}

export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}

/** The errno code of a Node system error (ENOENT, EACCES, ...); undefined for any other value. */
export function errnoOf(err: unknown): string | undefined {
  const code = err instanceof Error ? (err as NodeJS.ErrnoException).code : undefined;
  return typeof code === 'string' ? code : undefined;
}

/**
 * A path that is not there: ENOENT, ENOTDIR (a part of it is a file), or ESRCH (a /proc entry of a
 * process that exited while it was read). The one test of "an optional file is absent".
 */
export function isMissing(err: unknown): boolean {
  const code = errnoOf(err);
  return code === 'ENOENT' || code === 'ENOTDIR' || code === 'ESRCH';
}

/** `work`'s value, or `fallback` when the path it reads is not there (isMissing); any other failure is thrown. */
export async function ifMissing<T, F>(work: Promise<T>, fallback: F): Promise<T | F> {
  try {
    return await work;
  } catch (err) {
    if (isMissing(err)) return fallback;
    throw err;
  }
}

/** The HTTP status of an engine's error (dockerode sets statusCode); undefined for any other failure. */
export function engineStatus(err: unknown): number | undefined {
  const status = err !== null && typeof err === 'object' ? (err as { statusCode?: unknown }).statusCode : undefined;
  return typeof status === 'number' ? status : undefined;
}

/** A request ended by its AbortSignal (a bound that passed, a cancel): the error fetch and the engine client throw. */
export const isAbortError = (err: unknown): boolean => (err as { name?: unknown } | null)?.name === 'AbortError';

/** An engine object already gone: "No such container" (or exec, image, network), HTTP 404. */
export const isGoneFromEngine = (err: unknown): boolean => engineStatus(err) === 404;

/** Why a file could not be read, short, for a message: its errno code (ENOENT, EACCES), else the error's message. */
export function readFailure(err: unknown): string {
  return errnoOf(err) ?? errorMessage(err);
}
