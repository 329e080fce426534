/**
 * A sandbox backend written from docs/architecture.md's "Add a backend" alone, as one from outside
 * the package would be: it imports nothing of termgrade but the front door, drives the `docker`
 * command (child_process) instead of the Engine API, gives the least the contract asks (prepare,
 * start; run, putArchive, getArchive, close, snapshot; changes, env, getArchive, start, discard)
 * and takes every other method from the defaults. Loaded with `--backend-module`; the self-check
 * is its proof (test/backend-module.test.ts). Not for production: `docker exec -e` shows a
 * command's environment in the host's process list.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import {
  CancelledError,
  DROPPED_CAPABILITIES,
  TermgradeError,
  type Backend,
  type BackendProvider,
  type BackendSandbox,
  type BackendSnapshot,
  type FsChange,
  type RunProcess,
} from '../../src/index.js';

/** Every container this backend makes carries it (a test removes what is left by it). */
export const CLI_DOCKER_LABEL = 'io.termgrade.cli-docker';
/** The tag its image builds take. */
export const CLI_DOCKER_IMAGE = 'termgrade-cli-docker';

interface Ran {
  code: number | null;
  stdout: Buffer;
  stderr: string;
}

/** One `docker` command to its end (stdin from `input` when given); rejects only when it could not run or `signal` aborted. */
function docker(args: string[], options: { input?: Readable; signal?: AbortSignal } = {}): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const child = spawn('docker', args, {
      stdio: [options.input ? 'pipe' : 'ignore', 'pipe', 'pipe'],
      signal: options.signal,
    });
    const out: Buffer[] = [];
    let err = '';
    child.stdout!.on('data', (c: Buffer) => out.push(c));
    child.stderr!.on('data', (c: Buffer) => (err += c.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout: Buffer.concat(out), stderr: err }));
    if (options.input && child.stdin) {
      child.stdin.on('error', () => undefined); // docker exited early: its exit code says why
      options.input.pipe(child.stdin);
    }
  });
}

/** A docker command's trimmed stdout; `environment_error` with its stderr when it fails. */
async function must(args: string[], signal?: AbortSignal): Promise<string> {
  const r = await docker(args, { signal });
  if (r.code !== 0) throw new TermgradeError('environment_error', `docker ${args[0]}: ${r.stderr.trim()}`);
  return r.stdout.toString().trim();
}

/** A tar of `path` in a container (running, stopped or only created); null when the path is absent. */
async function archiveOf(container: string, path: string): Promise<Readable | null> {
  const r = await docker(['cp', `${container}:${path}`, '-']);
  if (r.code === 0) return Readable.from([r.stdout]);
  if (/Could not find the file|No such container:path/.test(r.stderr)) return null;
  throw new TermgradeError('environment_error', `docker cp ${path}: ${r.stderr.trim()}`);
}

const KINDS: Record<string, FsChange['kind']> = { A: 'added', C: 'changed', D: 'deleted' };

/** One sandbox: a container idling under `sleep infinity`. */
class CliSandbox implements BackendSandbox {
  private closing: Promise<void> | null = null;

  constructor(
    readonly id: string,
    /** Its limits and hardening, for the verifier's sandbox started from its snapshot. */
    private readonly spec: string[],
  ) {}

  run: RunProcess = async (argv, { env, cwd, user, signal }) => {
    if (this.closing) throw new Error(`sandbox ${this.id.slice(0, 12)} is closed`);
    const args = ['exec', ...Object.entries(env ?? {}).flatMap(([k, v]) => ['-e', `${k}=${v}`])];
    if (cwd) args.push('-w', cwd);
    if (user) args.push('-u', user);
    const r = await docker([...args, this.id, ...argv], { signal });
    return { exitCode: r.code, stdout: r.stdout.toString(), stderr: r.stderr };
  };

  async putArchive(tar: Readable): Promise<void> {
    if (this.closing) throw new Error(`sandbox ${this.id.slice(0, 12)} is closed`);
    const r = await docker(['cp', '-', `${this.id}:/`], { input: tar });
    if (r.code !== 0) throw new TermgradeError('environment_error', `docker cp into the sandbox: ${r.stderr.trim()}`);
  }

  getArchive(path: string): Promise<Readable | null> {
    return archiveOf(this.id, path);
  }

  /**
   * Frozen by `docker pause` while its changes are listed and its files committed to an image.
   * Processes that will not freeze (a fork bomb outruns the freezer) are ended instead, and the
   * files taken as they left them.
   */
  async snapshot(): Promise<BackendSnapshot> {
    const paused = (await docker(['pause', this.id])).code === 0;
    if (!paused) await docker(['kill', this.id]);
    try {
      const diff = await must(['diff', this.id]);
      const changes = diff
        .split('\n')
        .filter(Boolean)
        .map((line) => ({ path: line.slice(2), kind: KINDS[line[0]!] ?? 'changed' }));
      const image = await must(['commit', '--pause=false', this.id]);
      return new CliSnapshot(image, changes, this.id, this.spec);
    } finally {
      if (paused) await docker(['unpause', this.id]);
    }
  }

  close(): Promise<void> {
    this.closing ??= docker(['rm', '-f', '-v', this.id]).then(
      () => undefined,
      () => undefined, // never throws: what is left carries the label
    );
    return this.closing;
  }
}

