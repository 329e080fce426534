import { setMaxListeners } from 'node:events';
import { randomBytes } from 'node:crypto';
import type Docker from 'dockerode';
import { z } from 'zod';
import type { Task } from '../../task/task.js';
import { CancelledError, TermgradeError, errorMessage, isGoneFromEngine } from '../../util/errors.js';
import { withTimeout } from '../../util/time.js';
import { DOCKER_CAPABILITIES, DockerProvider, type DockerProviderOptions } from '../docker/provider.js';
import { untilAborted } from '../start.js';
import { resolveBuildNetwork, type BuildNetwork } from '../docker/build-network.js';
import { LABEL_OWNER, ownerId } from '../docker/labels.js';
import type {
  PreparedEnvironment,
  PrepareOptions,
  ProviderCapabilities,
  ProviderHealth,
  Sandbox,
  SandboxProvider,
  StartOptions,
} from '../sandbox.js';
import { connectEngine } from './engine-connect.js';
import { engineNameOf, type EngineSpec } from './engine-spec.js';
import { PoolSandbox } from './sandbox.js';
import { imageIdOf } from '../docker/image.js';
import { shipImage } from './ship.js';
import { causeOf, log, logged } from '../../util/log.js';

/** What the pool says as it works: an engine lost or back, an image copied to an engine. */
export const PoolEventSchema = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('engine-down'), engine: z.string(), reason: z.string() }),
  /** Back in the pool; `removed`: this pool's containers left on it, removed first. */
  z.strictObject({ type: z.literal('engine-up'), engine: z.string(), removed: z.number().int() }),
  z.strictObject({
    type: z.literal('image-shipped'),
    engine: z.string(),
    from: z.string(),
    image: z.string(),
    ms: z.number(),
  }),
]);
export type PoolEvent = z.infer<typeof PoolEventSchema>;

export interface EnginePoolOptions {
  onEvent?: (e: PoolEvent) => void;
  /** How often a lost engine is asked whether it answers again (ms). Default 1000. */
  probeIntervalMs?: number;
  /** Longest wait for an engine's answer to a health ping (ms). Default 5000. */
  pingTimeoutMs?: number;
  /** Longest image copy between engines (ms). Default 15 minutes. */
  shipTimeoutMs?: number;
  /** The network image builds run on, on every engine; default the setting in force (see build-network.ts). */
  buildNetwork?: BuildNetwork;
  /** Options for each engine's DockerProvider (how commands reach containers, a forced builder). */
  docker?: Pick<DockerProviderOptions, 'execVia' | 'builder'>;
}

/** An engine pool is Docker engines (its fixed capacity in all is `capacity`). */
export const POOL_CAPABILITIES: ProviderCapabilities = { ...DOCKER_CAPABILITIES };

/** The signal every call in flight on an engine listens to (one listener each: many at once are expected). */
function lostController(): AbortController {
  const c = new AbortController();
  setMaxListeners(0, c.signal);
  return c;
}

/** One engine of the pool and what the pool knows of it. */
export class Engine {
  readonly name: string;
  readonly docker: Docker;
  readonly provider: DockerProvider;
  /** Ends the connection (an ssh tunnel); the pool calls it in closeAll. */
  readonly disconnect: () => void;
  inUse = 0;
  up = true;
  reason = '';
  /**
   * Aborted when the engine is lost, then replaced: a sandbox keeps the signal it was made under,
   * so it knows it is gone even after the engine is back, and calls waiting on a hung engine give up.
   */
  lostSignal = lostController();
  /** Image ids this engine is known to hold. */
  readonly present = new Set<string>();
  /** Copies to this engine under way, by image id. */
  readonly shipping = new Map<string, Promise<void>>();
  shipped = 0;

  constructor(
    readonly spec: EngineSpec,
    buildNetwork?: BuildNetwork,
    docker: EnginePoolOptions['docker'] = {},
  ) {
    this.name = engineNameOf(spec);
    const connection = connectEngine(spec);
    this.docker = connection.docker;
    this.disconnect = connection.close;
    this.provider = new DockerProvider({ ...docker, docker: this.docker, buildNetwork });
  }

  get capacity(): number {
    return this.spec.capacity;
  }
}

/** How one engine of a pool stands, as `status()` reports it. */
export interface EngineState {
  name: string;
  host: string;
  capacity: number;
  inUse: number;
  up: boolean;
  reason: string;
  imagesShipped: number;
}

/** Marks a pool's containers, so taking an engine back removes this pool's leftovers and nothing else (another pool in the same process). */
export const LABEL_POOL = 'io.termgrade.pool';

