import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import type Docker from 'dockerode';
import { baseImages, translateHeredocs } from '../../task/dockerfile.js';
import type { Task } from '../../task/task.js';
import { CancelledError, TermgradeError, errorMessage } from '../../util/errors.js';
import { withFileLock } from '../../util/lock.js';
import type { PreparedEnvironment, PrepareOptions } from '../sandbox.js';
import { LABEL_MANAGED, LABEL_TASK } from './labels.js';
import { BuildkitLog } from './buildkit-log.js';
import { packContext, packDir, packEntries } from '../tar.js';
import { buildRequestOf, networkHint, type BuildNetwork } from './build-network.js';
import { isGoneFromEngine } from '../../util/errors.js';
import { causeOf, log } from '../../util/log.js';

export const IMAGE_REPO = 'termgrade-env';
export const AGENT_IMAGE_REPO = 'termgrade-agent';

/** The engine's id of an image, or null when the engine does not have it. */
export async function imageIdOf(docker: Docker, ref: string): Promise<string | null> {
  try {
    return (await docker.getImage(ref).inspect()).Id;
  } catch (err) {
    if (isGoneFromEngine(err)) return null;
    throw err;
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
  const bases = await Promise.all(
    baseImages(text).map(async (ref) => `${ref}=${(await imageIdOf(docker, ref)) ?? 'absent'}`),
  );
  const hash = createHash('sha256')
    .update(`${env.contentHash}\0${bases.join('\0')}`)
    .digest('hex');
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
  return (await imageIdOf(docker, tag)) !== null;
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
  const trace = new BuildkitLog();
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
      (event: {
        id?: string;
        aux?: unknown;
        stream?: string;
        status?: string;
        error?: string;
        errorDetail?: { message?: string };
      }) => {
        if (event.id === 'moby.buildkit.trace' && typeof event.aux === 'string')
          for (const line of trace.lines(event.aux)) note(line);
        else if (event.stream) note(event.stream);
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
    throw new BuildError(
      `image ${tag} is not present locally and could not be pulled (${errorMessage(err)}); build or tag it first`,
      '',
    );
  }
  await follow(docker, stream, `pull of ${tag}`, task.config.environment.build_timeout_sec * 1000, options, note, log);
  return log();
}

/** An image builder: BuildKit, or the legacy one. */
export type DockerBuilder = 'buildkit' | 'legacy';

/** Where and how builds run: the build network, and a builder forced by the operator or a test. */
export interface BuildSetup {
  network: BuildNetwork;
  /** Default: what the engine offers (TERMGRADE_BUILDER=legacy still forces legacy, a fallback for operators). */
  builder?: DockerBuilder;
}

/**
 * Which builder the engine offers: BuildKit (Engine API 1.39+, on Linux) or only the legacy one.
 * Asked once per engine.
 */
const builders = new WeakMap<Docker, Promise<DockerBuilder>>();
function builderOf(docker: Docker, forced: DockerBuilder | undefined): Promise<DockerBuilder> {
  if (forced) return Promise.resolve(forced);
  if (process.env.TERMGRADE_BUILDER === 'legacy') return Promise.resolve('legacy');
  let b = builders.get(docker);
  if (!b) {
    b = (async () => {
      let v: { ApiVersion?: string; Os?: string };
      try {
        v = await docker.version();
      } catch (err) {
        // Not kept: an engine that did not answer once must not build with the legacy builder for good.
        builders.delete(docker);
        log.warn("could not ask the engine's version; this build uses the legacy builder", { cause: causeOf(err) });
        return 'legacy' as const;
      }
      const [major, minor] = (v.ApiVersion ?? '0.0').split('.').map(Number) as [number, number];
      return v.Os === 'linux' && (major > 1 || (major === 1 && minor >= 39))
        ? ('buildkit' as const)
        : ('legacy' as const);
    })();
    builders.set(docker, b);
  }
  return b;
}

/**
 * Runs one image build on the build network in force (see build-network.ts; the log's first line
 * says which and why): with BuildKit where the engine offers it (as Harbor does), else with the
 * legacy builder, saying which. A BuildKit build the engine refuses as such is tried once more
 * with the legacy builder, as is one on a named network (BuildKit in the engine knows only
 * default, host and none). The build log is kept either way.
 */
async function runBuild(
  docker: Docker,
  setup: BuildSetup,
  context: () => NodeJS.ReadableStream,
  tag: string,
  task: Task,
  options: PrepareOptions,
  what: string,
): Promise<string> {
  const { note, log } = logCollector(options);
  const network = setup.network;
  const request = buildRequestOf(network);
  const builder = request.legacyOnly ? 'legacy' : await builderOf(docker, setup.builder);
  note(`build network: ${network.name} (from ${network.from})\n`);
  const attempt = async (version: '1' | '2'): Promise<void> => {
    let stream: NodeJS.ReadableStream;
    try {
      stream = await docker.buildImage(context(), {
        t: tag,
        // Never the host's namespace unless the operator named it: a RUN step could reach its loopback.
        ...(request.networkmode ? { networkmode: request.networkmode } : {}),
        rm: true,
        forcerm: true,
        labels: { [LABEL_MANAGED]: 'true', [LABEL_TASK]: task.name },
        ...(version === '2' ? { version: '2' } : {}),
      } as Docker.ImageBuildOptions);
    } catch (err) {
      // Refused before any progress (a Dockerfile the engine cannot parse, say): still a build
      // failure with a log that says so.
      note(`ERROR: ${errorMessage(err)}\n`);
      throw new BuildError(`${what} failed: ${errorMessage(err)}${networkHint(errorMessage(err), network)}`, log());
    }
    try {
      await follow(docker, stream, what, task.config.environment.build_timeout_sec * 1000, options, note, log);
    } catch (err) {
      const hint = err instanceof BuildError ? networkHint(err.message, network) : '';
      throw hint ? new BuildError(`${err instanceof Error ? err.message : String(err)}${hint}`, log()) : err;
    }
  };
  if (builder === 'buildkit') {
    note('builder: BuildKit\n');
    try {
      await attempt('2');
      return log();
    } catch (err) {
      if (
        !(err instanceof BuildError) ||
        !/buildkit|session|not supported|unknown parameter/i.test(err.message) ||
        /dockerfile parse error|returned a non-zero|exit code/i.test(err.message)
      )
        throw err;
      note(`BuildKit refused the build (${err.message}); building with the legacy builder\n`);
    }
  } else if (request.legacyOnly) {
    note(
      `builder: legacy (BuildKit in the engine builds only on the default, host or no network, not on "${network.name}")\n`,
    );
  } else {
    note(
      'builder: legacy (this engine offers no BuildKit: BuildKit-only Dockerfile syntax other than heredocs will not build)\n',
    );
  }
  await attempt('1');
  return log();
}

async function build(
  docker: Docker,
  setup: BuildSetup,
  task: Task,
  tag: string,
  options: PrepareOptions,
): Promise<string> {
  if (task.environment.kind !== 'dockerfile') throw new Error('build needs a Dockerfile');
  const contextDir = task.environment.contextDir;
  // Heredocs are rewritten for every builder: this engine's BuildKit frontend may predate them.
  const translated = translateHeredocs(await readFile(path.join(contextDir, 'Dockerfile'), 'utf8'));
  const overrides = translated ? [{ path: 'Dockerfile', content: translated.dockerfile }, ...translated.files] : [];
  const log = await runBuild(
    docker,
    setup,
    () => (overrides.length ? packContext(contextDir, overrides) : packDir(contextDir, '')),
    tag,
    task,
    options,
    'build',
  );
  return translated
    ? `Dockerfile heredocs rewritten for this engine (${translated.files.length} file(s) from COPY/ADD heredocs)\n${log}`
    : log;
}

/**
 * Builds (or finds) a task's image. Concurrent requests for one image share a single build,
 * and an image already present is reused without touching the build context.
 */
export class ImageBuilder {
  private readonly inFlight = new Map<string, Promise<PreparedEnvironment>>();

  constructor(
    private readonly docker: Docker,
    /** The network builds run on (see build-network.ts). */
    readonly network: BuildNetwork,
    /** A builder forced for every build (see BuildSetup). */
    private readonly builder?: DockerBuilder,
  ) {}

  private get setup(): BuildSetup {
    return { network: this.network, builder: this.builder };
  }

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
            if (prebuilt)
              return {
                image: prebuilt,
                source: 'prebuilt' as const,
                cached: true,
                durationMs: performance.now() - started,
                log: '',
              };
            const built = await build();
            return {
              ...built,
              source: 'dockerfile-fallback' as const,
              log: `prebuilt image ${env.prebuilt} is not available here; built the task's Dockerfile instead\n${built.log}`,
            };
          })
        : build()
    ).then(async (prepared) => ({ ...prepared, imageId: await imageIdOf(this.docker, prepared.image) }));
    // The agent's layer, then the offline verifier toolchain's (see src/verifier/toolchain).
    const layer = [options.agentLayer, task.verifierLayer?.lines].filter(Boolean).join('\n');
    if (!layer) return base;
    return base.then(async (prepared) => {
      if (task.verifierLayer)
        await this.once(`toolchain:${task.verifierLayer.toolchainImage}`, () =>
          this.ensureToolchain(task, task.verifierLayer!, options),
        );
      const id = prepared.imageId ?? (await this.docker.getImage(prepared.image).inspect()).Id;
      const tag = `${AGENT_IMAGE_REPO}:${createHash('sha256').update(`${id}\0${layer}`).digest('hex').slice(0, 20)}`;
      const derived = await this.once(tag, () => this.ensureDerived(task, prepared, layer, tag, options));
      return {
        ...derived,
        imageId: await imageIdOf(this.docker, derived.image),
        durationMs: prepared.durationMs + derived.durationMs,
        cached: prepared.cached && derived.cached,
        log: prepared.log + derived.log,
      };
    });
  }

  /** Concurrent requests for one image share one promise. */
  /** A build from a context packed in memory (`what` names it in the log and errors); BuildError if no image results. */
  private async buildPacked(
    context: Buffer,
    tag: string,
    task: Task,
    options: PrepareOptions,
    what: string,
  ): Promise<string> {
    const stream = () => Readable.from([context]) as unknown as NodeJS.ReadableStream;
    const log = await runBuild(this.docker, this.setup, stream, tag, task, options, what);
    if (!(await imageExists(this.docker, tag))) throw new BuildError(`no image ${tag} after the ${what}`, log);
    return log;
  }

  private once(tag: string, make: () => Promise<PreparedEnvironment>): Promise<PreparedEnvironment> {
    let pending = this.inFlight.get(tag);
    if (!pending) {
      pending = make().finally(() => this.inFlight.delete(tag));
      this.inFlight.set(tag, pending);
    }
    return pending;
  }

  /** The task's image plus an agent's layer (tmux, say), named by the base image id and the layer. */
  private async ensureDerived(
    task: Task,
    base: PreparedEnvironment,
    layer: string,
    tag: string,
    options: PrepareOptions,
  ): Promise<PreparedEnvironment> {
    const started = performance.now();
    const cached = (): PreparedEnvironment => ({
      image: tag,
      source: base.source,
      cached: true,
      durationMs: performance.now() - started,
      log: '',
    });
    if (await imageExists(this.docker, tag)) return cached();
    return withFileLock(
      `image-${tag}`,
      async () => {
        if (await imageExists(this.docker, tag)) return cached();
        const context = await packEntries([{ path: 'Dockerfile', content: `FROM ${base.image}\n${layer}\n` }]);
        const log = await this.buildPacked(context, tag, task, options, 'agent image build');
        return { image: tag, source: base.source, cached: false, durationMs: performance.now() - started, log };
      },
      options.signal,
    );
  }

  /** termgrade's offline verifier toolchain image, built once per engine from its recipe (with the build network). */
  private async ensureToolchain(
    task: Task,
    toolchain: NonNullable<Task['verifierLayer']>,
    options: PrepareOptions,
  ): Promise<PreparedEnvironment> {
    const tag = toolchain.toolchainImage;
    const started = performance.now();
    const done = (cached: boolean, log: string): PreparedEnvironment => ({
      image: tag,
      source: 'dockerfile',
      cached,
      durationMs: performance.now() - started,
      log,
    });
    if (await imageExists(this.docker, tag)) return done(true, '');
    return withFileLock(
      `image-${tag}`,
      async () => {
        if (await imageExists(this.docker, tag)) return done(true, '');
        const context = await packEntries(toolchain.recipe());
        // The recipe installs packages: its own build timeout, not the task's.
        const recipeTask = {
          ...task,
          config: {
            ...task.config,
            environment: {
              ...task.config.environment,
              build_timeout_sec: Math.max(task.config.environment.build_timeout_sec, 1800),
            },
          },
        };
        const log = await this.buildPacked(context, tag, recipeTask, options, 'verifier toolchain build');
        return done(false, log);
      },
      options.signal,
    );
  }

  private async ensure(task: Task, tag: string, options: PrepareOptions): Promise<PreparedEnvironment> {
    const started = performance.now();
    const source = task.environment.kind === 'image' ? ('prebuilt' as const) : ('dockerfile' as const);
    const cached = (): PreparedEnvironment => ({
      image: tag,
      source,
      cached: true,
      durationMs: performance.now() - started,
      log: '',
    });
    if (await imageExists(this.docker, tag)) return cached();
    // Another termgrade process may be building the same image: wait for it, then reuse its work.
    return withFileLock(
      `image-${tag}`,
      async () => {
        if (await imageExists(this.docker, tag)) return cached();
        const log =
          task.environment.kind === 'image'
            ? await pull(this.docker, tag, task, options)
            : await build(this.docker, this.setup, task, tag, options);
        if (!(await imageExists(this.docker, tag)))
          throw new BuildError(
            `no image ${tag} after the ${task.environment.kind === 'image' ? 'pull' : 'build'}`,
            log,
          );
        return { image: tag, source, cached: false, durationMs: performance.now() - started, log };
      },
      options.signal,
    );
  }
}
