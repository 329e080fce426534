import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { configStats, taskRates, type TaskRate } from '../report/aggregate.js';
import { countByTask } from '../records/counts.js';
import { loadRecordSet } from '../records/load.js';
import { selectTraining, selectValidation } from '../select/select.js';
import { jaccard, sameModelCeiling } from '../stats/overlap.js';
import { TermgradeError } from '../util/errors.js';
import { statsJson } from '../util/json.js';
import { inBand } from '../stats/band.js';
import { compareRates, pairedMethodNote } from '../stats/paired.js';
import { passAtKCurveNote } from '../stats/pass-at-k.js';
import { namedRewardMeans, splitByImage } from '../report/records.js';
import type { RecordSet } from '../records/load.js';
import { combiningLine } from '../store/identity.js';
import { readTaskList } from '../task/list.js';
import { EXIT } from './signals.js';
import type { CompareOutput, OverlapOutput, SelectManifest, StatsOutput } from '../report/outputs.js';
import { num, pct, table, wasteLines } from './table.js';

const out = (text: string): void => {
  process.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
};

function ratesFor(rates: TaskRate[], config: string): TaskRate[] {
  const mine = rates.filter((r) => r.config === config);
  if (mine.length === 0) {
    const known = [...new Set(rates.map((r) => r.config))].join(', ') || 'none';
    throw new TermgradeError('usage', `no graded trials for configuration "${config}" (known: ${known})`);
  }
  return mine;
}

/**
 * Records of the sources; in text mode, a line saying so when they come from several jobs (each
 * trial counted once, two jobs' trials never merged however alike their ids).
 */
async function loadRecords(sources: string[], json: boolean | undefined): Promise<RecordSet> {
  const set = await loadRecordSet(sources);
  const combining = combiningLine(set.jobs);
  if (combining && !json) out(combining);
  return set;
}

/** The stats table, one row per configuration. */
function configTable(configs: ReturnType<typeof configStats>): string {
  return table(
    [
      'config',
      'tasks',
      'trials',
      'pass@1 %',
      '95% CI',
      'errors',
      'inconsistent',
      'med s/success',
      'med out tok/success',
      'med $/success',
      'near misses',
    ],
    configs.map((c) => [
      c.config,
      c.tasks,
      c.trials,
      pct(c.pass1.mean),
      `[${pct(c.pass1.ciLo)}, ${pct(c.pass1.ciHi)}]`,
      Object.values(c.errorsByClass).reduce((a, b) => a + b, 0),
      c.findings.inconsistentTrials,
      num(c.efficiency.medianTimeMsPerSuccess === null ? null : c.efficiency.medianTimeMsPerSuccess / 1000, 1),
      num(c.efficiency.medianOutputTokensPerSuccess),
      num(c.efficiency.medianCostUsdPerSuccess, 4),
      c.efficiency.nearMisses,
    ]),
  );
}

/** Per configuration, below the table: pass@k, error classes, coverage and what else stands out. */
function printConfigNotes(configs: ReturnType<typeof configStats>, records: RecordSet['records']): void {
  const named = namedRewardMeans(records);
  for (const c of configs) {
    const ks = c.passAtK.map((p) => `pass@${p.k} ${pct(p.value)}%${p.method === 'unbiased' ? '' : ' (eb)'}`);
    out(`\n${c.config}: ${ks.join(', ')}`);
    const note = passAtKCurveNote(c.passAtK, c.passAtKPrior);
    if (note) out(`  (eb): ${note}`);
    const errs = Object.entries({ ...c.errorsByClass, ...c.outcomesByClass });
    if (errs.length) out(`  error classes: ${errs.map(([k, v]) => `${k} ${v}`).join(', ')}`);
    const cov = c.coverage;
    if (cov.graded < cov.attempted)
      out(
        `  coverage: ${cov.graded} of ${cov.attempted} trials graded (${pct(cov.fraction)}%); without a reward: ${cov.infra} infrastructure, ${cov.ungraded} verifier`,
      );
    if (c.findings.inconsistentTrials > 0)
      out(
        `  inconsistent rewards (kept as graded, flagged): ${c.findings.inconsistentTrials} trial(s): ${Object.entries(
          c.findings.byCode,
        )
          .map(([k, v]) => `${k} ${v}`)
          .join(', ')}`,
      );
    if (c.retryWaste.wastedMs > 0) out(`  ${wasteLines([c]).trim().replace(`${c.config}: `, '')}`);
    const others = named.get(c.config);
    if (others?.length)
      out(
        `  named rewards (mean over graded trials; rates use \`reward\` only): ${others.map((o) => `${o.name} ${num(o.mean, 3)} (${o.trials})`).join(', ')}`,
      );
    if (c.unmeasuredTasks.length)
      out(
        `  unmeasured (no graded trial): ${c.unmeasuredTasks.length} task(s): ${c.unmeasuredTasks.slice(0, 20).join(', ')}${c.unmeasuredTasks.length > 20 ? ', ...' : ''}`,
      );
  }
}

