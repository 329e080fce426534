import path from 'node:path';
import { parseDockerfile, substitute, type Instruction } from '../task/dockerfile.js';
import type { EnvironmentPart } from './schema.js';

/** Every instruction keyword the Dockerfile reference defines. */
const KEYWORDS = new Set([
  'FROM',
  'RUN',
  'CMD',
  'LABEL',
  'MAINTAINER',
  'EXPOSE',
  'ENV',
  'ADD',
  'COPY',
  'ENTRYPOINT',
  'VOLUME',
  'USER',
  'WORKDIR',
  'ARG',
  'ONBUILD',
  'STOPSIGNAL',
  'HEALTHCHECK',
  'SHELL',
]);

/**
 * The cheap check before any build: problems that make a generated environment unbuildable, found
 * by reading it (unknown instructions, no FROM first, a COPY of a file the model did not write, a
 * path escaping the context). Pure; an empty list means "worth building".
 */
export function lintEnvironment(env: EnvironmentPart): string[] {
  const problems: string[] = [];
  const text = env.dockerfile;
  if (text.includes('\0')) return ['Dockerfile: contains a NUL byte'];
  // A line that starts a word but is no instruction (a typo like FRM) cannot parse.
  const joined = text.replace(/\\\r?\n/g, ' ');
  const instructions = parseDockerfile(text);
  const lines = joined.split(/\r?\n/);
  let inHeredoc: string | null = null;
  lines.forEach((raw, i) => {
    const line = raw.trim();
    if (inHeredoc !== null) {
      if (line === inHeredoc) inHeredoc = null;
      return;
    }
    if (line === '' || line.startsWith('#')) return;
    const word = /^([A-Za-z]+)(\s|$)/.exec(line)?.[1]?.toUpperCase();
    if (!word || !KEYWORDS.has(word))
      problems.push(`Dockerfile line ${i + 1}: "${line.slice(0, 60)}" is not a Dockerfile instruction`);
    const heredoc = /<<-?(["']?)([A-Za-z_][A-Za-z0-9_]*)\1/.exec(line);
    if (heredoc && (word === 'RUN' || word === 'COPY' || word === 'ADD')) inHeredoc = heredoc[2]!;
  });
  const first = instructions.find((i) => i.keyword !== 'ARG');
  if (!first) problems.push('Dockerfile: no instruction at all');
  else if (first.keyword !== 'FROM')
    problems.push(`Dockerfile line ${first.line}: the first instruction (after ARGs) is ${first.keyword}, not FROM`);
  for (const f of env.files) {
    if (path.posix.normalize(f.path) === 'Dockerfile')
      problems.push('files: names Dockerfile, which is the dockerfile field');
  }
  problems.push(
    ...copyProblems(
      instructions,
      env.files.map((f) => f.path),
    ),
  );
  return problems;
}

/** The flags COPY and ADD take (Dockerfile reference); any other is refused by Docker as unknown. */
const COPY_FLAGS: Readonly<Record<string, ReadonlySet<string>>> = {
  COPY: new Set(['from', 'chown', 'chmod', 'link', 'parents', 'exclude']),
  ADD: new Set(['chown', 'chmod', 'link', 'keep-git-dir', 'checksum', 'exclude']),
};
/** Flags that take no value (`--link`, or `--link=true`). */
const BOOLEAN_FLAGS = new Set(['link', 'parents', 'keep-git-dir']);

/** One COPY or ADD read the way Docker reads it: its flags, sources and destination. */
interface CopyArgs {
  flags: Map<string, string | null>;
  sources: string[];
  dest: string;
}

/** Splits a COPY/ADD's arguments: leading `--flag[=value]` words, then JSON (exec) or shell form. */
function readCopyArgs(args: string): CopyArgs | string {
  const flags = new Map<string, string | null>();
  let rest = args.trim();
  for (
    let m = /^--([A-Za-z-]+)(?:=(\S*))?(?:\s+|$)/.exec(rest);
    m;
    m = /^--([A-Za-z-]+)(?:=(\S*))?(?:\s+|$)/.exec(rest)
  ) {
    flags.set(m[1]!, m[2] ?? null);
    rest = rest.slice(m[0].length);
  }
  // Docker reads the JSON form when the rest parses as a JSON array of strings, else the shell form.
  const json = jsonWords(rest);
  const words =
    json ??
    rest
      .split(/\s+/)
      .filter((w) => w !== '')
      .map((w) => w.replace(/^(["'])(.*)\1$/, '$2'));
  if (words.length < 2) return 'needs a source and a destination';
  return { flags, sources: words.slice(0, -1), dest: words.at(-1)! };
}

function jsonWords(text: string): string[] | null {
  if (!text.startsWith('[')) return null;
  try {
    const parsed: unknown = JSON.parse(text);
    return Array.isArray(parsed) && parsed.every((w) => typeof w === 'string') ? parsed : null;
  } catch {
    // Not JSON: the shell form, which the caller reads as words.
    return null;
  }
}

/** Why Docker refuses a flag, or null: unknown flags, flags missing their value, a bad --chmod. */
function flagProblem(keyword: string, name: string, value: string | null): string | null {
  if (!COPY_FLAGS[keyword]!.has(name)) return `--${name} is not a ${keyword} flag (Docker refuses it as unknown)`;
  if (BOOLEAN_FLAGS.has(name))
    return value === null || /^(true|false)$/.test(value) ? null : `--${name}=${value} is not true or false`;
  if (value === null || value === '') return `--${name} needs a value (--${name}=...)`;
  if (name === 'chmod' && !/^[0-7]{3,4}$/.test(value) && !/^([ugoa]*[-+=][rwxXst]*,?)+$/.test(value))
    return `--chmod=${value} is neither an octal mode (755) nor a symbolic one (u+x)`;
  if (name === 'chown' && !/^[A-Za-z0-9_.$-]+(:[A-Za-z0-9_.$-]+)?$/.test(value))
    return `--chown=${value} is not USER, USER:GROUP, UID or UID:GID`;
  return null;
}

/**
 * A Go `filepath.Match` pattern (what Docker matches COPY sources with) as a regular expression over
 * a whole context path: `*` and `?` stay within one path segment, `[...]` is a class (`^` negates),
 * `\` escapes.
 */
function globRegExp(pattern: string): RegExp | null {
  let re = '';
  for (let i = 0; i < pattern.length; i++) {
    const ch = pattern[i]!;
    if (ch === '*') re += '[^/]*';
    else if (ch === '?') re += '[^/]';
    else if (ch === '\\' && i + 1 < pattern.length) re += `\\${pattern[++i]}`;
    else if (ch === '[') {
      const end = pattern.indexOf(']', i + 2);
      if (end < 0) return null;
      else {
        re += `[${pattern.slice(i + 1, end)}]`;
        i = end;
      }
    } else re += ch.replace(/[.+^${}()|/]/g, '\\$&');
  }
  return new RegExp(`^${re}$`);
}

/** The build context's entries: every file written and every folder above one. */
function contextEntries(files: string[]): { files: Set<string>; dirs: Set<string> } {
  const out = { files: new Set<string>(), dirs: new Set<string>() };
  for (const f of files) {
    const norm = path.posix.normalize(f).replace(/^\.\//, '').replace(/\/$/, '');
    out.files.add(norm);
    for (let d = path.posix.dirname(norm); d !== '.'; d = path.posix.dirname(d)) out.dirs.add(d);
  }
  return out;
}

/**
 * Every COPY and ADD checked as Docker would run it against a context holding only the files
 * written: flags Docker knows (`--chown`, `--chmod`, `--link` ...; `--from` copies from elsewhere),
 * sources relative to the context (`./x`, `/x` and `x` alike; `x/` a folder; Go globs that must
 * match something), several sources only into a folder (`/dest/`). Each problem says why.
 */
function copyProblems(instructions: Instruction[], written: string[]): string[] {
  const problems: string[] = [];
  // The Dockerfile itself is in the build context beside the files written.
  const entries = contextEntries([...written, 'Dockerfile']);
  const vars = new Map<string, string>();
  /** Stages begun so far (the current one is the last), and the names of those before it. */
  let stages = 0;
  const named = new Set<string>();
  let current: string | null = null;
  for (const ins of instructions) {
    if (ins.keyword === 'ARG' || ins.keyword === 'ENV') readVariables(ins, vars);
    if (ins.keyword === 'FROM') {
      vars.clear();
      if (current) named.add(current);
      current = /\sAS\s+(\S+)\s*$/i.exec(ins.args)?.[1]?.toLowerCase() ?? null;
      stages++;
    }
    if ((ins.keyword !== 'COPY' && ins.keyword !== 'ADD') || ins.heredocs.length) continue;
    const at = `Dockerfile line ${ins.line}: ${ins.keyword}`;
    const read = readCopyArgs(ins.args);
    if (typeof read === 'string') {
      problems.push(`${at} ${read}`);
      continue;
    }
    for (const [name, value] of read.flags) {
      const why = flagProblem(ins.keyword, name, value);
      if (why) problems.push(`${at}: ${why}`);
    }
    if (read.sources.length > 1 && !read.dest.endsWith('/'))
      problems.push(
        `${at}: ${read.sources.length} sources go into ${read.dest}, which does not end with / (Docker copies several sources only into a folder written as /dest/)`,
      );
    if (read.flags.has('from')) {
      // The sources are in that stage or image, not in the context: not checked against the files.
      const from = read.flags.get('from');
      const why = from ? fromProblem(from, stages, named, current) : null;
      if (why) problems.push(`${at}: ${why}`);
      continue;
    }
    for (const src of read.sources) {
      const why = sourceProblem(src, entries, vars, ins.keyword);
      if (why) problems.push(`${at} source ${src} ${why}`);
    }
  }
  return problems;
}

/**
 * Why Docker would refuse `--from=VALUE` (null: it would not): a stage index must name a stage
 * before this one, and a stage may not copy from itself. Any other name that is no earlier stage's
 * is an image, pulled at build time as FROM's are.
 */
function fromProblem(value: string, stages: number, named: ReadonlySet<string>, current: string | null): string | null {
  if (/^\d+$/.test(value)) {
    const index = Number(value);
    if (index < stages - 1) return null;
    const before =
      stages <= 1
        ? 'no stage comes before this one'
        : stages === 2
          ? 'only stage 0 comes before this one'
          : `only stages 0-${stages - 2} come before this one`;
    return index === stages - 1
      ? `--from=${value} is this stage itself (Docker: refers to current build stage); ${before}`
      : `--from=${value} names stage ${value}, but ${before} (Docker: index out of bounds)`;
  }
  const name = value.toLowerCase();
  if (name === current && !named.has(name))
    return `--from=${value} is this stage's own name: Docker cannot copy from the stage being built (it looks for an image of that name); copy from an earlier stage`;
  return null;
}

/** ARG name[=default] and ENV name=value / ENV name value, as later COPY sources may use them. */
function readVariables(ins: Instruction, vars: Map<string, string>): void {
  const legacy = /^([A-Za-z_][A-Za-z0-9_]*)\s+([^=]*)$/.exec(ins.args.trim());
  if (ins.keyword === 'ENV' && legacy) {
    vars.set(legacy[1]!, legacy[2]!.trim());
    return;
  }
  for (const m of ins.args.matchAll(/([A-Za-z_][A-Za-z0-9_]*)=("[^"]*"|'[^']*'|\S*)/g))
    vars.set(m[1]!, m[2]!.replace(/^(["'])(.*)\1$/, '$2'));
}

/** Why Docker would not find this source among the files written (null: it would). */
function sourceProblem(
  raw: string,
  entries: { files: Set<string>; dirs: Set<string> },
  vars: Map<string, string>,
  keyword: string,
): string | null {
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(raw) || /^git@/.test(raw))
    return keyword === 'COPY'
      ? 'is a URL, which Docker refuses for COPY; write the file instead'
      : 'is a URL: ADD would fetch it from a URL at build time, which a task must not need; write the file instead';
  const names = [...raw.matchAll(/\$\{?([A-Za-z_][A-Za-z0-9_]*)/g)].map((m) => m[1]!);
  // A variable the Dockerfile does not define comes from --build-arg: nothing to check it against.
  if (names.some((n) => !vars.has(n))) return null;
  const src = substitute(raw, vars);
  const wantsDir = /\/\.?$/.test(src);
  const norm = path.posix.normalize(src.replace(/^\/+/, '')).replace(/\/$/, '');
  if (norm === '..' || norm.startsWith('../'))
    return 'is outside the build context (Docker refuses a source above it; only the files written are in it)';
  if (norm === '.' || norm === '') return null;
  const listing = (): string => {
    const all = [...entries.files].sort();
    return ` (the build context holds: ${all.slice(0, 12).join(', ')}${all.length > 12 ? ', ...' : ''})`;
  };
  if (/(^|[^\\])[*?[]/.test(norm)) {
    const re = globRegExp(norm);
    if (!re) return 'has a [ that no ] closes: not a valid pattern (Docker: syntax error in pattern)';
    const pool = wantsDir ? [...entries.dirs] : [...entries.files, ...entries.dirs];
    if (pool.some((p) => re.test(p))) return null;
    return `matches none of the files written, and Docker fails a COPY whose pattern matches nothing${listing()}`;
  }
  if (entries.dirs.has(norm)) return null;
  if (entries.files.has(norm))
    return wantsDir ? `ends with / but ${norm} is a file written, not a folder (Docker: not a directory)` : null;
  return `is not among the files written, so Docker's build would fail ("${norm}": not found)${listing()}`;
}
