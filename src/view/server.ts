import { readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { TermgradeError, ifMissing } from '../util/errors.js';
import { readJsonIfThere } from '../util/files.js';
import { HostCheck } from '../util/host-check.js';
import { listenOn } from '../util/listen.js';
import { isLoopback, tokenEquals } from '../util/net.js';
import { generateToken } from '../util/token.js';
import { APP_HTML, readAppScript } from './app.js';
import { isPassingReward } from '../trial/accounting.js';
import { Catalog, type TrialQuery } from './catalog.js';
import { grid, jobFigures, type JobConfigFigures } from './figures.js';
import { viewerReport, viewerReportData } from './report.js';
import { statsJson } from '../util/json.js';

export interface ViewerOptions {
  sources: string[];
  host?: string;
  port?: number;
  /** What a browser or client must show (`?token=` once, then a cookie; or a bearer header); generated when not given. */
  token?: string | null;
  /** Host names (besides the bound address) the viewer may be reached by, e.g. behind a proxy. */
  allowedHosts?: string[];
  /** How often job stores are looked at for new records (ms). Default 1000. */
  refreshMs?: number;
}

/** Files of a trial folder the viewer serves whole (the transcript untruncated); larger ones are cut with a note. */
const MAX_FILE_BYTES = 50 * 1024 * 1024;

/** Every file below a trial folder, as paths relative to it. */
async function filesUnder(dir: string, rel = ''): Promise<Array<{ path: string; bytes: number }>> {
  const out: Array<{ path: string; bytes: number }> = [];
  for (const e of await ifMissing(readdir(path.join(dir, rel), { withFileTypes: true }), [])) {
    const r = rel ? `${rel}/${e.name}` : e.name;
    if (e.isDirectory()) out.push(...(await filesUnder(dir, r)));
    else if (e.isFile()) out.push({ path: r, bytes: (await stat(path.join(dir, r))).size });
  }
  return out;
}

export interface RunningViewer {
  url: string;
  /** The address to open in a browser: the token rides along once and becomes a cookie. */
  openUrl: string;
  token: string;
  tokenGenerated: boolean;
  catalog: Catalog;
  close: () => Promise<void>;
}

type App = FastifyInstance;

/** Refuses a request from another Host or Origin, or without the token (header, cookie or `?token=`). */
function guardRequests(app: App, hostCheck: HostCheck, token: string): void {
  const authorised = (req: FastifyRequest): boolean => {
    const header = req.headers.authorization?.replace(/^Bearer /, '') ?? '';
    const cookie = new RegExp(`(?:^|;\\s*)${cookieName(hostCheck)}=([^;]+)`).exec(req.headers.cookie ?? '')?.[1] ?? '';
    const query = (req.query as { token?: string }).token ?? '';
    return [header, decodeURIComponent(cookie), query].some((t) => t && tokenEquals(t, token));
  };
  app.addHook('onRequest', async (req, reply) => {
    const refused = hostCheck.refusal(req.headers.host, req.headers.origin);
    if (refused) return reply.code(403).send({ error: { code: 'forbidden', message: refused } });
    if (!authorised(req))
      return reply.code(401).send({
        error: {
          code: 'unauthorized',
          message: 'a token is needed: open the address `termgrade view` printed (it ends in ?token=...)',
        },
      });
  });
}

/** Cookies are shared by every port of a host: each viewer has its own cookie name. */
const cookieName = (hostCheck: HostCheck): string => `tg_token_${hostCheck.port}`;

/** The app's page and script; the token given once in the address becomes a cookie. */
function pageRoutes(app: App, hostCheck: HostCheck, token: string, script: string): void {
  app.get('/', async (req, reply) => {
    // The token given once in the address becomes a cookie; the address bar and history lose it
    // (the browser keeps the #fragment across the redirect, so deep links survive).
    if ((req.query as { token?: string }).token) {
      return reply
        .header(
          'set-cookie',
          `${cookieName(hostCheck)}=${encodeURIComponent(token)}; HttpOnly; SameSite=Strict; Path=/`,
        )
        .redirect('/', 303);
    }
    return reply.type('text/html; charset=utf-8').send(APP_HTML);
  });
  app.get('/app.js', async (_req, reply) => reply.type('text/javascript; charset=utf-8').send(script));
  app.get('/favicon.ico', async (_req, reply) => reply.code(204).send());
}

/** A request's trial filters. Filters are names matched against the index, never paths. */
function queryOf(req: FastifyRequest): TrialQuery {
  const q = req.query as Record<string, string | undefined>;
  return {
    job: q.job || undefined,
    config: q.config || undefined,
    task: q.task || undefined,
    exact: q.exact === '1',
    status: q.status || undefined,
    reward: q.reward === 'pass' || q.reward === 'fail' || q.reward === 'none' ? q.reward : undefined,
    error: q.error || undefined,
    test: q.test || undefined,
    consistency: q.consistency === 'inconsistent' ? 'inconsistent' : undefined,
    sort: q.sort || undefined,
    dir: q.dir === 'desc' ? 'desc' : 'asc',
    offset: Number(q.offset ?? 0) || 0,
    limit: Number(q.limit ?? 50) || 50,
  };
}

/** The lists: summary, trials, grid, each job's figures, and the report of everything shown. */
function listRoutes(app: App, catalog: Catalog): void {
  app.get('/api/summary', async () => ({
    jobs: catalog.jobSummaries(),
    facets: catalog.facets(),
    version: catalog.version,
  }));
  app.get('/api/trials', async (req) => catalog.query(queryOf(req)));
  app.get('/api/grid', async (req) => grid(catalog.outcomes(queryOf(req))));

  // Each job's figures as `stats` computes them, worked out again only when the job changed.
  const figures = new Map<string, { version: number; value: { configs: JobConfigFigures[]; error: string | null } }>();
  app.get('/api/jobs', async () => {
    const summaries = catalog.jobSummaries();
    const out = [];
    for (const src of catalog.sources()) {
      let f = figures.get(src.dir);
      if (!f || f.version !== catalog.version)
        figures.set(src.dir, (f = { version: catalog.version, value: await jobFigures(src.dir) }));
      out.push({ ...summaries.find((s) => s.job === src.name)!, ...f.value });
    }
    return { jobs: out, version: catalog.version };
  });

  // report.json of everything shown: the same figures as `termgrade report`, `stats` and `compare`.
  app.get('/api/report', async (_req, reply) =>
    reply
      .type('application/json; charset=utf-8')
      .send(statsJson(await viewerReportData(catalog.sources().map((x) => x.dir)))),
  );
  // The report of everything shown, served beside the viewer: its rows link to their trials here.
  app.get('/report', async (_req, reply) =>
    reply.type('text/html; charset=utf-8').send(await viewerReport(catalog.sources().map((x) => x.dir))),
  );
}

/** The rewards of a result's steps (a multi-step trial's), in order; [] without steps. */
function stepRewards(result: unknown): Array<number | null> {
  const steps = result && typeof result === 'object' && 'steps' in result ? result.steps : null;
  if (!Array.isArray(steps)) return [];
  return steps.map((x: unknown) =>
    x && typeof x === 'object' && 'reward' in x && typeof x.reward === 'number' ? x.reward : null,
  );
}

/** One trial: its row, result, transcript and files, and any file inside its own folder. */
function trialRoutes(app: App, catalog: Catalog): void {
  app.get('/api/trial', async (req, reply: FastifyReply) => {
    let id = (req.query as { id?: string }).id ?? '';
    // A trial that was running when its page opened and has since been recorded: its record.
    if (!catalog.row(id) && id.includes('/running/')) id = id.replace('/running/', '/');
    const row = catalog.row(id);
    if (!row) return reply.code(404).send({ error: { code: 'not_found', message: `no trial ${id}` } });
    const dir = catalog.dirOf(id);
    const file = dir ? await readJsonIfThere(path.join(dir, 'result.json')) : null;
    // termgrade's own result.json, or another harness's (an imported Harbor trial's): the store's
    // record stands in for the fields the file does not have, so every stored field is shown.
    const native = file && typeof file === 'object' && 'schemaVersion' in file && 'trialId' in file ? file : null;
    const stored = catalog.stored(id);
    const result = stored ? { ...stored, ...(native ?? {}), recordSource: native ? 'result.json' : 'store' } : file;
    return {
      row,
      result,
      // Whether the trial and each of its steps passed, by the one rule: the page draws these, it decides nothing.
      passes: { trial: row.passed === 1, steps: stepRewards(result).map((r) => isPassingReward(r)) },
      trajectory: dir ? await readJsonIfThere(path.join(dir, 'agent', 'trajectory.json')) : null,
      files: dir ? await filesUnder(dir) : [],
    };
  });

  app.get('/api/file', async (req, reply: FastifyReply) => {
    const { id = '', path: rel = '' } = req.query as { id?: string; path?: string };
    const dir = catalog.dirOf(id);
    const file = dir ? path.resolve(dir, rel) : null;
    // Only files inside the trial's own folder.
    if (!dir || !file || !file.startsWith(`${path.resolve(dir)}${path.sep}`))
      return reply.code(404).send({ error: { code: 'not_found', message: 'no such file in this trial' } });
    const st = await ifMissing(stat(file), null);
    if (!st?.isFile())
      return reply.code(404).send({ error: { code: 'not_found', message: 'no such file in this trial' } });
    const buf = await readFile(file);
    const text = buf.subarray(0, MAX_FILE_BYTES).toString('utf8');
    return reply
      .type('text/plain; charset=utf-8')
      .send(st.size > MAX_FILE_BYTES ? `${text}\n[... ${st.size - MAX_FILE_BYTES} more bytes not shown ...]` : text);
  });
}

/** Server-sent events: the catalog's version, sent again whenever it changes. */
function eventRoute(app: App, catalog: Catalog, listeners: Set<(v: number) => void>): void {
  app.get('/api/events', (req, reply) => {
    reply.hijack();
    reply.raw.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
    });
    reply.raw.write(`data: ${JSON.stringify({ version: catalog.version })}\n\n`);
    const send = (v: number): void => void reply.raw.write(`data: ${JSON.stringify({ version: v })}\n\n`);
    listeners.add(send);
    req.raw.on('close', () => listeners.delete(send));
  });
}

