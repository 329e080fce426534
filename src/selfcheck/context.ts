import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadTask } from '../task/load.js';
import type { Task } from '../task/task.js';
import { acquireSandbox, type SandboxLease } from '../sandbox/lease.js';
import type { ProviderCapabilities, Sandbox, SandboxProvider } from '../sandbox/sandbox.js';
import { writeSelfcheckTask } from './task.js';

/** A check's verdict failed: the message says what the backend did instead. */
export class CheckFailed extends Error {}

/** Fails the check with `message` unless `cond` holds. */
export function expect(cond: boolean, message: string): asserts cond {
  if (!cond) throw new CheckFailed(message);
}

/** What a check works with; everything it opens is closed and removed when the check ends. */
export class CheckContext {
  private readonly leases: SandboxLease[] = [];
  private readonly dirs: string[] = [];

  constructor(
    readonly provider: SandboxProvider,
    readonly image: string,
    readonly signal: AbortSignal,
  ) {}

  /** A fresh folder on this machine. */
  async tempDir(): Promise<string> {
    const d = await mkdtemp(path.join(tmpdir(), 'termgrade-selfcheck-'));
    this.dirs.push(d);
    return d;
  }

  /** The checks' task (its tests pass only on /app/out.txt = hello), or one with other tests. */
  async task(testSh?: string): Promise<Task> {
    return loadTask(await writeSelfcheckTask(await this.tempDir(), this.image, testSh));
  }

  /** A sandbox of the checks' task, acquired as every command acquires one. */
  async sandbox(): Promise<Sandbox> {
    const lease = await acquireSandbox({
      provider: this.provider,
      task: await this.task(),
      signal: this.signal,
      labels: { 'io.termgrade.selfcheck': 'true' },
    });
    this.leases.push(lease);
    return lease.sandbox;
  }

  async dispose(): Promise<void> {
    await Promise.all(this.leases.map((l) => l.close()));
    await Promise.all(this.dirs.map((d) => rm(d, { recursive: true, force: true })));
  }
}

/** One contract check: what it needs of the backend, and its body (throws CheckFailed, or any error, to fail). */
export interface SelfCheck {
  name: string;
  /** What it shows, one line. */
  about: string;
  needs: Array<keyof ProviderCapabilities>;
  run(ctx: CheckContext): Promise<void>;
}