/** The per-task table (--tasks). */
function printTaskTable(perTask: TaskRate[], band: [number, number]): void {
  out('');
  out(
    table(
      ['config', 'task', 'n', 'c', 'rate %', 'Wilson 95%', 'Jeffreys 95%', `P(band ${band.join('-')})`],
      perTask.map((t) => [
        t.config,
        t.task,
        t.n,
        t.c,
        pct(t.rate),
        t.wilson ? `[${pct(t.wilson[0])}, ${pct(t.wilson[1])}]` : '- (adaptive)',
        `[${pct(t.jeffreys[0])}, ${pct(t.jeffreys[1])}]`,
        num(t.bandProbability, 3),
      ]),
    ),
  );
}

export async function statsCommand(
  sources: string[],
  flags: { tasks?: boolean; json?: boolean; band: [number, number]; byImage?: boolean },
): Promise<number> {
  const { records: loaded, jobs } = await loadRecords(sources, flags.json);
  const records = flags.byImage ? splitByImage(loaded) : loaded;
  const configs = configStats(records);
  const perTask = flags.tasks ? taskRates(countByTask(records), flags.band) : undefined;
  if (flags.json) {
    out(statsJson({ jobs, configs, tasks: perTask } satisfies StatsOutput));
    return EXIT.ok;
  }
  out(configTable(configs));
  printConfigNotes(configs, records);
  if (perTask) printTaskTable(perTask, flags.band);
  return EXIT.ok;
}

export async function compareCommand(
  a: string,
  b: string,
  sources: string[],
  flags: { json?: boolean; families?: string; permutations: number },
): Promise<number> {
  const rates = taskRates(countByTask((await loadRecords(sources, flags.json)).records));
  let families: Map<string, string> | undefined;
  if (flags.families) {
    const text = await readFile(flags.families, 'utf8').catch((err: NodeJS.ErrnoException) => {
      throw new TermgradeError(
        'bad_input',
        `${flags.families}: cannot read the families file (${err.code ?? err.message})`,
      );
    });
    families = new Map(
      text
        .split('\n')
        .map((l) => l.trim().split(/[\s,]+/))
        .filter((p) => p.length >= 2 && !p[0]!.startsWith('#'))
        .map((p) => [p[0]!, p[1]!]),
    );
  }
  let compared: ReturnType<typeof compareRates>;
  try {
    compared = compareRates(ratesFor(rates, a), ratesFor(rates, b), { families, permutations: flags.permutations });
  } catch (err) {
    if (err instanceof RangeError) throw new TermgradeError('bad_input', `${a} vs ${b}: ${err.message}`);
    throw err;
  }
  const { result, onlyA, onlyB } = compared;
  const method = pairedMethodNote(result);
  if (flags.json) {
    out(statsJson({ a, b, ...result, method, onlyA, onlyB } satisfies CompareOutput));
    return EXIT.ok;
  }
  const sign = result.meanDiff >= 0 ? '+' : '';
  out(`${a} vs ${b} on ${result.t} common ${result.clustered ? 'task families' : 'tasks'}`);
  out(`  mean difference ${sign}${pct(result.meanDiff)} points, 95% CI [${pct(result.ciLo)}, ${pct(result.ciHi)}]`);
  out(`  p = ${result.p.toPrecision(3)}: ${result.significant ? 'significant' : 'not significant'} at 5% (${method})`);
  out(
    `  cross-check, paired t-test: t = ${num(result.tStat, 3)}, df ${result.df}, p = ${result.tTestP === null ? '- (the differences have no variance)' : result.tTestP.toPrecision(3)}`,
  );
  if (onlyA || onlyB) out(`  left out: ${onlyA} tasks only in ${a}, ${onlyB} only in ${b}`);
  return EXIT.ok;
}

export interface SelectFlags {
  model: string;
  band: [number, number];
  n?: number;
  target: number;
  exclude?: string[];
  minTrials: number;
  validation?: number;
  validationTargets: number[];
  out?: string;
  json?: boolean;
}

