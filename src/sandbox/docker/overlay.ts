import { constants } from 'node:fs';
import { access, lstat, mkdir, open, readdir, readFile, writeFile, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import type Docker from 'dockerode';
import { nameText } from '../names.js';
import { MAX_SCANNED_CHANGES, ScanLimitError, type FsChange } from '../sandbox.js';
import { errnoOf, isMissing } from '../../util/errors.js';
import { causeOf, log, logged } from '../../util/log.js';

/**
 * A container's filesystem changes read straight from its overlay2 upper layer on this machine.
 * The engine's own diff walks the whole image to answer (hundreds of milliseconds on a small image,
 * seconds on a large one); the upper layer holds exactly what changed, so walking it costs about
 * as much as the agent wrote. A file is "changed" when a lower layer has it, else "added"; a
 * whiteout (a 0/0 character device) is a deletion. Null when the layer is not readable from here
 * (a remote engine, another storage driver): the caller asks the engine instead.
 */
export interface OverlayLayers {
  upper: string;
  lowers: string[];
}

export async function overlayLayers(container: Docker.Container): Promise<OverlayLayers | null> {
  const info = (await container.inspect()) as { GraphDriver?: { Name?: string; Data?: Record<string, string> } };
  const data = info.GraphDriver?.Data;
  if (info.GraphDriver?.Name !== 'overlay2' || !data?.UpperDir || !data.LowerDir) return null;
  try {
    await access(data.UpperDir);
  } catch (err) {
    // Not on this machine (a remote engine's path) or not ours to read: the engine's paths serve.
    if (!isMissing(err) && errnoOf(err) !== 'EACCES')
      log.debug("cannot read a container's upper layer", { cause: causeOf(err) });
    return null;
  }
  return { upper: data.UpperDir, lowers: data.LowerDir.split(':') };
}

/**
 * What an open with O_NOFOLLOW finds when the path is not a plain folder or file of the layer (gone,
 * a file where a folder was, a link): the engine's path answers, unlogged. Anything else is logged.
 */
const notHere = {
  expected: (err: unknown): boolean => isMissing(err) || errnoOf(err) === 'ELOOP',
};

/** Whether any lower layer has `rel` (a path under the layer's root, as bytes: names need not be UTF-8). */
async function inLower(lowers: string[], rel: string | Buffer): Promise<boolean> {
  for (const dir of lowers) {
    try {
      await lstat(Buffer.concat([Buffer.from(dir), Buffer.from(rel)]));
      return true;
    } catch (err) {
      // Not in this layer; any other failure cannot vouch that it is absent, so the caller asks the engine.
      if (!isMissing(err)) return true;
    }
  }
  return false;
}

const SLASH = Buffer.from('/');

/**
 * Every change in the upper layer; throws ScanLimitError past `limit` (a list cut short would hide
 * changes). Names are read and followed as bytes; a path is reported as nameText gives it (a name
 * that is not UTF-8 escaped), so any name the agent can make is scanned, none breaks the scan.
 */
export async function overlayChanges(layers: OverlayLayers, limit = MAX_SCANNED_CHANGES): Promise<FsChange[]> {
  const out: FsChange[] = [];
  const upper = Buffer.from(layers.upper);
  const walk = async (rel: Buffer, shown: string): Promise<void> => {
    const entries = await readdir(Buffer.concat([upper, rel]), { withFileTypes: true, encoding: 'buffer' });
    for (const e of entries) {
      if (out.length >= limit) throw new ScanLimitError(out.length);
      const child = Buffer.concat([rel, SLASH, e.name]);
      const text = `${shown}/${nameText(e.name)}`;
      if (e.isCharacterDevice() && (await lstat(Buffer.concat([upper, child]))).rdev === 0) {
        out.push({ path: text, kind: 'deleted' });
        continue;
      }
      out.push({ path: text, kind: (await inLower(layers.lowers, child)) ? 'changed' : 'added' });
      if (e.isDirectory()) await walk(child, text);
    }
  };
  await walk(Buffer.alloc(0), '');
  return out;
}

/**
 * Whether this kernel's overlayfs keeps every file of the upper layer whole: with metacopy or
 * redirect_dir on, a file or folder in the upper layer may take its data from a lower one, and
 * reading the upper layer alone would miss it. Docker leaves both off; read once.
 */
let wholeUpper: Promise<boolean> | null = null;
function upperHoldsWholeFiles(): Promise<boolean> {
  const off = (name: string): Promise<boolean> =>
    readFile(`/sys/module/overlay/parameters/${name}`, 'utf8').then(
      (v) => v.trim() === 'N',
      logged('read an overlay module parameter', false, { expected: isMissing }), // absent: an older kernel
    );
  wholeUpper ??= Promise.all([off('metacopy'), off('redirect_dir')]).then(([a, b]) => a && b);
  return wholeUpper;
}

const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;
const FILE_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;
/** `name` inside the folder open as `dir`: resolved from that folder, never through a link. */
const at = (dir: FileHandle, name: string | Buffer): Buffer =>
  Buffer.concat([Buffer.from(`/proc/self/fd/${dir.fd}/`), Buffer.from(name)]);

/**
 * The folder at `parts` in the upper layer, reached one component at a time from the layer's root
 * (never through a link); null when it is not a folder there. The caller closes it.
 */
async function openInUpper(upper: string, parts: string[]): Promise<FileHandle | null> {
  let dir = await open(upper, DIR_FLAGS);
  for (const part of parts) {
    const next = await open(at(dir, part), DIR_FLAGS).catch(logged('open a folder in an upper layer', null, notHere));
    await dir.close();
    if (!next) return null;
    dir = next;
  }
  return dir;
}

const pathParts = (p: string): string[] | null => {
  const parts = p.split('/').filter(Boolean);
  return parts.length === 0 || parts.includes('..') || parts.includes('.') ? null : parts;
};

/**
 * The first `maxBytes` of a container's file, read from its upper layer: when the layer holds it
 * as a plain file (one the agent wrote or changed), that is exactly what the container sees.
 * Undefined when the layer cannot say (the file is not there, or not a plain file): the caller
 * asks the engine. Opened like `copyFromUpper`, never through a link.
 */
export async function readFromUpper(
  layers: OverlayLayers,
  file: string,
  maxBytes: number,
): Promise<Buffer | undefined> {
  const parts = pathParts(file);
  if (!parts || !(await upperHoldsWholeFiles())) return undefined;
  const dir = await openInUpper(layers.upper, parts.slice(0, -1)).catch(logged('open an upper layer', null, notHere));
  if (!dir) return undefined;
  try {
    const handle = await open(at(dir, parts[parts.length - 1]!), FILE_FLAGS).catch(
      logged('open a file in an upper layer', null, notHere),
    );
    if (!handle) return undefined;
    try {
      const st = await handle.stat();
      if (!st.isFile()) return undefined;
      const body = Buffer.alloc(Math.min(maxBytes, st.size));
      const { bytesRead } = await handle.read(body, 0, body.length, 0);
      return body.subarray(0, bytesRead);
    } finally {
      await handle.close();
    }
  } finally {
    await dir.close();
  }
}

/**
 * Copies a folder of the container to `hostDir` straight from its upper layer, without the engine
 * (which would start a helper process and walk the folder inside the container's root for it).
 * Only when the upper layer alone can hold that folder: no lower layer has the path, so nothing
 * below shows through it. Every folder and file is opened relative to its parent's descriptor with
 * O_NOFOLLOW, so a process still running in the sandbox that swaps a folder for a link while this
 * reads cannot lead the copy out of the layer onto this machine's own files. Like the engine's
 * copy, only plain files and folders arrive, and files past `maxBytes` in all are skipped.
 * Returns false when it cannot vouch for the copy: the caller asks the engine.
 */
export async function copyFromUpper(
  layers: OverlayLayers,
  srcDir: string,
  hostDir: string,
  maxBytes: number,
): Promise<boolean> {
  const parts = pathParts(srcDir);
  if (!parts || !(await upperHoldsWholeFiles()) || (await inLower(layers.lowers, `/${parts.join('/')}`))) return false;
  // Not a folder in the upper layer: let the engine say what is there.
  const dir = await openInUpper(layers.upper, parts).catch(logged('open an upper layer', null, notHere));
  if (!dir) return false;
  try {
    let bytes = 0;
    // Names read as bytes: a name that is not UTF-8 is copied, not dropped, under its escaped text
    // (nameText), so that whatever reads the copy by name on this machine finds it.
    const copy = async (from: FileHandle, to: string, depth: number): Promise<void> => {
      await mkdir(to, { recursive: true });
      const entries = await readdir(`/proc/self/fd/${from.fd}`, { withFileTypes: true, encoding: 'buffer' });
      for (const e of entries) {
        const into = path.join(to, nameText(e.name));
        if (e.isDirectory() && depth < 64) {
          const sub = await open(at(from, e.name), DIR_FLAGS).catch(
            logged('open a folder in an upper layer', null, notHere),
          );
          if (!sub) continue; // swapped for something else meanwhile
          try {
            await copy(sub, into, depth + 1);
          } finally {
            await sub.close();
          }
        } else if (e.isFile()) {
          const file = await open(at(from, e.name), FILE_FLAGS).catch(
            logged('open a file in an upper layer', null, notHere),
          );
          if (!file) continue;
          try {
            const st = await file.stat();
            if (!st.isFile() || bytes + st.size > maxBytes) continue;
            bytes += st.size;
            // No more than it had when measured, should it grow meanwhile.
            await writeFile(into, (await file.readFile()).subarray(0, st.size));
          } finally {
            await file.close();
          }
        }
      }
    };
    try {
      await copy(dir, hostDir, 0);
    } catch (err) {
      // Whatever was copied, the engine's copy writes over it.
      log.debug('could not copy a folder from an upper layer (the engine copies it)', { cause: causeOf(err) });
      return false;
    }
    return true;
  } finally {
    await dir.close();
  }
}
