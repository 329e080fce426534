import Docker from 'dockerode';
import type { Task } from '../../task/task.js';
import { CancelledError, TermgradeError, errorMessage } from '../../util/errors.js';
import type { PreparedEnvironment, PrepareOptions, ProviderHealth, Sandbox, SandboxProvider, StartOptions } from '../sandbox.js';
import { removeLeftovers } from './cleanup.js';
import { ImageBuilder } from './image.js';
import { resolveBuildNetwork, type BuildNetwork } from './build-network.js';
import { LABEL_MANAGED, LABEL_OWNER, LABEL_TASK, ownerId } from './labels.js';
import { DockerSandbox } from './sandbox.js';
import { EngineTurns } from './turns.js';

/**
 * Capabilities no terminal task needs, dropped from Docker's default set: raw sockets (spoofing),
 * device nodes, the audit log, and setting file capabilities (a way back to privileges).
 */
export const DROPPED_CAPABILITIES = ['NET_RAW', 'MKNOD', 'AUDIT_WRITE', 'SETFCAP'];

/**
 * The container a trial runs in: idle, limited, labelled, with no network unless the caller names
 * an isolated one (the host's own network namespace is never used: a task could reach the host's
 * loopback services). no-new-privileges stops setuid binaries from gaining more than they had.
 */
export function containerSpec(task: Task, image: string, labels: Record<string, string> = {}, network: string | null = null): Docker.ContainerCreateOptions {
  const limits = task.limits;
  const env = task.config.environment;
  return {
    Image: image,
    // Idle until the agent works in it; tini (Init) reaps orphans a task's commands leave behind.
    Entrypoint: ['sleep'],
    Cmd: ['infinity'],
    WorkingDir: env.workdir,
    Env: Object.entries(env.env).map(([k, v]) => `${k}=${v}`),
    Labels: { [LABEL_MANAGED]: 'true', [LABEL_OWNER]: ownerId(), [LABEL_TASK]: task.name, ...labels },
    NetworkDisabled: network === null,
    HostConfig: {
      // "none" never takes an address, let alone a private-range one.
      NetworkMode: network ?? 'none',
      CapDrop: DROPPED_CAPABILITIES,
      SecurityOpt: ['no-new-privileges'],
      NanoCpus: Math.round(limits.cpus * 1e9),
      Memory: limits.memoryMb * 1024 * 1024,
      MemorySwap: limits.memoryMb * 1024 * 1024,
      PidsLimit: limits.pidsLimit,
      Init: true,
    },
  };
}

export interface DockerProviderOptions {
  /** Engine socket; default DOCKER_HOST or /var/run/docker.sock, as dockerode resolves it. */
  docker?: Docker;
  /** The network image builds run on; default the setting in force (see resolveBuildNetwork). */
  buildNetwork?: BuildNetwork;
}

export class DockerProvider implements SandboxProvider {
  readonly name = 'docker';
  readonly docker: Docker;
  private readonly images: ImageBuilder;
  private readonly open = new Set<DockerSandbox>();

  /** The order this engine serves its sandboxes' heavy requests (see EngineTurns). */
  readonly turns = new EngineTurns();
  private sized: Promise<void> | null = null;

  constructor(options: DockerProviderOptions = {}) {
    this.docker = options.docker ?? new Docker();
    this.images = new ImageBuilder(this.docker, options.buildNetwork ?? resolveBuildNetwork());
  }

  /** Serves as many requests at once as the engine has cores (asked once; 2 until it answers). */
  private sizeTurns(): Promise<void> {
    this.sized ??= this.docker.info().then(
      (info: { NCPU?: number }) => {
        if (typeof info.NCPU === 'number' && info.NCPU > 0) this.turns.concurrency = Math.max(2, info.NCPU);
      },
      () => undefined,
    );
    return this.sized;
  }

  /** Fails with a readable message when no engine answers; returns warnings (none for one engine). */
  async ping(): Promise<string[]> {
    try {
      await this.docker.ping();
      return [];
    } catch (err) {
      throw new TermgradeError(
        'engine_unavailable',
        `no Docker engine answers (${errorMessage(err)}); run scripts/setup.sh, or start dockerd`,
      );
    }
  }

  async health(): Promise<ProviderHealth> {
    try {
      const v = (await this.docker.version()) as { Version?: string; ApiVersion?: string };
      return { ok: true, detail: `Docker Engine ${v.Version ?? '?'} (API ${v.ApiVersion ?? '?'})` };
    } catch (err) {
      return { ok: false, detail: errorMessage(err) };
    }
  }

  cleanup(options: { all?: boolean } = {}): Promise<number> {
    return removeLeftovers(this.docker, options);
  }

  /** An isolated network the user made for tasks that need one; refuses host, none and missing ones. */
  async checkNetwork(name: string): Promise<void> {
    if (name === 'host' || name === 'none' || name === 'bridge' || name === 'default') {
      throw new TermgradeError('bad_input', `network "${name}" is not an isolated network: name one made for tasks (docker network create --internal ...), or run offline`);
    }
    let info: { Driver?: string };
    try {
      info = (await this.docker.getNetwork(name).inspect()) as { Driver?: string };
    } catch {
      throw new TermgradeError('bad_input', `the Docker engine has no network "${name}"; this engine cannot give tasks network access, so they run offline unless you create one`);
    }
    if (info.Driver === 'host' || info.Driver === 'null') throw new TermgradeError('bad_input', `network "${name}" uses the ${info.Driver} driver: not an isolated network`);
  }

  prepare(task: Task, options?: PrepareOptions): Promise<PreparedEnvironment> {
    return this.images.prepare(task, options);
  }

  async start(task: Task, prepared: PreparedEnvironment, options: StartOptions = {}): Promise<Sandbox> {
    if (options.signal?.aborted) throw new CancelledError('sandbox start');
    if (options.network) await this.checkNetwork(options.network);
    await this.sizeTurns();
    const place = this.turns.place(options.background);
    const container = await this.turns.run(place, () => this.docker.createContainer(containerSpec(task, prepared.image, options.labels, options.network ?? null)));
    const sandbox = new DockerSandbox(this.docker, container, this.turns, place, () => this.open.delete(sandbox));
    this.open.add(sandbox);
    try {
      await this.turns.run(place, () => container.start());
    } catch (err) {
      await sandbox.close();
      throw new TermgradeError('environment_error', `container for ${task.name} did not start: ${errorMessage(err)}`);
    }
    if (options.signal?.aborted) {
      await sandbox.close();
      throw new CancelledError('sandbox start');
    }
    return sandbox;
  }

  async closeAll(): Promise<void> {
    await Promise.all([...this.open].map((s) => s.close()));
  }
}
