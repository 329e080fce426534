import type { Duplex } from 'node:stream';
import type Docker from 'dockerode';
import { CancelledError, isGoneFromEngine } from '../../util/errors.js';
import { causeOf, log, logged } from '../../util/log.js';
import { sleep } from '../../util/time.js';
import { OutputCapture, type CapturedOutput } from '../capture.js';
import type { ExecOptions, ExecResult } from '../sandbox.js';
import {
  DEFAULT_MAX_OUTPUT_BYTES,
  DEFAULT_SPOOL_DIR,
  killScript,
  parseText,
  raceDeadline,
  spool,
  timedOutResult,
  wrap,
  type Spool,
} from '../exec-wrapper.js';
import { shellQuote } from '../../util/shell-quote.js';
import type { DockerShell } from './shell.js';
import type { Turn } from './turns.js';

/** Splits the wrapper's size line off stdout and states what was cut. */
function parseEmitted(
  stdout: OutputCapture,
  stderr: OutputCapture,
  limit: number,
): { out: CapturedOutput; err: CapturedOutput } {
  return parseText(stdout.result().text, stderr.result().text, stdout.total, stderr.total, limit);
}

/** Starts an exec and collects its (already bounded) output until the stream ends. */
async function startExec(
  docker: Docker,
  container: Docker.Container,
  turn: Turn,
  cmd: string[],
  options: ExecOptions,
  limit: number,
): Promise<{ exec: Docker.Exec; stream: Duplex; stdout: OutputCapture; stderr: OutputCapture; ended: Promise<void> }> {
  // Setting the process up is the engine's work (runc); the command then runs on its own time.
  const { exec, stream } = await turn(async () => {
    const exec = await container.exec({
      Cmd: cmd,
      AttachStdout: true,
      AttachStderr: true,
      AttachStdin: false,
      Tty: false,
      Env: options.env ? Object.entries(options.env).map(([k, v]) => `${k}=${v}`) : undefined,
      WorkingDir: options.cwd,
      User: options.user,
    });
    return { exec, stream: await exec.start({ hijack: true, stdin: false }) };
  });
  // The wrapper already bounds what it prints; the captures are a second fence, a little larger.
  const stdout = new OutputCapture(limit + 4096);
  const stderr = new OutputCapture(limit + 4096);
  docker.modem.demuxStream(stream, stdout, stderr);
  const ended = new Promise<void>((resolve) => {
    stream.once('end', resolve);
    stream.once('close', resolve);
    stream.once('error', () => resolve());
  });
  return { exec, stream, stdout, stderr, ended };
}

/**
 * The same command, wrapper and guarantees as `dockerExec`, sent through the sandbox's helper
 * shell instead of a new engine exec: no exec round trip and far less work for the engine, which
 * is the bottleneck when many trials share two cores. A timeout or cancellation still kills the
 * process group through an engine exec.
 */
export async function shellExec(
  docker: Docker,
  container: Docker.Container,
  turn: Turn,
  shell: DockerShell,
  command: string | string[],
  options: ExecOptions = {},
  spoolDir = DEFAULT_SPOOL_DIR,
): Promise<ExecResult> {
  if (options.signal?.aborted) throw new CancelledError('command');
  const started = performance.now();
  const limit = options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
  const s = spool(spoolDir);
  const argv = wrap(command, s, limit, true);
  const env = Object.entries(options.env ?? {}).map(([k, v]) => shellQuote(`${k}=${v}`));
  const line = `(${options.cwd ? `cd -- ${shellQuote(options.cwd)} || exit 126; ` : ''}exec ${env.length ? `/usr/bin/env ${env.join(' ')} ` : ''}${argv.map(shellQuote).join(' ')})`;
  const running = shell.run(line, { timeoutSec: Number.POSITIVE_INFINITY }); // the deadline is ours, below
  const outcome = await raceDeadline(running, options);
  if (outcome === 'timeout' || outcome === 'aborted') {
    const collected = await killGroupAndCollect(docker, container, turn, s, limit);
    // The wrapper died with its group; let the shell report it so it is in step for the next command.
    const settled = await Promise.race([
      running.then(
        () => true,
        () => true, // ended either way: only its end is waited for (its output was collected above)
      ),
      sleep(5000).then(() => false),
    ]);
    if (!settled) shell.close();
    if (outcome === 'aborted') throw new CancelledError('command');
    return timedOutResult(collected, started);
  }
  const mark = `\n\x1eTG-STDERR ${s.id}\n`;
  const at = outcome.output.lastIndexOf(mark);
  const outPart = at >= 0 ? outcome.output.slice(0, at) : outcome.output;
  const errPart = at >= 0 ? outcome.output.slice(at + mark.length) : '';
  const { out, err } = parseText(outPart, errPart, Buffer.byteLength(outPart), Buffer.byteLength(errPart), limit);
  return {
    exitCode: outcome.exitCode,
    stdout: out,
    stderr: err,
    timedOut: false,
    durationMs: performance.now() - started,
  };
}

