import { randomBytes } from 'node:crypto';
import type { Duplex } from 'node:stream';
import type Docker from 'dockerode';
import { CancelledError } from '../../util/errors.js';
import { OutputCapture } from '../capture.js';
import type { ExecOptions, ExecResult } from '../sandbox.js';

export const DEFAULT_MAX_OUTPUT_BYTES = 2 * 1024 * 1024;
/** After the process has exited, how long to keep reading output a background child may still hold. */
const DRAIN_GRACE_MS = 150;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * Runs every command in a new session (setsid) whose leader writes its pid to a file, so a timeout
 * can kill the whole process group from a second exec: the Engine API has no "kill exec".
 */
function wrap(command: string | string[], pidFile: string): string[] {
  const argv = typeof command === 'string' ? ['/bin/sh', '-c', command] : command;
  // Not `exec "$@"`: the shell stays as session leader so it can remove its pid file afterwards.
  const script = `echo $$ > ${pidFile}; "$@"; rc=$?; rm -f ${pidFile}; exit $rc`;
  return ['setsid', '-w', '/bin/sh', '-c', script, 'termgrade-exec', ...argv];
}

async function killGroup(container: Docker.Container, pidFile: string): Promise<void> {
  try {
    const ex = await container.exec({
      Cmd: ['/bin/sh', '-c', `p=$(cat ${pidFile} 2>/dev/null) && kill -KILL -- -"$p" 2>/dev/null; rm -f ${pidFile}`],
      AttachStdout: false,
      AttachStderr: false,
    });
    await ex.start({ Detach: true });
  } catch {
    // The container may be gone already; teardown removes whatever is left.
  }
}

/**
 * One command in a running container, to completion, timeout or cancellation.
 * Ends on whichever comes first: the output stream closing, or the engine reporting the process
 * exited (polled, because a background child holding stdout keeps the stream open forever).
 */
export async function dockerExec(
  docker: Docker,
  container: Docker.Container,
  command: string | string[],
  options: ExecOptions = {},
): Promise<ExecResult> {
  if (options.signal?.aborted) throw new CancelledError('command');
  const started = performance.now();
  const pidFile = `/tmp/.termgrade-exec-${randomBytes(6).toString('hex')}`;
  const limit = options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
  const stdout = new OutputCapture(limit);
  const stderr = new OutputCapture(limit);

  const exec = await container.exec({
    Cmd: wrap(command, pidFile),
    AttachStdout: true,
    AttachStderr: true,
    AttachStdin: false,
    Tty: false,
    Env: options.env ? Object.entries(options.env).map(([k, v]) => `${k}=${v}`) : undefined,
    WorkingDir: options.cwd,
    User: options.user,
  });
  const stream = (await exec.start({ hijack: true, stdin: false })) as Duplex;
  docker.modem.demuxStream(stream, stdout, stderr);

  let streamEnded = false;
  const ended = new Promise<void>((resolve) => {
    const done = (): void => {
      streamEnded = true;
      resolve();
    };
    stream.once('end', done);
    stream.once('close', done);
    stream.once('error', done);
  });

  type Outcome = 'ended' | 'exited' | 'timeout' | 'aborted';
  let stopPolling = false;
  const pollExited = async (): Promise<Outcome> => {
    let interval = 50;
    while (!stopPolling) {
      await sleep(interval);
      if (stopPolling) break;
      interval = Math.min(interval * 2, 1000);
      const info = await exec.inspect().catch(() => null);
      if (info && !info.Running && info.ExitCode !== null) return 'exited';
    }
    return 'ended';
  };
  const timers: NodeJS.Timeout[] = [];
  const timedOut = new Promise<Outcome>((resolve) => {
    if (options.timeoutSec !== undefined) timers.push(setTimeout(() => resolve('timeout'), options.timeoutSec * 1000));
  });
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<Outcome>((resolve) => {
    onAbort = () => resolve('aborted');
    options.signal?.addEventListener('abort', onAbort, { once: true });
  });

  let outcome: Outcome;
  try {
    outcome = await Promise.race([ended.then((): Outcome => 'ended'), pollExited(), timedOut, aborted]);
  } finally {
    stopPolling = true;
    timers.forEach(clearTimeout);
    if (onAbort) options.signal?.removeEventListener('abort', onAbort);
  }

  if (outcome === 'timeout' || outcome === 'aborted') await killGroup(container, pidFile);
  if (!streamEnded) {
    // Let output already in flight arrive, then stop listening: a daemon may hold the pipe forever.
    await Promise.race([ended, sleep(outcome === 'exited' ? DRAIN_GRACE_MS : 1000)]);
    stream.destroy();
  }
  if (outcome === 'aborted') throw new CancelledError('command');

  const exitCode = outcome === 'timeout' ? null : ((await exec.inspect()).ExitCode ?? null);
  return {
    exitCode,
    stdout: stdout.result(),
    stderr: stderr.result(),
    timedOut: outcome === 'timeout',
    durationMs: performance.now() - started,
  };
}
