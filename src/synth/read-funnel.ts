import { stat } from 'node:fs/promises';
import path from 'node:path';
import { funnel } from './funnel.js';
import type { SynthReport } from './schema.js';
import { SynthStore } from './store.js';
import { TermgradeError, ifMissing } from '../util/errors.js';

/**
 * The funnel of a synth job for `report --synth`: given the synth output folder (`synth --out`,
 * whose job is `.synth/synth.db`) or the database itself. A folder with no synth job is bad input:
 * an empty funnel would read as a job that made nothing.
 */
export async function readSynthFunnel(target: string): Promise<SynthReport> {
  const isDir = (await ifMissing(stat(target), null))?.isDirectory() ?? false;
  const file = isDir ? path.join(target, '.synth', 'synth.db') : target;
  if (!(await ifMissing(stat(file), null))?.isFile()) {
    throw new TermgradeError(
      'bad_input',
      `--synth ${target}: no synth job there (looked for ${file}; give a synth --out folder)`,
    );
  }
  const store = SynthStore.open(file);
  try {
    return funnel(
      store.candidates(),
      store.stages(),
      isDir ? path.resolve(target) : path.dirname(path.dirname(path.resolve(file))),
      { elapsedMs: store.elapsedMs(), resumed: 0 },
    );
  } finally {
    store.close();
  }
}
