import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { processAlive } from '../../util/process-alive.js';
import { isMissing } from '../../util/errors.js';
import { causeOf, log } from '../../util/log.js';

/** Every container termgrade starts carries these, so leftovers of a killed run can be found. */
export const LABEL_MANAGED = 'io.termgrade.managed';
export const LABEL_OWNER = 'io.termgrade.owner';
export const LABEL_TASK = 'io.termgrade.task';
/** On a verifier's container (started from a snapshot of a trial's sandbox). */
export const LABEL_VERIFIER = 'io.termgrade.verifier';
/** On an image committed from a trial's sandbox for its verifier (it also keeps the sandbox's owner label). */
export const LABEL_SNAPSHOT = 'io.termgrade.snapshot';

/** When a process started, in clock ticks since boot (Linux), so a reused pid is told apart. */
function startTicks(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Field 22; the command name (field 2) may hold spaces, so count from its closing paren.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
  } catch (err) {
    if (isMissing(err)) return null; // no such process
    throw err;
  }
}

/** The first 12 hex digits of a file's id (machine-id, boot_id), or '' when there is none. */
function idFrom(file: string): string {
  try {
    return readFileSync(file, 'utf8')
      .replace(/[^0-9a-f]/gi, '')
      .slice(0, 12);
  } catch (err) {
    // Absent on some systems (a container, no systemd): the id is then the host name alone.
    if (!isMissing(err)) log.debug('could not read a machine id', { file, cause: causeOf(err) });
    return '';
  }
}

/**
 * This machine and this boot of it. Hostnames repeat across machines (CI runners, containers all
 * called "localhost"), so the machine id is part of an owner; the boot id tells a process from
 * before a reboot, which is gone whatever its pid says.
 */
const MACHINE = idFrom('/etc/machine-id') || idFrom('/var/lib/dbus/machine-id') || hostname().replace(/:/g, '-');
const BOOT = idFrom('/proc/sys/kernel/random/boot_id');

let self: string | null = null;

/**
 * `host:pid:start:machine:boot` of this process: unique across machines sharing engines (a job
 * spread over several engines, other machines' jobs on the same ones) and across pid reuse and
 * reboots. A container whose owner process is gone is a leftover.
 */
export function ownerId(): string {
  self ??= `${hostname().replace(/:/g, '-')}:${process.pid}:${startTicks(process.pid) ?? '0'}:${MACHINE}:${BOOT}`;
  return self;
}

/**
 * Whether the owner is a live process. Another machine's process is not ours to judge (alive): a
 * cleanup on any machine removes only its own dead processes' containers, on every engine. An
 * empty owner is not a termgrade process at all (an image build's container, say): treated as
 * alive too, so cleanup never removes it.
 */
export function ownerIsAlive(owner: string | undefined): boolean {
  if (!owner) return true;
  const [host, pidText, start, machine, boot] = owner.split(':');
  // Owners written before the machine and boot ids were part of it: the host name decides.
  if (machine === undefined ? host !== hostname() : machine !== MACHINE) return true;
  if (boot !== undefined && BOOT && boot !== BOOT) return false; // from before this machine's last boot
  const pid = Number(pidText);
  if (!Number.isInteger(pid) || pid <= 0 || !processAlive(pid)) return false;
  if (start === undefined || start === '0') return true;
  const now = startTicks(pid);
  return now === null || now === start;
}
