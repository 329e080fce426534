import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
/**
 * The viewer's page: one static HTML shell and one script (page/app.ts, compiled for the browser by
 * page/tsconfig.json), nothing fetched from outside. Routes live in the address's hash, so every view is a deep link:
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
dl.record { display: grid; grid-template-columns: max-content 1fr; gap: 2px 12px; margin: 6px 0 14px; }
dl.record dt { color: #57606a; }
dl.record dd { margin: 0; word-break: break-all; }
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
<script type="module" src="/app.js"></script></body></html>
`;

/** The compiled page script, beside this module in dist/ (the build compiles page/ with the DOM library). */
const APP_JS_FILE = fileURLToPath(new URL('./page/app.js', import.meta.url));

/** The page script's text; read once per viewer, so a missing build fails at start, not on first load. */
export async function readAppScript(): Promise<string> {
  return readFile(APP_JS_FILE, 'utf8');
}
