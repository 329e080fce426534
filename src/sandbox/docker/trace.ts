import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { access, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { sleep } from '../../util/time.js';
import { ifMissing, isMissing } from '../../util/errors.js';
import { logged } from '../../util/log.js';

/**
 * Records which files a command in a container executes, opens and looks up, with this machine's
 * strace attached from outside the container (nothing in the sandbox takes part, so nothing the
 * agent left there can fake the record). Only for an engine on this machine: the command is held
 * stopped (SIGSTOP) until strace has attached, found by a marker in its command line.
 */
const CALLS =
  'execve,execveat,open,openat,openat2,stat,lstat,newfstatat,statx,access,faccessat,faccessat2,readlink,readlinkat,getdents64,chdir,bind';

let straceHere: Promise<boolean> | null = null;
/** Whether this machine has strace (asked once). */
export function canTrace(): Promise<boolean> {
  straceHere ??= access('/usr/bin/strace').then(
    () => true,
    logged('find strace (commands run untraced)', false, { expected: isMissing }),
  );
  return straceHere;
}

export interface TracedCommand {
  /** The argv to run in the container in place of `argv`: it stops itself until the tracer holds it. */
  argv: string[];
  /** Attaches the tracer once the command is waiting; resolves false when it could not (the command then runs untraced). */
  attach(): Promise<boolean>;
  /** Stops tracing and returns strace's log (null when it never attached). */
  finish(): Promise<string | null>;
}

async function findStopped(marker: string, deadlineMs: number): Promise<number | null> {
  const end = Date.now() + deadlineMs;
  while (Date.now() < end) {
    for (const name of await readdir('/proc')) {
      if (!/^\d+$/.test(name)) continue;
      const cmd = await ifMissing(readFile(`/proc/${name}/cmdline`, 'utf8'), ''); // exited meanwhile
      if (!cmd.includes(marker)) continue;
      const stat = await ifMissing(readFile(`/proc/${name}/stat`, 'utf8'), '');
      if (/\) T /.test(stat)) return Number(name);
    }
    await sleep(10);
  }
  return null;
}

async function tracerOf(pid: number): Promise<number> {
  const status = await ifMissing(readFile(`/proc/${pid}/status`, 'utf8'), '');
  return Number(/TracerPid:\s*(\d+)/.exec(status)?.[1] ?? 0);
}

export function tracedCommand(argv: string[]): TracedCommand {
  const marker = `termgrade-trace-${randomBytes(8).toString('hex')}`;
  let strace: ChildProcess | null = null;
  let logFile: string | null = null;
  let pid: number | null = null;
  return {
    argv: ['/bin/sh', '-c', 'kill -STOP $$; exec "$@"', marker, ...argv],
    async attach() {
      pid = await findStopped(marker, 10_000);
      if (pid === null) return false;
      const dir = await mkdtemp(path.join(tmpdir(), 'termgrade-trace-'));
      logFile = path.join(dir, 'trace.log');
      strace = spawn(
        '/usr/bin/strace',
        ['-f', '-qq', '-y', '-s', '4096', '-e', `trace=${CALLS}`, '-o', logFile, '-p', String(pid)],
        { stdio: 'ignore' },
      );
      const spawned = strace;
      let ok = false;
      for (let i = 0; i < 500 && spawned.exitCode === null; i++) {
        if ((await tracerOf(pid)) === spawned.pid) {
          ok = true;
          break;
        }
        await sleep(10);
      }
      process.kill(pid, 'SIGCONT');
      return ok;
    },
    async finish() {
      const s = strace;
      if (!s || !logFile) return null;
      if (s.exitCode === null) {
        // Processes the command left running keep strace attached: detach from them.
        const exited = new Promise<void>((resolve) => s.once('exit', () => resolve()));
        s.kill('SIGINT');
        await Promise.race([exited, sleep(5000)]);
        if (s.exitCode === null) s.kill('SIGKILL');
      }
      const log = await ifMissing(readFile(logFile, 'utf8'), null); // strace never wrote it
      await rm(path.dirname(logFile), { recursive: true, force: true });
      return log;
    },
  };
}
