import { combiningLine } from '../store/identity.js';
import type { ReportData } from './page-data.js';
import { passAtKMethodNote } from '../stats/pass-at-k.js';

/** HTML-escaped text. */
export const esc = (s: unknown): string => String(s ?? '').replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

const pct = (x: number | null | undefined): string =>
  x === null || x === undefined || !Number.isFinite(x) ? '-' : (100 * x).toFixed(1);
const num = (x: number | null | undefined, digits = 2): string =>
  x === null || x === undefined || !Number.isFinite(x) ? '-' : x.toFixed(digits);

type Cell =
  string | number | null | { text: string; sort: number | string; cls?: string; href?: string; title?: string };

/** A sortable table: every cell carries the value it sorts by (click a header to sort). */
function table(id: string, head: string[], rows: Cell[][]): string {
  const cell = (c: Cell): string => {
    if (c !== null && typeof c === 'object') {
      const text = c.href ? `<a href="${esc(c.href)}">${esc(c.text)}</a>` : esc(c.text);
      return `<td data-v="${esc(c.sort)}"${c.cls ? ` class="${c.cls}"` : ''}${c.title ? ` title="${esc(c.title)}"` : ''}>${text}</td>`;
    }
    const v = c ?? '';
    return `<td data-v="${esc(v)}">${esc(v === '' ? '-' : v)}</td>`;
  };
  return `<table class="sortable" id="${id}"><thead><tr>${head.map((h) => `<th>${esc(h)}</th>`).join('')}</tr></thead><tbody>${rows.map((r) => `<tr>${r.map(cell).join('')}</tr>`).join('')}</tbody></table>`;
}

const stat = (x: number | null, text = pct(x)): Cell => ({ text, sort: x === null || !Number.isFinite(x) ? -1e18 : x });