/**
 * A sandbox provider over several Docker engines (local sockets, TLS over TCP, SSH), each with a
 * capacity. Images are built once, on the first engine that answers, and copied by id to the
 * engines that need them (never rebuilt per engine: a rebuild can pull other packages). A trial
 * goes to an engine with a free slot, preferring one that already holds its image, then the least
 * loaded. An engine that stops answering is drained: its sandboxes fail as the environment's
 * failure (the job re-runs those trials elsewhere within its infrastructure budget), nothing new
 * goes there, and it is asked again every second; once it answers, this pool's containers left
 * on it are removed and it takes trials again. Each engine is a DockerProvider: the pool adds
 * placement, copying and failover, nothing else.
 */
export class EnginePool implements SandboxProvider {
  readonly name = 'engines';
  readonly capabilities = POOL_CAPABILITIES;
  /** This pool among others, even in one process. */
  readonly id = randomBytes(8).toString('hex');
  readonly engines: Engine[];
  private readonly waiters = new Set<() => void>();
  private readonly open = new Set<PoolSandbox>();
  private monitor: NodeJS.Timeout | null = null;
  private ticks = 0;
  private readonly probeIntervalMs: number;
  private readonly pingTimeoutMs: number;
  private readonly shipTimeoutMs: number;

  constructor(
    specs: EngineSpec[],
    private readonly options: EnginePoolOptions = {},
  ) {
    if (!specs.length) throw new TermgradeError('usage', 'an engine pool needs at least one engine');
    const buildNetwork = options.buildNetwork ?? resolveBuildNetwork();
    this.engines = specs.map((s) => new Engine(s, buildNetwork, options.docker));
    const names = this.engines.map((e) => e.name);
    const twice = names.find((n, i) => names.indexOf(n) !== i);
    if (twice) throw new TermgradeError('usage', `two engines are named "${twice}": give each a name (name=X)`);
    this.probeIntervalMs = options.probeIntervalMs ?? 1000;
    this.pingTimeoutMs = options.pingTimeoutMs ?? 5000;
    this.shipTimeoutMs = options.shipTimeoutMs ?? 15 * 60_000;
  }

  /** Sandboxes at once across every engine (lost ones included: they may come back). */
  get capacity(): number {
    return this.engines.reduce((n, e) => n + e.capacity, 0);
  }

  status(): EngineState[] {
    return this.engines.map((e) => ({
      name: e.name,
      host: e.spec.host,
      capacity: e.capacity,
      inUse: e.inUse,
      up: e.up,
      reason: e.reason,
      imagesShipped: e.shipped,
    }));
  }

  private emit(e: PoolEvent): void {
    this.options.onEvent?.(e);
  }

  /** Whether the engine answers a ping within the timeout; never throws. */
  answers(engine: Engine): Promise<boolean> {
    return withTimeout(engine.docker.ping(), this.pingTimeoutMs, 'engine_unavailable', 'no answer').then(
      () => true,
      () => false, // no answer (or a refusal) within the timeout is what this asks
    );
  }

  /** Fails with a readable message when no engine answers; says which do not. */
  async ping(): Promise<string[]> {
    const results = await Promise.all(this.engines.map(async (e) => ({ e, ok: await this.answers(e) })));
    for (const r of results) if (!r.ok && r.e.up) this.markDown(r.e, 'does not answer');
    const down = results
      .filter((r) => !r.ok)
      .map((r) => `engine ${r.e.name} (${r.e.spec.host}) does not answer; it is asked again while the run lasts`);
    if (down.length === this.engines.length)
      throw new TermgradeError(
        'engine_unavailable',
        `no Docker engine of the pool answers: ${this.engines.map((e) => `${e.name} (${e.spec.host})`).join(', ')}`,
      );
    this.ensureMonitor();
    return down;
  }

  async health(): Promise<ProviderHealth> {
    const parts = await Promise.all(
      this.engines.map(async (e) => {
        const h = await e.provider.health();
        return {
          ok: h.ok,
          text: `${e.name}: ${h.ok ? `${h.detail}, ${e.inUse}/${e.capacity} in use` : `down (${h.detail})`}`,
        };
      }),
    );
    return { ok: parts.some((p) => p.ok), detail: parts.map((p) => p.text).join('; ') };
  }

  /** Every engine must have the network (a trial may land on any). */
  async checkNetwork(name: string): Promise<void> {
    for (const e of this.engines.filter((x) => x.up)) {
      try {
        await e.provider.checkNetwork(name);
      } catch (err) {
        throw new TermgradeError('bad_input', `engine ${e.name}: ${errorMessage(err)}`);
      }
    }
  }

  /** Builds (or finds) the image on the first engine that answers; it is copied to others on demand. */
  async prepare(task: Task, options?: PrepareOptions): Promise<PreparedEnvironment> {
    this.ensureMonitor();
    let last: unknown = null;
    for (const e of this.engines) {
      if (!e.up) continue;
      try {
        const prepared = await e.provider.prepare(task, options);
        if (prepared.imageId) e.present.add(prepared.imageId);
        return prepared;
      } catch (err) {
        last = err;
        if (err instanceof CancelledError || !(await this.lost(e, err))) throw err;
      }
    }
    throw (
      last ??
      new TermgradeError('environment_error', `no engine answers to build ${task.name}'s image: ${this.downSummary()}`)
    );
  }

