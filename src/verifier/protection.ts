import { z } from 'zod';
import { AdmissionEvidenceSchema } from './evidence.js';
import type { TracedCall } from './python-path.js';

/**
 * What the verifier of a task executes, loads and reads, recorded while it grades the reference
 * solution (admission): the protected set. A trial's agent that changes any of these files, or
 * adds a file where the verifier looked one up and found none, changed what the verifier would do:
 * tampering. Derived from execution, not from a list of names, so a program, library, hook or
 * configuration file nobody thought to list is protected as soon as the verifier touches it.
 */
export const ProtectionRecordSchema = z.object({
  schemaVersion: z.literal(1),
  task: z.string(),
  /** The task's content checksum: a record is used only for the exact task it was made from. */
  checksum: z.string(),
  recordedAt: z.string(),
  /** Every path the verifier executed, opened, listed or looked up (found or not), in the oracle's final state. */
  accessed: z.array(z.string()),
  /** Paths the reference solution changed, added or removed: the task's outputs, which an agent is meant to change. */
  outputs: z.array(z.string()),
  /** For each library name the dynamic loader resolved through /etc/ld.so.cache, the file it chose. */
  libraries: z.record(z.string(), z.string()),
  /**
   * The TCP/UDP ports the verifier bound (a judge server of its own, say): an agent process holding
   * one when the tests start would take it from them, so that grading is refused (graded 0).
   * Absent in records made before it was kept: no port is checked then.
   */
  boundPorts: z.array(z.number().int().min(1).max(65535)).optional(),
  /**
   * What a pass looked like for the reference solution (see evidence.ts); absent in records made
   * before it was kept, and for multi-step tasks (whose steps are graded, see stepEvidence).
   */
  evidence: AdmissionEvidenceSchema.optional(),
  /**
   * For a multi-step task, what a pass of each step looked like for its reference solution, by
   * step name; a step missing here (records made before it was kept) is graded by the rules that
   * need no record.
   */
  stepEvidence: z.record(z.string(), AdmissionEvidenceSchema).optional(),
  /**
   * Python's module searches while the verifier ran: each run of folders a Python process looked
   * in, in order, and the entries it found in the last (`attr/__init__.py`, `six.py`). A name
   * added to an earlier folder, or a better-ranked form beside it, would win the search now
   * (see python-path.ts). Absent from records made before it was kept.
   */
  pythonSearches: z.array(z.object({ path: z.array(z.string()), found: z.array(z.string()) })).optional(),
});
export type ProtectionRecord = z.infer<typeof ProtectionRecordSchema>;

/**
 * One record of a multi-step task's admission from the records its steps' gradings made, in
 * order: what any step's verifier touched, loaded, bound or searched is protected (the union);
 * the outputs are the latest (the sandbox carries every step's changes on); each step's evidence
 * kept under its name.
 */
export function mergeStepRecords(earlier: ProtectionRecord | null, later: ProtectionRecord): ProtectionRecord {
  if (!earlier) return later;
  const union = <T>(a: T[] | undefined, b: T[] | undefined): T[] => [...new Set([...(a ?? []), ...(b ?? [])])];
  const ports = union(earlier.boundPorts, later.boundPorts).sort((a, b) => a - b);
  const stepEvidence = { ...earlier.stepEvidence, ...later.stepEvidence };
  const searches = [...(earlier.pythonSearches ?? []), ...(later.pythonSearches ?? [])];
  return {
    ...later,
    accessed: union(earlier.accessed, later.accessed).sort(),
    libraries: { ...earlier.libraries, ...later.libraries },
    ...(earlier.boundPorts || later.boundPorts ? { boundPorts: ports } : {}),
    ...(Object.keys(stepEvidence).length ? { stepEvidence } : {}),
    ...(earlier.pythonSearches || later.pythonSearches ? { pythonSearches: searches } : {}),
  };
}

/** Whether a record holds the evidence of every grading of the task (each step's, for a multi-step task). */
export function recordHasEvidence(record: ProtectionRecord, stepNames: string[]): boolean {
  if (stepNames.length === 0) return record.evidence !== undefined;
  return stepNames.every((name) => record.stepEvidence?.[name] !== undefined);
}

/**
 * How a trial's grade was protected (recorded on the trial): `admission` when the task's protected
 * set from its reference solution was known; `rules` when it was not (no check, no oracle trial
 * yet): the fixed rules only (system programs, libraries, Python and pytest hooks, loader and NSS
 * configuration), which are narrower.
 */
export const ProtectionMode = z.enum(['admission', 'rules']);
export type ProtectionMode = z.infer<typeof ProtectionMode>;

/** The mode a grading has with this record (or none). */
export const protectionModeOf = (record: ProtectionRecord | null | undefined): ProtectionMode =>
  record ? 'admission' : 'rules';

/** Paths whose content is the run's own scratch, never machinery: the kernel's, temporary files, the harness's folders. */
const VOLATILE = /^\/(proc|sys|dev|tmp|var\/tmp|run|logs|tests)(\/|$)/;

/** Python's bytecode caches follow their source: a cache is protected when its source is. */
const PYC = /^(.*)\/__pycache__\/([^/]+?)\.[^/.]+(\.opt-\d)?\.pyc$/;

/** The protected paths of a record, ready for lookups. */
export function protectedSet(record: ProtectionRecord): Set<string> {
  const outputs = new Set(record.outputs);
  return new Set(record.accessed.filter((p) => !VOLATILE.test(p) && !outputs.has(p)));
}

export function isVolatile(p: string): boolean {
  return VOLATILE.test(p);
}

/** The source file a bytecode cache stands for, or null when `p` is no cache. */
export function pycSource(p: string): string | null {
  const m = PYC.exec(p);
  return m ? `${m[1]}/${m[2]}.py` : null;
}

