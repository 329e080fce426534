/**
 * TEST DOUBLE. A sandbox provider with no engine behind it: sandboxes are in-memory file maps and
 * commands do nothing but what the verifier's own steps need, so scheduler tests (retries, caps,
 * resume, accounting) run in milliseconds. It stands in for a backend only where the backend is
 * not what is being tested; the real backends pass the behaviour and attack suites.
 */
import { prepareFoldersInside } from '../../src/sandbox/verifier-folders.js';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Task } from '../../src/task/task.js';
import type {
  CopyOptions,
  ExecOptions,
  ExecResult,
  FileEntry,
  FsChange,
  PreparedEnvironment,
  ProviderCapabilities,
  ProviderHealth,
  Sandbox,
  SandboxProvider,
  SandboxSnapshot,
  Shell,
  StartOptions,
} from '../../src/sandbox/sandbox.js';
import { CancelledError, TermgradeError } from '../../src/util/errors.js';

/** What the grader of a fake trial returns: a reward, no reward file, or a verifier that hangs. */
export type FakeGrade = number | 'no-reward' | 'hang';

export interface FakeBehaviour {
  /** The verifier's reward for a task's n-th graded run (0-based, counted per task). */
  grade?: (task: Task, n: number) => FakeGrade;
  /** Whether the n-th start of a task's sandbox fails (an engine hiccup). */
  startFails?: (task: Task, n: number) => boolean;
  /** Whether preparing a task's image fails (a broken build). */
  prepareFails?: (task: Task) => boolean;
  /** Whether the engine is gone: preparing fails as a dropped socket does, and ping says no engine answers. */
  engineDown?: () => boolean;
  /** How long each command takes, ms. */
  commandMs?: number;
  /** How long a sandbox takes to start, ms. */
  startMs?: number;
}

const ok = (text = ''): ExecResult => ({
  exitCode: 0,
  stdout: { text, totalBytes: text.length, truncatedBytes: 0 },
  stderr: { text: '', totalBytes: 0, truncatedBytes: 0 },
  timedOut: false,
  durationMs: 0,
});

async function readTree(dir: string, prefix: string, into: Map<string, Buffer>): Promise<void> {
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) await readTree(p, `${prefix}/${e.name}`, into);
    else into.set(`${prefix}/${e.name}`, await readFile(p));
  }
}

export class FakeSandbox implements Sandbox {
  readonly files = new Map<string, Buffer>();
  /** Commands run in it (the set-up's mkdir of /logs is the first). */
  commands = 0;
  /** The network it is on now (setNetwork), and every change, in order: what each phase got. */
  network: string | null = null;
  readonly networkLog: (string | null)[] = [];
  private closed = false;

  constructor(
    readonly id: string,
    private readonly task: Task,
    private readonly provider: FakeProvider,
    private readonly onClose: () => void,
  ) {}

  private alive(): void {
    if (this.closed) throw new TermgradeError('environment_error', `fake sandbox ${this.id} is closed`);
  }

  async exec(command: string | string[], options: ExecOptions = {}): Promise<ExecResult> {
    this.alive();
    if (options.signal?.aborted) throw new CancelledError('command');
    this.commands += 1;
    const text = typeof command === 'string' ? command : command.join(' ');
    if (this.provider.behaviour.commandMs) await new Promise((r) => setTimeout(r, this.provider.behaviour.commandMs));
    if (text.includes('rm -rf /tests /logs/verifier')) {
      for (const k of [...this.files.keys()])
        if (k.startsWith('/tests/') || k.startsWith('/logs/verifier/')) this.files.delete(k);
      return ok();
    }
    if (text.includes('echo missing')) {
      // The artifact probe: what each quoted path is, from the file map.
      const paths = [...text.matchAll(/p='([^']*)'/g)].map((m) => m[1]!);
      const kind = (p: string): string =>
        this.files.has(p) ? 'file' : [...this.files.keys()].some((k) => k.startsWith(`${p}/`)) ? 'dir' : 'missing';
      return ok(`${paths.map(kind).join('\n')}\n`);
    }
    if (text.includes('/tests/test.sh')) {
      this.provider.networksAtGrading.push(this.network);
      const grade = this.provider.gradeNext(this.task);
      if (grade === 'hang') return { ...ok(), exitCode: null, timedOut: true };
      if (grade !== 'no-reward') this.files.set('/logs/verifier/reward.txt', Buffer.from(`${grade}\n`));
      return ok();
    }
    return ok();
  }

  async shell(): Promise<Shell> {
    throw new Error('the fake sandbox has no helper shell');
  }

  async copyIn(hostDir: string, destDir: string, _options?: CopyOptions): Promise<void> {
    this.alive();
    await readTree(hostDir, destDir.replace(/\/+$/, ''), this.files);
  }

  async putFiles(entries: FileEntry[]): Promise<void> {
    this.alive();
    for (const e of entries) if (e.content !== undefined) this.files.set(e.path, Buffer.from(e.content));
  }

  async copyOut(srcDir: string, hostDir: string): Promise<void> {
    this.alive();
    await mkdir(hostDir, { recursive: true });
    for (const [k, v] of this.files) {
      if (!k.startsWith(`${srcDir}/`)) continue;
      const target = path.join(hostDir, k.slice(srcDir.length + 1));
      await mkdir(path.dirname(target), { recursive: true });
      await writeFile(target, v);
    }
  }

