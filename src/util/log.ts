import { appendFileSync } from 'node:fs';
import { makeScrub, type Scrub } from './scrub.js';

/**
 * A small logger for what an operator needs when something failed off the main path (a grade
 * that could not be written, a cleanup that did not happen, why a verifier crashed): one line to
 * stderr and, when given, one JSON line to a log file (a job's or a server's). Every line passes
 * through the scrub first, so an API key inside an error message never reaches either sink.
 */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
export type LogFields = Record<string, string | number | boolean | null | undefined>;

export interface Logger {
  debug(message: string, fields?: LogFields): void;
  info(message: string, fields?: LogFields): void;
  warn(message: string, fields?: LogFields): void;
  error(message: string, fields?: LogFields): void;
}

export interface LoggerOptions {
  /** Lines below this level are dropped (default info). */
  level?: LogLevel;
  /** Also append each line as JSON to this file. */
  file?: string;
  /** Applied to every line before it is written (default: none). */
  scrub?: Scrub;
  /** Where the human line goes (default process.stderr); null for the file alone. */
  stream?: { write(text: string): unknown } | null;
}

const RANK: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

/** An error's message (its first line), for a log field; anything else as text. */
export function causeOf(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  return text.split('\n')[0] ?? '';
}

export function createLogger(options: LoggerOptions = {}): Logger {
  const min = RANK[options.level ?? 'info'];
  const scrub = options.scrub ?? ((t: string) => t);
  const stream = options.stream === undefined ? process.stderr : options.stream;
  let fileFailed = false;
  const write = (level: LogLevel, message: string, fields: LogFields = {}): void => {
    if (RANK[level] < min) return;
    const shown = Object.entries(fields).filter(([, v]) => v !== undefined);
    const tail = shown.map(
      ([k, v]) => ` ${k}=${typeof v === 'string' && /\s/.test(v) ? JSON.stringify(v) : String(v)}`,
    );
    stream?.write(scrub(`[termgrade] ${level}: ${message}${tail.join('')}\n`));
    if (!options.file || fileFailed) return;
    const line = { time: new Date().toISOString(), level, message, ...Object.fromEntries(shown) };
    try {
      appendFileSync(options.file, scrub(`${JSON.stringify(line)}\n`));
    } catch (err) {
      // Said once on stderr, then the file is left alone: logging must never fail the work it reports on.
      fileFailed = true;
      stream?.write(scrub(`[termgrade] warn: cannot write the log file ${options.file}: ${causeOf(err)}\n`));
    }
  };
  return {
    debug: (m, f) => write('debug', m, f),
    info: (m, f) => write('info', m, f),
    warn: (m, f) => write('warn', m, f),
    error: (m, f) => write('error', m, f),
  };
}

const processSecrets = new Set<string>();
let scrubProcess: Scrub = (t) => t;

/**
 * Secrets the process holds (an API key, a server's token), taken out of every line the default
 * logger writes: called where a secret is read, so no caller of `log` has to know it.
 */
export function hideInLogs(...secrets: Array<string | null | undefined>): void {
  for (const s of secrets) if (s) processSecrets.add(s);
  scrubProcess = makeScrub([...processSecrets]);
}

/** The process's default logger: stderr, level from TERMGRADE_LOG_LEVEL (default info), secrets hidden. */
export const log: Logger = createLogger({
  level: parseLevel(process.env.TERMGRADE_LOG_LEVEL),
  scrub: (text) => scrubProcess(text),
});

function parseLevel(text: string | undefined): LogLevel {
  return text === 'debug' || text === 'info' || text === 'warn' || text === 'error' ? text : 'info';
}

/**
 * A `.catch` handler for best-effort work whose failure changes no outcome (a cleanup, a hint, a
 * faster path with a slower one behind it): says what could not be done and why through the process's
 * logger (debug unless told), then gives `fallback`; a failure `expected` names (a container already
 * gone, a file absent) gives `fallback` unlogged. The cause is never dropped silently.
 */
export function logged<F = undefined>(
  what: string,
  fallback?: F,
  options: { level?: LogLevel; fields?: LogFields; expected?: (err: unknown) => boolean } = {},
): (err: unknown) => F {
  return (err) => {
    // A named, expected case (a container already gone, a file absent) is the fallback without a word.
    if (!options.expected?.(err))
      log[options.level ?? 'debug'](`could not ${what}`, { ...options.fields, cause: causeOf(err) });
    return fallback as F;
  };
}
