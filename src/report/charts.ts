import * as vega from 'vega';
import { compile, type TopLevelSpec } from 'vega-lite';
import type { ReportData } from './page-data.js';

/**
 * The report's charts as Vega-Lite specifications, rendered to static SVG here (no browser, no
 * script in the page): the page opens from file:// with no network.
 */
async function svg(spec: TopLevelSpec): Promise<string> {
  const view = new vega.View(vega.parse(compile(spec).spec), { renderer: 'none' });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}

const base = {
  $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
  config: { font: 'sans-serif', axis: { labelLimit: 220 } },
} as const;

/** Groups of configurations whose pass@k values are all equal (their lines coincide). */
export function coinciding(d: ReportData): string[][] {
  const byKey = new Map<string, string[]>();
  for (const c of d.configs) {
    const key = JSON.stringify(c.passAtK.map((p) => [p.k, Number.isFinite(p.value) ? p.value.toFixed(6) : null]));
    byKey.set(key, [...(byKey.get(key) ?? []), c.config]);
  }
  return [...byKey.values()].filter((g) => g.length > 1);
}

/**
 * Points closer than a label's height (on the chart's scales: log hours, pass@1) share one label:
 * the first of a group carries every name, the others none.
 */
export function labelOnce<T extends { config: string; pass1: number; hours: number }>(
  points: T[],
): Array<T & { label: string }> {
  const near = (a: T, b: T): boolean =>
    Math.abs(a.pass1 - b.pass1) < 0.04 && Math.abs(Math.log10(a.hours) - Math.log10(b.hours)) < 0.15;
  const out = points.map((p) => ({ ...p, label: '' }));
  const taken = new Set<number>();
  for (let i = 0; i < out.length; i++) {
    if (taken.has(i)) continue;
    const group = [i];
    for (let j = i + 1; j < out.length; j++) if (!taken.has(j) && near(out[i]!, out[j]!)) group.push(j);
    group.forEach((g) => taken.add(g));
    out[i]!.label = group.map((g) => out[g]!.config).join(', ');
  }
  return out;
}

/** Tasks shown in the heatmap at most (a row each); the rest are in the table below it. */
export const HEATMAP_MAX_TASKS = 300;

/** Task x configuration: each cell the task's rate (the figure the band uses), n in the tooltip. */
async function heatmap(d: ReportData): Promise<string> {
  const tasks = [...new Set(d.tasks.map((t) => t.task))].sort().slice(0, HEATMAP_MAX_TASKS);
  const shown = new Set(tasks);
  const cells = d.tasks
    .filter((t) => shown.has(t.task))
    .map((t) => ({
      task: t.task,
      config: t.config,
      rate: t.rate,
      n: t.n,
      inBand: t.rate >= d.band[0] && t.rate <= d.band[1] ? 'in band' : 'out of band',
    }));
  return svg({
    ...base,
    title: {
      text: 'Task x configuration: success rate',
      subtitle: tasks.length < new Set(d.tasks.map((t) => t.task)).size ? `first ${tasks.length} tasks by name` : [],
    },
    data: { values: cells },
    width: { step: 60 },
    height: { step: 14 },
    layer: [
      {
        mark: { type: 'rect' },
        encoding: {
          x: { field: 'config', type: 'nominal', title: null, axis: { labelAngle: -30 } },
          y: { field: 'task', type: 'nominal', title: null, sort: tasks },
          color: { field: 'rate', type: 'quantitative', title: 'rate', scale: { domain: [0, 1], scheme: 'blues' } },
          tooltip: [
            { field: 'task' },
            { field: 'config' },
            { field: 'rate', format: '.2f' },
            { field: 'n', title: 'graded trials' },
          ],
        },
      },
      {
        mark: { type: 'text', fontSize: 9 },
        encoding: {
          x: { field: 'config', type: 'nominal' },
          y: { field: 'task', type: 'nominal', sort: tasks },
          text: { field: 'rate', format: '.2f' },
          color: { condition: { test: 'datum.rate > 0.6', value: 'white' }, value: 'black' },
        },
      },
    ],
  });
}

/** Each configuration's pass@1 with its 95% interval. */
async function pass1Chart(d: ReportData): Promise<string> {
  const pass1 = d.configs.map((c) => ({
    config: c.config,
    pass1: c.pass1.mean,
    lo: c.pass1.ciLo ?? c.pass1.mean,
    hi: c.pass1.ciHi ?? c.pass1.mean,
  }));
  return svg({
    ...base,
    title: 'pass@1 with 95% interval',
    width: 420,
    height: { step: 28 },
    data: { values: pass1 },
    layer: [
      {
        mark: { type: 'bar', color: '#4c78a8' },
        encoding: {
          y: { field: 'config', type: 'nominal', title: null },
          x: { field: 'pass1', type: 'quantitative', title: 'pass@1', scale: { domain: [0, 1] } },
        },
      },
      {
        mark: { type: 'rule', color: 'black' },
        encoding: {
          y: { field: 'config', type: 'nominal' },
          x: { field: 'lo', type: 'quantitative' },
          x2: { field: 'hi' },
        },
      },
    ],
  });
}

