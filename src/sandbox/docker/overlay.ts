import { access, lstat, readdir } from 'node:fs/promises';
import path from 'node:path';
import type Docker from 'dockerode';
import type { FsChange } from '../sandbox.js';

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
  } catch {
    return null;
  }
  return { upper: data.UpperDir, lowers: data.LowerDir.split(':') };
}

async function inLower(lowers: string[], rel: string): Promise<boolean> {
  for (const dir of lowers) {
    try {
      await lstat(path.join(dir, rel));
      return true;
    } catch {
      // not in this layer
    }
  }
  return false;
}

export async function overlayChanges(layers: OverlayLayers, limit = 200_000): Promise<FsChange[]> {
  const out: FsChange[] = [];
  const walk = async (rel: string): Promise<void> => {
    for (const e of await readdir(path.join(layers.upper, rel), { withFileTypes: true })) {
      if (out.length >= limit) return;
      const child = `${rel}/${e.name}`;
      if (e.isCharacterDevice() && (await lstat(path.join(layers.upper, child))).rdev === 0) {
        out.push({ path: child, kind: 'deleted' });
        continue;
      }
      out.push({ path: child, kind: (await inLower(layers.lowers, child)) ? 'changed' : 'added' });
      if (e.isDirectory()) await walk(child);
    }
  };
  await walk('');
  return out;
}
