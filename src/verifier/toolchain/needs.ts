/**
 * What a verifier's test.sh fetches from the network while it grades, read from its text alone
 * (no I/O): the commands that install packages or download tools (apt-get / apt install, curl and
 * wget of a URL, pip install, uv's installer, uv / uvx resolving packages), and the pytest run
 * through uvx with its pinned `-w` requirements (Terminal-Bench 2's standard template). A task
 * whose verifier needs the network cannot be graded offline as written; this says which lines.
 */

export type NetworkCommandKind = 'apt' | 'download' | 'pip' | 'uv';

export interface NetworkCommand {
  kind: NetworkCommandKind;
  /** 1-based line of test.sh where the command starts. */
  line: number;
  /** The command as written (continuations joined, whitespace folded, at most 200 characters). */
  command: string;
}

/** A `pip install` (pip, pip3, `python3 -m pip`, `uv pip`) and the requirements it names. */
export interface PipInstall {
  line: number;
  /** How it was asked: `pip` / `pip3`, `uv pip`, or `python -m pip` (which the toolchain does not serve). */
  via: 'pip' | 'uv' | 'python';
  /** Requirements as written (`httpx==0.28.1`). */
  requirements: string[];
  /** Options the offline toolchain has no equivalent for (`-r FILE`, `--index-url URL`). */
  unknownFlags: string[];
  command: string;
}

/** A `uvx ... pytest ...` invocation (or `uv tool run` / `uv run` of pytest): the Python it asks for, what it installs. */
export interface UvxPytest {
  line: number;
  python: string | null;
  /** `-w` / `--with` requirements, as written (`pytest==8.4.1`). */
  with: string[];
  /** uvx's own flags it does not know (an invocation the toolchain may not mean the same by). */
  unknownFlags: string[];
}

export interface VerifierNeeds {
  commands: NetworkCommand[];
  /** Packages `apt-get install` asks for, besides curl and ca-certificates (the uv installer's needs). */
  aptPackages: string[];
  /**
   * Fetching commands whose failure ends test.sh before it grades: `set -e` (errexit) in force
   * there, or the line itself exits on failure (`|| exit`).
   */
  fatal: NetworkCommand[];
  /** Every `uvx ... pytest` run in the script (`uv run ... pytest` too), in order. */
  uvxPytest: UvxPytest[];
  /** uv / uvx uses other than a pytest run and `uv pip install` (uv venv, uv sync, uvx of another tool). */
  otherUv: NetworkCommand[];
  /** Every pip / uv pip install in the script, in order. */
  pipInstalls: PipInstall[];
}

/** Logical lines: backslash continuations joined, comments dropped, with their first line's number. */
export function logicalLines(script: string): Array<{ line: number; text: string }> {
  const raw = script.split(/\r?\n/);
  const out: Array<{ line: number; text: string }> = [];
  for (let i = 0; i < raw.length; i++) {
    const start = i + 1;
    let text = raw[i]!;
    while (/\\\s*$/.test(text) && i + 1 < raw.length) text = text.replace(/\\\s*$/, ' ') + raw[++i]!;
    const body = stripComment(text).trim();
    if (body) out.push({ line: start, text: body });
  }
  return out;
}

/** A line less its trailing `# comment` (a `#` outside quotes, at the start of a word). */
function stripComment(text: string): string {
  let quote: string | null = null;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quote) {
      if (c === quote) quote = null;
      else if (c === '\\' && quote === '"') i++;
    } else if (c === "'" || c === '"') quote = c;
    else if (c === '#' && (i === 0 || /\s/.test(text[i - 1]!))) return text.slice(0, i);
  }
  return text;
}

/** Shell words of a simple command (quotes removed; no expansion). */
function words(text: string): string[] {
  const out: string[] = [];
  let cur = '';
  let has = false;
  let quote: string | null = null;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quote) {
      if (c === quote) quote = null;
      else cur += c;
    } else if (c === "'" || c === '"') {
      quote = c;
      has = true;
    } else if (/\s/.test(c)) {
      if (has || cur) out.push(cur);
      cur = '';
      has = false;
    } else {
      cur += c;
      has = true;
    }
  }
  if (has || cur) out.push(cur);
  return out;
}

/** A line split into simple commands at `&&`, `||`, `;`, `|` and `(`/`)` (quotes respected). */
function simpleCommands(text: string): string[] {
  const out: string[] = [];
  let cur = '';
  let quote: string | null = null;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quote) {
      if (c === quote) quote = null;
      cur += c;
    } else if (c === "'" || c === '"') {
      quote = c;
      cur += c;
    } else if (c === ';' || c === '|' || c === '&' || c === '(' || c === ')') {
      if (cur.trim()) out.push(cur.trim());
      cur = '';
    } else cur += c;
  }
  if (cur.trim()) out.push(cur.trim());
  return out;
}

/** The command word after leading assignments, `sudo`, `env`, `command`, `exec`, `then`/`do`/`else`, `!`. */
function commandWords(cmd: string): string[] {
  const w = words(cmd);
  let i = 0;
  while (
    i < w.length &&
    (/^[A-Za-z_][A-Za-z0-9_]*=/.test(w[i]!) ||
      /^(sudo|env|command|exec|then|do|else|elif|if|while|until|!|time|nohup)$/.test(w[i]!))
  )
    i++;
  return w.slice(i);
}

