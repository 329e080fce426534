import Docker from 'dockerode';
import type { Task } from '../../task/task.js';
import { CancelledError, TermgradeError, errorMessage, isGoneFromEngine } from '../../util/errors.js';
import type {
  PreparedEnvironment,
  PrepareOptions,
  ProviderCapabilities,
  ProviderHealth,
  Sandbox,
  SandboxProvider,
  StartOptions,
  VerifierCommand,
} from '../sandbox.js';
import { removeLeftovers } from './cleanup.js';
import { ImageBuilder, type DockerBuilder } from './image.js';
import { resolveBuildNetwork, type BuildNetwork } from './build-network.js';
import { LABEL_MANAGED, LABEL_OWNER, LABEL_TASK, LABEL_VERIFIER, ownerId } from './labels.js';
import {
  DockerSandbox,
  type CreatedContainer,
  type DockerExecVia,
  type SiblingFactory,
  type VerifierFactory,
} from './sandbox.js';
import { EngineTurns } from './turns.js';
import { trialNetworkRefusal, type NetworkInspection } from './trial-network.js';
import { logged } from '../../util/log.js';

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
export function containerSpec(
  task: Task,
  image: string,
  labels: Record<string, string> = {},
  network: string | null = null,
): Docker.ContainerCreateOptions {
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

/**
 * The verifier's container: the task's limits, started from a snapshot of the agent's sandbox, in
 * that sandbox's network and pid namespaces when it still runs (its localhost services answer the
 * tests, its processes are listed) and in none otherwise. Its own filesystem (the snapshot): no
 * agent process can write the tests' files.
 */
export function verifierSpec(
  task: Task,
  image: string,
  networkOf: string | null,
  labels: Record<string, string> = {},
  command?: VerifierCommand,
): Docker.ContainerCreateOptions {
  const spec = withCommand(containerSpec(task, image, { ...labels, [LABEL_VERIFIER]: 'true' }, null), command);
  if (!networkOf) return spec;
  return {
    ...spec,
    NetworkDisabled: false,
    HostConfig: {
      ...spec.HostConfig,
      NetworkMode: `container:${networkOf}`,
      // The agent's processes stay visible to the tests (pgrep, ps, kill -0, /proc/PID) ...
      PidMode: `container:${networkOf}`,
      // ... but not the other way: holding one capability the agent's processes lack, the tests'
      // processes cannot be traced by them, nor their /proc entries (root, fd, mem) opened, since
      // the kernel allows that only to a process holding every capability its target holds.
      CapAdd: [VERIFIER_ONLY_CAPABILITY],
    },
  };
}

/**
 * A container whose own process is the verifier's command (under tini, as the idle one): it stops
 * when the command ends, and the engine ends whatever the command left running with it.
 */
function withCommand(
  spec: Docker.ContainerCreateOptions,
  command: VerifierCommand | undefined,
): Docker.ContainerCreateOptions {
  if (!command) return spec;
  const env = new Map((spec.Env ?? []).map((e) => [e.slice(0, e.indexOf('=')), e] as const));
  for (const [k, v] of Object.entries(command.env)) env.set(k, `${k}=${v}`);
  return { ...spec, Entrypoint: ['/bin/sh', '-c'], Cmd: [command.command], Env: [...env.values()] };
}

/** Held by the verifier's processes only (harmless on its own: it sets scheduling priorities). */
export const VERIFIER_ONLY_CAPABILITY = 'SYS_NICE';

export interface DockerProviderOptions {
  /** Engine socket; default DOCKER_HOST or /var/run/docker.sock, as dockerode resolves it. */
  docker?: Docker;
  /** The network image builds run on; default the setting in force (see resolveBuildNetwork). */
  buildNetwork?: BuildNetwork;
  /** How sandboxes reach their containers (see DockerExecVia); default `shell`. */
  execVia?: DockerExecVia;
  /** Forces an image builder; default BuildKit where the engine offers it (TERMGRADE_BUILDER=legacy as a fallback). */
  builder?: DockerBuilder;
}

/** What a Docker engine gives sandboxes (see ProviderCapabilities). */
export const DOCKER_CAPABILITIES: ProviderCapabilities = {
  commands: true,
  networkIsolation: true,
  fork: true,
};

export class DockerProvider implements SandboxProvider {
  readonly name = 'docker';
  readonly capabilities = DOCKER_CAPABILITIES;
  readonly docker: Docker;
  private readonly images: ImageBuilder;
  private readonly open = new Set<DockerSandbox>();

  /** The order this engine serves its sandboxes' heavy requests (see EngineTurns). */
  readonly turns = new EngineTurns();
  private sized: Promise<void> | null = null;

  constructor(options: DockerProviderOptions = {}) {
    this.docker = options.docker ?? new Docker();
    this.images = new ImageBuilder(this.docker, options.buildNetwork ?? resolveBuildNetwork(), options.builder);
    this.execVia = options.execVia ?? 'shell';
  }
  private readonly execVia: DockerExecVia;

  /** Serves as many requests at once as the engine has cores (asked once; 2 until it answers). */
  private sizeTurns(): Promise<void> {
    this.sized ??= this.docker.info().then((info: { NCPU?: number }) => {
      if (typeof info.NCPU === 'number' && info.NCPU > 0) this.turns.concurrency = Math.max(2, info.NCPU);
    }, logged("ask the engine's CPU count (the default number of engine turns stays)"));
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
      throw new TermgradeError(
        'bad_input',
        `network "${name}" is not an isolated network: name one made for trials (docker network create --subnet 100.64.0.0/24 -o com.docker.network.bridge.inhibit_ipv4=true ...), or run offline`,
      );
    }
    let info: NetworkInspection;
    try {
      info = await this.docker.getNetwork(name).inspect();
    } catch (err) {
      // Only a 404 is "no such network": an engine that does not answer is said as itself.
      if (!isGoneFromEngine(err)) throw err;
      throw new TermgradeError(
        'bad_input',
        `the Docker engine has no network "${name}"; this engine cannot give tasks network access, so they run offline unless you create one`,
      );
    }
    if (info.Driver === 'host' || info.Driver === 'null')
      throw new TermgradeError(
        'bad_input',
        `network "${name}" uses the ${info.Driver} driver: not an isolated network`,
      );
    const refusal = trialNetworkRefusal({ ...info, Name: name });
    if (refusal) throw new TermgradeError('bad_input', refusal);
  }

  prepare(task: Task, options?: PrepareOptions): Promise<PreparedEnvironment> {
    return this.images.prepare(task, options);
  }

  async start(task: Task, prepared: PreparedEnvironment, options: StartOptions = {}): Promise<Sandbox> {
    if (options.signal?.aborted) throw new CancelledError('sandbox start');
    if (options.network) await this.checkNetwork(options.network);
    await this.sizeTurns();
    const place = this.turns.place(options.background);
    const verifiers: VerifierFactory = {
      fromImage: async (image, networkOf, signal) => {
        const made = await this.create(
          task,
          verifierSpec(task, image, networkOf, options.labels),
          this.turns.place(),
          'verifier container',
        );
        await made.start(signal);
        return made.sandbox;
      },
      // The agent's own image: the verifier's layer receives a copy of the agent's (see layer-copy.ts).
      beside: (networkOf, command) =>
        this.create(
          task,
          verifierSpec(task, prepared.image, networkOf, options.labels, command),
          this.turns.place(),
          'verifier container',
        ),
    };
    // A fork's children: the same image, limits and labels, each able to fork in turn (see fork.ts).
    const siblings: SiblingFactory = (labels, network) =>
      this.create(
        task,
        containerSpec(task, prepared.image, { ...options.labels, ...labels }, network),
        this.turns.place(),
        'forked container',
        verifiers,
        siblings,
      );
    const made = await this.create(
      task,
      containerSpec(task, prepared.image, options.labels, options.network ?? null),
      place,
      'container',
      verifiers,
      siblings,
    );
    await made.start(options.signal);
    return made.sandbox;
  }

  /** Creates one container (not started); its start, and every failure path, close it on failure. */
  private async create(
    task: Task,
    spec: Docker.ContainerCreateOptions,
    place: number,
    what: string,
    verifiers?: VerifierFactory,
    siblings?: SiblingFactory,
  ): Promise<CreatedContainer> {
    const container = await this.turns.run(place, () => this.docker.createContainer(spec));
    const sandbox = new DockerSandbox(
      this.docker,
      container,
      this.turns,
      place,
      () => this.open.delete(sandbox),
      verifiers,
      this.execVia,
      siblings,
    );
    this.open.add(sandbox);
    return {
      sandbox,
      start: async (signal) => {
        try {
          if (signal?.aborted) throw new CancelledError('sandbox start');
          await this.turns.run(place, () => container.start());
        } catch (err) {
          await sandbox.close();
          if (err instanceof CancelledError) throw err;
          throw new TermgradeError('environment_error', `${what} for ${task.name} did not start: ${errorMessage(err)}`);
        }
        if (signal?.aborted) {
          await sandbox.close();
          throw new CancelledError('sandbox start');
        }
      },
    };
  }

  async closeAll(): Promise<void> {
    await Promise.all([...this.open].map((s) => s.close()));
  }
}