  async start(task: Task, prepared: PreparedEnvironment, options: StartOptions = {}): Promise<Sandbox> {
    this.ensureMonitor();
    const id = prepared.imageId ?? null;
    for (let tries = 0; tries <= this.engines.length; tries++) {
      const engine = await this.acquire(id, options.signal);
      try {
        if (id) await this.ensureImage(engine, prepared.image, id);
        // By id: the container runs exactly the image that was built, whatever a tag says there.
        const starting = engine.provider.start(task, id ? { ...prepared, image: id } : prepared, {
          ...options,
          labels: { ...options.labels, [LABEL_POOL]: this.id },
        });
        // A start given up (its deadline passed, its job stopped) frees the slot now, not when the
        // engine answers; a container it makes after all is removed as it arrives.
        const inner = options.signal
          ? await untilAborted(starting, options.signal, (late) => void late.close())
          : await starting;
        const sandbox = new PoolSandbox(this, engine, inner, () => {
          this.open.delete(sandbox);
          this.release(engine);
        });
        this.open.add(sandbox);
        return sandbox;
      } catch (err) {
        this.release(engine);
        if (err instanceof CancelledError || !(await this.lost(engine, err))) throw err;
      }
    }
    throw new TermgradeError(
      'environment_error',
      `no engine could start a sandbox for ${task.name}: ${this.downSummary()}`,
    );
  }

  /** A slot on the best engine: one holding the image, then the least loaded; waits while all are full. */
  private async acquire(imageId: string | null, signal?: AbortSignal): Promise<Engine> {
    for (;;) {
      if (signal?.aborted) throw new CancelledError('sandbox start');
      const up = this.engines.filter((e) => e.up);
      if (!up.length) throw new TermgradeError('environment_error', `no engine answers: ${this.downSummary()}`);
      const free = up.filter((e) => e.inUse < e.capacity);
      if (free.length) {
        const rank = (e: Engine): number => (imageId && e.present.has(imageId) ? 0 : 1) + e.inUse / e.capacity / 2;
        const best = free.reduce((a, b) => (rank(b) < rank(a) ? b : a));
        best.inUse += 1;
        return best;
      }
      await new Promise<void>((resolve) => {
        const wake = (): void => {
          this.waiters.delete(wake);
          signal?.removeEventListener('abort', wake);
          resolve();
        };
        this.waiters.add(wake);
        signal?.addEventListener('abort', wake, { once: true });
      });
    }
  }

  /** A slot is free, or the set of engines changed: every waiter looks again. */
  private wake(): void {
    for (const w of [...this.waiters]) w();
  }

  /**
   * n slots on `engine` taken at once for a fork's children, which live where their parent does
   * (its layer is copied on that machine); `environment_error` when they do not fit there now.
   * Returns how to wrap each child the fork made (its slot freed when it closes) and how to give
   * back the slots of children never made.
   */
  reserveOn(engine: Engine, n: number): { adopt(inner: Sandbox): PoolSandbox; giveBack(count: number): void } {
    if (!engine.up) throw new TermgradeError('environment_error', `engine ${engine.name} is lost: ${engine.reason}`);
    if (engine.inUse + n > engine.capacity)
      throw new TermgradeError(
        'environment_error',
        `a fork into ${n} runs on its parent's engine ${engine.name}, which has room for ${engine.capacity - engine.inUse} more`,
      );
    engine.inUse += n;
    return {
      adopt: (inner) => {
        const sandbox = new PoolSandbox(this, engine, inner, () => {
          this.open.delete(sandbox);
          this.release(engine);
        });
        this.open.add(sandbox);
        return sandbox;
      },
      giveBack: (count) => {
        for (let i = 0; i < count; i++) this.release(engine);
      },
    };
  }

  release(engine: Engine): void {
    engine.inUse = Math.max(0, engine.inUse - 1);
    this.wake();
  }

