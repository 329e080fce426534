// The viewer's page script, run by the browser (compiled by src/view/page/tsconfig.json with the
// DOM library, served as /app.js by ../server.ts). It talks to the server only through the JSON
// API; the shapes it reads are written down below. Text from trials is only ever put in the page
// as text, never as HTML.

// ---- what the JSON API sends (src/view/server.ts, catalog.ts, figures.ts) ----
type Counts = Record<string, number | undefined>;
interface JobSummary {
  job: string;
  counts: Counts;
  total: number | null;
}
interface Summary {
  jobs: JobSummary[];
  facets: { job: string[]; config: string[]; status: string[]; error: string[] };
}
interface Row {
  id: string;
  job: string;
  config: string;
  task: string;
  attempt: number;
  status: string;
  reward: number | null;
  /** 1 when the reward passes: the server's one rule (isPassingReward), never the page's. */
  passed: number;
  error_class: string | null;
  failing: string;
  duration_ms: number | null;
  output_tokens: number | null;
  cost_usd: number | null;
  findings: string;
}
interface ConfigFigures {
  config: string;
  tasks: number;
  graded: number;
  attempted: number;
  coverage: number | null;
  costUsd: number | null;
  pass1: { mean: number | null; ciLo: number | null; ciHi: number | null };
}
interface JobFigures extends JobSummary {
  configs: ConfigFigures[];
  error: string | null;
}
interface GridCell {
  task: string;
  config: string;
  n: number;
  c: number;
  rate: number | null;
  errors: number;
  running: number;
}
interface Phase {
  startedAt?: string;
  durationMs: number;
}
interface TestResult {
  name: string;
  status: string;
  durationMs?: number | null;
  message?: string | null;
}
interface StepResult {
  name: string;
  reward: number | null;
  rewards?: Record<string, number> | null;
  contributes: boolean;
  stoppedTrial?: boolean;
  testsSummary: { passed: number; total: number };
  error?: { class: string } | null;
}
/** A trial's result.json, or the store's record standing in for it; every field may be missing. */
interface TrialResult {
  error?: { class: string; phase?: string | null; message?: string | null } | null;
  exitReason?: string | null;
  source?: string;
  recordSource?: 'result.json' | 'store';
  tests?: TestResult[];
  rewards?: Record<string, number> | null;
  steps?: StepResult[];
  taskVersion?: string | null;
  dataset?: { name?: string | null; version?: string | null } | null;
  tokens?: { input: number; cached: number; output: number } | null;
  passed?: boolean | null;
  turns?: number | null;
  costUsd?: number | null;
  durationMs?: number | null;
  infraAttempts?: number;
  engine?: string | null;
  imageId?: string | null;
  phases?: Record<string, Phase | null | undefined> | null;
  startedAt?: string | null;
  finishedAt?: string | null;
  task?: { name?: string; path?: string; checksum?: string } | null;
  taskChecksum?: string | null;
  testsSource?: string | null;
  image?: string | null;
  retries?: Array<{ class?: string; message?: string; durationMs?: number }> | null;
  tampering?: unknown[] | null;
}
interface TrajectoryStep {
  step_id: number;
  source: string;
  message?: string | null;
  reasoning_content?: string | null;
  tool_calls?: Array<{ function_name: string; arguments: unknown }> | null;
  observation?: { results?: Array<{ source_call_id?: string | null; content?: string | null }> | null } | null;
  metrics?: { prompt_tokens: number; completion_tokens: number } | null;
  extra?: { parse_error?: string | null } | null;
}
interface Trial {
  row: Row;
  result: TrialResult | null;
  /** Whether the trial and each of its steps passed, as the server's one rule says. */
  passes: { trial: boolean; steps: boolean[] };
  trajectory: { steps?: unknown } | null;
  files: Array<{ path: string; bytes: number }>;
}

// ---- helpers ----

const byId = (id: string): HTMLElement => {
  const el = document.getElementById(id);
  if (!el) throw new Error(`the page has no #${id}`);
  return el;
};
const main = byId('main');

type Kid = Node | string | number | null | undefined | false | Kid[];
type Attrs = Record<string, string | number | boolean | EventListener | null | undefined>;

