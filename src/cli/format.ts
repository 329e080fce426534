import type { CheckedTask, CheckReport } from '../check/schema.js';

const secs = (ms: number | null): string => (ms === null ? '-' : `${(ms / 1000).toFixed(1)}s`);

export function taskLine(t: CheckedTask): string {
  const mark = t.verdict === 'admissible' ? 'ok  ' : 'FAIL';
  const why = t.reasons.length ? ` [${t.reasons.join(', ')}]` : '';
  return `${mark} ${t.name}${why}  (${t.tests.length} tests, ${secs(t.durationMs)})`;
}

/** The human summary: one line per task, problems indented under it, then yield and reasons. */
export function formatCheckReport(report: CheckReport): string {
  const lines: string[] = [];
  for (const t of report.tasks) {
    lines.push(taskLine(t));
    if (t.verdict === 'rejected') for (const d of t.details.filter((x) => !x.startsWith('warning: ')).slice(0, 5)) lines.push(`       ${d}`);
    // Warnings: what a probe suspected but execution did not confirm (never a rejection).
    for (const f of t.findings.filter((x) => !x.rejects).slice(0, 3)) lines.push(`       warning: ${f.probe}: ${f.saw}`);
  }
  const s = report.summary;
  lines.push('');
  lines.push(`${s.admissible} of ${s.total} admissible (yield ${(s.yield * 100).toFixed(1)}%) in ${secs(s.durationMs)}${s.cancelled ? ' -- CANCELLED, partial results' : ''}`);
  const reasons = Object.entries(s.reasons).sort((a, b) => b[1] - a[1]);
  if (reasons.length) lines.push(`rejections: ${reasons.map(([r, n]) => `${r} ${n}`).join(', ')}`);
  lines.push(`trials and logs: ${s.outDir}`);
  return lines.join('\n');
}
