import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { CheckReportSchema, type CheckReport } from '../check/schema.js';
import { TermgradeError, ifMissing } from '../util/errors.js';
import { statsJson } from '../util/json.js';
import { charts } from './charts.js';
import { loadDetails } from './details.js';
import { loadRecordSet } from '../records/load.js';
import { SelectManifestSchema, type SelectManifest } from './outputs.js';
import { reportData, type ReportData, type SynthFunnelView } from './page-data.js';
import { renderReport } from './page.js';

export interface BuildReportOptions {
  sources: string[];
  outDir: string;
  band?: [number, number];
  minTrials?: number;
  /** A check output (check.json) for the yield and rejection reasons. */
  check?: string;
  /** A selection: `select --out` folder or its manifest.json. */
  select?: string;
  /** A synth job's funnel (synth's readSynthFunnel of `report --synth DIR`), shown beside the check yield. */
  synth?: SynthFunnelView;
}

async function readContract<T>(
  file: string,
  schema: {
    safeParse(
      v: unknown,
    ):
      | { success: true; data: T }
      | { success: false; error: { issues: Array<{ path: PropertyKey[]; message: string }> } };
  },
  what: string,
): Promise<T> {
  let raw: unknown;
  try {
    raw = JSON.parse(await readFile(file, 'utf8'));
  } catch (err) {
    throw new TermgradeError('bad_input', `${file}: cannot read ${what}: ${(err as Error).message}`);
  }
  const parsed = schema.safeParse(raw);
  if (!parsed.success)
    throw new TermgradeError(
      'bad_input',
      `${file}: not ${what}: ${parsed.error.issues
        .slice(0, 3)
        .map((i) => `${i.path.join('.') || '(top)'}: ${i.message}`)
        .join('; ')}`,
    );
  return parsed.data;
}

/**
 * `termgrade report`: index.html (self-contained: charts as inline SVG, no script but table
 * sorting, nothing fetched) and report.json (the figures) in `outDir`.
 */
export async function buildReport(o: BuildReportOptions): Promise<{ index: string; data: ReportData }> {
  // A report of a synth job (--synth) may have no trials of its own.
  const { records, jobs } = await loadRecordSet(o.sources, { allowEmpty: o.synth !== undefined });
  const details = await loadDetails(o.sources);
  let check: CheckReport | null = null;
  if (o.check) check = await readContract(o.check, CheckReportSchema, 'a check output (check.json)');
  let selection: SelectManifest | null = null;
  if (o.select) {
    const file = (await ifMissing(stat(o.select), null))?.isDirectory() // absent: readContract says so
      ? path.join(o.select, 'manifest.json')
      : o.select;
    selection = await readContract(file, SelectManifestSchema, 'a selection manifest (select --out DIR/manifest.json)');
  }
  const synth = o.synth ?? null;
  const data = reportData({
    sources: o.sources,
    jobs,
    records,
    details,
    band: o.band ?? [0.25, 0.75],
    minTrials: o.minTrials ?? 4,
    check,
    selection,
    synth,
  });
  const svgs = await charts(data);
  await mkdir(o.outDir, { recursive: true });
  const index = path.join(o.outDir, 'index.html');
  await writeFile(index, renderReport(data, svgs, new Date().toISOString()));
  await writeFile(path.join(o.outDir, 'report.json'), `${statsJson(data)}\n`);
  return { index, data };
}
