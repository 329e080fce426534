import { execFile, spawn } from 'node:child_process';
import { chmod, cp, lstat, mkdir, readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { DiskLimitError, ScanLimitError } from '../sandbox.js';
import { TESTS_DIR, VERIFIER_LOGS } from '../verifier-folders.js';
import type { OverlayLayers } from './overlay.js';

const run = promisify(execFile);

/**
 * Copies a container's upper layer (what its processes wrote) into the empty upper layer of a
 * container not yet started, made from the same image: that container then starts with the first
 * one's files as they were at the copy, and nothing in the first can reach them. On this machine
 * this replaces an engine commit (which tars the layer, unpacks it as a new image layer and hashes
 * it: about 0.2 s of the engine's CPU for a few files, against ~15 ms for this copy; see
 * bench/job-throughput and scratch measurements in the issue notes).
 *
 * GNU cp in archive mode keeps what overlayfs reads from an upper layer: modes, owners, times,
 * hard links among the copied files, special files (whiteouts are 0/0 character devices), and
 * extended attributes; xattrs are asked for by name so that one not copied (the trusted.overlay.*
 * marks of a folder that hides the one below) fails the copy instead of silently changing what
 * the verifier sees. Links are copied as links, never followed.
 */
export async function copyLayer(from: string, to: string, signal?: AbortSignal): Promise<void> {
  const present = await readdir(to);
  if (present.length > 0)
    throw new Error(`the verifier's layer ${to} is not empty (${present.slice(0, 3).join(', ')})`);
  try {
    await run('cp', ['-a', '--preserve=xattr', '--reflink=auto', '-T', '--', from, to], {
      maxBuffer: 1024 * 1024,
      signal,
      killSignal: 'SIGKILL',
    });
  } catch (err) {
    if (signal?.aborted) throw signal.reason;
    if (/^spawn /.test(String((err as NodeJS.ErrnoException).syscall))) throw err; // no cp here
    const stderr = String((err as { stderr?: string }).stderr ?? '')
      .trim()
      .split('\n')
      .slice(0, 3)
      .join('; ');
    throw new Error(`the agent's files could not be copied for the verifier: ${stderr || (err as Error).message}`, {
      cause: err,
    });
  }
}

/** What a layer holds, as measured by measureLayer. */
export interface LayerSize {
  /** Entries (files, folders, links, whiteouts): the paths the scan would list. */
  entries: number;
  /** Bytes as the engine counts a container's size: apparent sizes of all but folders, a hard-linked file once. */
  bytes: number;
}

/**
 * Counts a layer's entries and bytes, stopping at the first bound passed: ScanLimitError past
 * `maxChanges` entries (the scan of the copy would refuse it anyway), DiskLimitError past
 * `maxBytes`; `signal` (the copy's deadline) kills it and rejects with its reason. Run before the
 * copy, so that a layer past a bound costs its measuring, never its copy (250,000 empty files took
 * 109 s to copy before the scan refused them). GNU find walks it: it prints no names (a name need
 * not be text), and took 0.8 s of CPU for 250,000 entries where Node's own walk took 30 s.
 */
export function measureLayer(
  upper: string,
  bounds: { maxChanges: number; maxBytes: number },
  signal?: AbortSignal,
): Promise<LayerSize> {
  return new Promise<LayerSize>((resolve, reject) => {
    const find = spawn('find', ['-P', upper, '-mindepth', '1', '-printf', '%y %s %i %n\\n'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const size: LayerSize = { entries: 0, bytes: 0 };
    const linked = new Set<string>();
    let rest = '';
    let stderr = '';
    let done = false;
    const stop = (err: unknown): void => {
      if (done) return;
      done = true;
      signal?.removeEventListener('abort', onAbort);
      find.kill('SIGKILL');
      reject(err);
    };
    const onAbort = (): void => stop(signal?.reason);
    if (signal?.aborted) return stop(signal.reason);
    signal?.addEventListener('abort', onAbort, { once: true });
    const line = (l: string): void => {
      const [type, bytes, inode, links] = l.split(' ');
      size.entries += 1;
      if (size.entries > bounds.maxChanges) return stop(new ScanLimitError(size.entries, bounds.maxChanges));
      if (type === 'd' || (Number(links) > 1 && linked.has(inode!))) return;
      if (Number(links) > 1) linked.add(inode!);
      size.bytes += Number(bytes);
      if (size.bytes > bounds.maxBytes) stop(new DiskLimitError(size.bytes, bounds.maxBytes));
    };
    find.stdout.setEncoding('utf8');
    find.stdout.on('data', (chunk: string) => {
      const lines = (rest + chunk).split('\n');
      rest = lines.pop()!;
      for (const l of lines) if (!done) line(l);
    });
    find.stderr.setEncoding('utf8');
    find.stderr.on('data', (c: string) => {
      if (stderr.length < 4096) stderr += c;
    });
    find.on('error', stop);
    find.on('close', (code) => {
      if (done) return;
      if (code !== 0)
        return stop(new Error(`the agent's layer could not be measured: ${stderr.trim() || `find exited ${code}`}`));
      done = true;
      signal?.removeEventListener('abort', onAbort);
      resolve(size);
    });
  });
}

async function kindAt(file: string): Promise<'dir' | 'other' | null> {
  try {
    return (await lstat(file)).isDirectory() ? 'dir' : 'other';
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

/** Whether any layer below holds `rel` (as anything). */
async function belowHas(lowers: string[], rel: string): Promise<'dir' | 'other' | null> {
  for (const dir of lowers) {
    const kind = await kindAt(path.join(dir, rel));
    if (kind) return kind;
  }
  return null;
}

/**
 * Makes /tests (the tests folders copied in, in order) and an empty /logs/verifier in the upper layer of a
 * verifier container that has not started, replacing whatever the agent's copied files hold
 * there; nothing runs in the container for it. Every step works on this layer's own entries by
 * name and never follows a link (a link the agent left is removed as one). Returns false, having
 * changed nothing, when a layer below holds /tests or /logs/verifier, or /logs as something other
 * than a folder: hiding those would need overlay marks this does not write, so the caller makes
 * the folders with commands once the container runs (prepareFoldersInside).
 */
export async function prepareFoldersInLayer(layers: OverlayLayers, testsDirs: string[]): Promise<boolean> {
  const rel = (p: string): string => p.replace(/^\/+/, '');
  const logs = path.posix.dirname(VERIFIER_LOGS);
  if (
    (await belowHas(layers.lowers, rel(TESTS_DIR))) ||
    (await belowHas(layers.lowers, rel(VERIFIER_LOGS))) ||
    (await belowHas(layers.lowers, rel(logs))) === 'other'
  )
    return false;
  const at = (p: string): string => path.join(layers.upper, rel(p));
  await rm(at(TESTS_DIR), { recursive: true, force: true });
  await mkdir(at(TESTS_DIR));
  for (const dir of testsDirs)
    await cp(dir, at(TESTS_DIR), { recursive: true, force: true, verbatimSymlinks: true, preserveTimestamps: true });
  await chmod(at(TESTS_DIR), 0o755);
  // /logs: kept when it is a folder (the agent's own logs stay), replaced when it is anything else.
  if ((await kindAt(at(logs))) === 'other') await rm(at(logs), { force: true });
  await mkdir(at(logs), { recursive: true });
  await chmod(at(logs), 0o755);
  await rm(at(VERIFIER_LOGS), { recursive: true, force: true });
  await mkdir(at(VERIFIER_LOGS));
  await chmod(at(VERIFIER_LOGS), 0o755);
  return true;
}