/** The synth funnel beside the check yield: what generation kept at each stage, and what check kept. */
function synthSection(d: ReportData): string {
  const f = d.synth;
  if (!f) return '<p class="empty">No synth job given (--synth DIR).</p>';
  const admission = f.stages.find((s) => s.stage === 'check')!;
  const parts = ['<h3 id="synth">Synthesis funnel</h3>'];
  const yields: Cell[][] = [
    ['synth, end to end (candidates to admitted tasks)', f.candidates, f.admitted, stat(f.endToEndYield)],
    ["synth's admission (its check stage)", admission.candidates, admission.passed, stat(admission.yield)],
  ];
  if (d.check) yields.push(['check output (--check)', d.check.total, d.check.admissible, stat(d.check.yield)]);
  parts.push(table('synth-yield', ['', 'entered', 'admitted', 'yield %'], yields));
  parts.push(
    `<p>${f.candidates} candidates in ${esc(f.outDir)}: ${f.admitted} admitted, ${f.rejected} rejected${f.unfinished ? `, ${f.unfinished} unfinished (the job was stopped; run it again to resume)` : ''}.</p>`,
  );
  const funnelRows = f.stages.map((s) => [
    s.stage,
    s.candidates,
    s.passed,
    stat(s.yield),
    s.runs,
    { text: num(s.wallMs / 1000, 1), sort: s.wallMs },
    stat(s.timeShare),
  ]);
  parts.push(table('synth-funnel', ['stage', 'entered', 'passed', 'yield %', 'runs', 'time s', 'time %'], funnelRows));
  parts.push(
    table(
      'synth-repairs',
      ['repaired part', 'repairs', 'candidates', 'of those admitted'],
      f.repairs.map((r) => [r.part, r.attempts, r.candidates, r.admitted]),
    ),
  );
  const reasons = Object.entries(f.rejections).sort((a, b) => b[1] - a[1]);
  if (reasons.length) parts.push(table('synth-rejections', ['rejection reason', 'candidates'], reasons));
  const t = f.testsPerAdmitted;
  const cost = f.costUsd === null ? 'cost unknown (no price)' : `cost $${num(f.costUsd, 4)}`;
  parts.push(
    `<p>Tests per admitted task: ${t.mean === null ? '-' : `mean ${num(t.mean, 1)} (min ${t.min}, max ${t.max})`}. Generator: ${f.tokens.calls} calls, ${f.tokens.prompt} prompt + ${f.tokens.completion} completion tokens, ${f.tokens.malformedReplies} malformed replies, ${cost}.</p>`,
  );
  return parts.join('\n');
}

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
.chart { margin: 8px 0; } figure.chart { margin: 8px 0 16px; } .figure-note { color: #555; font-size: 12px; } .note { color: #555; font-size: 13px; } .empty { color: #888; font-style: italic; }
`;

export interface RenderOptions {
  /**
   * Where a row's trials are listed, when the page is served beside the viewer (`termgrade view`
   * serves it at /report): the address of the viewer's trial list filtered to a configuration and,
   * when given, one task. A report written to a file has no viewer to link to.
   */
  trialsLink?: (filter: { config: string; task?: string }) => string;
}

/** A chart with what it is drawn over said under it: its band and the trials a task needs to count. */
function figure(id: string, svg: string | undefined, band: string, minTrials: string): string {
  if (!svg) return '';
  return `<figure class="chart" data-figure="${id}">${svg}<figcaption class="figure-note">Band: ${esc(band)}. Minimum trials: ${esc(minTrials)}.</figcaption></figure>`;
}

/** What every section of the page reads: the figures, the charts, and how a row links to its trials. */
interface PageContext {
  d: ReportData;
  charts: Record<string, string>;
  linked: (text: string, filter: { config: string; task?: string }) => Cell;
  band: string;
  everyTask: string;
}

/** pass@1 and pass@k: chart, table per configuration, pass@k chart. */
function passSection({ d, charts, linked, everyTask }: PageContext): string[] {
  // The k measured (1, 2, 4, ... and each configuration's largest n), not 2..count: a column per k that has figures.
  const kCols = [...new Set(d.configs.flatMap((c) => c.passAtK.map((p) => p.k)))]
    .filter((k) => k > 1)
    .sort((a, b) => a - b)
    .slice(0, 7);
  const parts: string[] = [];
  parts.push('<h2 id="pass1">pass@1 and pass@k</h2>');
  parts.push(figure('pass1', charts.pass1, 'none (pass@1 is the mean rate over every task)', everyTask));
  parts.push(
    table(
      'configs',
      [
        'config',
        'tasks',
        'graded trials',
        'pass@1 %',
        '95% CI',
        ...kCols.map((k) => `pass@${k} %`),
        'coverage %',
        'unmeasured tasks',
        'inconsistent rewards',
      ],
      d.configs.map((c) => [
        linked(c.config, { config: c.config }),
        c.tasks,
        c.trials,
        stat(c.pass1.mean),
        {
          text: c.pass1.ciLo === null ? '-' : `[${pct(c.pass1.ciLo)}, ${pct(c.pass1.ciHi)}]`,
          sort: c.pass1.ciLo ?? -1,
        },
        ...kCols.map((k) => {
          const p = c.passAtK.find((x) => x.k === k);
          return p ? stat(p.value, `${pct(p.value)}${p.method === 'unbiased' ? '' : ' (eb)'}`) : null;
        }),
        stat(c.coverage.fraction),
        c.unmeasuredTasks.length,
        c.findings.inconsistentTrials,
      ]),
    ),
  );
  // Said only when a figure above carries the mark: each configuration's method, named.
  const marked = d.configs.flatMap((c) =>
    c.passAtK
      .filter((p) => kCols.includes(p.k) && p.method !== 'unbiased')
      .map((p) => `<li>${esc(c.config)}, pass@${p.k}: ${esc(passAtKMethodNote(p, c.passAtKPrior))}</li>`),
  );
  if (marked.length)
    parts.push(
      `<div class="note" id="k-gt-n"><p>(eb): not the unbiased estimator alone:</p><ul>${marked.join('')}</ul></div>`,
    );
  parts.push(
    figure(
      'passAtK',
      charts.passAtK,
      'none (every task)',
      `${everyTask}; a task with fewer than k trials counts its own trials plus k - n predicted by the configuration's empirical-Bayes prior (never above 0 for a configuration that never succeeded, 1 for a task that did)`,
    ),
  );
  return parts;
}

