import { readFile, readlink, stat } from 'node:fs/promises';
import path from 'node:path';
import type Docker from 'dockerode';
import { errorMessage, ifMissing, isMissing } from '../../util/errors.js';
import { log, logged } from '../../util/log.js';
import { sleep } from '../../util/time.js';
import {
  DiskLimitError,
  ForkError,
  ScanLimitError,
  type ForkedService,
  type ForkOptions,
  type Sandbox,
  type SandboxFork,
} from '../sandbox.js';
import { cgroupFreezer, filesOf } from './freezer.js';
import { pidsIn, socketInodes, socketsOf, type Socket } from './hold.js';
import { copyLayer, measureLayer } from './layer-copy.js';
import type { OverlayLayers } from './overlay.js';
import type { CreatedContainer } from './sandbox.js';
import { boundsOf } from './snapshot.js';
import type { Turn } from './turns.js';

/** What a Docker sandbox lends its fork: its container, its turn in the engine's line, its layers, how to make a sibling. */
export interface ForkHost {
  container: Docker.Container;
  turn: Turn;
  /** The container's overlay layers, readable here (null: not on this machine). */
  layers: OverlayLayers | null;
  /** Creates (does not start) a container from the sandbox's own image, limits and labels, plus `labels`, on `network`. */
  createSibling(labels: Record<string, string>, network: string | null): Promise<CreatedContainer>;
}

/** Seconds a child's services have to listen again. */
export const FORK_READY_SEC = 15;

/** A service of the parent's as recorded while it was frozen, with what it takes to start it again. */
interface RecordedService extends ForkedService {
  pid: number;
  env: string[];
  /** Where its stdout went, when that was a file of the sandbox's; else /dev/null. */
  output: string;
  /** Why it cannot be started again, when that is known before trying. */
  refusal: string | null;
}

/** What the parent ran at the fork: its services (to start again), and the rest (not carried). */
interface Recorded {
  services: RecordedService[];
  notCarried: string[];
}

/** A process that exited meanwhile reads as empty, unlogged; any other failure (no privileges) is logged. */
const procRead = { expected: isMissing };

/** A process's command line (argv); empty when it cannot be read (gone, a zombie). */
async function argvOf(pid: number): Promise<string[]> {
  const raw = await ifMissing(readFile(`/proc/${pid}/cmdline`, 'utf8'), '');
  return raw === '' ? [] : raw.replace(/\0$/, '').split('\0');
}

/** The parent pid of a host process (0 when gone). */
async function ppidOf(pid: number): Promise<number> {
  const stat = await ifMissing(readFile(`/proc/${pid}/stat`, 'utf8'), '');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1] ?? 0);
}

