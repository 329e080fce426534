import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import type Docker from 'dockerode';
import { baseImages } from '../../task/dockerfile.js';
import type { Task } from '../../task/task.js';
import { CancelledError, TermgradeError, errorMessage } from '../../util/errors.js';
import { withFileLock } from '../../util/lock.js';
import type { PreparedEnvironment, PrepareOptions } from '../sandbox.js';
import { LABEL_MANAGED, LABEL_TASK } from './labels.js';
import { packDir, packEntries } from './tar.js';

export const IMAGE_REPO = 'termgrade-env';
export const AGENT_IMAGE_REPO = 'termgrade-agent';

/** The engine's id of an image, or null when the engine does not have it. */
async function imageIdOf(docker: Docker, ref: string): Promise<string | null> {
  try {
    return (await docker.getImage(ref).inspect()).Id;
  } catch {
    return null;
  }
}

/**
 * A task image's name: a hash of the environment's content and of the resolved id of every image
 * it builds from (each FROM and COPY --from). A base tag that moves to another image names a new
 * task image, so a stale environment is never reused; an unchanged task never builds twice.
 */
export async function imageTag(docker: Docker, task: Task): Promise<string> {
  const env = task.environment;
  if (env.kind === 'image') return env.image;
  const text = await readFile(path.join(env.contextDir, 'Dockerfile'), 'utf8');
  const bases = await Promise.all(baseImages(text).map(async (ref) => `${ref}=${(await imageIdOf(docker, ref)) ?? 'absent'}`));
  const hash = createHash('sha256').update(`${env.contentHash}\0${bases.join('\0')}`).digest('hex');
  return `${IMAGE_REPO}:${hash.slice(0, 20)}`;
}

/**
 * Harbor's precedence: a task that names a prebuilt image (`docker_image`) runs on it when it can
 * be had (here, or pulled); its Dockerfile is built when it cannot, or when a build is forced.
 */
async function prebuiltIfAvailable(docker: Docker, task: Task, options: PrepareOptions): Promise<string | null> {
  const env = task.environment;
  if (env.kind !== 'dockerfile' || !env.prebuilt || options.forceBuild) return null;
  if (await imageExists(docker, env.prebuilt)) return env.prebuilt;
  try {
    await pull(docker, env.prebuilt, task, options);
    return (await imageExists(docker, env.prebuilt)) ? env.prebuilt : null;
  } catch (err) {
    if (err instanceof CancelledError) throw err;
    return null;
  }
}

export class BuildError extends TermgradeError {
  constructor(
    message: string,
    readonly log: string,
  ) {
    super('build_failed', message);
  }
}

async function imageExists(docker: Docker, tag: string): Promise<boolean> {
  try {
    await docker.getImage(tag).inspect();
    return true;
  } catch {
    return false;
  }
}

const MAX_LOG_CHARS = 200_000;

/** Follows an engine progress stream (build or pull) to its end, under a timeout and a signal. */
function follow(
  docker: Docker,
  stream: NodeJS.ReadableStream,
  what: string,
  timeoutMs: number,
  options: PrepareOptions,
  note: (line: string) => void,
  log: () => string,
): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let failed: string | null = null;
    const stop = (): void => (stream as unknown as { destroy(): void }).destroy();
    const timer = setTimeout(() => {
      stop();
      reject(new BuildError(`${what} timed out after ${timeoutMs / 1000} s`, log()));
    }, timeoutMs);
    const onAbort = (): void => {
      stop();
      clearTimeout(timer);
      reject(new CancelledError(what));
    };
    options.signal?.addEventListener('abort', onAbort, { once: true });
    docker.modem.followProgress(
      stream,
      (err) => {
        clearTimeout(timer);
        options.signal?.removeEventListener('abort', onAbort);
        if (err) reject(new BuildError(`${what} failed: ${errorMessage(err)}`, log()));
        else if (failed) reject(new BuildError(`${what} failed: ${failed}`, log()));
        else resolve();
      },
      (event: { stream?: string; status?: string; error?: string; errorDetail?: { message?: string } }) => {
        if (event.stream) note(event.stream);
        else if (event.status) note(`${event.status}\n`);
        if (event.error) {
          failed = event.errorDetail?.message ?? event.error;
          note(`ERROR: ${failed}\n`);
        }
      },
    );
  });
}

function logCollector(options: PrepareOptions): { note: (line: string) => void; log: () => string } {
  const lines: string[] = [];
  let chars = 0;
  return {
    note: (line) => {
      options.onLog?.(line);
      if (chars < MAX_LOG_CHARS) lines.push(line);
      chars += line.length;
    },
    log: () => lines.join(''),
  };
}

/** A task that names an image which is not here: try the registry (none is reachable on CI). */
async function pull(docker: Docker, tag: string, task: Task, options: PrepareOptions): Promise<string> {
  const { note, log } = logCollector(options);
  let stream: NodeJS.ReadableStream;
  try {
    stream = await docker.pull(tag);
  } catch (err) {
    throw new BuildError(`image ${tag} is not present locally and could not be pulled (${errorMessage(err)}); build or tag it first`, '');
  }
  await follow(docker, stream, `pull of ${tag}`, task.config.environment.build_timeout_sec * 1000, options, note, log);
  return log();
}

