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