/** Each pair of configurations compared on their common tasks. */
function pairedSection({ d }: PageContext): string[] {
  const parts: string[] = [];
  parts.push('<h2 id="paired">Paired comparisons</h2>');
  parts.push(
    d.paired.length
      ? table(
          'paired',
          ['A', 'B', 'common tasks', 'A - B (points)', '95% CI', 'p', '', 'test'],
          d.paired.map((p) => {
            const cls = p.significant ? 'sig' : 'ns';
            return [
              p.a,
              p.b,
              p.tasks,
              { text: `${p.meanDiff >= 0 ? '+' : ''}${pct(p.meanDiff)}`, sort: p.meanDiff, cls },
              { text: `[${pct(p.ciLo)}, ${pct(p.ciHi)}]`, sort: p.ciLo, cls },
              { text: p.p.toPrecision(3), sort: p.p, cls },
              { text: p.significant ? 'significant' : 'not significant', sort: p.significant ? 1 : 0, cls },
              p.method,
            ];
          }),
        )
      : '<p class="empty">Fewer than two configurations with common tasks.</p>',
  );
  return parts;
}

/** Per-task rates: the histogram and the task x configuration heatmap. */
function ratesSection({ charts, band, everyTask }: PageContext): string[] {
  const parts: string[] = [];
  parts.push('<h2 id="rates">Per-task rates</h2>');
  parts.push(
    figure('histogram', charts.histogram, `${band} (shaded; the counts in and out of band use it)`, everyTask),
  );
  parts.push('<h2 id="heatmap">Task x configuration</h2>');
  parts.push(figure('heatmap', charts.heatmap, `${band} (rates in the cells; the band is not drawn)`, everyTask));
  return parts;
}

/** Runtime, time, tokens and cost per success. */
function costSection({ d, charts, linked, everyTask }: PageContext): string[] {
  const parts: string[] = [];
  parts.push('<h2 id="cost">Runtime, time, tokens and cost per success</h2>');
  parts.push(figure('runtime', charts.runtime, 'none', everyTask));
  parts.push(
    table(
      'efficiency',
      [
        'config',
        'pass@1 %',
        'total trial time h',
        'successes',
        'median s / success',
        'median output tokens / success',
        'median $ / success',
        'near misses',
      ],
      d.runtime.map((r) => [
        linked(r.config, { config: r.config }),
        stat(r.pass1),
        stat(r.hours, num(r.hours, 3)),
        r.successes,
        stat(
          r.medianTimeMsPerSuccess === null ? null : r.medianTimeMsPerSuccess / 1000,
          num(r.medianTimeMsPerSuccess === null ? null : r.medianTimeMsPerSuccess / 1000, 1),
        ),
        stat(r.medianOutputTokensPerSuccess, num(r.medianOutputTokensPerSuccess, 0)),
        stat(r.medianCostUsdPerSuccess, num(r.medianCostUsdPerSuccess, 4)),
        r.nearMisses,
      ]),
    ),
  );
  return parts;
}

/** Band sets: Jaccard between configurations, read against the same-model ceiling. */
function overlapSection({ d, band }: PageContext): string[] {
  const names = d.configs.map((c) => c.config);
  const parts: string[] = [];
  parts.push('<h2 id="overlap">Band sets: Jaccard and the same-model ceiling</h2>');
  parts.push(
    `<p class="note">Band ${esc(band)}: tasks in the band with at least ${d.overlap.minTrials} graded trials. Read each Jaccard against the ceiling: re-measuring the same model would reach about that.</p>`,
  );
  // A "-" is never left unexplained: the cell says why there is no figure.
  const whyNoJaccard = `- (both band sets empty)`;
  const whyNoCeiling = (i: number): string =>
    d.overlap.measured[i] === 0
      ? `- (no task with ${d.overlap.minTrials}+ graded trials)`
      : `- (no task of it lands in the band when re-measured)`;
  parts.push(
    table(
      'jaccard',
      ['', ...names],
      [
        ...names.map((m, i) => [
          m,
          ...d.overlap.jaccard[i]!.map((v) =>
            v === null ? { text: whyNoJaccard, sort: -1, cls: 'ns' } : stat(v, num(v)),
          ),
        ]),
        [
          'same-model ceiling',
          ...d.overlap.sameModelCeiling.map((v, i) =>
            v === null ? { text: whyNoCeiling(i), sort: -1, cls: 'ns' } : stat(v, num(v)),
          ),
        ],
        ['band set size', ...d.overlap.sizes],
        [`tasks with ${d.overlap.minTrials}+ graded trials`, ...d.overlap.measured],
      ],
    ),
  );
  return parts;
}