const fold = (s: string): string => {
  const t = s.replace(/\s+/g, ' ').trim();
  return t.length > 200 ? `${t.slice(0, 197)}...` : t;
};

const base = (w: string): string => w.replace(/^.*\//, '');

/** uvx options that take a value. */
const UVX_VALUE_FLAGS = new Set([
  '-p',
  '--python',
  '-w',
  '--with',
  '--from',
  '--with-requirements',
  '--index-url',
  '--extra-index-url',
  '--index',
  '--default-index',
  '-i',
  '--cache-dir',
  '--directory',
  '--project',
  '--config-file',
  '--with-editable',
  '--constraints',
  '-c',
  '--overrides',
  '--python-preference',
  '--color',
]);
/** uvx flags the offline toolchain means the same by (they change nothing it does). */
const UVX_HARMLESS = new Set([
  '-q',
  '--quiet',
  '-v',
  '--verbose',
  '--offline',
  '--no-progress',
  '--isolated',
  '--native-tls',
  '--no-cache',
  '-n',
  '--python-preference',
  '--color',
  '--cache-dir',
  // uv run's: no project is read (uv.sh refuses a `uv run` inside a project without it).
  '--no-project',
]);

function parseUvx(args: string[], line: number): UvxPytest | null {
  let python: string | null = null;
  const withReqs: string[] = [];
  const unknownFlags: string[] = [];
  let i = 0;
  for (; i < args.length; i++) {
    const a = args[i]!;
    if (!a.startsWith('-')) break;
    const eq = a.indexOf('=');
    const flag = a.startsWith('--') && eq > 0 ? a.slice(0, eq) : a;
    const inline = a.startsWith('--') && eq > 0 ? a.slice(eq + 1) : null;
    const value = (): string => inline ?? args[++i] ?? '';
    if (flag === '-p' || flag === '--python') python = value();
    else if (flag === '-w' || flag === '--with')
      withReqs.push(
        ...value()
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean),
      );
    else if (UVX_VALUE_FLAGS.has(flag)) {
      const v = value();
      if (!UVX_HARMLESS.has(flag)) unknownFlags.push(`${flag} ${v}`);
    } else if (!UVX_HARMLESS.has(flag)) unknownFlags.push(a);
  }
  const tool = args[i];
  const viaPython =
    tool !== undefined && /^python(3(\.\d+)?)?$/.test(tool) && args[i + 1] === '-m' && args[i + 2] === 'pytest';
  if (tool === undefined || (!viaPython && !/^pytest([<>=!~].*)?$/.test(tool))) return null;
  return { line, python, with: withReqs, unknownFlags };
}

/** pip install options that take a value, and those of them that change nothing offline. */
const PIP_VALUE_FLAGS = new Set([
  '-r',
  '--requirement',
  '-e',
  '--editable',
  '-c',
  '--constraint',
  '-i',
  '--index-url',
  '--extra-index-url',
  '-f',
  '--find-links',
  '-t',
  '--target',
  '--prefix',
  '--root',
  '--src',
  '--python',
  '-p',
  '--root-user-action',
  '--progress-bar',
  '--upgrade-strategy',
  '--only-binary',
  '--no-binary',
  '--timeout',
  '--retries',
  '--cache-dir',
]);
/** pip install options the offline toolchain means the same by (kept in step with uvx.py's PIP_HARMLESS). */
const PIP_HARMLESS = new Set([
  '-q',
  '--quiet',
  '-v',
  '--verbose',
  '-U',
  '--upgrade',
  '--no-cache-dir',
  '--no-cache',
  '--break-system-packages',
  '--user',
  '--system',
  '--no-input',
  '--disable-pip-version-check',
  '--force-reinstall',
  '--ignore-installed',
  '-I',
  '--no-deps',
  '--no-warn-script-location',
  '--pre',
  '--compile',
  '--no-compile',
  '--prefer-binary',
  '--python',
  '-p',
  '--root-user-action',
  '--progress-bar',
  '--upgrade-strategy',
  '--only-binary',
  '--no-binary',
  '--timeout',
  '--retries',
  '--cache-dir',
]);

/** The arguments after `install`: its requirements and the options with no offline equivalent. */
function parsePipInstall(args: string[]): { requirements: string[]; unknownFlags: string[] } {
  const requirements: string[] = [];
  const unknownFlags: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (!a.startsWith('-')) {
      requirements.push(a);
      continue;
    }
    const eq = a.indexOf('=');
    const flag = a.startsWith('--') && eq > 0 ? a.slice(0, eq) : a;
    const inline = a.startsWith('--') && eq > 0 ? a.slice(eq + 1) : null;
    const value = PIP_VALUE_FLAGS.has(flag) ? (inline ?? args[++i] ?? '') : null;
    if (!PIP_HARMLESS.has(flag)) unknownFlags.push(value === null ? a : `${flag} ${value}`);
  }
  return { requirements, unknownFlags };
}

