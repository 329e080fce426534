import Docker from 'dockerode';
import type { Task } from '../../task/task.js';
import { CancelledError, TermgradeError, errorMessage } from '../../util/errors.js';
import type { PreparedEnvironment, PrepareOptions, Sandbox, SandboxProvider, StartOptions } from '../sandbox.js';
import { ImageBuilder } from './image.js';
import { LABEL_MANAGED, LABEL_OWNER, LABEL_TASK, ownerId } from './labels.js';
import { DockerSandbox } from './sandbox.js';

/** The container a trial runs in: idle, offline unless the task asks otherwise, limited, labelled. */
export function containerSpec(task: Task, image: string, labels: Record<string, string> = {}): Docker.ContainerCreateOptions {
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
    NetworkDisabled: !limits.network,
    HostConfig: {
      // "none" never takes an address, let alone a private-range one; "host" only when the task asks.
      NetworkMode: limits.network ? 'host' : 'none',
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
}

export class DockerProvider implements SandboxProvider {
  readonly name = 'docker';
  readonly docker: Docker;
  private readonly images: ImageBuilder;
  private readonly open = new Set<DockerSandbox>();

  constructor(options: DockerProviderOptions = {}) {
    this.docker = options.docker ?? new Docker();
    this.images = new ImageBuilder(this.docker);
  }

  /** Fails with a readable message when no engine answers. */
  async ping(): Promise<void> {
    try {
      await this.docker.ping();
    } catch (err) {
      throw new TermgradeError(
        'engine_unavailable',
        `no Docker engine answers (${errorMessage(err)}); run scripts/setup.sh, or start dockerd`,
      );
    }
  }

  prepare(task: Task, options?: PrepareOptions): Promise<PreparedEnvironment> {
    return this.images.prepare(task, options);
  }

  async start(task: Task, prepared: PreparedEnvironment, options: StartOptions = {}): Promise<Sandbox> {
    if (options.signal?.aborted) throw new CancelledError('sandbox start');
    const container = await this.docker.createContainer(containerSpec(task, prepared.image, options.labels));
    const sandbox = new DockerSandbox(this.docker, container, () => this.open.delete(sandbox));
    this.open.add(sandbox);
    try {
      await container.start();
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