/** The check's yield and the selection, when given. */
function checkSection({ d, linked, band }: PageContext): string[] {
  const parts: string[] = [];
  parts.push('<h2 id="check">Check yield and selection</h2>');
  if (d.check) {
    parts.push(
      `<p>${d.check.admissible} of ${d.check.total} candidate tasks admitted (yield ${pct(d.check.yield)}%), ${d.check.rejected} rejected.</p>`,
    );
    parts.push(
      table(
        'reasons',
        ['rejection reason', 'tasks'],
        Object.entries(d.check.reasons)
          .sort((a, b) => b[1] - a[1])
          .map(([k, v]) => [k, v]),
      ),
    );
  } else parts.push('<p class="empty">No check output given (--check check.json).</p>');
  parts.push(synthSection(d));
  if (d.selection) {
    const s = d.selection;
    const own = s.rule.band.join('-');
    parts.push(
      `<p class="note" id="selection-band">This table uses the selection's own band, ${esc(own)} (its rule, minimum ${s.rule.minTrials} graded trials)${own === band ? ", the same as the report's" : `, not the report's ${esc(band)}`}; its P(band) is for ${esc(own)}.</p>`,
    );
    parts.push(
      `<p>Selection for <b>${esc(s.model)}</b>: band ${s.rule.band.join('-')}, target ${s.rule.target}; ${s.training.length} selected, ${s.validation.length} validation; left out ${s.skipped.outOfBand} out of band, ${s.skipped.tooFewTrials} with too few trials, ${s.skipped.unmeasured} unmeasured.</p>`,
    );
    parts.push(
      table(
        'selected',
        ['set', 'task', 'trials', 'rate %', `P(band ${own})`],
        [
          ...s.training.map((t) => [
            'training',
            linked(t.task, { config: s.model, task: t.task }),
            t.trials,
            stat(t.rate),
            stat(t.bandProbability, num(t.bandProbability, 3)),
          ]),
          ...s.validation.map((t) => [
            `validation (${t.target})`,
            linked(t.task, { config: s.model, task: t.task }),
            t.trials,
            stat(t.rate),
            stat(t.bandProbability, num(t.bandProbability, 3)),
          ]),
        ],
      ),
    );
  } else parts.push('<p class="empty">No selection given (--select DIR or manifest.json).</p>');
  return parts;
}

/** Trajectory behaviour, error classes, near misses and the tests that fail most. */
function behaviourSection({ d, charts, linked }: PageContext): string[] {
  const parts: string[] = [];
  parts.push('<h2 id="behaviour">Trajectory behaviour</h2>');
  parts.push(
    table(
      'behaviour',
      [
        'config',
        'trials',
        'with trajectory',
        'quit early (complete in <= 2 turns, no command)',
        'turns with no valid action',
        'median output tokens of those turns',
        'turns: success - failure, same task (median; tasks)',
        'input : output tokens',
      ],
      d.behaviour.map((b) => [
        b.config,
        b.trials,
        b.withTrajectory,
        b.quitEarly,
        { text: `${b.noActionTurns} of ${b.turns}`, sort: b.noActionTurns },
        stat(b.noActionTokensMedian, num(b.noActionTokensMedian, 0)),
        {
          text:
            b.turnsSuccessMinusFailure === null ? '-' : `${num(b.turnsSuccessMinusFailure, 1)} (${b.tasksWithBoth})`,
          sort: b.turnsSuccessMinusFailure ?? -1e18,
        },
        stat(b.inputOutputRatio, b.inputOutputRatio === null ? '-' : `${num(b.inputOutputRatio, 1)} : 1`),
      ]),
    ),
  );
  parts.push(figure('errors', charts.errors, 'none', 'none (every trial, graded or not)'));
  parts.push('<h3>Near misses (failed exactly one test of eight or more)</h3>');
  parts.push(
    d.nearMisses.length
      ? table(
          'near-misses',
          ['job', 'trial', 'config', 'task', 'tests passed', 'failing test'],
          d.nearMisses.map((n) => [
            n.job,
            n.trialId,
            n.config,
            linked(n.task, { config: n.config, task: n.task }),
            n.testsPassed,
            n.failing.join(', ') || '-',
          ]),
        )
      : '<p class="empty">None.</p>',
  );
  parts.push('<h3>Tests that fail most</h3>');
  parts.push(
    d.failingTests.length
      ? table(
          'failing-tests',
          ['task :: test', 'failures', 'configs'],
          d.failingTests.map((t) => [t.test, t.failures, t.configs.join(', ')]),
        )
      : '<p class="empty">No failing test names recorded.</p>',
  );
  return parts;
}