async function killGroupAndCollect(
  docker: Docker,
  container: Docker.Container,
  turn: Turn,
  s: Spool,
  limit: number,
): Promise<{ out: CapturedOutput; err: CapturedOutput } | null> {
  try {
    const kill = killScript(s, limit);
    const run = await startExec(docker, container, turn, ['/bin/sh', '-c', kill], {}, limit);
    await Promise.race([run.ended, sleep(10_000)]);
    run.stream.destroy();
    return parseEmitted(run.stdout, run.stderr, limit);
  } catch (err) {
    // The container may be gone already; teardown removes whatever is left.
    if (!isGoneFromEngine(err)) log.debug('could not end a timed-out command', { cause: causeOf(err) });
    return null;
  }
}

/**
 * One command in a running container, to completion, timeout or cancellation. Ends when the
 * stream closes, or when the engine reports the process gone (polled, as a safety net).
 */
export async function dockerExec(
  docker: Docker,
  container: Docker.Container,
  turn: Turn,
  command: string | string[],
  options: ExecOptions = {},
  spoolDir = DEFAULT_SPOOL_DIR,
): Promise<ExecResult> {
  if (options.signal?.aborted) throw new CancelledError('command');
  const started = performance.now();
  const limit = options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES;
  const s = spool(spoolDir);
  const run = await startExec(docker, container, turn, wrap(command, s, limit), options, limit);

  type Outcome = 'ended' | 'exited' | 'timeout' | 'aborted';
  let stopPolling = false;
  const pollExited = async (): Promise<Outcome> => {
    let interval = 100;
    while (!stopPolling) {
      await sleep(interval);
      if (stopPolling) break;
      interval = Math.min(interval * 2, 2000);
      const info = await run.exec
        .inspect()
        .catch(logged('poll whether a command exited', null, { expected: isGoneFromEngine })); // polled again
      if (info && !info.Running && info.ExitCode !== null) return 'exited';
    }
    return 'ended';
  };
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<Outcome>((resolve) => {
    if (options.timeoutSec !== undefined) timer = setTimeout(() => resolve('timeout'), options.timeoutSec * 1000);
  });
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<Outcome>((resolve) => {
    onAbort = () => resolve('aborted');
    options.signal?.addEventListener('abort', onAbort, { once: true });
  });

  let outcome: Outcome;
  try {
    outcome = await Promise.race([run.ended.then((): Outcome => 'ended'), pollExited(), timedOut, aborted]);
  } finally {
    stopPolling = true;
    clearTimeout(timer);
    if (onAbort) options.signal?.removeEventListener('abort', onAbort);
  }

  if (outcome === 'timeout' || outcome === 'aborted') {
    run.stream.destroy();
    const collected = await killGroupAndCollect(docker, container, turn, s, limit);
    if (outcome === 'aborted') throw new CancelledError('command');
    return timedOutResult(collected, started);
  }
  if (outcome === 'exited') await Promise.race([run.ended, sleep(2000)]);
  run.stream.destroy();
  const { out, err } = parseEmitted(run.stdout, run.stderr, limit);
  const info = await run.exec.inspect();
  return {
    exitCode: info.ExitCode ?? null,
    stdout: out,
    stderr: err,
    timedOut: false,
    durationMs: performance.now() - started,
  };
}
