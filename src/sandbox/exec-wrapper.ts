import { randomBytes } from 'node:crypto';
import { CancelledError } from '../util/errors.js';
import { sleep } from '../util/time.js';
import type { CapturedOutput } from './capture.js';
import { SYSTEM_PATH, type ExecOptions, type ExecResult } from './sandbox.js';

export const DEFAULT_MAX_OUTPUT_BYTES = 2 * 1024 * 1024;
/** Where commands spool their output (a verifier's sandbox uses a name of its own: see DockerSandbox.spoolDir). */
export const DEFAULT_SPOOL_DIR = '/tmp/.termgrade-exec';

/**
 * Why commands do not write to the exec's pipes directly: a background child (a server that
 * solve.sh starts) would inherit them, the engine would hold the exec open for it, and once the
 * engine gave up on the pipe the child would die of SIGPIPE. So the command writes to spool files
 * in the container; when it exits, the wrapper prints the sizes, then the head and tail of each
 * file (the middle never leaves the container), and removes them. The wrapper leads a new session
 * and records its pid, so a timeout kills the whole process group from a second exec (the Engine
 * API has no "kill exec"). The wrapper is every backend's: Docker's exec paths send it, and
 * `execByRun` builds the whole exec contract on a backend's plain process run.
 */
export interface Spool {
  id: string;
  dir: string;
  pid: string;
  out: string;
  err: string;
}

export function spool(dir: string): Spool {
  const id = randomBytes(6).toString('hex');
  const base = `${dir}/${id}`;
  return { id, dir, pid: `${base}.pid`, out: `${base}.out`, err: `${base}.err` };
}

/**
 * Shell that prints "<out bytes> <err bytes>\n", then out's head+tail on stdout and err's on
 * stderr, and removes the spool. Process spawns cost ~5 ms each in a container, so it spawns as
 * few as it can: one wc for both sizes and only when either holds something (most commands the
 * harness sends print nothing), cat/head/tail only for non-empty files, one rm.
 */
export function emitScript(s: Spool, limit: number, joined = false): string {
  const head = Math.floor(limit / 2);
  const tail = limit - head;
  // Joined: stderr follows stdout on the same stream after a marker line (the helper shell has one).
  const toErr = joined
    ? `; printf '\\n${STDERR_MARK} ${s.id}\\n'; tg_show "$3" ${s.err}`
    : `; tg_show "$3" ${s.err} >&2`;
  return [
    `tg_show() { if [ "$1" -le ${limit} ]; then [ "$1" -eq 0 ] || cat "$2"; else head -c ${head} "$2"; printf '\\n[... %s bytes omitted ...]\\n' $(($1 - ${limit})); tail -c ${tail} "$2"; fi; }`,
    `if [ -s ${s.out} ] || [ -s ${s.err} ]; then set -- $(wc -c ${s.out} ${s.err} 2>/dev/null) 0 x 0 x; else set -- 0 x 0 x; fi`,
    `printf '%s %s\\n' "$1" "$3"`,
    `tg_show "$1" ${s.out}${toErr}`,
    `rm -f ${s.out} ${s.err} ${s.pid}`,
  ].join('; ');
}

export const STDERR_MARK = '\\036TG-STDERR';

export function wrap(command: string | string[], s: Spool, limit: number, joined = false): string[] {
  const argv = typeof command === 'string' ? ['/bin/sh', '-c', command] : command;
  const prepare = `[ -d ${s.dir} ] || { mkdir -p ${s.dir} && chmod 1777 ${s.dir}; } 2>/dev/null`;
  // The command's own PATH comes back just for it (TG_PATH carries it past setsid).
  const run = `PATH=$TG_PATH; unset TG_PATH; "$@" > ${s.out} 2> ${s.err} < /dev/null; rc=$?; PATH=${SYSTEM_PATH}`;
  const script = `${prepare}; echo $$ > ${s.pid}; ${run}; ${emitScript(s, limit, joined)}; exit $rc`;
  return [
    '/bin/sh',
    '-c',
    `TG_PATH=$PATH PATH=${SYSTEM_PATH} exec setsid -w /bin/sh -c "$@"`,
    'termgrade-wrap',
    script,
    'termgrade-exec',
    ...argv,
  ];
}

export function parseText(
  raw: string,
  errText: string,
  outTotal: number,
  errTotal: number,
  limit: number,
): { out: CapturedOutput; err: CapturedOutput } {
  const nl = raw.indexOf('\n');
  const sizes = /^(\d+) (\d+)$/.exec(nl >= 0 ? raw.slice(0, nl).trim() : '');
  const outBytes = sizes ? Number(sizes[1]) : outTotal;
  const errBytes = sizes ? Number(sizes[2]) : errTotal;
  const cut = (n: number): number => Math.max(0, n - limit);
  return {
    out: { text: sizes ? raw.slice(nl + 1) : raw, totalBytes: outBytes, truncatedBytes: cut(outBytes) },
    err: { text: errText, totalBytes: errBytes, truncatedBytes: cut(errBytes) },
  };
}

