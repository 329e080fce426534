import type { FsChange } from '../sandbox/sandbox.js';

/**
 * Python's module searches, as the verifier made them at admission, and the names an agent adds
 * that would win them now. Python lists each folder of its path once and afterwards looks up only
 * the names it saw there, so a name added to an earlier folder is never looked up in the trace:
 * the protected set of paths cannot see it. What the trace does show is the order: for every
 * import, Python stats each folder of its path in turn (to see whether its listing is stale), then
 * looks up the module's own files in the folder that had the name. Those runs of folders, per
 * process, with the modules each run found, are what admission records (`pythonSearches`).
 */

/** One traced call: its pid, name and path (resolved against its directory descriptor), whether it succeeded and found a folder. */
export interface TracedCall {
  pid: string;
  name: string;
  path: string;
  ok: boolean;
  isDir: boolean;
}

/** A search path as Python walked it, and the entries it found in its last folder (`attr/__init__.py`, `six.py`, `ns`). */
export interface PythonSearch {
  path: string[];
  found: string[];
}

const STAT_CALLS = /^(stat|lstat|newfstatat|statx)$/;
/** A process that touched these is a Python interpreter (its standard library, its bytecode). */
const PYTHON_FILE = /\/lib\/python3[0-9.]*\/|\.pyc$/;

interface PidState {
  run: string[];
  /** After a run: the folder whose files are being looked up, and the entry found so far. */
  lookup: { path: string[]; name: string; found: string } | null;
}

/** The searches a trace shows Python processes making, one per distinct folder run, with every module each found. */
export function pythonSearches(calls: Iterable<TracedCall>): PythonSearch[] {
  const states = new Map<string, PidState>();
  const python = new Set<string>();
  const found = new Map<string, Set<string>>();
  const close = (s: PidState): void => {
    if (!s.lookup) return;
    const key = JSON.stringify(s.lookup.path);
    found.set(key, (found.get(key) ?? new Set()).add(s.lookup.found));
    s.lookup = null;
  };
  for (const c of calls) {
    if (c.name.startsWith('execve')) python.delete(c.pid);
    if (PYTHON_FILE.test(c.path)) python.add(c.pid);
    const s = states.get(c.pid) ?? { run: [], lookup: null };
    states.set(c.pid, s);
    if (!lookingUp(s, c)) close(s);
    stepRun(s, c, python.has(c.pid), close);
  }
  for (const s of states.values()) close(s);
  return [...found].map(([key, names]) => ({ path: JSON.parse(key) as string[], found: [...names].sort() }));
}

/** Whether a call looks up the module being looked up (its candidates, its folder): the first file there is what was loaded. */
function lookingUp(s: PidState, c: TracedCall): boolean {
  const l = s.lookup;
  const folder = l?.path[l.path.length - 1];
  if (!l || folder === undefined || !c.path.startsWith(`${folder}/`)) return false;
  const rest = c.path.slice(folder.length + 1);
  if (moduleEntry(rest)?.name !== l.name) return false;
  if (c.ok && !c.isDir && l.found === l.name && moduleEntry(rest)?.rank !== NAMESPACE) l.found = rest;
  return true;
}

/** One call's effect on a process's run of folders: a folder stat'ed extends it, a file in its last folder ends it. */
function stepRun(s: PidState, c: TracedCall, isPython: boolean, close: (s: PidState) => void): void {
  const last = s.run[s.run.length - 1];
  if (STAT_CALLS.test(c.name) && c.ok && c.isDir) {
    // The same folder again (zipimport's check, the finder's, its mtime) is the same step; a folder
    // seen earlier in the run starts a new search: one search visits a folder once.
    if (c.path !== last) s.run = s.run.includes(c.path) ? [c.path] : [...s.run, c.path];
    return;
  }
  if (last !== undefined && c.path.startsWith(`${last}/`)) {
    const rest = c.path.slice(last.length + 1);
    const entry = moduleEntry(rest);
    // An import looks up a module's own files (`x.py`, `x/__init__.py`); other reads are not searches.
    if (isPython && entry && entry.rank !== NAMESPACE) {
      close(s);
      const file = c.ok && !c.isDir && entry.rank !== NAMESPACE;
      s.lookup = { path: s.run, name: entry.name, found: file ? rest : entry.name };
    }
    s.run = [];
    return;
  }
  // Opening or listing a folder of the run (a stale listing refilled) is part of the search.
  if (!s.run.includes(c.path)) s.run = [];
}

/**
 * How an entry of a search folder competes for a module name, by Python's FileFinder: a package
 * (a folder with `__init__`) first, then extension modules, source, bytecode; a folder without
 * `__init__` (a namespace portion) only when nothing else was found anywhere.
 */
