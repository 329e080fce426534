import { stat } from 'node:fs/promises';
import { TermgradeError, ifMissing } from '../util/errors.js';
import { convertTb1 } from '../task/convert.js';
import { EXIT } from './signals.js';

export async function convertCommand(src: string, flags: { out: string }): Promise<number> {
  const st = await ifMissing(stat(src), null);
  if (!st) throw new TermgradeError('bad_input', `${src}: no such folder`);
  if (!st.isDirectory())
    throw new TermgradeError('bad_input', `${src}: not a folder (a TB1 task folder, or a folder of them)`);
  const converted = await convertTb1(src, flags.out);
  for (const c of converted) {
    process.stdout.write(
      `${c.to}${c.unconverted.length ? `  (not carried over: ${c.unconverted.length}, see CONVERT.md)` : ''}\n`,
    );
    for (const u of c.unconverted) process.stdout.write(`    - ${u}\n`);
  }
  process.stdout.write(
    `converted ${converted.length} Terminal-Bench 1 task(s) into ${flags.out}; check them with: termgrade check ${flags.out}\n`,
  );
  return EXIT.ok;
}
