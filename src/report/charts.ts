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

const base = { $schema: 'https://vega.github.io/schema/vega-lite/v6.json', config: { font: 'sans-serif', axis: { labelLimit: 220 } } } as const;

export async function charts(d: ReportData): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const pass1 = d.configs.map((c) => ({ config: c.config, pass1: c.pass1.mean, lo: c.pass1.ciLo ?? c.pass1.mean, hi: c.pass1.ciHi ?? c.pass1.mean }));
  out.pass1 = await svg({
    ...base,
    title: 'pass@1 with 95% interval',
    width: 420,
    height: { step: 28 },
    data: { values: pass1 },
    layer: [
      { mark: { type: 'bar', color: '#4c78a8' }, encoding: { y: { field: 'config', type: 'nominal', title: null }, x: { field: 'pass1', type: 'quantitative', title: 'pass@1', scale: { domain: [0, 1] } } } },
      { mark: { type: 'rule', color: 'black' }, encoding: { y: { field: 'config', type: 'nominal' }, x: { field: 'lo', type: 'quantitative' }, x2: { field: 'hi' } } },
    ],
  } as TopLevelSpec);

  const passk = d.configs.flatMap((c) => c.passAtK.map((p) => ({ config: c.config, k: p.k, value: p.value, method: p.method === 'model' ? 'k > n for some tasks (model)' : p.method })));
  out.passAtK = await svg({
    ...base,
    title: 'pass@k',
    width: 420,
    height: 240,
    data: { values: passk },
    mark: { type: 'line', point: true },
    encoding: {
      x: { field: 'k', type: 'quantitative', title: 'k' },
      y: { field: 'value', type: 'quantitative', title: 'pass@k', scale: { domain: [0, 1] } },
      color: { field: 'config', type: 'nominal' },
      shape: { field: 'method', type: 'nominal', title: 'estimator' },
    },
  } as TopLevelSpec);

  const bins = d.histogram.flatMap((h) => h.bins.map((b) => ({ config: `${h.config} (in band ${h.inBand}, out ${h.outOfBand})`, lo: b.lo, hi: b.hi, count: b.count })));
  out.histogram = await svg({
    ...base,
    title: `Per-task success rate (band ${d.band[0]}-${d.band[1]} shaded)`,
    data: { values: bins },
    facet: { row: { field: 'config', type: 'nominal', title: null, header: { labelAngle: 0, labelAlign: 'left', labelLimit: 400 } } },
    spec: {
      width: 420,
      height: 110,
      layer: [
        { data: { values: [{ lo: d.band[0], hi: d.band[1] }] }, mark: { type: 'rect', color: '#f2cf5b', opacity: 0.35 }, encoding: { x: { field: 'lo', type: 'quantitative' }, x2: { field: 'hi' } } },
        { mark: { type: 'bar', color: '#4c78a8' }, encoding: { x: { field: 'lo', type: 'quantitative', title: 'task rate', scale: { domain: [0, 1] } }, x2: { field: 'hi' }, y: { field: 'count', type: 'quantitative', title: 'tasks' } } },
      ],
    },
  } as TopLevelSpec);

  const runtime = d.runtime.filter((r) => r.hours > 0).map((r) => ({ ...r, hours: Math.max(r.hours, 1e-4) }));
  out.runtime = await svg({
    ...base,
    title: 'pass@1 against total runtime',
    width: 420,
    height: 240,
    data: { values: runtime },
    layer: [
      { mark: { type: 'point', filled: true, size: 80 }, encoding: { x: { field: 'hours', type: 'quantitative', title: 'total trial time (hours, log)', scale: { type: 'log' } }, y: { field: 'pass1', type: 'quantitative', title: 'pass@1', scale: { domain: [0, 1] } }, color: { field: 'config', type: 'nominal' } } },
      { mark: { type: 'text', dx: 6, align: 'left' }, encoding: { x: { field: 'hours', type: 'quantitative', scale: { type: 'log' } }, y: { field: 'pass1', type: 'quantitative' }, text: { field: 'config' } } },
    ],
  } as TopLevelSpec);

  const errors = d.configs.flatMap((c) => [
    ...Object.entries(c.errorsByClass).map(([k, n]) => ({ config: c.config, class: `${k} (no reward)`, n })),
    ...Object.entries(c.outcomesByClass).map(([k, n]) => ({ config: c.config, class: `${k} (graded)`, n })),
  ]);
  if (errors.length) {
    out.errors = await svg({
      ...base,
      title: 'Error classes',
      width: 420,
      height: { step: 18 },
      data: { values: errors },
      mark: 'bar',
      encoding: { y: { field: 'class', type: 'nominal', title: null }, x: { field: 'n', type: 'quantitative', title: 'trials' }, color: { field: 'config', type: 'nominal' } },
    } as TopLevelSpec);
  }
  return out;
}