/** An element with attributes (`on...` ones are listeners) and children (text is always text). */
function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs, ...kids: Kid[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null) continue;
    if (typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = String(v);
    else el.setAttribute(k, String(v));
  }
  const add = (kid: Kid): void => {
    if (Array.isArray(kid)) kid.forEach(add);
    else if (kid !== null && kid !== undefined && kid !== false) el.append(kid instanceof Node ? kid : String(kid));
  };
  kids.forEach(add);
  return el;
}
/** An input or select's value, from the event it sent. */
const valueOf = (e: Event): string => (e.target as HTMLInputElement | HTMLSelectElement).value;

const api = async (p: string): Promise<Response> => {
  const r = await fetch(p);
  if (!r.ok) throw new Error(`${p}: ${r.status}`);
  return r;
};
const json = async <T>(p: string): Promise<T> => (await (await api(p)).json()) as T;
const fmtS = (ms: number | null | undefined): string =>
  ms === null || ms === undefined ? '-' : `${(ms / 1000).toFixed(1)} s`;
const fmtR = (r: number | null | undefined): string => (r === null || r === undefined ? '-' : String(r));
const fmt3 = (v: unknown): string => (typeof v === 'number' ? String(Math.round(v * 1000) / 1000) : '-');
const pct = (x: number | null | undefined): string =>
  x === null || x === undefined || !Number.isFinite(x) ? '-' : `${(100 * x).toFixed(1)}%`;
const params = (): URLSearchParams => new URLSearchParams(location.hash.split('?')[1] ?? '');
const go = (p: string): void => {
  location.hash = p;
};
/** Trials recorded so far (everything but those not run and those running). */
const recorded = (counts: Counts): number =>
  Object.entries(counts)
    .filter(([s]) => s !== 'not_run' && s !== 'running')
    .reduce((a, [, n]) => a + (n ?? 0), 0);
let summary: Summary | null = null;
let lastVersion = -1;

async function loadSummary(): Promise<Summary> {
  summary = await json<Summary>('/api/summary');
  return summary;
}

// ---- the trial table, the jobs and the grid ----
function jobsStrip(s: Summary): HTMLElement {
  return h(
    'div',
    { class: 'jobs' },
    s.jobs.map((j) => {
      const done = recorded(j.counts);
      const counts =
        Object.entries(j.counts)
          .map(([st, n]) => `${st} ${n}`)
          .join(', ') || 'no trials yet';
      return h(
        'div',
        { class: 'job', 'data-job': j.job },
        h('b', {}, j.job),
        ' ',
        h('span', { class: 'muted' }, counts + (j.total ? ` of ${j.total} slots` : '')),
        j.total
          ? h(
              'div',
              { class: 'bar' },
              h('div', { style: `width:${Math.min(100, (100 * done) / j.total).toFixed(1)}%` }),
            )
          : null,
      );
    }),
  );
}

const COLUMNS = [
  ['task', 'task'],
  ['config', 'config'],
  ['attempt', 'attempt'],
  ['status', 'status'],
  ['reward', 'reward'],
  ['error_class', 'error class'],
  ['tests_failed', 'failing tests'],
  ['duration_ms', 'time'],
  ['output_tokens', 'out tokens'],
  ['cost_usd', 'cost $'],
  ['job', 'job'],
] as const;
const FILTERS = ['job', 'config', 'task', 'exact', 'status', 'reward', 'error', 'test', 'consistency'];
const filterQuery = (p: URLSearchParams): URLSearchParams => {
  const q = new URLSearchParams();
  for (const f of FILTERS) {
    const v = p.get(f);
    if (v) q.set(f, v);
  }
  return q;
};

type SetParam = (name: string, value: string) => void;

