import { charts } from '../report/charts.js';
import { loadDetails } from '../report/details.js';
import { loadRecordSet } from '../records/load.js';
import { reportData } from '../report/page-data.js';
import { renderReport } from '../report/page.js';

/** The viewer's trial list filtered to a configuration and, when given, exactly one task. */
export function trialsLink(f: { config: string; task?: string }): string {
  const q = new URLSearchParams({ config: f.config });
  if (f.task) {
    q.set('task', f.task);
    q.set('exact', '1');
  }
  return `/#/?${q}`;
}

/** report.json's figures over the viewer's sources (the report's default band and minimum trials). */
export async function viewerReportData(sources: string[]): Promise<ReturnType<typeof reportData>> {
  const { records, jobs } = await loadRecordSet(sources);
  const details = await loadDetails(sources);
  return reportData({ sources, jobs, records, details, band: [0.25, 0.75], minTrials: 4 });
}

/**
 * `termgrade report`'s page over the viewer's sources, with the report's default band and
 * minimum trials, each row linking to its trials in the viewer.
 */
export async function viewerReport(sources: string[]): Promise<string> {
  const data = await viewerReportData(sources);
  return renderReport(data, await charts(data), new Date().toISOString(), { trialsLink });
}
