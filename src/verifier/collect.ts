import { mkdir, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { CopyLimitError, SYSTEM_PATH, type Sandbox } from '../sandbox/sandbox.js';
import type { Task } from '../task/task.js';
import { errorMessage } from '../util/errors.js';
import { shellQuote } from '../util/shell-quote.js';
import { walk } from '../util/walk.js';

/** Harbor's convention folder: copied out (with the declared artifacts) for a task that declares `[[verifier.collect]]` or `artifacts`. */
export const ARTIFACTS_DIR = '/logs/artifacts';
/** The most one trial's artifacts may hold; past it an artifact is not kept at all (fail closed, never a part). */
export const MAX_ARTIFACT_BYTES = 64 * 1024 * 1024;

/** What became of one `[[verifier.collect]]` command: its exit code, or why it gave none. */
export interface CollectRun {
  command: string;
  exitCode: number | null;
  timedOut: boolean;
}

/** One artifact as copied out (or why it was not): the trial keeps the list beside the verifier's logs. */
export interface ArtifactCopy {
  source: string;
  destination: string;
  ok: boolean;
  message: string | null;
}

export interface CollectOutcome {
  hooks: CollectRun[];
  artifacts: ArtifactCopy[];
}

type Kind = 'dir' | 'file' | 'link' | 'other' | 'missing';

/**
 * Runs the task's collect commands in the verifier's sandbox once the tests ended (Harbor's
 * `[[verifier.collect]]`: diagnostics, so a failing one is recorded, never a grade), then tells
 * what each artifact path is. Runs before the sandbox is stopped; the copy comes after.
 */
export async function runCollect(
  box: Sandbox,
  task: Task,
  signal?: AbortSignal,
): Promise<{ hooks: CollectRun[]; kinds: Map<string, Kind> }> {
  const hooks: CollectRun[] = [];
  for (const hook of task.config.verifier.collect) {
    const r = await box.exec(['/bin/sh', '-c', hook.command], {
      env: task.config.verifier.env,
      timeoutSec: hook.timeout_sec,
      signal,
    });
    hooks.push({ command: hook.command, exitCode: r.exitCode, timedOut: r.timedOut });
  }
  const sources = [ARTIFACTS_DIR, ...task.config.artifacts.map((a) => a.source)];
  const probe = sources
    .map(
      (p) =>
        `p=${shellQuote(p)}; if [ -L "$p" ]; then echo link; elif [ -d "$p" ]; then echo dir; elif [ -f "$p" ]; then echo file; elif [ -e "$p" ]; then echo other; else echo missing; fi`,
    )
    .join('; ');
  const r = await box.exec(['/bin/sh', '-c', `PATH=${SYSTEM_PATH}; ${probe}`], { timeoutSec: 60, signal });
  const lines = r.stdout.text.trim().split('\n');
  const kinds = new Map<string, Kind>();
  // A probe that did not answer for every path leaves those unknown: they are not copied (fail closed).
  sources.forEach((s, i) =>
    kinds.set(s, r.exitCode === 0 && lines.length === sources.length ? (lines[i] as Kind) : 'other'),
  );
  return { hooks, kinds };
}

/**
 * Copies the artifacts out of the stopped verifier's sandbox into `hostDir` (through the backend:
 * nothing in the sandbox runs), each under its destination, all together at most `maxBytes`. A
 * path that is a link, a device or unreadable, or that would pass the bound, is refused and said
 * so; what was copied of it is removed. /logs/artifacts missing is no artifact, not an error.
 */
export async function copyArtifacts(
  box: Sandbox,
  task: Task,
  kinds: Map<string, Kind>,
  hostDir: string,
  maxBytes = MAX_ARTIFACT_BYTES,
): Promise<ArtifactCopy[]> {
  const wanted = [{ source: ARTIFACTS_DIR, destination: 'logs/artifacts' }, ...task.config.artifacts];
  const out: ArtifactCopy[] = [];
  let left = maxBytes;
  for (const a of wanted) {
    const kind = kinds.get(a.source) ?? 'other';
    if (kind === 'missing' && a.source === ARTIFACTS_DIR) continue;
    const record = (ok: boolean, message: string | null): void =>
      void out.push({ source: a.source, destination: a.destination, ok, message });
    if (kind !== 'dir' && kind !== 'file') {
      record(
        false,
        kind === 'missing'
          ? 'not there'
          : kind === 'link'
            ? 'a symbolic link: not followed'
            : 'not a plain file or folder',
      );
      continue;
    }
    const target = path.join(hostDir, a.destination);
    try {
      if (kind === 'dir') {
        await box.copyOut(a.source, target, { trusted: true, maxBytes: left, whole: true });
        left -= await bytesUnder(target);
      } else {
        const body = await box.readFile(a.source, left + 1);
        if (body === null) throw new Error('could not be read');
        if (body.length > left) throw new CopyLimitError(a.source, maxBytes);
        await writeWhole(target, body);
        left -= body.length;
      }
      record(true, null);
    } catch (err) {
      await rm(target, { recursive: true, force: true });
      record(
        false,
        err instanceof CopyLimitError ? `over the artifacts' bound of ${maxBytes} bytes: not kept` : errorMessage(err),
      );
    }
  }
  return out;
}

async function bytesUnder(dir: string): Promise<number> {
  let n = 0;
  for (const e of await walk(dir)) if (e.kind === 'file') n += (await stat(e.abs)).size;
  return n;
}

async function writeWhole(target: string, body: Buffer): Promise<void> {
  await mkdir(path.dirname(target), { recursive: true });
  await writeFile(target, body);
}
