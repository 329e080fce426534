import { combiningLine } from '../store/identity.js';
import type { ReportData } from './page-data.js';

/** HTML-escaped text. */
export const esc = (s: unknown): string => String(s ?? '').replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

const pct = (x: number | null | undefined): string => (x === null || x === undefined || !Number.isFinite(x) ? '-' : `${(100 * x).toFixed(1)}`);
const num = (x: number | null | undefined, digits = 2): string => (x === null || x === undefined || !Number.isFinite(x) ? '-' : x.toFixed(digits));

type Cell = string | number | null | { text: string; sort: number | string; cls?: string };

/** A sortable table: every cell carries the value it sorts by (click a header to sort). */
function table(id: string, head: string[], rows: Cell[][]): string {
  const cell = (c: Cell): string => {
    if (c !== null && typeof c === 'object') return `<td data-v="${esc(c.sort)}"${c.cls ? ` class="${c.cls}"` : ''}>${esc(c.text)}</td>`;
    const v = c ?? '';
    return `<td data-v="${esc(v)}">${esc(v === '' ? '-' : v)}</td>`;
  };
  return `<table class="sortable" id="${id}"><thead><tr>${head.map((h) => `<th>${esc(h)}</th>`).join('')}</tr></thead><tbody>${rows.map((r) => `<tr>${r.map(cell).join('')}</tr>`).join('')}</tbody></table>`;
}

const stat = (x: number | null, text = pct(x)): Cell => ({ text, sort: x === null || !Number.isFinite(x) ? -1e18 : x });

const SORT_SCRIPT = `
for (const t of document.querySelectorAll('table.sortable')) {
  t.querySelectorAll('th').forEach((th, i) => th.addEventListener('click', () => {
    const dir = th.dataset.dir === 'asc' ? 'desc' : 'asc';
    t.querySelectorAll('th').forEach((h) => delete h.dataset.dir);
    th.dataset.dir = dir;
    const rows = [...t.tBodies[0].rows];
    const key = (r) => { const v = r.cells[i].dataset.v; const n = Number(v); return v !== '' && !Number.isNaN(n) ? n : v; };
    rows.sort((a, b) => { const x = key(a), y = key(b); const c = typeof x === 'number' && typeof y === 'number' ? x - y : String(x).localeCompare(String(y)); return dir === 'asc' ? c : -c; });
    for (const r of rows) t.tBodies[0].appendChild(r);
  }));
}`;

const STYLE = `
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px auto; max-width: 1100px; color: #222; padding: 0 16px; }
h1 { font-size: 22px; } h2 { font-size: 17px; margin-top: 36px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
table { border-collapse: collapse; margin: 8px 0 16px; font-size: 13px; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; }
th { background: #f4f4f4; cursor: pointer; user-select: none; }
th[data-dir=asc]::after { content: ' \\25B2'; } th[data-dir=desc]::after { content: ' \\25BC'; }
td.ns { color: #888; } td.sig { font-weight: 600; }
.chart { margin: 8px 0; } .note { color: #555; font-size: 13px; } .empty { color: #888; font-style: italic; }
`;

