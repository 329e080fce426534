import { convertTb1 } from '../task/convert.js';
import { EXIT } from './signals.js';

export async function convertCommand(src: string, flags: { out: string }): Promise<number> {
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