export interface ModuleEntry {
  name: string;
  rank: number;
}

const SUFFIX_RANK: [RegExp, number][] = [
  [/^(\.[^./]+)?\.so$/, 1],
  [/^\.py$/, 2],
  [/^\.pyc$/, 3],
];
const NAMESPACE = 4;

/**
 * The module an entry of a search folder provides (`rest` is the path below that folder: `attr`,
 * `attr.py`, `attr.cpython-311-x86_64-linux-gnu.so`, `attr/__init__.py`, `attr/x.py`), or null.
 * Names are compared as the import system on Linux does: exactly.
 */
export function moduleEntry(rest: string): ModuleEntry | null {
  const [first, second, ...more] = rest.split('/');
  if (!first || first === '__pycache__') return null;
  const dot = first.indexOf('.');
  if (second === undefined && dot > 0) {
    const suffix = first.slice(dot);
    const rank = SUFFIX_RANK.find(([re]) => re.test(suffix))?.[1];
    return rank === undefined ? null : { name: first.slice(0, dot), rank };
  }
  if (dot >= 0) return null; // a folder with a dot in its name is no module
  const init = second !== undefined && more.length === 0 && /^__init__\.(py|pyc|([^./]+\.)?so)$/.test(second);
  return { name: first, rank: init ? 0 : NAMESPACE };
}

/** The user site folder: site.py looks it up at every start, and puts it ahead of site-packages when it exists. */
const USER_SITE = /\/\.local\/lib\/python3[0-9.]*\/site-packages$/;
const SITE_FOLDER = /\/(site|dist)-packages$/;

/**
 * The search paths with the user site folders admission looked up and found missing, where
 * site.py would put them: an agent that makes one makes a new folder early on Python's path.
 */
export function withUserSite(searches: PythonSearch[], accessed: string[]): PythonSearch[] {
  const userSites = accessed.filter((p) => USER_SITE.test(p));
  return searches.map(({ path, found }) => {
    const at = path.findIndex((d) => SITE_FOLDER.test(d));
    const add = userSites.filter((u) => !path.includes(u));
    return at < 0 || add.length === 0
      ? { path, found }
      : { path: [...path.slice(0, at), ...add, ...path.slice(at)], found };
  });
}

/** The folders (or archives) the agent's `.pth` files name, each with its file and site folder; lines that run code are a fixed rule. */
function* pthEntries(
  changes: FsChange[],
  pth: (path: string) => string | undefined,
): Generator<{ change: FsChange; site: string; entry: string }> {
  for (const change of changes) {
    const site = change.path.slice(0, change.path.lastIndexOf('/'));
    const body = change.kind !== 'deleted' && change.path.endsWith('.pth') ? pth(change.path) : undefined;
    if (body === undefined) continue;
    for (const raw of body.split('\n')) {
      const line = raw.replace(/\s+$/, '');
      if (line === '' || line.startsWith('#') || /^import[\s;]/.test(line)) continue;
      yield { change, site, entry: resolveIn(site, line) };
    }
  }
}

/**
 * The search paths with the folders the agent's `.pth` files add: site.py appends each folder a
 * line names (relative to the site folder) when it reads that folder, so the new folder comes
 * right after it, ahead of the site folders read later.
 */
export function withPthFolders(
  searches: PythonSearch[],
  changes: FsChange[],
  pth: (path: string) => string | undefined,
): PythonSearch[] {
  const added = new Map<string, string[]>();
  for (const { site, entry } of pthEntries(changes, pth)) added.set(site, [...(added.get(site) ?? []), entry]);
  if (added.size === 0) return searches;
  return searches.map(({ path, found }) => ({
    // Inserted after a folder, never after the last: that one is where the search found its modules.
    path: path.flatMap((d, i) =>
      i === path.length - 1 ? [d] : [d, ...(added.get(d) ?? []).filter((x) => !path.includes(x))],
    ),
    found,
  }));
}

/**
 * `.pth` files that put a file the agent added on Python's path: an archive (zip, egg), whose
 * modules the scan cannot list, so it fails closed on them.
 */
export function pthArchives(changes: FsChange[], pth: (path: string) => string | undefined): Shadowing[] {
  const made = new Set(changes.filter((c) => c.kind !== 'deleted').map((c) => c.path));
  const parents = new Set<string>();
  for (const p of made)
    for (let i = p.lastIndexOf('/'); i > 0; i = p.lastIndexOf('/', i - 1)) parents.add(p.slice(0, i));
  const found: Shadowing[] = [];
  for (const { change, entry } of pthEntries(changes, pth))
    if (made.has(entry) && !parents.has(entry))
      found.push({ change, why: `puts ${entry}, a file the agent added (an archive of modules), on Python's path` });
  return found;
}

