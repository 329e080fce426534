import type { PreparedEnvironment, SandboxProvider } from '../sandbox/sandbox.js';
import { withSandbox } from '../sandbox/lease.js';
import type { Task } from '../task/task.js';
import type { EnvironmentPart, EnvironmentState, SolutionState } from './schema.js';

/** Entries of a recorded tree, and changed files described, before the record says "truncated". */
export const MAX_TREE_ENTRIES = 2000;
export const MAX_CHANGES = 200;
/** Bytes of a command's output, or of a changed file's text, kept in the record. */
const OUTPUT_KEEP = 4096;
const TEXT_KEEP = 2048;
/** Files hashed in a tree: larger ones are recorded with their size only. */
const HASH_MAX_BYTES = 1024 * 1024;

/** Paths a solution's run changes that are the harness's, not the solution's. */
const HARNESS_PATHS = /^\/(solution|logs|proc|sys|dev|run|tmp\/\.termgrade)(\/|$)/;

const tail = (text: string, n = OUTPUT_KEEP): string =>
  text.length > n ? `[... ${text.length - n} characters cut ...]${text.slice(-n)}` : text;

/** A synth sandbox is leased as any other, labelled so that `cleanup` and operators can tell it. */
const SYNTH_LABELS = { 'termgrade.synth': 'true' };

const TREE_SCRIPT = `set -u
n=${MAX_TREE_ENTRIES + 1}
for root in "$@"; do [ -e "$root" ] && find "$root" -xdev -printf '%y\\t%s\\t%p\\n' 2>/dev/null; done | head -n "$n"
printf '%s\\n' '--hashes--'
for root in "$@"; do [ -e "$root" ] && find "$root" -xdev -type f -size -${HASH_MAX_BYTES + 1}c -print0 2>/dev/null; done | head -z -n "$n" | xargs -0 -r sha256sum 2>/dev/null`;

/** Parses TREE_SCRIPT's output into entries (pure). */
export function parseTree(output: string): { tree: EnvironmentState['tree']; truncated: boolean } {
  const [listing = '', hashes = ''] = output.split('--hashes--\n');
  const sums = new Map<string, string>();
  for (const line of hashes.split('\n')) {
    const m = /^([0-9a-f]{64}) {2}(.*)$/.exec(line);
    if (m) sums.set(m[2]!, m[1]!);
  }
  const rows = listing.split('\n').filter((l) => l.includes('\t'));
  const kinds: Record<string, EnvironmentState['tree'][number]['kind']> = { f: 'file', d: 'dir', l: 'link' };
  const tree = rows.slice(0, MAX_TREE_ENTRIES).map((l) => {
    const [k = '', size = '0', ...rest] = l.split('\t');
    const p = rest.join('\t');
    return { path: p, kind: kinds[k] ?? ('other' as const), size: Number(size) || 0, sha256: sums.get(p) ?? null };
  });
  return { tree, truncated: rows.length > MAX_TREE_ENTRIES };
}

/**
 * The built image's real state, recorded in a sandbox started from it (offline): the tree of the
 * workdir and the folders the model named, with sizes and hashes; the tools' versions; the output
 * of the short commands the model asked for.
 */
