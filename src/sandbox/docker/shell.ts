import { randomBytes } from 'node:crypto';
import type { Duplex } from 'node:stream';
import { Writable } from 'node:stream';
import type Docker from 'dockerode';
import { TermgradeError } from '../../util/errors.js';
import type { Shell } from '../sandbox.js';
import type { Turn } from './turns.js';

const MAX_OUTPUT = 4 * 1024 * 1024;

/**
 * One long-lived `/bin/sh` reading commands on stdin; each command is followed by a marker line
 * carrying a nonce and the exit code, which is how we know where its output ends.
 */
export class DockerShell implements Shell {
  private buffer = '';
  private dead: Error | null = null;
  private queue: Promise<unknown> = Promise.resolve();
  private waiter: (() => void) | null = null;

  private constructor(private readonly stream: Duplex) {}

  static async open(docker: Docker, container: Docker.Container, turn: Turn): Promise<DockerShell> {
    const stream = await turn(async () => {
      const exec = await container.exec({
        Cmd: ['/bin/sh'],
        AttachStdin: true,
        AttachStdout: true,
        AttachStderr: true,
        Tty: false,
      });
      return await exec.start({ hijack: true, stdin: true });
    });
    const shell = new DockerShell(stream);
    const sink = new Writable({
      write: (chunk: Buffer, _enc, done) => {
        shell.buffer += chunk.toString('utf8');
        if (shell.buffer.length > MAX_OUTPUT) shell.buffer = shell.buffer.slice(-MAX_OUTPUT);
        shell.waiter?.();
        done();
      },
    });
    docker.modem.demuxStream(stream, sink, sink);
    const onEnd = (): void => {
      shell.dead ??= new TermgradeError('environment_error', 'the helper shell in the sandbox exited');
      shell.waiter?.();
    };
    stream.on('end', onEnd);
    stream.on('close', onEnd);
    stream.on('error', onEnd);
    return shell;
  }

  get alive(): boolean {
    return this.dead === null;
  }

  run(command: string, options: { timeoutSec?: number } = {}): Promise<{ output: string; exitCode: number }> {
    const next = this.queue.then(() => this.runNow(command, options.timeoutSec ?? 30));
    this.queue = next.catch(() => undefined); // the queue only orders runs: the caller gets the failure from `next`
    return next;
  }

  private async runNow(command: string, timeoutSec: number): Promise<{ output: string; exitCode: number }> {
    if (this.dead) throw this.dead;
    const nonce = randomBytes(6).toString('hex');
    const marker = new RegExp(`\\x1eTG ${nonce} (\\d+)\\n`);
    this.buffer = '';
    this.stream.write(`{ ${command}\n} </dev/null 2>&1; printf '\\036TG %s %d\\n' ${nonce} $?\n`);
    const deadline = Number.isFinite(timeoutSec) ? Date.now() + timeoutSec * 1000 : Number.POSITIVE_INFINITY;
    for (;;) {
      const m = marker.exec(this.buffer);
      if (m) {
        const output = this.buffer.slice(0, m.index);
        this.buffer = this.buffer.slice(m.index + m[0].length);
        return { output, exitCode: Number(m[1]) };
      }
      if (this.dead) throw this.dead;
      const left = deadline - Date.now();
      if (left <= 0) {
        this.close();
        throw new TermgradeError('environment_error', `helper command did not finish within ${timeoutSec} s`);
      }
      await new Promise<void>((resolve) => {
        // Node timers hold at most 2^31-1 ms; a longer wait just wakes up and waits again.
        const timer = setTimeout(resolve, Math.min(left, 2_147_483_647));
        this.waiter = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.waiter = null;
    }
  }

  close(): void {
    this.dead ??= new TermgradeError('environment_error', 'the helper shell was closed');
    this.stream.destroy();
  }
}