/** uid:gid a process runs as (its real ids). */
async function userOf(pid: number): Promise<string> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const id = (key: string): string => new RegExp(`^${key}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? '0';
  return `${id('Uid')}:${id('Gid')}`;
}

/** Options whose next argument is inline code or a module name, not a file (sh -c, perl -e, python -m, node -e). */
const INLINE_OPTIONS = new Set(['-c', '-e', '-E', '-m', '--eval', '-r']);
/** What a file an interpreter runs is named like: a path, or a name with a script's extension. */
const SCRIPT_NAME = /^[^\s]*(\/[^\s]*|\.(py|pl|sh|bash|js|mjs|cjs|ts|rb|php|lua|jar|R|tcl))$/;

/**
 * The file a service's command runs when it is not the program itself (`perl /tmp/srv.pl`, `node
 * server.js`): the first argument that is not an option, when it is named like a file. Null when
 * there is none (`python3 -m http.server`, `sh -c "..."`, `gunicorn app:app`).
 */
function scriptOf(command: string[]): string | null {
  for (let i = 1; i < command.length; i++) {
    const arg = command[i]!;
    if (INLINE_OPTIONS.has(arg)) return null;
    if (arg.startsWith('-')) continue;
    return SCRIPT_NAME.test(arg) ? arg : null;
  }
  return null;
}

/**
 * Why a service cannot be started again because the file it runs is gone from the sandbox (deleted
 * or moved since it started): started again, it would exit at once and never listen. Read through
 * the process's own root while the container is frozen; null when the file is there or cannot be
 * looked at from here (then the fork tries, and waits for it to listen).
 */
async function missingScript(pid: number, command: string[], cwd: string): Promise<string | null> {
  const script = scriptOf(command);
  if (!script || !cwd.startsWith('/')) return null;
  const inSandbox = path.posix.resolve(cwd, script);
  const found = await stat(`/proc/${pid}/root${inSandbox}`).then(
    () => true,
    (err: NodeJS.ErrnoException) => (err.code === 'ENOENT' || err.code === 'ENOTDIR' ? false : null),
  );
  return found === false ? `the file it runs, ${inSandbox}, is gone since it started (deleted or moved)` : null;
}

/** The service as it must be started again, read from /proc while the container is frozen. */
async function recordService(pid: number, sockets: Socket[]): Promise<RecordedService> {
  const command = await argvOf(pid);
  const [cwd, user, environ, out, exe] = await Promise.all([
    readlink(`/proc/${pid}/cwd`).catch(logged("read a service's folder", '', procRead)),
    userOf(pid).catch(logged("read a service's user", '0:0', procRead)),
    readFile(`/proc/${pid}/environ`, 'utf8').catch(logged("read a service's environment", '', procRead)),
    readlink(`/proc/${pid}/fd/1`).catch(logged("read a service's output", '', procRead)),
    readlink(`/proc/${pid}/exe`).catch(logged("read a service's program", '', procRead)),
  ]);
  const refusal =
    command.length === 0
      ? 'its command line cannot be read'
      : exe.endsWith(' (deleted)')
        ? `its program ${exe.replace(/ \(deleted\)$/, '')} was deleted since it started`
        : !cwd.startsWith('/') || cwd.endsWith(' (deleted)')
          ? `its working folder ${cwd || '?'} is gone`
          : await missingScript(pid, command, cwd);
  return {
    pid,
    command,
    cwd,
    user,
    ports: [...new Set(sockets.filter((s) => s.port !== 0).map((s) => s.port))].sort((a, b) => a - b),
    sockets: [...new Set(sockets.filter((s) => s.port === 0 && s.path).map((s) => s.path))].sort(),
    env: environ.split('\0').filter((e) => e.includes('=')),
    output: out.startsWith('/') && !out.endsWith(' (deleted)') && !out.startsWith('/dev/') ? out : '/dev/null',
    refusal,
  };
}

/**
 * The container's processes sorted, read from /proc while it is frozen: a service is a process
 * holding a listening socket whose parent holds none of those (a server's workers that share its
 * socket come with it when it starts again); each is recorded with the sockets it and its workers
 * hold. The container's own init and idle command, and the harness's processes (those the engine
 * started from outside: the helper shell), are neither services nor listed as not carried; a
 * service's other descendants are its own to start again.
 */
async function recordProcesses(initPid: number, cgroupDir: string, ownCommand: string[]): Promise<Recorded> {
  const [sockets, all] = await Promise.all([socketsOf(initPid), pidsIn(cgroupDir)]);
  const listening = new Map(sockets.filter((s) => s.listening).map((s) => [s.inode, s] as const));
  const pids = all.filter((p) => p !== initPid);
  const inside = new Set(all);
  const [parents, held] = await Promise.all([Promise.all(pids.map(ppidOf)), Promise.all(pids.map(socketInodes))]);
  const parent = new Map(pids.map((p, i) => [p, parents[i]!] as const));
  const own = new Map(pids.map((p, i) => [p, [...held[i]!].flatMap((n) => listening.get(n) ?? [])] as const));
  const isService = (p: number): boolean => own.get(p)!.length > 0;
  /** The nearest ancestor (or itself) that is a service with no service above it; null when none. */
  const rootOf = (p: number): number | null => {
    let root: number | null = null;
    for (let at = p; inside.has(at) && at !== initPid; at = parent.get(at) ?? 0) if (isService(at)) root = at;
    return root;
  };
  const roots = new Map<number, Socket[]>();
  const rest: number[] = [];
  for (const p of pids) {
    const root = rootOf(p);
    if (root === null) rest.push(p);
    else roots.set(root, [...(roots.get(root) ?? []), ...own.get(p)!]);
  }
  const services = await Promise.all([...roots].map(([p, s]) => recordService(p, s)));
  const notCarried: string[] = [];
  for (const p of rest) {
    if (!inside.has(parent.get(p) ?? 0)) continue; // started by the engine from outside: the harness's
    const argv = await argvOf(p);
    if (parent.get(p) === initPid && argv.join('\0') === ownCommand.join('\0')) continue;
    if (argv.length) notCarried.push(argv.join(' '));
  }
  return { services, notCarried };
}

/** The layer measured against the bounds, then copied, within the copy's time bound; a ForkError names what stopped it. */
async function copyParent(from: string, to: string, options: ForkOptions): Promise<void> {
  const bounds = boundsOf(options.bounds);
  const deadline = AbortSignal.timeout(bounds.copyTimeoutSec * 1000);
  try {
    await measureLayer(from, bounds, deadline);
    await copyLayer(from, to, deadline);
  } catch (err) {
    if (err instanceof ScanLimitError || err instanceof DiskLimitError)
      throw new ForkError(`the sandbox's files cannot be forked: ${err.message}`);
    if (deadline.aborted)
      throw new ForkError(`the sandbox's files could not be copied within ${bounds.copyTimeoutSec} s`);
    throw new ForkError(`the sandbox's files could not be copied: ${errorMessage(err)}`);
  }
}