  /** The image on `engine`: there already, or copied from an engine that holds it (one copy at a time per image). */
  private ensureImage(engine: Engine, tag: string, id: string): Promise<void> {
    if (engine.present.has(id)) return Promise.resolve();
    let copying = engine.shipping.get(id);
    if (!copying) {
      copying = (async () => {
        if ((await imageIdOf(engine.docker, id)) === id) return;
        let source: Engine | null = null;
        for (const e of this.engines) {
          if (e === engine || !e.up) continue;
          const held = await imageIdOf(e.docker, id).catch(
            logged('ask an engine whether it holds an image', null, { fields: { engine: e.name } }),
          ); // the next engine may
          if (e.present.has(id) || held === id) {
            source = e;
            break;
          }
        }
        if (!source)
          throw new TermgradeError(
            'environment_error',
            `image ${tag} is on no engine that answers, so it cannot be copied to ${engine.name}`,
          );
        const t0 = performance.now();
        await shipImage(source.docker, engine.docker, { tag, id }, this.shipTimeoutMs);
        engine.shipped += 1;
        this.emit({
          type: 'image-shipped',
          engine: engine.name,
          from: source.name,
          image: tag,
          ms: performance.now() - t0,
        });
      })().then(
        () => {
          engine.present.add(id);
          engine.shipping.delete(id);
        },
        (err: unknown) => {
          engine.shipping.delete(id);
          throw err;
        },
      );
      engine.shipping.set(id, copying);
    }
    return copying;
  }

  /**
   * After an error from an engine: is the engine lost? It is when it no longer answers a ping;
   * then it is drained. An error from an engine that still answers is the operation's own.
   */
  async lost(engine: Engine, err: unknown): Promise<boolean> {
    if (!engine.up) return true;
    if (await this.answers(engine)) return false;
    this.markDown(engine, errorMessage(err));
    return true;
  }

  private markDown(engine: Engine, reason: string): void {
    if (!engine.up) return;
    engine.up = false;
    engine.reason = reason.slice(0, 300);
    engine.lostSignal.abort();
    engine.lostSignal = lostController();
    this.emit({ type: 'engine-down', engine: engine.name, reason: engine.reason });
    this.ensureMonitor();
    this.wake();
  }

  /**
   * Back in the pool: whatever this pool left on the engine is removed first (its containers
   * died with the engine or belong to trials already counted as failed); what it holds is looked
   * up afresh.
   */
  private async readmit(engine: Engine): Promise<void> {
    let removed = 0;
    try {
      const mine = await engine.docker.listContainers({
        all: true,
        filters: { label: [`${LABEL_OWNER}=${ownerId()}`, `${LABEL_POOL}=${this.id}`] },
      });
      for (const c of mine) {
        await engine.docker
          .getContainer(c.Id)
          .remove({ force: true, v: true })
          .then(
            () => (removed += 1),
            logged('remove a container the pool left on a readmitted engine', undefined, {
              fields: { engine: engine.name },
              expected: isGoneFromEngine,
            }),
          );
      }
    } catch (err) {
      // Not answering after all: asked again at the next tick.
      log.debug('a lost engine still does not answer', { engine: engine.name, cause: causeOf(err) });
      return;
    }
    engine.present.clear();
    engine.up = true;
    engine.reason = '';
    this.emit({ type: 'engine-up', engine: engine.name, removed });
    this.wake();
  }

  /**
   * Once a second: lost engines are asked whether they answer again; every fifth second, engines
   * with sandboxes open are pinged so one that hangs (rather than refusing) is drained too.
   */
  private ensureMonitor(): void {
    if (this.monitor) return;
    let busy = false;
    this.monitor = setInterval(() => {
      if (busy) return;
      busy = true;
      this.ticks += 1;
      void (async () => {
        for (const e of this.engines) {
          if (!e.up) {
            if (await this.answers(e)) await this.readmit(e);
          } else if (this.ticks % 5 === 0 && e.inUse > 0 && !(await this.answers(e))) {
            this.markDown(e, `no answer within ${this.pingTimeoutMs / 1000} s`);
          }
        }
      })().finally(() => {
        busy = false;
      });
    }, this.probeIntervalMs);
    this.monitor.unref();
  }

  private downSummary(): string {
    return this.engines
      .map((e) => `${e.name} ${e.up ? `${e.inUse}/${e.capacity} in use` : `lost (${e.reason})`}`)
      .join(', ');
  }

  async closeAll(): Promise<void> {
    if (this.monitor) clearInterval(this.monitor);
    this.monitor = null;
    await Promise.all([...this.open].map((s) => s.close()));
    // A lost engine cannot be reached; its leftovers are dead owners' to any later cleanup.
    await Promise.all(this.engines.filter((e) => e.up).map((e) => e.provider.closeAll()));
    for (const e of this.engines) e.disconnect();
  }

  /** Leftovers of dead owners on every engine that answers; engines that do not are skipped. */
  async cleanup(options: { all?: boolean } = {}): Promise<number> {
    const counts = await Promise.all(
      this.engines.map((e) =>
        e.provider.cleanup(options).catch((err: unknown) => {
          log.warn('cleanup skipped an engine that did not answer: its leftovers stay until the next cleanup', {
            engine: e.name,
            cause: causeOf(err),
          });
          return 0;
        }),
      ),
    );
    return counts.reduce((a, b) => a + b, 0);
  }
}