/** The report as one self-contained page: charts inline as SVG, tables sortable by a few lines of script. */
export function renderReport(d: ReportData, charts: Record<string, string>, generatedAt: string): string {
  const names = d.configs.map((c) => c.config);
  const maxK = Math.max(1, ...d.configs.map((c) => c.passAtK.length));
  const kCols = Array.from({ length: Math.min(maxK, 8) - 1 }, (_, i) => i + 2);
  const parts: string[] = [];
  parts.push(`<h1>termgrade report</h1><p class="note">${esc(d.trials)} graded or attempted trials from ${d.sources.map((s) => `<code>${esc(s)}</code>`).join(', ')}; generated ${esc(generatedAt)}. Band ${d.band[0]}-${d.band[1]}. Figures are those of <code>termgrade stats --json</code> on the same sources (also in report.json).</p>`);
  const combining = combiningLine(d.jobs);
  if (combining) parts.push(`<p class="note combining">${esc(combining)}: each trial counted once, trials of different jobs never merged.</p>`);

  parts.push('<h2 id="pass1">pass@1 and pass@k</h2>');
  parts.push(`<div class="chart">${charts.pass1 ?? ''}</div>`);
  parts.push(
    table(
      'configs',
      ['config', 'tasks', 'graded trials', 'pass@1 %', '95% CI', ...kCols.map((k) => `pass@${k} %`), 'coverage %', 'unmeasured tasks', 'inconsistent rewards'],
      d.configs.map((c) => [
        c.config,
        c.tasks,
        c.trials,
        stat(c.pass1.mean),
        { text: c.pass1.ciLo === null ? '-' : `[${pct(c.pass1.ciLo)}, ${pct(c.pass1.ciHi)}]`, sort: c.pass1.ciLo ?? -1 },
        ...kCols.map((k) => {
          const p = c.passAtK.find((x) => x.k === k);
          return p ? stat(p.value, `${pct(p.value)}${p.method === 'model' ? ' (k>n)' : ''}`) : null;
        }),
        stat(c.coverage.fraction),
        c.unmeasuredTasks.length,
        c.findings.inconsistentTrials,
      ]),
    ),
  );
  parts.push(`<p class="note">(k&gt;n): some tasks have fewer than k trials; their pass@k is the Jeffreys-posterior model estimate, not the unbiased one.</p>`);
  parts.push(`<div class="chart">${charts.passAtK ?? ''}</div>`);

  parts.push('<h2 id="paired">Paired comparisons</h2>');
  parts.push(
    d.paired.length
      ? table(
          'paired',
          ['A', 'B', 'common tasks', 'A - B (points)', '95% CI', 'p', ''],
          d.paired.map((p) => {
            const cls = p.significant ? 'sig' : 'ns';
            return [p.a, p.b, p.tasks, { text: `${p.meanDiff >= 0 ? '+' : ''}${pct(p.meanDiff)}`, sort: p.meanDiff, cls }, { text: `[${pct(p.ciLo)}, ${pct(p.ciHi)}]`, sort: p.ciLo, cls }, { text: p.p.toPrecision(3), sort: p.p, cls }, { text: p.significant ? 'significant' : 'not significant', sort: p.significant ? 1 : 0, cls }];
          }),
        )
      : '<p class="empty">Fewer than two configurations with common tasks.</p>',
  );

  parts.push('<h2 id="rates">Per-task rates</h2>');
  parts.push(`<div class="chart">${charts.histogram ?? ''}</div>`);

  parts.push('<h2 id="cost">Runtime, time, tokens and cost per success</h2>');
  parts.push(`<div class="chart">${charts.runtime ?? ''}</div>`);
  parts.push(
    table(
      'efficiency',
      ['config', 'pass@1 %', 'total trial time h', 'successes', 'median s / success', 'median output tokens / success', 'median $ / success', 'near misses'],
      d.runtime.map((r) => [r.config, stat(r.pass1), stat(r.hours, num(r.hours, 3)), r.successes, stat(r.medianTimeMsPerSuccess === null ? null : r.medianTimeMsPerSuccess / 1000, num(r.medianTimeMsPerSuccess === null ? null : r.medianTimeMsPerSuccess / 1000, 1)), stat(r.medianOutputTokensPerSuccess, num(r.medianOutputTokensPerSuccess, 0)), stat(r.medianCostUsdPerSuccess, num(r.medianCostUsdPerSuccess, 4)), r.nearMisses]),
    ),
  );

  parts.push('<h2 id="overlap">Band sets: Jaccard and the same-model ceiling</h2>');
  parts.push(`<p class="note">Tasks in the band with at least ${d.overlap.minTrials} graded trials. Read each Jaccard against the ceiling: re-measuring the same model would reach about that.</p>`);
  parts.push(
    table(
      'jaccard',
      ['', ...names],
      [
        ...names.map((m, i) => [m, ...d.overlap.jaccard[i]!.map((v) => stat(v, num(v)))]),
        ['same-model ceiling', ...d.overlap.sameModelCeiling.map((v) => stat(v, num(v)))],
        ['band set size', ...d.overlap.sizes],
      ],
    ),
  );

  parts.push('<h2 id="check">Check yield and selection</h2>');
  if (d.check) {
    parts.push(`<p>${d.check.admissible} of ${d.check.total} candidate tasks admitted (yield ${pct(d.check.yield)}%), ${d.check.rejected} rejected.</p>`);
    parts.push(table('reasons', ['rejection reason', 'tasks'], Object.entries(d.check.reasons).sort((a, b) => b[1] - a[1]).map(([k, v]) => [k, v])));
  } else parts.push('<p class="empty">No check output given (--check check.json).</p>');
  if (d.selection) {
    const s = d.selection;
    parts.push(`<p>Selection for <b>${esc(s.model)}</b>: band ${s.rule.band.join('-')}, target ${s.rule.target}; ${s.training.length} selected, ${s.validation.length} validation; left out ${s.skipped.outOfBand} out of band, ${s.skipped.tooFewTrials} with too few trials, ${s.skipped.unmeasured} unmeasured.</p>`);
    parts.push(table('selected', ['set', 'task', 'trials', 'rate %', 'P(band)'], [...s.training.map((t) => ['training', t.task, t.trials, stat(t.rate), stat(t.bandProbability, num(t.bandProbability, 3))]), ...s.validation.map((t) => [`validation (${t.target})`, t.task, t.trials, stat(t.rate), stat(t.bandProbability, num(t.bandProbability, 3))])]));
  } else parts.push('<p class="empty">No selection given (--select DIR or manifest.json).</p>');

  parts.push('<h2 id="behaviour">Trajectory behaviour</h2>');
  parts.push(
    table(
      'behaviour',
      ['config', 'trials', 'with trajectory', 'quit early (complete in <= 2 turns, no command)', 'turns with no valid action', 'median output tokens of those turns', 'turns: success - failure, same task (median; tasks)', 'input : output tokens'],
      d.behaviour.map((b) => [b.config, b.trials, b.withTrajectory, b.quitEarly, { text: `${b.noActionTurns} of ${b.turns}`, sort: b.noActionTurns }, stat(b.noActionTokensMedian, num(b.noActionTokensMedian, 0)), { text: b.turnsSuccessMinusFailure === null ? '-' : `${num(b.turnsSuccessMinusFailure, 1)} (${b.tasksWithBoth})`, sort: b.turnsSuccessMinusFailure ?? -1e18 }, stat(b.inputOutputRatio, b.inputOutputRatio === null ? '-' : `${num(b.inputOutputRatio, 1)} : 1`)]),
    ),
  );
  if (charts.errors) parts.push(`<div class="chart">${charts.errors}</div>`);
  parts.push('<h3>Near misses (failed exactly one test of eight or more)</h3>');
  parts.push(d.nearMisses.length ? table('near-misses', ['job', 'trial', 'config', 'task', 'tests passed', 'failing test'], d.nearMisses.map((n) => [n.job, n.trialId, n.config, n.task, n.testsPassed, n.failing.join(', ') || '-'])) : '<p class="empty">None.</p>');
  parts.push('<h3>Tests that fail most</h3>');
  parts.push(d.failingTests.length ? table('failing-tests', ['task :: test', 'failures', 'configs'], d.failingTests.map((t) => [t.test, t.failures, t.configs.join(', ')])) : '<p class="empty">No failing test names recorded.</p>');

  parts.push('<h2 id="consistency">Reward consistency</h2>');
  parts.push(`<p class="note">Graded trials whose reward disagrees with the verifier's other evidence: a full reward while tests failed, or reward.json and reward.txt that differ. Their reward is counted as the verifier gave it; look at them before trusting it.</p>`);
  parts.push(d.inconsistent.length ? table('inconsistent', ['trial', 'config', 'task', 'reward', 'finding', 'details'], d.inconsistent.flatMap((t) => t.findings.map((f) => [t.trialId, t.config, t.task, t.reward, f.code, f.message]))) : '<p class="empty">No trial has an inconsistent reward.</p>');

  parts.push('<h2 id="tasks">Every task</h2>');
  parts.push(
    table(
      'task-rates',
      ['config', 'task', 'n', 'c', 'rate %', 'Jeffreys 95%', `P(band)`],
      d.tasks.map((t) => [t.config, t.task, t.n, t.c, stat(t.rate), { text: `[${pct(t.jeffreys[0])}, ${pct(t.jeffreys[1])}]`, sort: t.jeffreys[0] }, stat(t.bandProbability, num(t.bandProbability, 3))]),
    ),
  );

  return `<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>termgrade report</title><meta name="viewport" content="width=device-width, initial-scale=1"><style>${STYLE}</style></head><body>${parts.join('\n')}<script>${SORT_SCRIPT}</script></body></html>\n`;
}