async function build(docker: Docker, task: Task, tag: string, options: PrepareOptions): Promise<string> {
  if (task.environment.kind !== 'dockerfile') throw new Error('build needs a Dockerfile');
  const { note, log } = logCollector(options);
  const stream = await docker.buildImage(packDir(task.environment.contextDir, '') as unknown as NodeJS.ReadableStream, {
    t: tag,
    networkmode: 'host', // builds reach Debian's packages through the host; trials never do
    rm: true,
    forcerm: true,
    labels: { [LABEL_MANAGED]: 'true', [LABEL_TASK]: task.name },
  });
  await follow(docker, stream, 'build', task.config.environment.build_timeout_sec * 1000, options, note, log);
  return log();
}

/**
 * Builds (or finds) a task's image. Concurrent requests for one image share a single build,
 * and an image already present is reused without touching the build context.
 */
export class ImageBuilder {
  private readonly inFlight = new Map<string, Promise<PreparedEnvironment>>();

  constructor(private readonly docker: Docker) {}

  prepare(task: Task, options: PrepareOptions = {}): Promise<PreparedEnvironment> {
    const env = task.environment;
    const build = async (): Promise<PreparedEnvironment> => {
      const tag = await imageTag(this.docker, task);
      return this.once(tag, () => this.ensure(task, tag, options));
    };
    const base = (
      env.kind === 'dockerfile' && env.prebuilt && !options.forceBuild
        ? this.once(`prebuilt:${env.prebuilt}:${env.contentHash}`, async () => {
            const started = performance.now();
            const prebuilt = await prebuiltIfAvailable(this.docker, task, options);
            if (prebuilt) return { image: prebuilt, source: 'prebuilt' as const, cached: true, durationMs: performance.now() - started, log: '' };
            const built = await build();
            return { ...built, source: 'dockerfile-fallback' as const, log: `prebuilt image ${env.prebuilt} is not available here; built the task's Dockerfile instead\n${built.log}` };
          })
        : build()
    ).then(async (prepared) => ({ ...prepared, imageId: await imageIdOf(this.docker, prepared.image) }));
    if (!options.agentLayer) return base;
    const layer = options.agentLayer;
    return base.then(async (prepared) => {
      const id = prepared.imageId ?? (await this.docker.getImage(prepared.image).inspect()).Id;
      const tag = `${AGENT_IMAGE_REPO}:${createHash('sha256').update(`${id}\0${layer}`).digest('hex').slice(0, 20)}`;
      const derived = await this.once(tag, () => this.ensureDerived(task, prepared, layer, tag, options));
      return { ...derived, imageId: await imageIdOf(this.docker, derived.image), durationMs: prepared.durationMs + derived.durationMs, cached: prepared.cached && derived.cached, log: prepared.log + derived.log };
    });
  }

  /** Concurrent requests for one image share one promise. */
  private once(tag: string, make: () => Promise<PreparedEnvironment>): Promise<PreparedEnvironment> {
    let pending = this.inFlight.get(tag);
    if (!pending) {
      pending = make().finally(() => this.inFlight.delete(tag));
      this.inFlight.set(tag, pending);
    }
    return pending;
  }

  /** The task's image plus an agent's layer (tmux, say), named by the base image id and the layer. */
  private async ensureDerived(task: Task, base: PreparedEnvironment, layer: string, tag: string, options: PrepareOptions): Promise<PreparedEnvironment> {
    const started = performance.now();
    const cached = (): PreparedEnvironment => ({ image: tag, source: base.source, cached: true, durationMs: performance.now() - started, log: '' });
    if (await imageExists(this.docker, tag)) return cached();
    return withFileLock(`image-${tag}`, async () => {
      if (await imageExists(this.docker, tag)) return cached();
      const context = await packEntries([{ path: 'Dockerfile', content: `FROM ${base.image}\n${layer}\n` }]);
      const { note, log } = logCollector(options);
      const stream = await this.docker.buildImage(Readable.from([context]) as unknown as NodeJS.ReadableStream, {
        t: tag,
        networkmode: 'host',
        rm: true,
        forcerm: true,
        labels: { [LABEL_MANAGED]: 'true', [LABEL_TASK]: task.name },
      });
      await follow(this.docker, stream, 'agent image build', task.config.environment.build_timeout_sec * 1000, options, note, log);
      if (!(await imageExists(this.docker, tag))) throw new BuildError(`no image ${tag} after the agent image build`, log());
      return { image: tag, source: base.source, cached: false, durationMs: performance.now() - started, log: log() };
    }, options.signal);
  }

  private async ensure(task: Task, tag: string, options: PrepareOptions): Promise<PreparedEnvironment> {
    const started = performance.now();
    const source = task.environment.kind === 'image' ? ('prebuilt' as const) : ('dockerfile' as const);
    const cached = (): PreparedEnvironment => ({ image: tag, source, cached: true, durationMs: performance.now() - started, log: '' });
    if (await imageExists(this.docker, tag)) return cached();
    // Another termgrade process may be building the same image: wait for it, then reuse its work.
    return withFileLock(`image-${tag}`, async () => {
      if (await imageExists(this.docker, tag)) return cached();
      const log = task.environment.kind === 'image' ? await pull(this.docker, tag, task, options) : await build(this.docker, task, tag, options);
      if (!(await imageExists(this.docker, tag))) throw new BuildError(`no image ${tag} after the ${task.environment.kind === 'image' ? 'pull' : 'build'}`, log);
      return { image: tag, source, cached: false, durationMs: performance.now() - started, log };
    }, options.signal);
  }
}
