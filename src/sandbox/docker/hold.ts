import { mkdir, readdir, readFile, readlink, rmdir, writeFile } from 'node:fs/promises';
import { cgroupFreezer, filesOf, type CgroupFiles, type Freezer } from './freezer.js';
import { errnoOf, ifMissing, isMissing } from '../../util/errors.js';
import { causeOf, log, logged } from '../../util/log.js';

/**
 * While the tests run, every process the agent left that is not a service is held frozen: it
 * stays listed (ps, pgrep, kill -0 and /proc/PID answer for it) but cannot run, so it can neither
 * signal, trace nor read the tests' processes (whatever uid they run as), nor bind a port, take a
 * lock or connect to a socket of theirs. A service (a process holding a listening socket) runs on,
 * so it answers the tests on localhost. The hold is a child cgroup of the container's own with
 * freezing set: a signal cannot undo it (a SIGCONT from a service would undo a SIGSTOP), and a
 * held process cannot fork out of it. The container's init (the engine's, not the agent's) is not held.
 */
export interface Hold {
  /** Host pids held frozen, and those left running as services. */
  held: number[];
  services: number[];
  /** Ports of `reserved` an agent process holds a socket on (listening or not). */
  squatted: number[];
  /** Every held process back in the container's cgroup, running. Idempotent, never throws. */
  release(): Promise<void>;
}

const HELD = 'termgrade-held';

/** Holds by container id, so a container is never stopped (or removed) while part of it is frozen: cgroup v1 cannot kill a frozen process. */
const active = new Map<string, Hold>();

/** Releases the hold on a container, if there is one (before the container is stopped or removed). */
export async function releaseHold(containerId: string): Promise<void> {
  await active.get(containerId)?.release();
}

export interface Socket {
  inode: string;
  /** 0 for a unix socket. */
  port: number;
  /** A unix socket's path (empty when it has none, or for TCP and UDP). */
  path: string;
  /** Listening TCP, an unconnected bound UDP socket, or a listening unix socket. */
  listening: boolean;
}

/** A process or cgroup that ended meanwhile (ENOENT, ESRCH): the expected case of every /proc and cgroup call here. */
const gone = { expected: isMissing };

/** The sockets of a network namespace, from /proc/PID/net of a process in it. */
export async function socketsOf(pid: number): Promise<Socket[]> {
  const out: Socket[] = [];
  for (const [table, listenState] of [
    ['tcp', '0A'],
    ['tcp6', '0A'],
    ['udp', '07'],
    ['udp6', '07'],
  ] as const) {
    const text = await ifMissing(readFile(`/proc/${pid}/net/${table}`, 'utf8'), ''); // no IPv6, or the process gone
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 10) continue;
      const port = parseInt(f[1]!.slice(f[1]!.lastIndexOf(':') + 1), 16);
      out.push({ inode: f[9]!, port, path: '', listening: f[3] === listenState && port !== 0 });
    }
  }
  const unix = await ifMissing(readFile(`/proc/${pid}/net/unix`, 'utf8'), '');
  for (const line of unix.split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    // Flags 00010000: __SO_ACCEPTCON, a socket that listen() was called on.
    if (f.length >= 7)
      out.push({ inode: f[6]!, port: 0, path: f[7] ?? '', listening: (parseInt(f[3]!, 16) & 0x10000) !== 0 });
  }
  return out;
}

/** The socket inodes a process holds open. */
export async function socketInodes(pid: number): Promise<Set<string>> {
  const inodes = new Set<string>();
  const fds = await readdir(`/proc/${pid}/fd`).catch(logged("list a process's open files", [] as string[], gone));
  for (const fd of fds) {
    const link = await readlink(`/proc/${pid}/fd/${fd}`).catch(logged("read a process's open file", '', gone));
    const m = /^socket:\[(\d+)\]$/.exec(link);
    if (m) inodes.add(m[1]!);
  }
  return inodes;
}

export const pidsIn = async (dir: string): Promise<number[]> =>
  (await ifMissing(readFile(`${dir}/cgroup.procs`, 'utf8'), '')) // the cgroup gone with its container
    .split('\n')
    .filter((l) => /^\d+$/.test(l))
    .map(Number);

/** Moves every process of one cgroup into another, one write per process (the kernel takes one pid per write). */
async function moveAll(from: string, to: string): Promise<void> {
  for (const pid of await pidsIn(from))
    await writeFile(`${to}/cgroup.procs`, String(pid)).catch(logged('move a process between cgroups', undefined, gone));
}

/** Where a container's hold lives: its cgroup's files, the child cgroup made frozen, and the container's freezer. */
export interface HoldPlace {
  initPid: number;
  containerId: string;
  files: CgroupFiles;
  child: string;
  freezer: Freezer;
  /** The child cgroup removed, nothing held (when no hold is taken after all). */
  drop(): Promise<void>;
}

