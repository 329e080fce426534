import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { driftReport, type ServedGrade } from '../report/drift.js';
import { readTaskList } from '../task/list.js';
import { TermgradeError, ifMissing, isMissing, readFailure } from '../util/errors.js';
import { statsJson } from '../util/json.js';
import type { DriftOutput } from '../report/outputs.js';
import { EXIT } from './signals.js';
import { num, pct, table } from './table.js';

/** Grades a server recorded: a --record name, its data folder (grades.jsonl inside) or the file itself. */
async function readGrades(source: string): Promise<ServedGrade[]> {
  const named = path.join('.termgrade', 'serve', source);
  if (
    !(await ifMissing(stat(source), null)) &&
    /^[A-Za-z0-9._-]+$/.test(source) &&
    (await ifMissing(stat(named), null))
  )
    source = named;
  const file = (await ifMissing(stat(source), null))?.isDirectory() ? path.join(source, 'grades.jsonl') : source;
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if (!isMissing(err)) throw new TermgradeError('bad_input', `${file}: cannot read the grades (${readFailure(err)})`);
    throw new TermgradeError(
      'bad_input',
      `${file}: no grades recorded here (a \`serve --data-dir\` folder holds grades.jsonl)`,
    );
  }
  return text
    .split('\n')
    .filter((l) => l.trim())
    .map((line, i) => {
      try {
        const g = JSON.parse(line) as {
          task: string;
          model?: string | null;
          reward: number | null;
          finished_at?: string;
        };
        return { task: g.task, policy: g.model ?? 'unlabelled', reward: g.reward, at: g.finished_at ?? '' };
      } catch (err) {
        throw new TermgradeError('bad_input', `${file}:${i + 1}: not JSON: ${(err as Error).message}`);
      }
    });
}

export async function driftCommand(
  source: string,
  flags: { selection?: string; band: [number, number]; recent: number; minTrials: number; json?: boolean },
): Promise<number> {
  const grades = await readGrades(source);
  const selected = flags.selection
    ? await readTaskList(path.join(flags.selection, 'selected.txt'), 'selection')
    : undefined;
  const rows = driftReport(grades, { band: flags.band, recent: flags.recent, minTrials: flags.minTrials, selected });
  const left = rows.filter((r) => (selected ? r.selected : true) && r.verdict !== 'in_band' && r.verdict !== 'too_few');
  if (flags.json) {
    process.stdout.write(
      `${statsJson({ band: flags.band, recent: flags.recent, rows, leftBand: left.map((r) => ({ policy: r.policy, task: r.task, verdict: r.verdict })) } satisfies DriftOutput)}\n`,
    );
    return EXIT.ok;
  }
  process.stdout.write(
    `${table(
      ['policy', 'task', 'n', 'c', 'rate %', 'Jeffreys 95%', 'P(band)', 'verdict'],
      rows.map((r) => [
        r.policy,
        r.task,
        r.n,
        r.c,
        pct(r.rate),
        `[${pct(r.interval[0])}, ${pct(r.interval[1])}]`,
        num(r.bandProbability, 3),
        r.verdict,
      ]),
    )}\n`,
  );
  process.stdout.write(
    `\n${left.length} ${selected ? 'selected ' : ''}task(s) left the band ${flags.band.join('-')} over their last ${flags.recent} graded rollouts${left.length ? `: ${left.map((r) => `${r.task} (${r.verdict}, ${r.policy})`).join(', ')}` : ''}\n`,
  );
  return EXIT.ok;
}