  async readFile(file: string, maxBytes: number): Promise<Buffer | null> {
    return this.files.get(file)?.subarray(0, maxBytes) ?? null;
  }

  async changes(): Promise<FsChange[]> {
    return [...this.files.keys()].map((p) => ({ path: p, kind: 'added' as const }));
  }

  /** The verifier's sandbox is a copy of this one's files (no engine to share a network with). */
  async snapshot(): Promise<SandboxSnapshot> {
    this.alive();
    this.provider.snapshots += 1;
    const files = new Map(this.files);
    return {
      changes: async () => [...files.keys()].map((p) => ({ path: p, kind: 'added' as const })),
      env: async () => ({ PATH: '/usr/local/bin:/usr/bin:/bin' }),
      readFile: async (file, maxBytes) => files.get(file)?.subarray(0, maxBytes) ?? null,
      startVerifier: async (options) => {
        const v = new FakeSandbox(`${this.id}-verifier`, this.task, this.provider, () => undefined);
        // It shares the original's network, as a real verifier shares its namespace.
        v.network = this.network;
        for (const [k, b] of files) v.files.set(k, b);
        await prepareFoldersInside(v, options.tests, options.env);
        return v;
      },
      discard: async () => undefined,
    };
  }

  async stop(): Promise<void> {
    this.alive();
  }

  async setNetwork(network: string | null): Promise<void> {
    this.alive();
    this.network = network;
    this.networkLog.push(network);
  }

  async diskUsage(): Promise<number | null> {
    return [...this.files.values()].reduce((a, b) => a + b.length, 0);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.onClose();
  }
}

export class FakeProvider implements SandboxProvider {
  readonly name = 'fake';
  /** Commands do not really run and there is no network to isolate: the self-check skips what needs them. */
  readonly capabilities: ProviderCapabilities = {
    commands: false,
    networkIsolation: false,
    fork: false,
  };
  /** Counters a test reads: sandboxes started (and of them, those asked as background starts), open now, most open at once. */
  starts = 0;
  backgroundStarts = 0;
  /** Sandboxes closed without ever running a command after their set-up (started for nothing). */
  unused = 0;
  open = 0;
  maxOpen = 0;
  /** Snapshots taken for grading (one per graded trial, one per step of a multi-step one). */
  snapshots = 0;
  /** The network each grading's verifier was on, in order. */
  readonly networksAtGrading: (string | null)[] = [];
  /** Every sandbox started, kept after it closed (a test reads what each one went through). */
  readonly started: FakeSandbox[] = [];
  private readonly startsByTask = new Map<string, number>();
  private readonly gradesByTask = new Map<string, number>();
  private readonly sandboxes = new Set<FakeSandbox>();

  constructor(readonly behaviour: FakeBehaviour = {}) {}

  gradeNext(task: Task): FakeGrade {
    const n = this.gradesByTask.get(task.name) ?? 0;
    this.gradesByTask.set(task.name, n + 1);
    return this.behaviour.grade?.(task, n) ?? 1;
  }

  async prepare(task: Task): Promise<PreparedEnvironment> {
    if (this.behaviour.engineDown?.()) throw new Error('connect ECONNREFUSED /var/run/docker.sock');
    if (this.behaviour.prepareFails?.(task))
      throw new TermgradeError('build_failed', `fake build of ${task.name} failed`);
    return { image: `fake:${task.name}`, source: 'dockerfile', cached: true, durationMs: 0, log: '' };
  }

  async start(task: Task, _prepared: PreparedEnvironment, options: StartOptions = {}): Promise<Sandbox> {
    if (options.signal?.aborted) throw new CancelledError('sandbox start');
    const n = this.startsByTask.get(task.name) ?? 0;
    this.startsByTask.set(task.name, n + 1);
    if (this.behaviour.startMs) await new Promise((r) => setTimeout(r, this.behaviour.startMs));
    if (this.behaviour.startFails?.(task, n))
      throw new TermgradeError('environment_error', `fake sandbox for ${task.name} did not start`);
    this.starts += 1;
    if (options.background) this.backgroundStarts += 1;
    this.open += 1;
    this.maxOpen = Math.max(this.maxOpen, this.open);
    const s = new FakeSandbox(`fake-${this.starts}`, task, this, () => {
      this.open -= 1;
      if (s.commands <= 1) this.unused += 1;
      this.sandboxes.delete(s);
    });
    s.network = options.network ?? null;
    this.sandboxes.add(s);
    this.started.push(s);
    return s;
  }

  async closeAll(): Promise<void> {
    await Promise.all([...this.sandboxes].map((s) => s.close()));
  }

  async health(): Promise<ProviderHealth> {
    return { ok: true, detail: 'fake provider (test double)' };
  }

  async cleanup(): Promise<number> {
    return 0;
  }

  async ping(): Promise<string[]> {
    if (this.behaviour.engineDown?.())
      throw new TermgradeError('engine_unavailable', 'no Docker engine answers (fake)');
    return [];
  }

  /** Any name but the engine's own networks: the fake has none to inspect. */
  async checkNetwork(name: string): Promise<void> {
    if (['host', 'none', 'bridge', 'default'].includes(name))
      throw new TermgradeError('bad_input', `network "${name}" is not an isolated network`);
  }
}