function filterBar(p: URLSearchParams, s: Summary, setParam: SetParam): HTMLElement {
  const select = (name: string, values: string[]): HTMLSelectElement =>
    h(
      'select',
      { name, onchange: (e: Event) => setParam(name, valueOf(e)) },
      h('option', { value: '' }, 'any'),
      values.map((v) => {
        const o = h('option', { value: v }, v);
        if (p.get(name) === v) o.selected = true;
        return o;
      }),
    );
  const text = (name: string, placeholder: string): HTMLInputElement =>
    h('input', {
      name,
      value: p.get(name) ?? '',
      placeholder,
      onchange: (e: Event) => setParam(name, valueOf(e).trim()),
    });
  return h(
    'div',
    { class: 'filters' },
    h('label', {}, 'job', select('job', s.facets.job)),
    h('label', {}, 'configuration', select('config', s.facets.config)),
    h('label', {}, p.get('exact') === '1' ? 'task is' : 'task contains', text('task', 'task name')),
    h('label', {}, 'status', select('status', s.facets.status)),
    h('label', {}, 'reward', select('reward', ['pass', 'fail', 'none'])),
    h('label', {}, 'error class', select('error', s.facets.error)),
    h('label', {}, 'failing test contains', text('test', 'test name')),
    h('label', {}, 'reward consistency', select('consistency', ['inconsistent'])),
  );
}

function jobCard(j: JobFigures): HTMLElement {
  const done = recorded(j.counts);
  const running = j.counts.running ?? 0;
  const rows = j.configs.map((c) =>
    h(
      'tr',
      { 'data-config': c.config },
      h(
        'td',
        {},
        h('a', { href: `#/?job=${encodeURIComponent(j.job)}&config=${encodeURIComponent(c.config)}` }, c.config),
      ),
      h('td', {}, c.tasks),
      h('td', { class: 'graded' }, c.graded),
      h(
        'td',
        { class: 'pass1' },
        pct(c.pass1.mean) + (c.pass1.ciLo === null ? '' : ` [${pct(c.pass1.ciLo)}, ${pct(c.pass1.ciHi)}]`),
      ),
      h('td', { class: 'coverage' }, `${pct(c.coverage)} (${c.graded} of ${c.attempted})`),
      h('td', { class: 'cost' }, c.costUsd === null ? '-' : `$${c.costUsd.toFixed(4)}`),
    ),
  );
  const heads = ['configuration', 'tasks', 'graded trials', 'pass@1 [95% CI]', 'coverage', 'cost'];
  return h(
    'div',
    { class: 'jobcard', 'data-job': j.job },
    h('b', {}, j.job),
    ' ',
    h(
      'span',
      { class: 'muted slots' },
      `${done} recorded` + (j.total ? ` of ${j.total} slots` : '') + (running ? ` \u00B7 ${running} running` : ''),
    ),
    ' ',
    h('a', { href: `#/grid?job=${encodeURIComponent(j.job)}` }, 'grid'),
    ' ',
    h('a', { href: `#/?job=${encodeURIComponent(j.job)}` }, 'trials'),
    j.error ? h('p', { class: 'err' }, j.error) : null,
    j.configs.length
      ? h(
          'table',
          { class: 'configs' },
          h(
            'thead',
            {},
            h(
              'tr',
              {},
              heads.map((x) => h('th', {}, x)),
            ),
          ),
          h('tbody', {}, rows),
        )
      : h('p', { class: 'muted' }, 'no trials recorded yet'),
  );
}

async function jobsView(): Promise<void> {
  const data = await json<{ jobs: JobFigures[] }>('/api/jobs');
  main.replaceChildren(
    h(
      'div',
      { id: 'jobs' },
      h('h2', {}, 'Jobs'),
      data.jobs.length ? null : h('p', { class: 'muted' }, 'no jobs yet: they appear here when they start'),
      data.jobs.map(jobCard),
    ),
  );
}

function gridCell(p: URLSearchParams, c: string, t: string, cell: GridCell | undefined): HTMLElement {
  if (!cell) return h('td', { class: 'muted' }, '');
  const q = filterQuery(p);
  q.set('config', c);
  q.set('task', t);
  q.set('exact', '1');
  const shade = cell.rate === null ? '#f6f8fa' : `hsl(${Math.round(120 * cell.rate)}, 60%, 85%)`;
  const text =
    (cell.rate === null ? '-' : `${cell.rate.toFixed(2)} (${cell.c}/${cell.n})`) +
    (cell.errors ? ` +${cell.errors} err` : '') +
    (cell.running ? ` \u00B7 ${cell.running} running` : '');
  return h(
    'td',
    { style: `background:${shade}`, 'data-config': c, 'data-rate': cell.rate === null ? '' : String(cell.rate) },
    h('a', { href: `#/?${q}` }, text),
  );
}