function resolveIn(base: string, p: string): string {
  const parts: string[] = [];
  for (const part of (p.startsWith('/') ? p : `${base}/${p}`).split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') parts.pop();
    else parts.push(part);
  }
  return `/${parts.join('/')}`;
}

/** Python's own folders, in the order site.py puts them on the path (the user site is added by `withUserSite`). */
const FIXED_ORDER: RegExp[] = [
  /^\/(usr\/)?(local\/)?lib\/python3\.[0-9]+$/,
  /^\/(usr\/)?(local\/)?lib\/python3\.[0-9]+\/lib-dynload$/,
  /^\/usr\/local\/lib\/python3\.[0-9]+\/(site|dist)-packages$/,
  /^\/(?!usr\/local\/)(.+\/)?lib\/python3[0-9.]*\/(site|dist)-packages$/,
];

/**
 * For a record made before searches were kept: the searches Python's fixed order implies, from
 * the folders of it admission touched and the module entries it looked up in each. Coarser than
 * a trace (no folder the task put first, no package's own folder), never narrower than nothing.
 */
export function fixedSearches(accessed: string[]): PythonSearch[] {
  const rank = (p: string): number => FIXED_ORDER.findIndex((re) => re.test(p));
  const folders = accessed.filter((p) => rank(p) >= 0).sort((a, b) => rank(a) - rank(b));
  return folders.map((folder) => ({
    path: [...folders.filter((f) => rank(f) < rank(folder)), folder],
    found: accessed
      .filter(
        (p) => p.startsWith(`${folder}/`) && (moduleEntry(p.slice(folder.length + 1))?.rank ?? NAMESPACE) < NAMESPACE,
      )
      .map((p) => p.slice(folder.length + 1))
      .filter((rest) => rest.split('/').length <= 2),
  }));
}

export interface Shadowing {
  change: FsChange;
  why: string;
}

/** What an entry in a folder would take from the verifier: a module it found there (at a rank) or later. */
interface Claim {
  name: string;
  /** The entry must rank before this to win (Infinity: any entry does). */
  rank: number;
  from: string;
}

/** Per folder and module name (`folder\0name`), what an entry there would take from the verifier: the easiest claim to beat. */
function claims(searches: PythonSearch[], outputs: Set<string>): Map<string, Claim> {
  const byName = new Map<string, Claim>();
  const add = (folder: string, claim: Claim): void => {
    const key = `${folder}\0${claim.name}`;
    if ((byName.get(key)?.rank ?? -1) < claim.rank) byName.set(key, claim);
  };
  for (const { path, found } of searches) {
    const from = path[path.length - 1];
    if (from === undefined) continue;
    for (const rest of found) {
      const entry = moduleEntry(rest);
      // A module found among the task's outputs is the agent's to write, wherever it puts it.
      if (!entry || outputs.has(`${from}/${rest}`)) continue;
      add(from, { name: entry.name, rank: entry.rank, from });
      // Earlier on the path any module form wins; a bare folder (namespace portion) only over another one.
      const rank = entry.rank === NAMESPACE ? Infinity : NAMESPACE;
      for (const earlier of path.slice(0, -1)) add(earlier, { name: entry.name, rank, from });
    }
  }
  return byName;
}

/**
 * The agent's added or changed entries that would now win a module search the verifier made: a
 * name it loaded from a later folder of that search, added to an earlier one (a folder made new,
 * like the user site, included), or a better-ranked form of it added beside it. The task's
 * outputs never count.
 */
export function pythonShadowing(
  changes: FsChange[],
  record: { accessed: string[]; outputs: string[]; pythonSearches?: PythonSearch[] | undefined },
  pth: (path: string) => string | undefined = () => undefined,
): Shadowing[] {
  const traced = record.pythonSearches ?? fixedSearches(record.accessed);
  const searches = withPthFolders(withUserSite(traced, record.accessed), changes, pth);
  const outputs = new Set(record.outputs);
  const byName = claims(searches, outputs);
  const folders = new Set(searches.flatMap((s) => s.path));
  const found: Shadowing[] = [];
  for (const c of changes) {
    if (c.kind === 'deleted' || outputs.has(c.path)) continue;
    for (let i = c.path.lastIndexOf('/'); i > 0; i = c.path.lastIndexOf('/', i - 1)) {
      const folder = c.path.slice(0, i);
      const entry = folders.has(folder) ? moduleEntry(c.path.slice(i + 1)) : null;
      const beaten = entry ? byName.get(`${folder}\0${entry.name}`) : undefined;
      if (!entry || !beaten || entry.rank >= beaten.rank) continue;
      found.push({ change: c, why: `shadows the module ${beaten.name} the verifier loaded from ${beaten.from}` });
      break;
    }
  }
  return found;
}