/**
 * Paths an strace log (`-f -y`, file and process calls) shows touched: execve'd programs, files
 * opened or looked up (found or not: a file added there later would be found), folders listed.
 * Relative paths are resolved against the call's directory descriptor, as `-y` prints it.
 */
export function tracedPaths(log: string): string[] {
  const out = new Set<string>();
  for (const c of tracedCalls(log)) {
    out.add(c.path);
    if (c.resolved) out.add(c.resolved);
  }
  return [...out].sort();
}

const CALL =
  /^(?:(\d+)\s+)?(execve|execveat|open|openat|openat2|stat|lstat|newfstatat|statx|access|faccessat|faccessat2|readlink|readlinkat|getdents64|getdents|chdir)\((.*)$/;

/** The calls of an strace log, in order, each with its path (and, for a file opened, what `-y` says it resolved to). */
export function* tracedCalls(log: string): Generator<TracedCall & { resolved?: string }> {
  for (const line of log.split('\n')) {
    const m = CALL.exec(line);
    if (!m) continue;
    const [, pid = '', name, rest] = m as unknown as [string, string | undefined, string, string];
    const ok = !/\)\s*=\s*-1\s/.test(line);
    const isDir = /S_IFDIR/.test(line);
    if (name.startsWith('getdents')) {
      const dir = /^\d+<([^>]*)>/.exec(rest);
      if (dir?.[1]) yield { pid, name, path: dir[1], ok, isDir: true };
      continue;
    }
    // The first quoted argument is the path; a leading dirfd (`3</usr/lib>` or AT_FDCWD</app>) anchors a relative one.
    const base = /^(?:AT_FDCWD|\d+)<([^>]*)>,\s*/.exec(rest);
    const str = /"((?:[^"\\]|\\.)*)"/.exec(rest);
    if (!str) continue;
    let p = str[1]!.replace(/\\(.)/g, '$1');
    if (p === '') {
      if (base?.[1]) yield { pid, name, path: base[1], ok, isDir }; // fstatat(fd, "", AT_EMPTY_PATH): the file open as fd
      continue;
    }
    if (!p.startsWith('/')) {
      if (!base?.[1]) continue;
      p = `${base[1].replace(/\/$/, '')}/${p}`;
    }
    // A file that was opened: -y also names what it resolved to (a link's target).
    const resolved = /=\s*\d+<([^>]+)>\s*$/.exec(line)?.[1];
    yield { pid, name, path: normalise(p), ok, isDir, ...(resolved ? { resolved } : {}) };
  }
}

/**
 * The ports (not 0: the kernel's choice) an strace log shows bound successfully over IPv4 or IPv6.
 * A call another traced process interrupted is split over two lines (`<unfinished ...>`, then
 * `<... bind resumed>`), joined here by process id.
 */
export function boundPorts(log: string): number[] {
  const ports = new Set<number>();
  const pending = new Map<string, number>();
  const add = (port: number): void => {
    if (port > 0 && port <= 65535) ports.add(port);
  };
  for (const line of log.split('\n')) {
    const call = /^(\d+\s+)?bind\(.*\bsin6?_port=htons\((\d+)\)(.*)$/.exec(line);
    if (call) {
      const [, pid = '', port, rest] = call as unknown as [string, string | undefined, string, string];
      if (/<unfinished \.\.\.>\s*$/.test(rest)) pending.set(pid.trim(), Number(port));
      else if (/\)\s*=\s*0\s*$/.test(rest)) add(Number(port));
      continue;
    }
    const resumed = /^(\d+\s+)?<\.\.\. bind resumed>.*\)\s*=\s*(-?\d+)/.exec(line);
    if (!resumed) continue;
    const pid = (resumed[1] ?? '').trim();
    if (resumed[2] === '0') add(pending.get(pid) ?? 0);
    pending.delete(pid);
  }
  return [...ports].sort((a, b) => a - b);
}

function normalise(p: string): string {
  const parts: string[] = [];
  for (const part of p.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') parts.pop();
    else parts.push(part);
  }
  return `/${parts.join('/')}`;
}

/**
 * The dynamic loader's cache (/etc/ld.so.cache, glibc's "glibc-ld.so.cache1.1" format, alone or
 * after the old format's entries): library name -> file. Null when it is not a cache this reads.
 */
export function parseLdCache(buf: Buffer): Map<string, string> | null {
  const start = buf.indexOf('glibc-ld.so.cache1.1');
  if (start < 0 || buf.length < start + 48) return null;
  const count = buf.readUInt32LE(start + 20);
  if (start + 48 + count * 24 > buf.length) return null;
  const str = (offset: number): string | null => {
    const at = start + offset;
    const end = buf.indexOf(0, at);
    return at < buf.length && end > at ? buf.toString('utf8', at, end) : null;
  };
  const map = new Map<string, string>();
  for (let i = 0; i < count; i++) {
    const e = start + 48 + i * 24;
    const key = str(buf.readUInt32LE(e + 4));
    const value = str(buf.readUInt32LE(e + 8));
    if (key === null || value === null) return null;
    if (!map.has(key)) map.set(key, value); // the loader takes the first entry for a name
  }
  return map;
}

/** The cache entries for the libraries the verifier opened (by file name), as admission saw them. */
export function librariesUsed(cache: Map<string, string> | null, accessed: string[]): Record<string, string> {
  if (!cache) return {};
  const names = new Set(accessed.map((p) => p.slice(p.lastIndexOf('/') + 1)));
  const used: Record<string, string> = {};
  for (const [name, file] of cache) if (names.has(name)) used[name] = file;
  return used;
}
