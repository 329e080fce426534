import path from 'node:path';

/**
 * The pure parts of check's probes: splitting a solution into top-level commands, deciding which
 * changed files are a solution's outputs, comparing final states, spotting a leak in an
 * instruction, and near-duplicate instructions. No I/O.
 */

/**
 * solve.sh as top-level commands, in order: comments and blank lines dropped; a command's
 * continuation lines, heredoc body and compound block (if/for/while/case/{ }) kept with it.
 */
export function splitCommands(script: string): string[] {
  const lines = script.split(/\r?\n/);
  const out: string[] = [];
  let current: string[] = [];
  let depth = 0;
  let heredoc: string | null = null;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (heredoc !== null) {
      current.push(line);
      if (line.replace(/^\t+/, '') === heredoc) heredoc = null;
    } else {
      const trimmed = line.trim();
      if (current.length === 0 && (trimmed === '' || trimmed.startsWith('#'))) continue;
      current.push(line);
      const h = /<<-?\s*['"]?([A-Za-z_][A-Za-z0-9_]*)['"]?/.exec(trimmed);
      if (h) heredoc = h[1]!;
      const words = trimmed.replace(/(["'])(?:(?!\1).)*\1/g, '""').split(/[\s;]+/);
      for (const w of words) {
        if (/^(if|for|while|until|case)$/.test(w)) depth += 1;
        else if (/^(fi|done|esac)$/.test(w)) depth -= 1;
      }
      if (/\{\s*$/.test(trimmed)) depth += 1;
      if (/^\}/.test(trimmed)) depth -= 1;
    }
    const continued = /\\\s*$/.test(line) || /(&&|\|\||\|)\s*$/.test(line.trim());
    if (heredoc === null && depth <= 0 && !continued && current.length) {
      out.push(current.join('\n'));
      current = [];
      depth = 0;
    }
  }
  if (current.length) out.push(current.join('\n'));
  return out;
}

/** Paths a solution's run leaves that are not its outputs: caches, logs, the harness's own files. */
const NOT_OUTPUT =
  /^\/(proc|sys|dev|run|tmp|var\/tmp|logs|solution|tests|var\/cache|var\/log|var\/lib\/(apt|dpkg)|root\/\.cache|root\/\.npm|root\/\.local\/share)(\/|$)|\/__pycache__\/|\.pyc$|\/\.pytest_cache\/|\/\.git\/|\.termgrade-exec/;

export function isOutputPath(p: string): boolean {
  return !NOT_OUTPUT.test(p);
}

/**
 * Whether a partial run's final state keeps everything the full solution's final state has: every
 * output file of the full run present with the same content. True means the steps left out only
 * cleaned up or were redundant, so passing without them is no sign of weak tests.
 */
export function keepsFinalState(
  full: Map<string, string>,
  partial: Map<string, string>,
): { same: boolean; differing: string[] } {
  const differing = [...full].filter(([p, h]) => partial.get(p) !== h).map(([p]) => p);
  return { same: differing.length === 0, differing };
}

const normalise = (s: string): string => s.replace(/\s+/g, ' ').trim();

/**
 * Whether the instruction gives the answer away: a substantial line of the reference solution
 * (at least 40 characters, not a comment) or the content of an expected output (at least 64
 * characters) appears in it verbatim (whitespace folded). Short outputs ("hello") are often
 * rightly named by an instruction and are not counted.
 */
export function instructionLeak(
  instruction: string,
  solveScript: string,
  outputs: Array<{ path: string; text: string }>,
): string | null {
  const text = normalise(instruction);
  for (const line of solveScript.split('\n')) {
    const l = normalise(line);
    if (l.length >= 40 && !l.startsWith('#') && text.includes(l))
      return `the instruction contains the solution's line "${l.slice(0, 80)}"`;
  }
  for (const o of outputs) {
    const t = normalise(o.text);
    if (t.length >= 64 && text.includes(t)) return `the instruction contains the expected content of ${o.path}`;
  }
  return null;
}

const PATH_CHAR = /[A-Za-z0-9._\-/~]/;

/** Whether `text` holds `p` as a whole path (not as the start of a longer one, other than by a trailing slash). */
function holdsPath(text: string, p: string): boolean {
  for (let i = text.indexOf(p); i >= 0; i = text.indexOf(p, i + 1)) {
    const before = i > 0 ? text[i - 1]! : ' ';
    let after = text[i + p.length] ?? ' ';
    if (after === '/') after = text[i + p.length + 1] ?? ' ';
    if (!PATH_CHAR.test(before) && !PATH_CHAR.test(after)) return true;
  }
  return false;
}

/**
 * Whether an image file is an input the task itself names: the instruction or the reference
 * solution gives its path (absolute, or relative to the working folder when it lies there) or its
 * own folder's (not the working folder or /). A move, copy or archive task's source is such an
 * input: that its bytes equal an output's is the task, not a leak.
 */
export function namedInput(file: string, texts: string[], workdir: string | null): boolean {
  const wd = workdir ? workdir.replace(/\/+$/, '') : null;
  const forms = [file];
  if (wd && file.startsWith(`${wd}/`)) forms.push(file.slice(wd.length + 1), `./${file.slice(wd.length + 1)}`);
  const parent = path.posix.dirname(file);
  if (parent !== '/' && parent !== wd) {
    forms.push(parent);
    if (wd && parent.startsWith(`${wd}/`)) forms.push(parent.slice(wd.length + 1));
  }
  return texts.some((t) => forms.some((f) => holdsPath(t, f)));
}

/**
 * Where each output could be taken from: for every output path, the image files (other than the
 * output itself as the image had it) holding exactly the bytes the oracle left there, in the order
 * found. `outputs` maps output path to content hash; `image` is (path, hash) pairs of the image.
 */
export function leakPlacements(outputs: Map<string, string>, image: Array<[string, string]>): Map<string, string[]> {
  const byHash = new Map<string, string[]>();
  for (const [p, h] of outputs) byHash.set(h, [...(byHash.get(h) ?? []), p]);
  const out = new Map<string, string[]>();
  for (const [file, h] of image) {
    for (const p of byHash.get(h) ?? []) {
      if (p === file) continue;
      out.set(p, [...(out.get(p) ?? []), file]);
    }
  }
  return out;
}

/**
 * The files a hack probe plays on: outputs of the oracle's final state (`outputs`) that the
 * verifier also touched when it graded the reference solution (admission's record: `accessed`,
 * and the solution's changes, `changed`): agent-writable code the tests run or import. Without a
 * record (a backend that cannot trace), every output is a candidate; which of them is code is
 * decided by its content (see targetKind), and a control grading keeps a file the tests do not
 * judge from counting. Python files first.
 */
export function hackCandidates(outputs: string[], record: { accessed: string[]; outputs: string[] } | null): string[] {
  const accessed = record ? new Set(record.accessed) : null;
  const changed = record ? new Set(record.outputs) : null;
  return outputs
    .filter((p) => !accessed || (accessed.has(p) && changed!.has(p)))
    .sort((a, b) => Number(b.endsWith('.py')) - Number(a.endsWith('.py')) || (a < b ? -1 : a > b ? 1 : 0));
}

/**
 * The TCP ports the tests name (what a squatter would hold): numbers 1024-65535 written shortly
 * after the word "port" (any case; not "report", "import") or after a loopback address and a colon
 * or comma. At most 8, in order. A number that is no port costs one grading, never a verdict.
 */
export function testPorts(texts: string[]): number[] {
  const found = new Set<number>();
  const patterns = [
    /(?<![a-z])port(?![a-z])\D{0,24}?(\d{4,5})\b/gi,
    /(?:localhost|127\.0\.0\.1|0\.0\.0\.0)['"]?\s*[:,]\s*(\d{4,5})\b/g,
  ];
  for (const text of texts)
    for (const re of patterns)
      for (const m of text.matchAll(re)) {
        const n = Number(m[1]);
        if (n >= 1024 && n <= 65535) found.add(n);
      }
  return [...found].slice(0, 8);
}