/** A committed image of the agent's files; read through a container created from it (never started). */
class CliSnapshot implements BackendSnapshot {
  private reader: Promise<string> | null = null;

  constructor(
    private readonly image: string,
    private readonly list: FsChange[],
    private readonly agent: string,
    private readonly spec: string[],
  ) {}

  async changes(): Promise<FsChange[]> {
    return this.list;
  }

  async env(): Promise<Record<string, string>> {
    const raw = await must(['image', 'inspect', '-f', '{{json .Config.Env}}', this.image]);
    const list = (JSON.parse(raw) as string[] | null) ?? [];
    return Object.fromEntries(list.map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)]));
  }

  async getArchive(path: string): Promise<Readable | null> {
    this.reader ??= must(['create', '--label', `${CLI_DOCKER_LABEL}=true`, this.image]);
    return archiveOf(await this.reader, path);
  }

  /** Its own container, in the agent's network while the agent's still runs (its services answer), else in none. */
  async start({ signal }: { signal?: AbortSignal }): Promise<CliSandbox> {
    const running = (await docker(['inspect', '-f', '{{.State.Running}}', this.agent])).stdout.toString().trim();
    const network = running === 'true' ? `container:${this.agent}` : 'none';
    return startContainer(['--network', network, ...this.spec], this.image, this.spec, signal);
  }

  async discard(): Promise<void> {
    const reader = await this.reader?.catch(() => null);
    if (reader) await docker(['rm', '-f', reader]).catch(() => undefined); // never throws
    await docker(['image', 'rm', '-f', this.image]).catch(() => undefined);
  }
}

/** `docker run` of an idle container; on any failure (a cancel included) nothing it made is left. */
async function startContainer(
  args: string[],
  image: string,
  spec: string[],
  signal?: AbortSignal,
): Promise<CliSandbox> {
  if (signal?.aborted) throw new CancelledError('sandbox start');
  const mark = `${CLI_DOCKER_LABEL}.start=${randomBytes(6).toString('hex')}`;
  const run = ['run', '-d', '--init', '--label', `${CLI_DOCKER_LABEL}=true`, '--label', mark, ...args];
  const r = await docker([...run, '--entrypoint', 'sleep', image, 'infinity'], { signal }).catch((err: unknown) => err);
  if (r instanceof Error || (r as Ran).code !== 0 || signal?.aborted) {
    const left = await docker(['ps', '-aq', '--filter', `label=${mark}`]);
    for (const id of left.stdout.toString().split('\n').filter(Boolean)) await docker(['rm', '-f', id]);
    if (signal?.aborted) throw new CancelledError('sandbox start');
    const why = r instanceof Error ? r.message : (r as Ran).stderr.trim();
    throw new TermgradeError('environment_error', `the container did not start: ${why}`);
  }
  return new CliSandbox((r as Ran).stdout.toString().trim(), spec);
}

const provider: BackendProvider = {
  name: 'cli-docker',
  capabilities: { commands: true, networkIsolation: true, fork: false },

  async prepare(task, options = {}) {
    const started = performance.now();
    if (options.agentLayer) throw new TermgradeError('usage', 'the cli-docker backend builds no agent layer');
    const env = task.environment;
    const signal = options.signal;
    const ran = (args: string[]): Promise<Ran> =>
      docker(args, { signal }).catch((err: unknown) => {
        throw signal?.aborted ? new CancelledError('prepare') : err;
      });
    if (env.kind === 'image') {
      const have = await ran(['image', 'inspect', env.image]);
      const pulled = have.code === 0 ? null : await ran(['pull', env.image]);
      if (pulled && pulled.code !== 0)
        throw new TermgradeError('build_failed', `docker pull ${env.image}: ${pulled.stderr.trim()}`);
      const durationMs = performance.now() - started;
      return { image: env.image, source: 'prebuilt', cached: !pulled, durationMs, log: pulled?.stderr ?? '' };
    }
    const tag = `${CLI_DOCKER_IMAGE}:${env.contentHash.slice(0, 20)}`;
    const built = await ran(['build', '-q', '-t', tag, env.contextDir]);
    if (built.code !== 0) throw new TermgradeError('build_failed', `docker build: ${built.stderr.trim()}`);
    const imageId = built.stdout.toString().trim();
    return {
      image: tag,
      imageId,
      source: 'dockerfile',
      cached: false,
      durationMs: performance.now() - started,
      log: built.stderr,
    };
  },

  async start(task, prepared, options = {}) {
    const limits = task.limits;
    const environment = task.config.environment;
    const spec = [
      '--cpus',
      String(limits.cpus),
      '--memory',
      `${limits.memoryMb}m`,
      '--pids-limit',
      String(limits.pidsLimit),
      '--security-opt',
      'no-new-privileges',
      ...DROPPED_CAPABILITIES.flatMap((c) => ['--cap-drop', c]),
      ...Object.entries(environment.env).flatMap(([k, v]) => ['-e', `${k}=${v}`]),
      ...(environment.workdir ? ['-w', environment.workdir] : []),
    ];
    const labels = Object.entries(options.labels ?? {}).flatMap(([k, v]) => ['--label', `${k}=${v}`]);
    const network = ['--network', options.network ?? 'none'];
    return startContainer([...network, ...labels, ...spec], prepared.image, spec, options.signal);
  },
};

/** The module's default export: what `--backend-module` registers. */
const backend: Backend = {
  name: 'cli-docker',
  create: () => provider,
};
export default backend;