async function gridView(): Promise<void> {
  const p = params();
  const [g, s] = await Promise.all([
    json<{ tasks: string[]; configs: string[]; cells: GridCell[] }>(`/api/grid?${filterQuery(p)}`),
    loadSummary(),
  ]);
  const setParam: SetParam = (k, v) => {
    const n = params();
    if (v) n.set(k, v);
    else n.delete(k);
    if (k === 'task') n.delete('exact');
    go(`/grid?${n}`);
  };
  const byKey = new Map(g.cells.map((c) => [`${c.config}\u0000${c.task}`, c]));
  const head = h(
    'tr',
    {},
    h('th', { class: 'task' }, 'task'),
    g.configs.map((c) => h('th', { 'data-config': c }, c)),
  );
  const rows = g.tasks.map((t) =>
    h(
      'tr',
      { 'data-task': t },
      h('th', { scope: 'row' }, t),
      g.configs.map((c) => gridCell(p, c, t, byKey.get(`${c}\u0000${t}`))),
    ),
  );
  main.replaceChildren(
    filterBar(p, s, setParam),
    h(
      'p',
      { class: 'muted', id: 'grid-info' },
      `${g.tasks.length} tasks \u00D7 ${g.configs.length} configurations; each cell: rate of graded trials (successes/graded), under the filters above`,
    ),
    h('table', { id: 'grid' }, h('thead', {}, head), h('tbody', {}, rows)),
  );
}

/** A row's colour: none without a reward, else pass or fail as the server said. */
const rowClass = (reward: number | null, passed: boolean): string => (reward === null ? '' : passed ? 'pass' : 'fail');

function trialRow(r: Row, box: HTMLInputElement): HTMLElement {
  return h(
    'tr',
    { class: r.status === 'running' ? 'running' : rowClass(r.reward, r.passed === 1), 'data-id': r.id },
    h('td', {}, box),
    h('td', { class: 'task' }, h('a', { href: `#/trial/${encodeURIComponent(r.id)}` }, r.task)),
    h('td', {}, r.config),
    h('td', {}, r.attempt),
    h('td', {}, r.status),
    h(
      'td',
      { class: 'reward' },
      fmtR(r.reward),
      r.findings ? h('span', { class: 'finding', title: r.findings }, ' \u26A0 inconsistent') : null,
    ),
    h('td', {}, r.error_class ?? ''),
    h('td', { title: r.failing }, r.failing ? r.failing.split('\n').join(', ') : ''),
    h('td', {}, fmtS(r.duration_ms)),
    h('td', {}, r.output_tokens ?? '-'),
    h('td', {}, r.cost_usd === null ? '-' : r.cost_usd.toFixed(4)),
    h('td', {}, r.job),
  );
}

/** The table's header: a click sorts by the column, a second click the other way. */
function tableHead(p: URLSearchParams): HTMLElement {
  const sortBy = (col: string): void => {
    const n = params();
    const dir = n.get('sort') === col && n.get('dir') !== 'desc' ? 'desc' : 'asc';
    n.set('sort', col);
    n.set('dir', dir);
    n.delete('page');
    go(`/?${n}`);
  };
  const arrow = (c: string): string => (p.get('sort') === c ? (p.get('dir') === 'desc' ? ' \u25BC' : ' \u25B2') : '');
  return h(
    'tr',
    {},
    h('th', {}, ''),
    COLUMNS.map(([c, label]) =>
      h('th', { 'data-col': c, class: c === 'task' ? 'task' : undefined, onclick: () => sortBy(c) }, label + arrow(c)),
    ),
  );
}

