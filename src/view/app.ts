import { PASS_REWARD } from '../trial/accounting.js';
/**
 * The viewer's page: one static HTML shell and one script, no build step and nothing fetched from
 * outside. Routes live in the address's hash, so every view is a deep link:
 *   #/?config=..&status=..&page=..   the trial table (filters, sorting, paging on the server)
 *   #/jobs                           every job: per configuration graded trials, pass@1, coverage, cost
 *   #/grid?config=..                 task x configuration rates (the same filters); cells link to their trials
 *   #/trial/ID                       one trial: phases, tests, transcript, screens, logs
 *   #/compare/ID/ID                  two trials side by side
 * Text from trials is only ever put in the page as text (textContent), never as HTML.
 */
export const APP_HTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>termgrade view</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 0; color: #222; }
header { background: #24292f; color: #fff; padding: 8px 16px; display: flex; gap: 16px; align-items: center; }
header a { color: #fff; text-decoration: none; font-weight: 600; }
main { padding: 12px 16px; }
.jobs { display: flex; gap: 12px; flex-wrap: wrap; margin-bottom: 10px; }
.job { border: 1px solid #ddd; border-radius: 6px; padding: 6px 10px; font-size: 13px; }
.bar { height: 6px; background: #eee; border-radius: 3px; margin-top: 4px; width: 180px; }
.bar > div { height: 6px; background: #2da44e; border-radius: 3px; }
.filters { display: flex; gap: 8px; flex-wrap: wrap; margin: 8px 0; }
.filters label { font-size: 12px; color: #555; display: flex; flex-direction: column; }
table { border-collapse: collapse; font-size: 13px; width: 100%; }
th, td { border-bottom: 1px solid #eee; padding: 4px 6px; text-align: left; vertical-align: top; }
th { background: #f6f8fa; cursor: pointer; user-select: none; white-space: nowrap; }
tr.pass td.reward { color: #1a7f37; font-weight: 600; } tr.fail td.reward { color: #cf222e; font-weight: 600; }
.pager { margin: 8px 0; display: flex; gap: 8px; align-items: center; }
pre { background: #f6f8fa; padding: 8px; overflow-x: auto; white-space: pre-wrap; word-break: break-word; margin: 4px 0; font-size: 12px; }
details { margin: 4px 0; } summary { cursor: pointer; }
.step { border-left: 3px solid #ddd; padding-left: 8px; margin: 10px 0; }
.step.agent { border-color: #0969da; } .step.user { border-color: #8250df; } .step.system { border-color: #999; }
.timeline { position: relative; height: 22px; background: #f6f8fa; margin: 6px 0 14px; }
.timeline div { position: absolute; top: 0; height: 22px; font-size: 11px; color: #fff; overflow: hidden; white-space: nowrap; padding-left: 3px; box-sizing: border-box; }
.cols { display: grid; grid-template-columns: 1fr 1fr; gap: 16px; }
.muted { color: #666; } .err { color: #cf222e; } .ok { color: #1a7f37; }
.finding { color: #9a6700; font-weight: 600; }
nav a { margin-right: 12px; font-weight: 400 !important; }
td.task, th.task, #grid th[scope=row] { white-space: nowrap; }
tr.running td { background: #fff8c5; } .running-note { color: #9a6700; font-weight: 600; }
#grid td { text-align: center; min-width: 70px; } #grid td a { color: inherit; text-decoration: none; display: block; }
.jobcard { border: 1px solid #ddd; border-radius: 6px; padding: 8px 12px; margin: 10px 0; }
</style></head>
<body><header><a href="#/">termgrade view</a><nav><a href="#/jobs">jobs</a><a href="#/grid">grid</a><a href="#/">trials</a><a href="/report" target="_blank">report</a></nav><span id="live" class="muted"></span></header><main id="main">loading...</main>
<script src="/app.js"></script></body></html>
`;

export const APP_JS = String.raw`
'use strict';
// The one rule for a passing reward (trial/accounting.ts), written in from the constant.
const PASS_REWARD = ${PASS_REWARD};
const main = document.getElementById('main');
const h = (tag, attrs, ...kids) => {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') el.className = v; else if (k.startsWith('on')) el.addEventListener(k.slice(2), v); else if (v !== undefined && v !== null) el.setAttribute(k, v);
  }
  for (const kid of kids.flat()) if (kid !== null && kid !== undefined) el.append(kid instanceof Node ? kid : String(kid));
  return el;
};
const api = async (p) => { const r = await fetch(p); if (!r.ok) throw new Error(p + ': ' + r.status); return r; };
const json = async (p) => (await api(p)).json();
const fmtS = (ms) => (ms === null || ms === undefined ? '-' : (ms / 1000).toFixed(1) + ' s');
const fmtR = (r) => (r === null || r === undefined ? '-' : String(r));
const fmt3 = (v) => (typeof v === 'number' ? String(Math.round(v * 1000) / 1000) : '-');
const params = () => new URLSearchParams(location.hash.split('?')[1] || '');
const go = (p) => { location.hash = p; };
let summary = null;
let lastVersion = -1;

async function loadSummary() { summary = await json('/api/summary'); return summary; }

function jobsStrip() {
  return h('div', { class: 'jobs' }, summary.jobs.map((j) => {
    const done = Object.entries(j.counts).filter(([s]) => s !== 'not_run' && s !== 'running').reduce((a, [, n]) => a + n, 0);
    const counts = Object.entries(j.counts).map(([s, n]) => s + ' ' + n).join(', ') || 'no trials yet';
    return h('div', { class: 'job', 'data-job': j.job }, h('b', {}, j.job), ' ', h('span', { class: 'muted' }, counts + (j.total ? ' of ' + j.total + ' slots' : '')),
      j.total ? h('div', { class: 'bar' }, h('div', { style: 'width:' + Math.min(100, (100 * done) / j.total).toFixed(1) + '%' })) : null);
  }));
}

const COLUMNS = [['task', 'task'], ['config', 'config'], ['attempt', 'attempt'], ['status', 'status'], ['reward', 'reward'], ['error_class', 'error class'], ['tests_failed', 'failing tests'], ['duration_ms', 'time'], ['output_tokens', 'out tokens'], ['cost_usd', 'cost $'], ['job', 'job']];
const FILTERS = ['job', 'config', 'task', 'exact', 'status', 'reward', 'error', 'test', 'consistency'];
const filterQuery = (p) => { const q = new URLSearchParams(); for (const f of FILTERS) if (p.get(f)) q.set(f, p.get(f)); return q; };

function filterBar(p, setParam) {
  const select = (name, values) => h('select', { name, onchange: (e) => setParam(name, e.target.value) }, h('option', { value: '' }, 'any'), values.map((v) => { const o = h('option', { value: v }, v); if (p.get(name) === v) o.selected = true; return o; }));
  const text = (name, placeholder) => h('input', { name, value: p.get(name) || '', placeholder, onchange: (e) => setParam(name, e.target.value.trim()) });
  return h('div', { class: 'filters' },
    h('label', {}, 'job', select('job', summary.facets.job)),
    h('label', {}, 'configuration', select('config', summary.facets.config)),
    h('label', {}, p.get('exact') === '1' ? 'task is' : 'task contains', text('task', 'task name')),
    h('label', {}, 'status', select('status', summary.facets.status)),
    h('label', {}, 'reward', select('reward', ['pass', 'fail', 'none'])),
    h('label', {}, 'error class', select('error', summary.facets.error)),
    h('label', {}, 'failing test contains', text('test', 'test name')),
    h('label', {}, 'reward consistency', select('consistency', ['inconsistent'])));
}

const pct = (x) => (x === null || x === undefined || !Number.isFinite(x) ? '-' : (100 * x).toFixed(1) + '%');

async function jobsView() {
  const data = await json('/api/jobs');
  main.replaceChildren(h('div', { id: 'jobs' }, h('h2', {}, 'Jobs'), data.jobs.length ? null : h('p', { class: 'muted' }, 'no jobs yet: they appear here when they start'), data.jobs.map((j) => {
    const done = Object.entries(j.counts).filter(([s]) => s !== 'not_run' && s !== 'running').reduce((a, [, n]) => a + n, 0);
    const running = j.counts.running || 0;
    const rows = j.configs.map((c) => h('tr', { 'data-config': c.config },
      h('td', {}, h('a', { href: '#/?job=' + encodeURIComponent(j.job) + '&config=' + encodeURIComponent(c.config) }, c.config)), h('td', {}, c.tasks), h('td', { class: 'graded' }, c.graded),
      h('td', { class: 'pass1' }, pct(c.pass1.mean) + (c.pass1.ciLo === null ? '' : ' [' + pct(c.pass1.ciLo) + ', ' + pct(c.pass1.ciHi) + ']')),
      h('td', { class: 'coverage' }, pct(c.coverage) + ' (' + c.graded + ' of ' + c.attempted + ')'), h('td', { class: 'cost' }, c.costUsd === null ? '-' : '$' + c.costUsd.toFixed(4))));
    return h('div', { class: 'jobcard', 'data-job': j.job },
      h('b', {}, j.job), ' ', h('span', { class: 'muted slots' }, done + ' recorded' + (j.total ? ' of ' + j.total + ' slots' : '') + (running ? ' \u00B7 ' + running + ' running' : '')),
      ' ', h('a', { href: '#/grid?job=' + encodeURIComponent(j.job) }, 'grid'), ' ', h('a', { href: '#/?job=' + encodeURIComponent(j.job) }, 'trials'),
      j.error ? h('p', { class: 'err' }, j.error) : null,
      j.configs.length ? h('table', { class: 'configs' }, h('thead', {}, h('tr', {}, ['configuration', 'tasks', 'graded trials', 'pass@1 [95% CI]', 'coverage', 'cost'].map((x) => h('th', {}, x)))), h('tbody', {}, rows)) : h('p', { class: 'muted' }, 'no trials recorded yet'));
  })));
}

async function gridView() {
  const p = params();
  const [g] = await Promise.all([json('/api/grid?' + filterQuery(p)), loadSummary()]);
  const setParam = (k, v) => { const n = params(); if (v) n.set(k, v); else n.delete(k); if (k === 'task') n.delete('exact'); go('/grid?' + n); };
  const byKey = new Map(g.cells.map((c) => [c.config + '\u0000' + c.task, c]));
  const head = h('tr', {}, h('th', { class: 'task' }, 'task'), g.configs.map((c) => h('th', { 'data-config': c }, c)));
  const rows = g.tasks.map((t) => h('tr', { 'data-task': t }, h('th', { scope: 'row' }, t), g.configs.map((c) => {
    const cell = byKey.get(c + '\u0000' + t);
    if (!cell) return h('td', { class: 'muted' }, '');
    const q = filterQuery(p); q.set('config', c); q.set('task', t); q.set('exact', '1');
    const shade = cell.rate === null ? '#f6f8fa' : 'hsl(' + Math.round(120 * cell.rate) + ', 60%, 85%)';
    const text = (cell.rate === null ? '-' : cell.rate.toFixed(2) + ' (' + cell.c + '/' + cell.n + ')') + (cell.errors ? ' +' + cell.errors + ' err' : '') + (cell.running ? ' \u00B7 ' + cell.running + ' running' : '');
    return h('td', { style: 'background:' + shade, 'data-config': c, 'data-rate': cell.rate === null ? '' : String(cell.rate) }, h('a', { href: '#/?' + q }, text));
  })));
  main.replaceChildren(filterBar(p, setParam), h('p', { class: 'muted', id: 'grid-info' }, g.tasks.length + ' tasks \u00D7 ' + g.configs.length + ' configurations; each cell: rate of graded trials (successes/graded), under the filters above'),
    h('table', { id: 'grid' }, h('thead', {}, head), h('tbody', {}, rows)));
}

async function tableView() {
  const p = params();
  const pageSize = 50;
  const page = Number(p.get('page') || 0);
  const q = filterQuery(p);
  if (p.get('sort')) { q.set('sort', p.get('sort')); q.set('dir', p.get('dir') || 'asc'); }
  q.set('offset', String(page * pageSize)); q.set('limit', String(pageSize));
  const [data] = await Promise.all([json('/api/trials?' + q), loadSummary()]);
  const setParam = (k, v) => { const n = params(); if (v) n.set(k, v); else n.delete(k); if (k === 'task') n.delete('exact'); if (k !== 'page') n.delete('page'); go('/?' + n); };
  const filters = filterBar(p, setParam);
  const picked = new Set();
  const compareBtn = h('button', { disabled: '', onclick: () => go('/compare/' + [...picked].map(encodeURIComponent).join('/')) }, 'compare 2 selected');
  const sortBy = (col) => { const n = params(); const dir = n.get('sort') === col && n.get('dir') !== 'desc' ? 'desc' : 'asc'; n.set('sort', col); n.set('dir', dir); n.delete('page'); go('/?' + n); };
  const head = h('tr', {}, h('th', {}, ''), COLUMNS.map(([c, label]) => h('th', { 'data-col': c, class: c === 'task' ? 'task' : undefined, onclick: () => sortBy(c) }, label + (p.get('sort') === c ? (p.get('dir') === 'desc' ? ' \u25BC' : ' \u25B2') : ''))));
  const rows = data.rows.map((r) => {
    const box = h('input', { type: 'checkbox', onchange: (e) => { if (e.target.checked) picked.add(r.id); else picked.delete(r.id); compareBtn.disabled = picked.size !== 2; } });
    return h('tr', { class: r.status === 'running' ? 'running' : r.reward === null ? '' : r.reward >= PASS_REWARD ? 'pass' : 'fail', 'data-id': r.id },
      h('td', {}, box), h('td', { class: 'task' }, h('a', { href: '#/trial/' + encodeURIComponent(r.id) }, r.task)), h('td', {}, r.config), h('td', {}, r.attempt), h('td', {}, r.status),
      h('td', { class: 'reward' }, fmtR(r.reward), r.findings ? h('span', { class: 'finding', title: r.findings }, ' \u26A0 inconsistent') : null), h('td', {}, r.error_class || ''), h('td', { title: r.failing }, r.failing ? r.failing.split('\n').join(', ') : ''),
      h('td', {}, fmtS(r.duration_ms)), h('td', {}, r.output_tokens ?? '-'), h('td', {}, r.cost_usd === null ? '-' : r.cost_usd.toFixed(4)), h('td', {}, r.job));
  });
  const pages = Math.max(1, Math.ceil(data.total / pageSize));
  const pager = h('div', { class: 'pager' },
    h('button', { onclick: () => setParam('page', String(page - 1)), ...(page <= 0 ? { disabled: '' } : {}) }, 'previous'),
    h('span', { id: 'page-info' }, 'page ' + (page + 1) + ' of ' + pages + ' (' + data.total + ' trials)'),
    h('button', { onclick: () => setParam('page', String(page + 1)), ...(page + 1 >= pages ? { disabled: '' } : {}) }, 'next'), compareBtn);
  main.replaceChildren(jobsStrip(), filters, pager, h('table', { id: 'trials' }, h('thead', {}, head), h('tbody', {}, rows)));
}

function timeline(phases, r) {
  const entries = Object.entries(phases || {}).filter(([, v]) => v && v.startedAt);
  if (!entries.length)
    return h('div', { class: 'muted', id: 'no-phases' }, 'no phase timings recorded' + (r && (r.startedAt || r.durationMs) ? '; the trial ran ' + (r.startedAt || '-') + ' to ' + (r.finishedAt || '-') + ' (' + fmtS(r.durationMs) + ')' : ''));
  const t0 = Math.min(...entries.map(([, v]) => Date.parse(v.startedAt)));
  const end = Math.max(...entries.map(([, v]) => Date.parse(v.startedAt) + v.durationMs));
  const span = Math.max(1, end - t0);
  const colours = { environment_setup: '#8250df', agent_setup: '#bf8700', agent_run: '#0969da', verification: '#1a7f37', teardown: '#6e7781' };
  return h('div', {},
    h('div', { class: 'timeline' }, entries.map(([k, v]) => h('div', { title: k + ' ' + fmtS(v.durationMs), style: 'left:' + ((100 * (Date.parse(v.startedAt) - t0)) / span) + '%;width:' + Math.max(0.5, (100 * v.durationMs) / span) + '%;background:' + (colours[k] || '#999') }, k))),
    h('div', { class: 'muted' }, entries.map(([k, v]) => k + ' ' + fmtS(v.durationMs)).join(' \u00B7 ')));
}

function transcript(traj) {
  if (!traj || !Array.isArray(traj.steps)) return h('p', { class: 'muted' }, 'no trajectory (agent/trajectory.json) in this trial');
  let turn = 0;
  return h('div', { class: 'transcript' }, traj.steps.map((s) => {
    if (s.source === 'agent') turn += 1;
    const calls = (s.tool_calls || []).map((c) => h('div', {}, h('b', {}, 'tool call ' + c.function_name), h('pre', {}, typeof c.arguments === 'string' ? c.arguments : JSON.stringify(c.arguments, null, 1))));
    const obs = ((s.observation && s.observation.results) || []).map((o, i) => h('details', { open: '' }, h('summary', {}, (o.source_call_id ? 'tool output' : 'screen after turn ' + turn) + ' (' + (o.content || '').length + ' chars)'), h('pre', { class: 'observation' }, o.content || '')));
    const metrics = s.metrics ? ' \u00B7 ' + s.metrics.prompt_tokens + ' in / ' + s.metrics.completion_tokens + ' out tokens' : '';
    const flags = s.extra && s.extra.parse_error ? h('div', { class: 'err' }, 'no valid action: ' + s.extra.parse_error) : null;
    return h('div', { class: 'step ' + s.source, 'data-step': s.step_id },
      h('div', { class: 'muted' }, '#' + s.step_id + ' ' + s.source + (s.source === 'agent' ? ' turn ' + turn : '') + metrics),
      s.message ? h('pre', { class: 'message' }, s.message) : null, s.reasoning_content ? h('details', {}, h('summary', {}, 'reasoning'), h('pre', {}, s.reasoning_content)) : null, flags, calls, obs);
  }));
}

async function trialPanel(id) {
  const t = await json('/api/trial?id=' + encodeURIComponent(id));
  const r = t.result || {};
  const err = r.error ? h('p', { class: 'err', id: 'error' }, 'error ' + r.error.class + (r.error.phase ? ' (' + r.error.phase + ')' : '') + (r.error.message ? ': ' + r.error.message : '') + (r.exitReason && r.exitReason !== 'completed' ? ' \u00B7 agent ended: ' + r.exitReason : '')) : null;
  const origin = r.source && r.source !== 'termgrade' ? h('p', { class: 'muted', id: 'origin' }, 'imported from ' + r.source + (r.recordSource === 'store' ? ": shown from the job's store (its own result.json is in the files below)" : '')) : null;
  // The reward stands as the verifier gave it; these say where its evidence disagrees.
  const findings = t.row.findings
    ? h('div', { class: 'findings' }, h('h3', {}, 'Findings: the reward is inconsistent'), h('ul', {}, t.row.findings.split('\n').map((f) => h('li', { class: 'finding' }, f))))
    : null;
  const tests = (r.tests || []).length
    ? h('table', { class: 'tests' }, h('thead', {}, h('tr', {}, h('th', {}, 'test'), h('th', {}, 'status'), h('th', {}, 'time'), h('th', {}, 'message'))), h('tbody', {}, r.tests.map((x) => h('tr', {}, h('td', {}, x.name), h('td', { class: x.status === 'passed' ? 'ok' : 'err' }, x.status), h('td', {}, x.durationMs === null || x.durationMs === undefined ? '-' : fmtS(x.durationMs)), h('td', {}, h('pre', {}, x.message || ''))))))
    : h('p', { class: 'muted' }, 'no per-test results');
  const logs = h('div', {}, t.files.filter((f) => f.path !== 'result.json' || r.recordSource === 'store').map((f) => {
    const d = h('details', { 'data-file': f.path }, h('summary', {}, f.path + ' (' + f.bytes + ' bytes)'));
    d.addEventListener('toggle', async () => { if (d.open && d.children.length === 1) d.append(h('pre', {}, await (await api('/api/file?id=' + encodeURIComponent(id) + '&path=' + encodeURIComponent(f.path))).text())); });
    return d;
  }));
  // Every named reward (the primary one is 'reward', the one rates use), a multi-step trial's steps, and the versions it ran.
  const named = Object.entries(r.rewards || {});
  const rewards = named.length > 1 || (named.length === 1 && named[0][0] !== 'reward')
    ? h('p', { class: 'rewards', id: 'rewards' }, 'rewards: ' + named.map(([k, v]) => k + ' ' + fmt3(v)).join(' \u00B7 '))
    : null;
  const steps = (r.steps || []).length
    ? h('table', { class: 'steps', id: 'steps' }, h('thead', {}, h('tr', {}, h('th', {}, 'step'), h('th', {}, 'reward'), h('th', {}, 'rewards'), h('th', {}, 'tests'), h('th', {}, 'error'))),
        h('tbody', {}, r.steps.map((x) => h('tr', { class: x.reward === null ? '' : x.reward >= PASS_REWARD ? 'pass' : 'fail' }, h('td', {}, x.name + (x.contributes ? '' : ' (not counted)') + (x.stoppedTrial ? ' (missed min_reward: the trial stopped here)' : '')), h('td', { class: 'reward' }, fmt3(x.reward)),
          h('td', {}, Object.entries(x.rewards || {}).map(([k, v]) => k + ' ' + fmt3(v)).join(', ')), h('td', {}, x.testsSummary.passed + '/' + x.testsSummary.total), h('td', {}, x.error ? x.error.class : '')))))
    : null;
  const versions = r.taskVersion || r.dataset ? h('p', { class: 'muted', id: 'versions' }, 'task version ' + (r.taskVersion || '-') + (r.dataset ? ' \u00B7 dataset ' + (r.dataset.name || '-') + ' ' + (r.dataset.version || '-') : '')) : null;
  const tokens = r.tokens ? r.tokens.input + ' in (' + r.tokens.cached + ' cached) / ' + r.tokens.output + ' out' : '-';
  return h('div', { class: 'trial', 'data-trial': id },
    h('h2', {}, t.row.task + ' \u00B7 ' + t.row.config + ' \u00B7 attempt ' + t.row.attempt),
    h('p', {}, 'reward ', h('b', { class: (r.passed ?? t.row.reward >= PASS_REWARD) ? 'ok' : 'err', id: 'reward' }, fmtR(t.row.reward)), ' \u00B7 ' + t.row.status + ' \u00B7 turns ' + (r.turns ?? '-') + ' \u00B7 ', h('span', { id: 'tokens' }, 'tokens ' + tokens), ' \u00B7 ', h('span', { id: 'cost' }, 'cost ' + (r.costUsd === null || r.costUsd === undefined ? '-' : '$' + r.costUsd.toFixed(4))), ' \u00B7 time ' + fmtS(r.durationMs) + (r.infraAttempts > 1 ? ' \u00B7 runs ' + r.infraAttempts : '') + (r.engine ? ' \u00B7 engine ' + r.engine : '') + (r.imageId ? ' \u00B7 image ' + r.imageId.slice(7, 19) : '')),
    origin,
    t.row.status === 'running' ? h('p', { class: 'running-note' }, 'running: the transcript so far, brought up to date while the trial runs') : null,
    versions, rewards, err, findings, steps ? h('h3', {}, 'Steps') : null, steps, h('h3', {}, 'Phases'), timeline(r.phases, r), h('h3', {}, 'Tests'), tests, h('h3', {}, 'Transcript'), transcript(t.trajectory), h('h3', {}, 'Files (agent and verifier logs)'), logs);
}

async function trialView(id) { main.replaceChildren(h('p', {}, h('a', { href: '#/' }, '\u2190 all trials')), await trialPanel(id)); }
async function compareView(a, b) { const [x, y] = await Promise.all([trialPanel(a), trialPanel(b)]); main.replaceChildren(h('p', {}, h('a', { href: '#/' }, '\u2190 all trials')), h('div', { class: 'cols' }, x, y)); }

async function route() {
  const path = location.hash.replace(/^#/, '').split('?')[0] || '/';
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  try {
    if (parts[0] === 'trial' && parts[1]) await trialView(parts.slice(1).join('/'));
    else if (parts[0] === 'jobs') await jobsView();
    else if (parts[0] === 'grid') await gridView();
    else if (parts[0] === 'compare' && parts.length >= 3) await compareView(parts[1], parts[2]);
    else await tableView();
  } catch (e) { main.replaceChildren(h('p', { class: 'err' }, String(e.message || e))); }
}
window.addEventListener('hashchange', route);
route();

// Live: a running job's new trials refresh the table (not a trial page someone is reading).
const events = new EventSource('/api/events');
events.onmessage = (m) => {
  const v = JSON.parse(m.data).version;
  document.getElementById('live').textContent = 'live \u00B7 update ' + v;
  // A trial page is left as it is, unless its trial is still running (its transcript grows).
  const reading = location.hash.startsWith('#/compare') || (location.hash.startsWith('#/trial') && !document.querySelector('.running-note'));
  if (lastVersion !== -1 && v !== lastVersion && !reading) route();
  lastVersion = v;
};
`;