/** What a killed command leaves: the output it had written (when it could be read back). */
export function timedOutResult(
  collected: { out: CapturedOutput; err: CapturedOutput } | null,
  started: number,
): ExecResult {
  const empty: CapturedOutput = { text: '', totalBytes: 0, truncatedBytes: 0 };
  return {
    exitCode: null,
    stdout: collected?.out ?? empty,
    stderr: collected?.err ?? empty,
    timedOut: true,
    durationMs: performance.now() - started,
  };
}

/** Kills the wrapper's process group (a timeout, a cancel), then prints what it had written, as the wrapper would have. */
export function killScript(s: Spool, limit: number): string {
  return `PATH=${SYSTEM_PATH}; p=$(cat ${s.pid} 2>/dev/null) && kill -9 -"$p" 2>/dev/null; ${emitScript(s, limit)}`;
}

/** A process run in the sandbox to its end, with its whole output: what a backend may give instead of `exec`. */
export interface ProcessRun {
  /** The process's exit code; null when it was killed. */
  exitCode: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs `argv` in the sandbox (no shell, as given) with these settings, resolving when the process
 * ends; rejects only when it could not be run at all. Aborting `signal` may end the local side
 * (the process in the sandbox is killed by the caller).
 */
export type RunProcess = (
  argv: string[],
  options: { env?: Record<string, string>; cwd?: string; user?: string; signal: AbortSignal },
) => Promise<ProcessRun>;

/**
 * A command's run raced against its deadline (`timeoutSec`) and its caller's cancellation
 * (`signal`): the run's own result, or which of the two came first. Listeners and the timer are
 * gone when it settles. Every exec path that waits on one promise goes through this.
 */
export async function raceDeadline<T>(
  running: Promise<T>,
  options: Pick<ExecOptions, 'timeoutSec' | 'signal'>,
): Promise<T | 'timeout' | 'aborted'> {
  let timer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  const stopped = new Promise<'timeout' | 'aborted'>((resolve) => {
    if (options.timeoutSec !== undefined) timer = setTimeout(() => resolve('timeout'), options.timeoutSec * 1000);
    onAbort = () => resolve('aborted');
    options.signal?.addEventListener('abort', onAbort, { once: true });
  });
  try {
    return await Promise.race([running, stopped]);
  } finally {
    clearTimeout(timer);
    if (onAbort) options.signal?.removeEventListener('abort', onAbort);
  }
}

/** Seconds the kill of a timed-out command, and the output it returns, may take. */
const KILL_SEC = 10;

/**
 * The whole exec contract (bounded output, a background child that cannot hold the command open,
 * a timeout that kills the process group and keeps the output so far, cancellation) built on a
 * backend's plain process run: the wrapper runs the command, and a second run kills its group.
 * Rejects when the wrapper did not run (the sandbox is gone): a failing command is a result.
 */
export async function execByRun(
  run: RunProcess,
  command: string | string[],
  options: ExecOptions = {},
  spoolDir = DEFAULT_SPOOL_DIR,
): Promise<ExecResult> {
  if (options.signal?.aborted) throw new CancelledError('command');
  const started = performance.now();
  const limit = options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
  const s = spool(spoolDir);
  const own = new AbortController();
  const { env, cwd, user } = options;
  const running = run(wrap(command, s, limit), { env, cwd, user, signal: own.signal });
  const outcome = await raceDeadline(running, options);
  if (outcome === 'timeout' || outcome === 'aborted') {
    const killed = await run(['/bin/sh', '-c', killScript(s, limit)], {
      signal: AbortSignal.timeout(KILL_SEC * 1000),
    }).then(
      (k) => parseText(k.stdout, k.stderr, Buffer.byteLength(k.stdout), Buffer.byteLength(k.stderr), limit),
      () => null, // the sandbox may be gone already: no output so far to give
    );
    own.abort();
    // The wrapper died with its group; its run ends with it (bounded, so a stuck backend cannot hold the caller).
    // Its rejection is our own abort (own.abort() above): the outcome is already decided.
    await Promise.race([running.catch(() => undefined), sleep(KILL_SEC * 1000)]);
    if (outcome === 'aborted') throw new CancelledError('command');
    return timedOutResult(killed, started);
  }
  if (!/^\d+ \d+\n/.test(outcome.stdout))
    throw new Error(
      `the command did not run in sandbox (exit ${outcome.exitCode}): ${outcome.stderr.trim().slice(0, 500) || 'no output'}`,
    );
  const { out, err } = parseText(
    outcome.stdout,
    outcome.stderr,
    Buffer.byteLength(outcome.stdout),
    Buffer.byteLength(outcome.stderr),
    limit,
  );
  return {
    exitCode: outcome.exitCode,
    stdout: out,
    stderr: err,
    timedOut: false,
    durationMs: performance.now() - started,
  };
}