export async function selectCommand(sources: string[], flags: SelectFlags): Promise<number> {
  const counts = countByTask((await loadRecords(sources, flags.json)).records);
  const rates = ratesFor(taskRates(counts, flags.band), flags.model);
  const unmeasured = counts.filter((t) => t.config === flags.model && t.n === 0).map((t) => t.task);
  const exclude = new Set<string>();
  for (const f of flags.exclude ?? []) for (const t of await readTaskList(f)) exclude.add(t);
  const training = selectTraining(rates, {
    band: flags.band,
    target: flags.target,
    n: flags.n,
    minTrials: flags.minTrials,
    exclude,
  });
  const validation = flags.validation
    ? selectValidation(rates, {
        targets: flags.validationTargets,
        perTarget: flags.validation,
        minTrials: flags.minTrials,
        exclude: new Set([...exclude, ...training.selected.map((t) => t.task)]),
      })
    : [];
  const row = (t: TaskRate) => ({
    task: t.task,
    trials: t.n,
    successes: t.c,
    rate: t.rate,
    interval: t.jeffreys,
    intervalMethod: 'jeffreys-95' as const,
    bandProbability: t.bandProbability,
  });
  const manifest: SelectManifest = {
    model: flags.model,
    rule: {
      band: flags.band,
      target: flags.target,
      n: flags.n ?? null,
      minTrials: flags.minTrials,
      excluded: exclude.size,
    },
    training: training.selected.map(row),
    skipped: { ...training.skipped, unmeasured: unmeasured.length },
    /** Tasks attempted with no graded trial (infrastructure or verifier failures): no rate, not selectable. */
    unmeasured,
    validation: validation.map((t) => ({ ...row(t), target: t.target })),
  };
  if (flags.out) {
    await mkdir(flags.out, { recursive: true });
    await writeFile(path.join(flags.out, 'selected.txt'), training.selected.map((t) => `${t.task}\n`).join(''));
    await writeFile(path.join(flags.out, 'manifest.json'), `${statsJson(manifest, 2)}\n`);
    if (flags.validation)
      await writeFile(path.join(flags.out, 'validation.txt'), validation.map((t) => `${t.task}\n`).join(''));
  }
  if (flags.json) {
    out(statsJson(manifest));
    return EXIT.ok;
  }
  out(
    `${flags.model}: ${training.selected.length} tasks selected (band ${flags.band.join('-')}, target ${flags.target}${flags.n ? `, n ${flags.n}` : ''})`,
  );
  const s = training.skipped;
  out(
    `  left out: ${s.outOfBand} out of band, ${s.tooFewTrials} with < ${flags.minTrials} trials, ${s.excluded} excluded, ${s.beyondN} beyond n, ${unmeasured.length} unmeasured (no graded trial)`,
  );
  if (flags.validation) out(`  validation: ${validation.length} tasks near ${flags.validationTargets.join(' and ')}`);
  if (flags.out)
    out(`  written to ${flags.out}: selected.txt, manifest.json${flags.validation ? ', validation.txt' : ''}`);
  else
    out(
      table(
        ['task', 'n', 'c', 'rate %', 'P(band)'],
        training.selected.map((t) => [t.task, t.n, t.c, pct(t.rate), num(t.bandProbability, 3)]),
      ),
    );
  return EXIT.ok;
}

export async function overlapCommand(
  sources: string[],
  flags: { models?: string[]; band: [number, number]; minTrials: number; json?: boolean },
): Promise<number> {
  const rates = taskRates(countByTask((await loadRecords(sources, flags.json)).records), flags.band);
  const models = flags.models ?? [...new Set(rates.map((r) => r.config))].sort();
  const sets = models.map(
    (m) =>
      new Set(
        ratesFor(rates, m)
          .filter((t) => t.n >= flags.minTrials && inBand(t.rate, flags.band[0], flags.band[1]))
          .map((t) => t.task),
      ),
  );
  const matrix = models.map((_, i) => models.map((__, j) => jaccard(sets[i]!, sets[j]!)));
  const ceilings = models.map((m) =>
    sameModelCeiling(
      ratesFor(rates, m).filter((t) => t.n >= flags.minTrials),
      flags.band,
    ),
  );
  if (flags.json) {
    out(
      statsJson({
        models,
        band: flags.band,
        sizes: sets.map((s) => s.size),
        jaccard: matrix,
        sameModelCeiling: ceilings,
      } satisfies OverlapOutput),
    );
    return EXIT.ok;
  }
  out(
    `Jaccard of band sets (band ${flags.band.join('-')}, >= ${flags.minTrials} trials); read against each model's same-model ceiling`,
  );
  out(
    table(
      ['', ...models],
      [
        ...models.map((m, i) => [m, ...matrix[i]!.map((v) => num(v, 2))]),
        ['ceiling', ...ceilings.map((v) => num(v, 2))],
        ['band set size', ...sets.map((s) => s.size)],
      ],
    ),
  );
  // A "-" is a Jaccard of two empty band sets (0/0) or no ceiling: say why each set is empty.
  const why = models.flatMap((m, i) =>
    sets[i]!.size ? [] : [`  ${m}: ${emptyBandSetReason(ratesFor(rates, m), flags.band, flags.minTrials)}`],
  );
  if (why.length)
    out(
      `"-" where a Jaccard has two empty band sets (0 of 0 tasks) or a ceiling has none to resample; empty band sets:\n${why.join('\n')}`,
    );
  return EXIT.ok;
}

/** Why a configuration's band set is empty: no graded trials, too few per task, or none in band. */
export function emptyBandSetReason(
  tasks: Array<{ n: number; rate: number }>,
  band: [number, number],
  minTrials: number,
): string {
  if (!tasks.length) return 'no graded trials in these sources (check the name against `termgrade stats`)';
  const enough = tasks.filter((t) => t.n >= minTrials);
  if (!enough.length)
    return `none of its ${tasks.length} task(s) has ${minTrials} graded trials (at most ${Math.max(...tasks.map((t) => t.n))}); run more trials (-k) or lower --min-trials`;
  const below = enough.filter((t) => t.rate < band[0]).length;
  return `none of its ${enough.length} task(s) with >= ${minTrials} trials has a rate in band ${band.join('-')} (${below} below, ${enough.length - below} above)`;
}