/** pass@k against k, per configuration. */
async function passAtKChart(d: ReportData): Promise<string> {
  const passk = d.configs.flatMap((c) =>
    c.passAtK.map((p) => ({
      config: c.config,
      k: p.k,
      value: p.value,
      method:
        p.method === 'unbiased+eb' ? `unbiased; ${p.extended} task(s) with k > n extended by the prior` : p.method,
    })),
  );
  // k is a whole number: ticks only at the k measured, never between them.
  const ks = [...new Set(passk.map((p) => p.k))].sort((a, b) => a - b);
  return svg({
    ...base,
    title: {
      text: 'pass@k',
      subtitle: coinciding(d).map((g) => `${g.join(' = ')} (same values, drawn over each other)`),
    },
    width: 420,
    height: 240,
    data: { values: passk },
    // Each configuration its own dash as well as colour: equal lines stay told apart.
    layer: [
      {
        mark: { type: 'line', strokeWidth: 2 },
        encoding: {
          x: {
            field: 'k',
            type: 'quantitative',
            title: 'k',
            axis: { values: ks, format: 'd' },
            scale: { domain: [ks[0] ?? 1, ks[ks.length - 1] ?? 1] },
          },
          y: { field: 'value', type: 'quantitative', title: 'pass@k', scale: { domain: [0, 1] } },
          color: { field: 'config', type: 'nominal' },
          strokeDash: { field: 'config', type: 'nominal', title: 'config' },
        },
      },
      {
        mark: { type: 'point', filled: true, size: 50 },
        encoding: {
          x: { field: 'k', type: 'quantitative' },
          y: { field: 'value', type: 'quantitative' },
          color: { field: 'config', type: 'nominal' },
          shape: { field: 'method', type: 'nominal', title: 'estimator' },
        },
      },
    ],
  });
}

/** Per configuration, how many tasks have each success rate; the band shaded. */
async function histogramChart(d: ReportData): Promise<string> {
  const bins = d.histogram.flatMap((h) =>
    h.bins.map((b) => ({
      config: `${h.config} (in band ${h.inBand}, out ${h.outOfBand})`,
      lo: b.lo,
      hi: b.hi,
      count: b.count,
    })),
  );
  return svg({
    ...base,
    title: `Per-task success rate (band ${d.band[0]}-${d.band[1]} shaded)`,
    data: { values: bins },
    facet: {
      row: {
        field: 'config',
        type: 'nominal',
        title: null,
        header: { labelAngle: 0, labelAlign: 'left', labelLimit: 400 },
      },
    },
    spec: {
      width: 420,
      height: 110,
      layer: [
        {
          data: { values: [{ lo: d.band[0], hi: d.band[1] }] },
          mark: { type: 'rect', color: '#f2cf5b', opacity: 0.35 },
          encoding: { x: { field: 'lo', type: 'quantitative' }, x2: { field: 'hi' } },
        },
        // Empty bins are not drawn: a bar of height 0 is still a stroke along the axis.
        {
          transform: [{ filter: 'datum.count > 0' }],
          mark: { type: 'bar', color: '#4c78a8' },
          encoding: {
            x: { field: 'lo', type: 'quantitative', title: 'task rate', scale: { domain: [0, 1] } },
            x2: { field: 'hi' },
            y: {
              field: 'count',
              type: 'quantitative',
              title: 'tasks',
              scale: { domainMin: 0 },
              axis: { tickMinStep: 1, format: 'd' },
            },
          },
        },
      ],
    },
  });
}

/** pass@1 against total trial time. */
async function runtimeChart(d: ReportData): Promise<string> {
  // Configurations at the same point share one label ("a, b"): labels never print over each other.
  const runtime = labelOnce(
    d.runtime
      .filter((r) => r.hours > 0)
      .map((r) => ({ config: r.config, pass1: r.pass1, hours: Math.max(r.hours, 1e-4) })),
  );
  return svg({
    ...base,
    title: 'pass@1 against total runtime',
    width: 420,
    height: 240,
    data: { values: runtime },
    layer: [
      {
        mark: { type: 'point', filled: true, size: 80 },
        encoding: {
          x: { field: 'hours', type: 'quantitative', title: 'total trial time (hours, log)', scale: { type: 'log' } },
          y: { field: 'pass1', type: 'quantitative', title: 'pass@1', scale: { domain: [0, 1] } },
          color: { field: 'config', type: 'nominal' },
        },
      },
      {
        transform: [{ filter: "datum.label !== ''" }],
        mark: { type: 'text', dx: 6, align: 'left' },
        encoding: {
          x: { field: 'hours', type: 'quantitative', scale: { type: 'log' } },
          y: { field: 'pass1', type: 'quantitative' },
          text: { field: 'label' },
        },
      },
    ],
  });
}

/** Trials per error class (no reward) and per graded outcome class; none when there are none. */
async function errorsChart(d: ReportData): Promise<string | null> {
  const errors = d.configs.flatMap((c) => [
    ...Object.entries(c.errorsByClass).map(([k, n]) => ({ config: c.config, class: `${k} (no reward)`, n })),
    ...Object.entries(c.outcomesByClass).map(([k, n]) => ({ config: c.config, class: `${k} (graded)`, n })),
  ]);
  if (!errors.length) return null;
  return svg({
    ...base,
    title: 'Error classes',
    width: 420,
    height: { step: 18 },
    data: { values: errors },
    mark: 'bar',
    encoding: {
      y: { field: 'class', type: 'nominal', title: null },
      x: { field: 'n', type: 'quantitative', title: 'trials' },
      color: { field: 'config', type: 'nominal' },
    },
  });
}

export async function charts(d: ReportData): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  out.pass1 = await pass1Chart(d);
  out.passAtK = await passAtKChart(d);
  out.histogram = await histogramChart(d);
  out.runtime = await runtimeChart(d);
  out.heatmap = await heatmap(d);
  const errors = await errorsChart(d);
  if (errors !== null) out.errors = errors;
  return out;
}