/**
 * The parent frozen (its cgroup here, else the engine's pause), its processes recorded and its
 * layer copied into `to`, then thawed: it runs on as it was. Processes that do not freeze (a fork
 * bomb outruns the freezer) refuse the fork; the parent is never ended for it, as grading would.
 */
async function frozenCopy(
  host: ForkHost,
  info: Docker.ContainerInspectInfo,
  layer: { from: string; to: string },
  options: ForkOptions,
): Promise<Recorded & { frozenMs: number }> {
  const { container, turn } = host;
  const pid = info.State.Pid;
  const procCgroup = await ifMissing(readFile(`/proc/${pid}/cgroup`, 'utf8'), null);
  const files = procCgroup ? filesOf(procCgroup, container.id) : null;
  if (!files) throw new ForkError("the sandbox's processes cannot be read from this machine; it cannot be forked here");
  const freezer = await cgroupFreezer(pid, container.id);
  try {
    await (freezer ? freezer.freeze() : turn(() => container.pause()));
  } catch (err) {
    throw new ForkError(`the sandbox's processes could not be frozen for the copy: ${errorMessage(err)}`);
  }
  const frozenAt = performance.now();
  try {
    const ownCommand = [info.Config.Entrypoint ?? [], info.Config.Cmd ?? []].flat();
    const [recorded] = await Promise.all([
      recordProcesses(pid, files.dir, ownCommand),
      copyParent(layer.from, layer.to, options),
    ]);
    return { ...recorded, frozenMs: performance.now() - frozenAt };
  } finally {
    await (freezer ? freezer.thaw() : turn(() => container.unpause())).catch(
      logged('thaw a sandbox after forking it', undefined, { level: 'warn', expected: isMissing }),
    );
  }
}

/** The network a child joins: the parent's own (none, or a named isolated one). */
function networkOf(info: Docker.ContainerInspectInfo): string | null {
  const mode = info.HostConfig?.NetworkMode ?? 'none';
  if (mode === 'none' || mode === '') return null;
  if (mode === 'host' || mode.startsWith('container:'))
    throw new ForkError(`the sandbox shares another's network (${mode}); it cannot be forked`);
  return mode;
}

/** The service started again in a child, detached (the exec returns at once), as it was recorded. */
async function restart(child: Sandbox, s: RecordedService, rootByDefault: boolean): Promise<void> {
  const r = await child.exec(
    ['/bin/sh', '-c', 'out=$1; shift; env -i "$@" </dev/null >>"$out" 2>&1 &', 'sh', s.output, ...s.env, ...s.command],
    // As root, the container's own user, through the sandbox's helper shell (no engine exec of its own).
    { ...(s.user === '0:0' && rootByDefault ? {} : { user: s.user }), cwd: s.cwd, timeoutSec: 30 },
  );
  if (r.exitCode !== 0)
    throw new ForkError(
      `the service "${s.command.join(' ')}" could not be started again in a fork: ${r.stderr.text.trim()}`,
    );
}