/**
 * The frozen child cgroup of the container whose init has host pid `initPid`, made ready to take
 * processes; null when the container's cgroup cannot be written from here (a remote engine).
 */
export async function holdPlace(initPid: number, containerId: string): Promise<HoldPlace | null> {
  const procCgroup = await ifMissing(readFile(`/proc/${initPid}/cgroup`, 'utf8'), null);
  const files = procCgroup ? filesOf(procCgroup, containerId) : null;
  const freezer = files ? await cgroupFreezer(initPid, containerId) : null;
  if (!files || !freezer) return null;
  const child = `${files.dir}/${HELD}`;
  try {
    await mkdir(child, { recursive: true });
    await writeFile(`${child}/${files.controlName}`, files.frozenValue);
  } catch (err) {
    // No child cgroup can be made here: held by nothing, as on a remote engine.
    log.debug('cannot make a cgroup to hold processes in', { cause: causeOf(err) });
    return null;
  }
  return { initPid, containerId, files, child, freezer, drop: releaser(containerId, files, child) };
}

/**
 * Sorts the container's processes and moves those that are not services into the frozen child
 * cgroup, listing which ports of `reserved` agent sockets hold. The caller has frozen the whole
 * container (`place.freezer`), so that none forks or opens a socket meanwhile, and thaws it after:
 * the copy of the agent's layer does this under its own freeze (one freeze for both). Nothing is
 * held when it throws.
 */
export async function holdFrozen(place: HoldPlace, reserved: number[]): Promise<Hold> {
  const { initPid, containerId, files, child } = place;

  try {
    const [sockets, pids] = await Promise.all([socketsOf(initPid), pidsIn(files.dir)]);
    const listening = new Set(sockets.filter((s) => s.listening).map((s) => s.inode));
    const others = pids.filter((pid) => pid !== initPid);
    const inodes = await Promise.all(others.map(socketInodes));
    const held: number[] = [];
    const services: number[] = [];
    others.forEach((pid, i) => ([...inodes[i]!].some((n) => listening.has(n)) ? services : held).push(pid));
    for (const pid of held)
      await writeFile(`${child}/cgroup.procs`, String(pid)).catch(
        logged('hold a process', undefined, { ...gone, level: 'warn' }),
      );
    const wanted = new Set(reserved);
    // A socket no process holds (inode 0: TIME_WAIT, say) takes no port from the tests.
    const squatted = [...new Set(sockets.filter((s) => s.inode !== '0' && wanted.has(s.port)).map((s) => s.port))];
    const hold = {
      held,
      services,
      squatted: squatted.sort((a, b) => a - b),
      release: releaser(containerId, files, child),
    };
    active.set(containerId, hold);
    return hold;
  } catch (err) {
    await place.drop();
    throw err;
  }
}

/**
 * Holds every process of the container whose init has host pid `initPid` that is not a service
 * (see Hold), and lists which ports of `reserved` agent sockets hold. Null when the container's
 * cgroup cannot be written from here (a remote engine). Throws when the processes cannot all be
 * frozen (a fork bomb outruns the freezer): nothing is then held.
 */
export async function holdNonServices(initPid: number, containerId: string, reserved: number[]): Promise<Hold | null> {
  const place = await holdPlace(initPid, containerId);
  if (!place) return null;
  try {
    await place.freezer.freeze();
  } catch (err) {
    await place.drop();
    throw err;
  }
  try {
    return await holdFrozen(place, reserved);
  } finally {
    await place.freezer
      .thaw()
      .catch(logged('thaw a container after sorting its processes', undefined, { ...gone, level: 'warn' }));
  }
}

function releaser(
  containerId: string,
  files: { dir: string; controlName: string; thawedValue: string },
  child: string,
): () => Promise<void> {
  let done: Promise<void> | null = null;
  return () =>
    (done ??= (async () => {
      await writeFile(`${child}/${files.controlName}`, files.thawedValue).catch(
        logged('thaw held processes', undefined, { ...gone, level: 'warn' }),
      );
      await moveAll(child, files.dir);
      // A process forked between the listing and the move keeps the folder busy: the container's
      // removal takes the folder with it (thawed, its processes can be killed).
      await rmdir(child).catch(
        logged('remove a hold cgroup', undefined, { expected: (err) => isMissing(err) || errnoOf(err) === 'EBUSY' }),
      );
      active.delete(containerId);
    })());
}

/**
 * Thaws a hold a process that died left on the container (its init at host pid `initPid`), so the
 * engine can stop and remove it (`cleanup`). Never throws.
 */
export async function thawLeftHold(initPid: number, containerId: string): Promise<void> {
  const procCgroup = await readFile(`/proc/${initPid}/cgroup`, 'utf8').catch(logged('read a cgroup', null, gone));
  const files = procCgroup ? filesOf(procCgroup, containerId) : null;
  if (files) await releaser(containerId, files, `${files.dir}/${HELD}`)();
}
