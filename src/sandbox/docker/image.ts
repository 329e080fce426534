import type Docker from 'dockerode';
import type { Task } from '../../task/task.js';
import { CancelledError, TermgradeError, errorMessage } from '../../util/errors.js';
import type { PreparedEnvironment, PrepareOptions } from '../sandbox.js';
import { LABEL_MANAGED, LABEL_TASK } from './labels.js';
import { packDir } from './tar.js';

export const IMAGE_REPO = 'termgrade-env';

/** Images are named by the environment's content, so an unchanged task never builds twice. */
export function imageTag(task: Task): string {
  if (task.environment.kind === 'image') return task.environment.image;
  return `${IMAGE_REPO}:${task.environment.contentHash.slice(0, 20)}`;
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

async function build(docker: Docker, task: Task, tag: string, options: PrepareOptions): Promise<string> {
  if (task.environment.kind !== 'dockerfile') throw new Error('unreachable');
  const lines: string[] = [];
  let logChars = 0;
  const note = (line: string): void => {
    options.onLog?.(line);
    if (logChars < MAX_LOG_CHARS) lines.push(line);
    logChars += line.length;
  };
  const stream = await docker.buildImage(packDir(task.environment.contextDir, '') as unknown as NodeJS.ReadableStream, {
    t: tag,
    networkmode: 'host', // builds reach Debian's packages through the host; trials never do
    rm: true,
    forcerm: true,
    labels: { [LABEL_MANAGED]: 'true', [LABEL_TASK]: task.name },
  });
  const timeoutMs = task.config.environment.build_timeout_sec * 1000;
  await new Promise<void>((resolve, reject) => {
    let failed: string | null = null;
    const timer = setTimeout(() => {
      (stream as unknown as { destroy(): void }).destroy();
      reject(new BuildError(`build timed out after ${timeoutMs / 1000} s`, lines.join('')));
    }, timeoutMs);
    const onAbort = (): void => {
      (stream as unknown as { destroy(): void }).destroy();
      reject(new CancelledError('image build'));
    };
    options.signal?.addEventListener('abort', onAbort, { once: true });
    docker.modem.followProgress(
      stream,
      (err) => {
        clearTimeout(timer);
        options.signal?.removeEventListener('abort', onAbort);
        if (err) reject(new BuildError(`build failed: ${errorMessage(err)}`, lines.join('')));
        else if (failed) reject(new BuildError(`build failed: ${failed}`, lines.join('')));
        else resolve();
      },
      (event: { stream?: string; error?: string; errorDetail?: { message?: string } }) => {
        if (event.stream) note(event.stream);
        if (event.error) {
          failed = event.errorDetail?.message ?? event.error;
          note(`ERROR: ${failed}\n`);
        }
      },
    );
  });
  return lines.join('');
}

/**
 * Builds (or finds) a task's image. Concurrent requests for one image share a single build,
 * and an image already present is reused without touching the build context.
 */
export class ImageBuilder {
  private readonly inFlight = new Map<string, Promise<PreparedEnvironment>>();

  constructor(private readonly docker: Docker) {}

  prepare(task: Task, options: PrepareOptions = {}): Promise<PreparedEnvironment> {
    const tag = imageTag(task);
    let pending = this.inFlight.get(tag);
    if (!pending) {
      pending = this.ensure(task, tag, options).finally(() => this.inFlight.delete(tag));
      this.inFlight.set(tag, pending);
    }
    return pending;
  }

  private async ensure(task: Task, tag: string, options: PrepareOptions): Promise<PreparedEnvironment> {
    const started = performance.now();
    if (await imageExists(this.docker, tag)) {
      return { image: tag, cached: true, durationMs: performance.now() - started, log: '' };
    }
    if (task.environment.kind === 'image') {
      throw new BuildError(`image ${tag} is not present locally and cannot be pulled here (no registry); build or tag it first`, '');
    }
    const log = await build(this.docker, task, tag, options);
    if (!(await imageExists(this.docker, tag))) throw new BuildError('build finished but produced no image', log);
    return { image: tag, cached: false, durationMs: performance.now() - started, log };
  }
}