async function tableView(): Promise<void> {
  const p = params();
  const pageSize = 50;
  const page = Number(p.get('page') || 0);
  const q = filterQuery(p);
  const sort = p.get('sort');
  if (sort) {
    q.set('sort', sort);
    q.set('dir', p.get('dir') || 'asc');
  }
  q.set('offset', String(page * pageSize));
  q.set('limit', String(pageSize));
  const [data, s] = await Promise.all([json<{ rows: Row[]; total: number }>(`/api/trials?${q}`), loadSummary()]);
  const setParam: SetParam = (k, v) => {
    const n = params();
    if (v) n.set(k, v);
    else n.delete(k);
    if (k === 'task') n.delete('exact');
    if (k !== 'page') n.delete('page');
    go(`/?${n}`);
  };
  const picked = new Set<string>();
  const compareBtn = h(
    'button',
    { disabled: '', onclick: () => go(`/compare/${[...picked].map(encodeURIComponent).join('/')}`) },
    'compare 2 selected',
  );
  const rows = data.rows.map((r) => {
    const onchange = (e: Event): void => {
      if ((e.target as HTMLInputElement).checked) picked.add(r.id);
      else picked.delete(r.id);
      compareBtn.disabled = picked.size !== 2;
    };
    return trialRow(r, h('input', { type: 'checkbox', onchange }));
  });
  const pages = Math.max(1, Math.ceil(data.total / pageSize));
  const pager = h(
    'div',
    { class: 'pager' },
    h(
      'button',
      { onclick: () => setParam('page', String(page - 1)), disabled: page <= 0 ? '' : undefined },
      'previous',
    ),
    h('span', { id: 'page-info' }, `page ${page + 1} of ${pages} (${data.total} trials)`),
    h(
      'button',
      { onclick: () => setParam('page', String(page + 1)), disabled: page + 1 >= pages ? '' : undefined },
      'next',
    ),
    compareBtn,
  );
  main.replaceChildren(
    jobsStrip(s),
    filterBar(p, s, setParam),
    pager,
    h('table', { id: 'trials' }, h('thead', {}, tableHead(p)), h('tbody', {}, rows)),
  );
}

// ---- one trial ----
const PHASE_COLOURS: Record<string, string> = {
  environment_setup: '#8250df',
  agent_setup: '#bf8700',
  agent_run: '#0969da',
  verification: '#1a7f37',
  teardown: '#6e7781',
};

function timeline(r: TrialResult): HTMLElement {
  const entries = Object.entries(r.phases ?? {}).filter((e): e is [string, Phase & { startedAt: string }] =>
    Boolean(e[1]?.startedAt),
  );
  if (!entries.length)
    return h(
      'div',
      { class: 'muted', id: 'no-phases' },
      'no phase timings recorded' +
        (r.startedAt || r.durationMs
          ? `; the trial ran ${r.startedAt || '-'} to ${r.finishedAt || '-'} (${fmtS(r.durationMs)})`
          : ''),
    );
  const t0 = Math.min(...entries.map(([, v]) => Date.parse(v.startedAt)));
  const end = Math.max(...entries.map(([, v]) => Date.parse(v.startedAt) + v.durationMs));
  const span = Math.max(1, end - t0);
  const bar = ([k, v]: [string, Phase & { startedAt: string }]): HTMLElement =>
    h(
      'div',
      {
        title: `${k} ${fmtS(v.durationMs)}`,
        style:
          `left:${(100 * (Date.parse(v.startedAt) - t0)) / span}%;` +
          `width:${Math.max(0.5, (100 * v.durationMs) / span)}%;background:${PHASE_COLOURS[k] ?? '#999'}`,
      },
      k,
    );
  return h(
    'div',
    {},
    h('div', { class: 'timeline' }, entries.map(bar)),
    h('div', { class: 'muted' }, entries.map(([k, v]) => `${k} ${fmtS(v.durationMs)}`).join(' \u00B7 ')),
  );
}

