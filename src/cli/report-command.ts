import { buildReport } from '../report/build.js';
import { readSynthFunnel } from '../synth/read-funnel.js';
import { EXIT } from './signals.js';
import { combiningLine } from '../store/identity.js';

export async function reportCommand(
  sources: string[],
  flags: { out: string; band: [number, number]; minTrials: number; check?: string; select?: string; synth?: string },
): Promise<number> {
  const t = performance.now();
  const { index, data } = await buildReport({
    sources,
    outDir: flags.out,
    band: flags.band,
    minTrials: flags.minTrials,
    check: flags.check,
    select: flags.select,
    synth: flags.synth === undefined ? undefined : await readSynthFunnel(flags.synth),
  });
  const combining = combiningLine(data.jobs);
  if (combining) process.stdout.write(`${combining}\n`);
  const f = data.synth;
  if (f) {
    const pct = (x: number | null): string => (x === null ? '-' : `${(100 * x).toFixed(1)}%`);
    const stages = f.stages
      .filter((s) => s.candidates > 0)
      .map((s) => `${s.stage} ${s.passed}/${s.candidates}`)
      .join(', ');
    const check = data.check
      ? `; check output yield ${pct(data.check.yield)} (${data.check.admissible}/${data.check.total})`
      : '';
    process.stdout.write(
      `synth: ${f.admitted} of ${f.candidates} candidates admitted (${pct(f.endToEndYield)}); ${stages}${check}\n`,
    );
  }
  process.stdout.write(
    `report: ${index} (${data.trials} trials, ${data.configs.length} configuration(s), ${((performance.now() - t) / 1000).toFixed(1)} s)\n`,
  );
  return EXIT.ok;
}