/**
 * `termgrade view`: a local web application over job stores, check outputs and trial folders.
 * The page is one static app; everything it shows comes from a small JSON API (paged, filtered and
 * sorted in SQL), and a running job's new trials arrive as server-sent events. Nothing is served
 * without the token (generated when none is given), nor to a Host or Origin other than the
 * viewer's own (DNS rebinding, other sites' pages).
 */
export async function startViewer(o: ViewerOptions): Promise<RunningViewer> {
  const host = o.host ?? '127.0.0.1';
  if (!isLoopback(host) && !o.token)
    throw new TermgradeError(
      'usage',
      `view --host ${host}: a bind other than loopback needs a token (--token-env VAR)`,
    );
  // Never open, even on loopback: a web page the user visits must not be able to read the trials.
  const token = o.token || generateToken();
  const hostCheck = new HostCheck(host, o.allowedHosts);
  const script = await readAppScript();
  const catalog = await Catalog.open(o.sources);
  const app = Fastify({ logger: false, forceCloseConnections: true });
  const listeners = new Set<(v: number) => void>();
  const timer = setInterval(() => {
    if (catalog.refresh()) for (const l of listeners) l(catalog.version);
  }, o.refreshMs ?? 1000);
  timer.unref();

  guardRequests(app, hostCheck, token);
  pageRoutes(app, hostCheck, token, script);
  listRoutes(app, catalog);
  trialRoutes(app, catalog);
  eventRoute(app, catalog, listeners);

  const address = await listenOn(app, host, o.port ?? 0, 'view').catch((err: unknown) => {
    clearInterval(timer);
    catalog.close();
    throw err;
  });
  hostCheck.port = Number(new URL(address).port);
  const url = address.replace('[::1]', 'localhost');
  return {
    url,
    openUrl: `${url}/?token=${encodeURIComponent(token)}`,
    token,
    tokenGenerated: !o.token,
    catalog,
    close: async () => {
      clearInterval(timer);
      listeners.clear();
      await app.close();
      catalog.close();
    },
  };
}