function transcriptStep(s: TrajectoryStep, turn: number): HTMLElement {
  const calls = (s.tool_calls ?? []).map((c) =>
    h(
      'div',
      {},
      h('b', {}, `tool call ${c.function_name}`),
      h('pre', {}, typeof c.arguments === 'string' ? c.arguments : JSON.stringify(c.arguments, null, 1)),
    ),
  );
  const obs = (s.observation?.results ?? []).map((o) =>
    h(
      'details',
      { open: '' },
      h(
        'summary',
        {},
        `${o.source_call_id ? 'tool output' : `screen after turn ${turn}`} (${(o.content ?? '').length} chars)`,
      ),
      h('pre', { class: 'observation' }, o.content ?? ''),
    ),
  );
  const metrics = s.metrics ? ` \u00B7 ${s.metrics.prompt_tokens} in / ${s.metrics.completion_tokens} out tokens` : '';
  const flags = s.extra?.parse_error ? h('div', { class: 'err' }, `no valid action: ${s.extra.parse_error}`) : null;
  return h(
    'div',
    { class: `step ${s.source}`, 'data-step': s.step_id },
    h('div', { class: 'muted' }, `#${s.step_id} ${s.source}` + (s.source === 'agent' ? ` turn ${turn}` : '') + metrics),
    s.message ? h('pre', { class: 'message' }, s.message) : null,
    s.reasoning_content ? h('details', {}, h('summary', {}, 'reasoning'), h('pre', {}, s.reasoning_content)) : null,
    flags,
    calls,
    obs,
  );
}

function transcript(traj: Trial['trajectory']): HTMLElement {
  if (!traj || !Array.isArray(traj.steps))
    return h('p', { class: 'muted' }, 'no trajectory (agent/trajectory.json) in this trial');
  let turn = 0;
  return h(
    'div',
    { class: 'transcript' },
    (traj.steps as TrajectoryStep[]).map((s) => {
      if (s.source === 'agent') turn += 1;
      return transcriptStep(s, turn);
    }),
  );
}

function testsTable(r: TrialResult): HTMLElement {
  const tests = r.tests ?? [];
  if (!tests.length) return h('p', { class: 'muted' }, 'no per-test results');
  return h(
    'table',
    { class: 'tests' },
    h(
      'thead',
      {},
      h('tr', {}, h('th', {}, 'test'), h('th', {}, 'status'), h('th', {}, 'time'), h('th', {}, 'message')),
    ),
    h(
      'tbody',
      {},
      tests.map((x) =>
        h(
          'tr',
          {},
          h('td', {}, x.name),
          h('td', { class: x.status === 'passed' ? 'ok' : 'err' }, x.status),
          h('td', {}, x.durationMs === null || x.durationMs === undefined ? '-' : fmtS(x.durationMs)),
          h('td', {}, h('pre', {}, x.message || '')),
        ),
      ),
    ),
  );
}

/** The trial's files, each read when opened. */
function fileList(id: string, t: Trial, r: TrialResult): HTMLElement {
  return h(
    'div',
    {},
    t.files
      .filter((f) => f.path !== 'result.json' || r.recordSource === 'store')
      .map((f) => {
        const d = h('details', { 'data-file': f.path }, h('summary', {}, `${f.path} (${f.bytes} bytes)`));
        const load = async (): Promise<void> => {
          if (!d.open || d.children.length !== 1) return;
          const res = await api(`/api/file?id=${encodeURIComponent(id)}&path=${encodeURIComponent(f.path)}`);
          d.append(h('pre', {}, await res.text()));
        };
        d.addEventListener('toggle', () => void load());
        return d;
      }),
  );
}

/** A multi-step trial's steps, or null. */
function stepsTable(r: TrialResult, passes: boolean[]): HTMLElement | null {
  const steps = r.steps ?? [];
  if (!steps.length) return null;
  const heads = ['step', 'reward', 'rewards', 'tests', 'error'].map((x) => h('th', {}, x));
  return h(
    'table',
    { class: 'steps', id: 'steps' },
    h('thead', {}, h('tr', {}, heads)),
    h(
      'tbody',
      {},
      steps.map((x, i) =>
        h(
          'tr',
          { class: rowClass(x.reward, passes[i] ?? false) },
          h(
            'td',
            {},
            x.name +
              (x.contributes ? '' : ' (not counted)') +
              (x.stoppedTrial ? ' (missed min_reward: the trial stopped here)' : ''),
          ),
          h('td', { class: 'reward' }, fmt3(x.reward)),
          h(
            'td',
            {},
            Object.entries(x.rewards ?? {})
              .map(([k, v]) => `${k} ${fmt3(v)}`)
              .join(', '),
          ),
          h('td', {}, `${x.testsSummary.passed}/${x.testsSummary.total}`),
          h('td', {}, x.error ? x.error.class : ''),
        ),
      ),
    ),
  );
}

