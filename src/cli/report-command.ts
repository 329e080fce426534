import { buildReport } from '../report/build.js';
import { EXIT } from './signals.js';
import { combiningLine } from '../store/identity.js';

export async function reportCommand(sources: string[], flags: { out: string; band: [number, number]; minTrials: number; check?: string; select?: string }): Promise<number> {
  const t = performance.now();
  const { index, data } = await buildReport({ sources, outDir: flags.out, band: flags.band, minTrials: flags.minTrials, check: flags.check, select: flags.select });
  const combining = combiningLine(data.jobs);
  if (combining) process.stdout.write(`${combining}\n`);
  process.stdout.write(`report: ${index} (${data.trials} trials, ${data.configs.length} configuration(s), ${((performance.now() - t) / 1000).toFixed(1)} s)\n`);
  return EXIT.ok;
}