export async function recordEnvironmentState(
  provider: SandboxProvider,
  task: Task,
  prepared: PreparedEnvironment,
  env: EnvironmentPart,
  signal?: AbortSignal,
): Promise<EnvironmentState> {
  return withSandbox({ provider, task, prepare: prepared, signal, labels: SYNTH_LABELS }, async (box) => {
    const pwd = await box.exec(['pwd'], { timeoutSec: 10, signal });
    const workdir = pwd.stdout.text.trim() || '/';
    const roots = [...new Set([workdir, ...env.statePaths])];
    const listed = await box.exec(['sh', '-c', TREE_SCRIPT, 'sh', ...roots], {
      timeoutSec: 60,
      signal,
      maxOutputBytes: 8 * 1024 * 1024,
    });
    if (listed.timedOut || listed.stdout.truncatedBytes > 0)
      throw new Error(`recording the file tree of ${roots.join(', ')} did not finish whole (timed out or over 8 MiB)`);
    const { tree, truncated } = parseTree(listed.stdout.text);
    const tools: EnvironmentState['tools'] = [];
    for (const name of env.tools) {
      const r = await box.exec(
        ['sh', '-c', 'command -v "$1" >/dev/null 2>&1 || exit 127; "$1" --version 2>&1 | head -n 1', 'sh', name],
        { timeoutSec: 10, signal },
      );
      tools.push({ name, version: r.exitCode === 0 ? r.stdout.text.trim() || null : null });
    }
    const commands: EnvironmentState['commands'] = [];
    for (const command of env.commands) {
      const r = await box.exec(['sh', '-c', command], { timeoutSec: 10, signal, maxOutputBytes: 64 * 1024 });
      commands.push({
        command,
        exitCode: r.exitCode,
        output: tail(`${r.stdout.text}${r.stderr.text ? `\n[stderr]\n${r.stderr.text}` : ''}`),
      });
    }
    return { image: prepared.image, workdir, tree, treeTruncated: truncated, tools, commands };
  });
}

const DESCRIBE_SCRIPT = `for p in "$@"; do
  if [ -L "$p" ]; then printf 'o\\t0\\t-\\t%s\\n' "$p"
  elif [ -f "$p" ]; then printf 'f\\t%s\\t%s\\t%s\\n' "$(stat -c %s -- "$p")" "$(sha256sum -- "$p" | cut -c1-64)" "$p"
  else printf 'o\\t0\\t-\\t%s\\n' "$p"; fi
done`;

/**
 * Runs the reference solution in a sandbox of the built image, offline, as the oracle will, and
 * records what it left: its exit, its output, and each file it added, changed or deleted (size,
 * hash and the start of its text).
 */
export async function runSolution(
  provider: SandboxProvider,
  task: Task,
  prepared: PreparedEnvironment,
  signal?: AbortSignal,
): Promise<SolutionState> {
  return withSandbox({ provider, task, prepare: prepared, signal, labels: SYNTH_LABELS }, async (box) => {
    await box.copyIn(task.solutionDir!, '/solution');
    const run = await box.exec(['bash', '/solution/solve.sh'], {
      env: task.config.solution.env,
      timeoutSec: task.config.agent.timeout_sec,
      signal,
      cwd: task.config.environment.workdir,
    });
    const all = (await box.changes())
      .filter((c) => !HARNESS_PATHS.test(c.path))
      .sort((a, b) => (a.path < b.path ? -1 : 1));
    const listed = all.slice(0, MAX_CHANGES);
    const described = new Map<string, { size: number; sha256: string }>();
    const present = listed.filter((c) => c.kind !== 'deleted').map((c) => c.path);
    if (present.length) {
      const r = await box.exec(['sh', '-c', DESCRIBE_SCRIPT, 'sh', ...present], {
        timeoutSec: 60,
        signal,
        maxOutputBytes: 4 * 1024 * 1024,
      });
      for (const line of r.stdout.text.split('\n')) {
        const [k, size, sum, ...rest] = line.split('\t');
        if (k === 'f') described.set(rest.join('\t'), { size: Number(size), sha256: sum! });
      }
    }
    const changes: SolutionState['changes'] = [];
    for (const c of listed) {
      const d = described.get(c.path);
      let text: string | null = null;
      if (d) {
        const bytes = await box.readFile(c.path, TEXT_KEEP);
        if (bytes && !bytes.includes(0)) text = bytes.toString('utf8');
      }
      changes.push({ path: c.path, kind: c.kind, size: d?.size ?? null, sha256: d?.sha256 ?? null, text });
    }
    return {
      exitCode: run.exitCode,
      timedOut: run.timedOut,
      stdout: tail(run.stdout.text),
      stderr: tail(run.stderr.text),
      changes,
      changesTruncated: all.length > MAX_CHANGES,
    };
  });
}