/** What went wrong, where the trial came from, its named rewards and versions: each or null. */
function trialNotes(r: TrialResult): Record<'err' | 'origin' | 'rewards' | 'versions', HTMLElement | null> {
  const e = r.error;
  const err = e
    ? h(
        'p',
        { class: 'err', id: 'error' },
        `error ${e.class}` +
          (e.phase ? ` (${e.phase})` : '') +
          (e.message ? `: ${e.message}` : '') +
          (r.exitReason && r.exitReason !== 'completed' && e.class !== 'cancelled'
            ? ` \u00B7 agent ended: ${r.exitReason}`
            : ''),
      )
    : null;
  const origin =
    r.source && r.source !== 'termgrade'
      ? h(
          'p',
          { class: 'muted', id: 'origin' },
          `imported from ${r.source}` +
            (r.recordSource === 'store'
              ? ": shown from the job's store (its own result.json is in the files below)"
              : ''),
        )
      : null;
  // Every named reward (the primary one is 'reward', the one rates use) and the versions it ran.
  const named = Object.entries(r.rewards ?? {});
  const rewards =
    named.length > 1 || (named.length === 1 && named[0]?.[0] !== 'reward')
      ? h(
          'p',
          { class: 'rewards', id: 'rewards' },
          `rewards: ${named.map(([k, v]) => `${k} ${fmt3(v)}`).join(' \u00B7 ')}`,
        )
      : null;
  const versions =
    r.taskVersion || r.dataset
      ? h(
          'p',
          { class: 'muted', id: 'versions' },
          `task version ${r.taskVersion || '-'}` +
            (r.dataset ? ` \u00B7 dataset ${r.dataset.name || '-'} ${r.dataset.version || '-'}` : ''),
        )
      : null;
  return { err, origin, rewards, versions };
}

/**
 * The rest of the record, so the page holds every field the store keeps for the trial: which task
 * content it ran (path, checksum), where its per-test results came from, why the agent stopped, the
 * image, each discarded infrastructure run and why, and what the verifier found tampered with.
 */
function recordFacts(r: TrialResult): HTMLElement {
  const facts: Array<[string, string, string]> = [
    ['task-path', 'task path', r.task?.path || '-'],
    ['task-checksum', 'task checksum', r.task?.checksum || r.taskChecksum || '-'],
    ['tests-source', 'per-test results from', r.testsSource ?? '-'],
    // A cancelled trial was stopped before it ended: it did not end as the agent ended it.
    [
      'exit-reason',
      'agent ended',
      r.error?.class === 'cancelled' ? 'cancelled (not run to the end)' : (r.exitReason ?? '-'),
    ],
    ['image', 'image', r.image ?? '-'],
    [
      'retries',
      'infrastructure runs discarded',
      r.retries?.length
        ? r.retries.map((x) => `${x.class ?? '?'}: ${x.message ?? ''} (${fmtS(x.durationMs)})`).join('; ')
        : 'none',
    ],
    [
      'tampering',
      'tampering found',
      r.tampering?.length ? r.tampering.map((x) => JSON.stringify(x)).join('; ') : 'none',
    ],
  ];
  return h(
    'dl',
    { class: 'record', id: 'record' },
    facts.map(([id, label, value]) => [h('dt', {}, label), h('dd', { 'data-field': id }, value)]),
  );
}

/** The line under the title: reward, status, turns, tokens, cost, time, runs, engine, image. */
function trialLine(t: Trial, r: TrialResult): HTMLElement {
  const tokens = r.tokens ? `${r.tokens.input} in (${r.tokens.cached} cached) / ${r.tokens.output} out` : '-';
  const passed = t.passes.trial;
  const cost = r.costUsd === null || r.costUsd === undefined ? '-' : `$${r.costUsd.toFixed(4)}`;
  return h(
    'p',
    {},
    'reward ',
    h('b', { class: passed ? 'ok' : 'err', id: 'reward' }, fmtR(t.row.reward)),
    ` \u00B7 ${t.row.status} \u00B7 turns ${r.turns ?? '-'} \u00B7 `,
    h('span', { id: 'tokens' }, `tokens ${tokens}`),
    ' \u00B7 ',
    h('span', { id: 'cost' }, `cost ${cost}`),
    ` \u00B7 time ${fmtS(r.durationMs)}` +
      ((r.infraAttempts ?? 0) > 1 ? ` \u00B7 runs ${r.infraAttempts}` : '') +
      (r.engine ? ` \u00B7 engine ${r.engine}` : '') +
      (r.imageId ? ` \u00B7 image ${r.imageId.slice(7, 19)}` : ''),
  );
}

