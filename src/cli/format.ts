import type { CheckedTask, CheckReport } from '../check/schema.js';
import type { Task } from '../task/task.js';

/** Prints what loading the tasks noticed but kept (a typo'd task.toml section or key), on stderr. */
export function warnAboutTasks(tasks: Iterable<Pick<Task, 'warnings'>>): void {
  for (const t of tasks) for (const w of t.warnings ?? []) process.stderr.write(`termgrade: warning: ${w}\n`);
}

/** A task.toml warning as check keeps it among a task's details (see check.ts). */
const CONFIG_WARNING = /^warning: \S*task\.toml: /;

const secs = (ms: number | null): string => (ms === null ? '-' : `${(ms / 1000).toFixed(1)}s`);

export function taskLine(t: CheckedTask): string {
  const mark = t.verdict === 'admissible' ? 'ok  ' : 'FAIL';
  const why = t.reasons.length ? ` [${t.reasons.join(', ')}]` : '';
  return `${mark} ${t.name}${why}  (${t.tests.length} tests, ${secs(t.durationMs)})`;
}

/** One task's block: its line, then its problems (when rejected) and its warnings indented under it. */
export function taskBlock(t: CheckedTask): string[] {
  const lines = [taskLine(t)];
  if (t.verdict === 'rejected')
    for (const d of t.details.filter((x) => !x.startsWith('warning: ')).slice(0, 5)) lines.push(`       ${d}`);
  for (const d of t.details.filter((x) => CONFIG_WARNING.test(x))) lines.push(`       ${d}`);
  // Warnings: what a probe suspected but execution did not confirm (never a rejection).
  for (const f of t.findings.filter((x) => !x.rejects).slice(0, 3)) lines.push(`       warning: ${f.probe}: ${f.saw}`);
  // What stood in for what the task asked, and the probes left out: said for every task.
  if (t.substitutions.length) lines.push(`       substituted: ${t.substitutions.join('; ')}`);
  for (const p of t.probesNotRun) lines.push(`       probes not run: ${p}`);
  return lines;
}

/**
 * The human summary: each task's block, then yield and reasons. `listed`: the blocks the progress
 * display already printed where this goes, by task path; a task is left out when its block is
 * still the same (no task is listed twice), and shown again when it changed since (a duplicate
 * found once every task was checked).
 */
export function formatCheckReport(report: CheckReport, options: { listed?: ReadonlyMap<string, string> } = {}): string {
  const lines: string[] = [];
  for (const t of report.tasks) {
    const block = taskBlock(t);
    if (options.listed?.get(t.path) !== block.join('\n')) lines.push(...block);
  }
  const s = report.summary;
  if (lines.length) lines.push('');
  lines.push(
    `${s.admissible} of ${s.total} admissible (yield ${(s.yield * 100).toFixed(1)}%) in ${secs(s.durationMs)}${s.cancelled ? ' -- CANCELLED, partial results' : ''}`,
  );
  const reasons = Object.entries(s.reasons).sort((a, b) => b[1] - a[1]);
  if (reasons.length) lines.push(`rejections: ${reasons.map(([r, n]) => `${r} ${n}`).join(', ')}`);
  lines.push(`trials and logs: ${s.outDir}`);
  return lines.join('\n');
}