/** Everything test.sh fetches while grading; empty lists when it fetches nothing. */
export function verifierNeeds(script: string): VerifierNeeds {
  const commands: NetworkCommand[] = [];
  const uvxPytest: UvxPytest[] = [];
  const otherUv: NetworkCommand[] = [];
  const fatal: NetworkCommand[] = [];
  const pipInstalls: PipInstall[] = [];
  const aptPackages: string[] = [];
  let errexit = /^#!.*\bbash\s+-[a-z]*e/.test(script);
  let uvGuard = false;
  for (const { line, text } of logicalLines(script)) {
    // errexit as the script turns it on and off at top level (a subshell's own `set` aside).
    const set = /^set\s+([-+])([a-z]*e[a-z]*|o\s+errexit)\b/.exec(text);
    if (set) errexit = set[1] === '-';
    // `if ! command -v uv ...; then <install uv> fi`: skipped where uv is on the PATH (the toolchain puts it there).
    if (/^if\s+!\s+command\s+-v\s+uvx?\b/.test(text)) uvGuard = true;
    else if (uvGuard && /^fi\b/.test(text)) uvGuard = false;
    const before = commands.length;
    const add = (kind: NetworkCommandKind): void => {
      if (!commands.some((c) => c.line === line && c.kind === kind)) commands.push({ kind, line, command: fold(text) });
    };
    for (const cmd of simpleCommands(text)) {
      const w = commandWords(cmd);
      const name = w[0] ? base(w[0]) : '';
      const sub = w.slice(1).filter((x) => !x.startsWith('-'));
      if (
        (name === 'apt-get' || name === 'apt' || name === 'aptitude') &&
        /^(install|update|upgrade|dist-upgrade|build-dep|source|download)$/.test(sub[0] ?? '')
      ) {
        add('apt');
        if (sub[0] === 'install')
          for (const p of sub.slice(1))
            if (!/^(curl|ca-certificates)$/.test(p) && !aptPackages.includes(p) && !p.includes('>'))
              aptPackages.push(p);
      } else if ((name === 'curl' || name === 'wget') && w.some((x) => /^(https?|ftp):\/\//.test(x))) add('download');
      else if (
        (/^pip(3(\.\d+)?)?$/.test(name) && sub[0] === 'install') ||
        (/^python(3(\.\d+)?)?$/.test(name) &&
          w[1] === '-m' &&
          /^pip$/.test(w[2] ?? '') &&
          w.slice(3).includes('install'))
      ) {
        add('pip');
        const via = name.startsWith('python') ? 'python' : 'pip';
        const from = via === 'python' ? 3 : 1;
        const args = w.slice(from + w.slice(from).indexOf('install') + 1);
        pipInstalls.push({ line, via, command: fold(cmd), ...parsePipInstall(args) });
      } else if (name === 'uv' && sub[0] === 'pip' && sub[1] === 'install') {
        add('uv');
        pipInstalls.push({
          line,
          via: 'uv',
          command: fold(cmd),
          ...parsePipInstall(w.slice(w.indexOf('install') + 1)),
        });
      } else if (name === 'uvx' || (name === 'uv' && (sub[0] === 'tool' ? sub[1] === 'run' : sub[0] === 'run'))) {
        // uvx, `uv tool run` and `uv run` of pytest: one run in an environment with its -w / --with.
        add('uv');
        const args = name === 'uvx' ? w.slice(1) : w.slice(w.indexOf('run') + 1);
        const run = parseUvx(args, line);
        if (run) uvxPytest.push(run);
        else otherUv.push({ kind: 'uv', line, command: fold(text) });
      } else if (name === 'uv' && /^(run|pip|sync|add|venv|tool|python)$/.test(sub[0] ?? '')) {
        // `uv venv` alone fetches only a Python it lacks; every other of these resolves packages.
        add('uv');
        otherUv.push({ kind: 'uv', line, command: fold(text) });
      }
    }
    const fetching = commands.slice(before).filter((c) => c.kind !== 'uv');
    if (fetching.length && !uvGuard && (errexit || /\|\|\s*exit\b/.test(text))) fatal.push(...fetching);
  }
  return { commands, aptPackages, fatal, uvxPytest, otherUv, pipInstalls };
}

/** Whether a verifier's log shows that fetching failed for want of a network (the confirmation of the static reading). */
export function downloadFailure(log: string): string | null {
  const patterns = [
    /Could not resolve host[^\n]*/i,
    /Temporary failure (in name )?resolution[^\n]*/i,
    /Temporary failure resolving[^\n]*/i,
    /Failed to (fetch|download)[^\n]*/i,
    /Network is unreachable[^\n]*/i,
    /Name or service not known[^\n]*/i,
    /failed to lookup address information[^\n]*/i,
    /dns error[^\n]*/i,
    /No matching distribution found[^\n]*/i,
    /Could not connect to[^\n]*/i,
    /uvx?: (command )?not found[^\n]*/i,
    /Unable to locate package[^\n]*/i,
  ];
  for (const p of patterns) {
    const m = p.exec(log);
    if (m) return m[0].trim().slice(0, 200);
  }
  return null;
}