/** Waits until every port and socket of `services` listens in the container whose init is `pid`; a ForkError names the first that does not. */
async function untilListening(pid: number, services: RecordedService[], timeoutSec: number): Promise<void> {
  const deadline = performance.now() + timeoutSec * 1000;
  for (;;) {
    const up = (await socketsOf(pid)).filter((s) => s.listening);
    const missing = services.find(
      (s) => s.ports.some((p) => !up.some((u) => u.port === p)) || s.sockets.some((p) => !up.some((u) => u.path === p)),
    );
    if (!missing) return;
    if (performance.now() > deadline)
      throw new ForkError(
        `the service "${missing.command.join(' ')}" (listening on ${[...missing.ports, ...missing.sockets].join(', ')} in the sandbox) did not listen again within ${timeoutSec} s in a fork; no fork was made`,
      );
    await sleep(100);
  }
}

/** Starts a child and its services, and waits until they listen. */
async function bringUp(
  made: CreatedContainer,
  recorded: Recorded & { rootByDefault: boolean },
  options: ForkOptions,
): Promise<void> {
  const { services } = recorded;
  await made.start(options.signal);
  if (services.length === 0) return;
  for (const s of services) await restart(made.sandbox, s, recorded.rootByDefault);
  const pid = await made.sandbox.initPid();
  await untilListening(pid, services, FORK_READY_SEC);
}

/**
 * Branches the running container into `n` (see Sandbox.fork): n containers created beside it from
 * its image, limits, labels and network; its layer copied into the first while it is frozen (its
 * processes and sockets recorded in the same freeze), then from that copy into the others while it
 * runs on; each child started with the parent's services started again and listening. All or
 * none: every child is removed on any failure, before the error is thrown.
 */
export async function forkByCopy(host: ForkHost, n: number, options: ForkOptions = {}): Promise<SandboxFork> {
  if (!Number.isInteger(n) || n < 1) throw new ForkError(`a fork makes at least one sandbox (asked for ${n})`);
  const began = performance.now();
  const phase = (name: string): void => log.debug('fork', { phase: name, ms: Math.round(performance.now() - began) });
  const info = await host.container.inspect();
  if (!info.State.Running || info.State.Paused)
    throw new ForkError('the sandbox is not running; only a live one is forked');
  const network = networkOf(info);
  const layers = host.layers;
  if (!layers)
    throw new ForkError(
      "the sandbox's layers cannot be read from this machine (a remote engine); it cannot be forked here",
    );
  const made: CreatedContainer[] = [];
  try {
    const creating = await Promise.allSettled(
      Array.from({ length: n }, (_, i) => host.createSibling(options.labels?.(i) ?? {}, network)),
    );
    for (const c of creating) if (c.status === 'fulfilled') made.push(c.value);
    const failed = creating.find((c): c is PromiseRejectedResult => c.status === 'rejected');
    if (failed) throw failed.reason;
    const uppers = await Promise.all(made.map(async (m) => (await m.sandbox.ownLayers())?.upper ?? null));
    if (uppers.some((u) => u === null)) throw new ForkError("a fork's layer is not readable from this machine");
    const [first, ...others] = uppers as string[];
    phase('created');
    const recorded = await frozenCopy(host, info, { from: layers.upper, to: first! }, options);
    const refused = recorded.services.find((s) => s.refusal);
    if (refused)
      throw new ForkError(
        `the service "${refused.command.join(' ') || refused.pid}" cannot be carried into a fork: ${refused.refusal}`,
      );
    phase('frozen copy');
    await Promise.all(others.map((to) => copyParent(first!, to, options)));
    phase('copies');
    const rootByDefault = ['', 'root', '0', '0:0'].includes(info.Config.User ?? '');
    await Promise.all(made.map((m) => bringUp(m, { ...recorded, rootByDefault }, options)));
    phase('ready');
    return {
      children: made.map((m) => m.sandbox),
      services: recorded.services.map(({ command, cwd, user, ports, sockets }) => ({
        command,
        cwd,
        user,
        ports,
        sockets,
      })),
      notCarried: recorded.notCarried,
      frozenMs: recorded.frozenMs,
      totalMs: performance.now() - began,
    };
  } catch (err) {
    await Promise.all(made.map((m) => m.sandbox.close()));
    throw err;
  }
}
