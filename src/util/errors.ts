/**
 * One error base with a stable code, so callers branch on `code`, never on message text.
 * The message always names what failed and where (file, task, container) in words a user can act on.
 */
export class TermgradeError extends Error {
  constructor(
    readonly code: string,
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