/** Graded trials whose reward disagrees with their evidence. */
function consistencySection({ d, linked }: PageContext): string[] {
  const parts: string[] = [];
  parts.push('<h2 id="consistency">Reward consistency</h2>');
  parts.push(
    `<p class="note">Graded trials whose reward disagrees with the verifier's other evidence: a full reward while tests failed, or reward.json and reward.txt that differ. Their reward is counted as the verifier gave it; look at them before trusting it.</p>`,
  );
  parts.push(
    d.inconsistent.length
      ? table(
          'inconsistent',
          ['trial', 'config', 'task', 'reward', 'finding', 'details'],
          d.inconsistent.flatMap((t) =>
            t.findings.map((f) => [
              t.trialId,
              t.config,
              linked(t.task, { config: t.config, task: t.task }),
              t.reward,
              f.code,
              f.message,
            ]),
          ),
        )
      : '<p class="empty">No trial has an inconsistent reward.</p>',
  );
  return parts;
}

/** Every task with a graded trial: its rate, interval and P(band). */
function tasksSection({ d, linked, band }: PageContext): string[] {
  const parts: string[] = [];
  parts.push('<h2 id="tasks">Every task</h2>');
  parts.push(
    `<p class="note" id="tasks-band">P(band) here is for the report's band, ${esc(band)} (--band), under the Jeffreys posterior; every task with at least one graded trial.${d.selection && d.selection.rule.band.join('-') !== band ? ` The selection above used its own band, ${esc(d.selection.rule.band.join('-'))}.` : ''}</p>`,
  );
  parts.push(
    table(
      'task-rates',
      ['config', 'task', 'n', 'c', 'rate %', 'Jeffreys 95%', `P(band ${band})`],
      d.tasks.map((t) => [
        t.config,
        linked(t.task, { config: t.config, task: t.task }),
        t.n,
        t.c,
        stat(t.rate),
        { text: `[${pct(t.jeffreys[0])}, ${pct(t.jeffreys[1])}]`, sort: t.jeffreys[0] },
        stat(t.bandProbability, num(t.bandProbability, 3)),
      ]),
    ),
  );
  return parts;
}

/** The report as one self-contained page: charts inline as SVG, tables sortable by a few lines of script. */
export function renderReport(
  d: ReportData,
  charts: Record<string, string>,
  generatedAt: string,
  options: RenderOptions = {},
): string {
  const link = options.trialsLink;
  const linked = (text: string, filter: { config: string; task?: string }): Cell =>
    link ? { text, sort: text, href: link(filter) } : text;
  const band = `${d.band[0]}-${d.band[1]}`;
  const everyTask = '1 graded trial per task (every task with a rate)';
  const parts: string[] = [];
  parts.push(
    `<h1>termgrade report</h1><p class="note">${esc(d.trials)} graded or attempted trials from ${d.sources.map((s) => `<code>${esc(s)}</code>`).join(', ')}; generated ${esc(generatedAt)}. Band ${d.band[0]}-${d.band[1]}. Figures are those of <code>termgrade stats --json</code> on the same sources (also in report.json).</p>`,
  );
  const combining = combiningLine(d.jobs);
  if (combining)
    parts.push(
      `<p class="note combining">${esc(combining)}: each trial counted once, trials of different jobs never merged.</p>`,
    );
  const c: PageContext = { d, charts, linked, band, everyTask };
  for (const section of [
    passSection,
    pairedSection,
    ratesSection,
    costSection,
    overlapSection,
    checkSection,
    behaviourSection,
    consistencySection,
    tasksSection,
  ]) {
    parts.push(...section(c));
  }

  return `<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>termgrade report</title><meta name="viewport" content="width=device-width, initial-scale=1"><style>${STYLE}</style></head><body>${parts.join('\n')}<script>${SORT_SCRIPT}</script></body></html>\n`;
}