async function trialPanel(id: string): Promise<HTMLElement> {
  const t = await json<Trial>(`/api/trial?id=${encodeURIComponent(id)}`);
  const r = t.result ?? {};
  const { err, origin, rewards, versions } = trialNotes(r);
  // The reward stands as the verifier gave it; these say where its evidence disagrees.
  const findings = t.row.findings
    ? h(
        'div',
        { class: 'findings' },
        h('h3', {}, 'Findings: the reward is inconsistent'),
        h(
          'ul',
          {},
          t.row.findings.split('\n').map((f) => h('li', { class: 'finding' }, f)),
        ),
      )
    : null;
  const steps = stepsTable(r, t.passes.steps);
  return h(
    'div',
    { class: 'trial', 'data-trial': id },
    h('h2', {}, `${t.row.task} \u00B7 ${t.row.config} \u00B7 attempt ${t.row.attempt}`),
    trialLine(t, r),
    origin,
    t.row.status === 'running'
      ? h('p', { class: 'running-note' }, 'running: the transcript so far, brought up to date while the trial runs')
      : null,
    versions,
    rewards,
    err,
    findings,
    steps ? h('h3', {}, 'Steps') : null,
    steps,
    h('h3', {}, 'Phases'),
    timeline(r),
    h('h3', {}, 'Record'),
    recordFacts(r),
    h('h3', {}, 'Tests'),
    testsTable(r),
    h('h3', {}, 'Transcript'),
    transcript(t.trajectory),
    h('h3', {}, 'Files (agent and verifier logs)'),
    fileList(id, t, r),
  );
}

const backLink = (): HTMLElement => h('p', {}, h('a', { href: '#/' }, '\u2190 all trials'));

async function trialView(id: string): Promise<void> {
  main.replaceChildren(backLink(), await trialPanel(id));
}
async function compareView(a: string, b: string): Promise<void> {
  const [x, y] = await Promise.all([trialPanel(a), trialPanel(b)]);
  main.replaceChildren(backLink(), h('div', { class: 'cols' }, x, y));
}

// ---- routing and live updates ----
async function route(): Promise<void> {
  const path = location.hash.replace(/^#/, '').split('?')[0] || '/';
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  try {
    if (parts[0] === 'trial' && parts[1]) await trialView(parts.slice(1).join('/'));
    else if (parts[0] === 'jobs') await jobsView();
    else if (parts[0] === 'grid') await gridView();
    else if (parts[0] === 'compare' && parts[1] && parts[2]) await compareView(parts[1], parts[2]);
    else await tableView();
  } catch (e) {
    main.replaceChildren(h('p', { class: 'err' }, e instanceof Error ? e.message : String(e)));
  }
}
window.addEventListener('hashchange', () => void route());
void route();

// Live: a running job's new trials refresh the table (not a trial page someone is reading).
const events = new EventSource('/api/events');
events.onmessage = (m: MessageEvent<string>) => {
  const v = (JSON.parse(m.data) as { version: number }).version;
  byId('live').textContent = `live \u00B7 update ${v}`;
  // A trial page is left as it is once it shows a recorded trial. While its trial runs (its
  // transcript grows), or when it could not be shown, it is brought up to date: a trial leaves the
  // running list when its result.json is written, a moment before the job's store records it, and
  // a page asked in between says "no trial"; left as it was, it would say so for good.
  const reading =
    location.hash.startsWith('#/compare') ||
    (location.hash.startsWith('#/trial') &&
      document.querySelector('.trial') !== null &&
      !document.querySelector('.running-note'));
  if (lastVersion !== -1 && v !== lastVersion && !reading) void route();
  lastVersion = v;
};
