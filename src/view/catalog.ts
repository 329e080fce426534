import { isPassingReward } from '../trial/accounting.js';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import Database from 'better-sqlite3';
import { TermgradeError, isMissing } from '../util/errors.js';
import type { TrialOutcome } from './figures.js';
import { filesNamed } from '../util/files.js';
import { processAlive } from '../util/process-alive.js';
import { JobStore, trialStatusOf } from '../store/store.js';
import { storedTrialRecord, type StoredTrialRecord } from '../records/trial-record.js';
import { runningSlotOf } from './running.js';
import { isJobFolder, openJobRecords, recordSource } from '../records/source.js';
import { causeOf, log } from '../util/log.js';

/**
 * Every trial the viewer shows, from job stores (read live: new records appear within a second),
 * check outputs and folders of trial folders, in one in-memory index so that filters, sorting and
 * paging are one indexed SQL query whatever the number of trials.
 */
export interface TrialQuery {
  job?: string;
  config?: string;
  task?: string;
  /** The task filter is the whole name (a grid cell's or report row's link), not a part of it. */
  exact?: boolean;
  status?: string;
  /** pass (a passing reward: isPassingReward), fail (a reward that does not pass), none (no reward). */
  reward?: 'pass' | 'fail' | 'none';
  error?: string;
  /** Trials in which a test whose name contains this failed. */
  test?: string;
  /** 'inconsistent': only trials with a reward-consistency finding. */
  consistency?: 'inconsistent';
  sort?: string;
  dir?: 'asc' | 'desc';
  offset?: number;
  limit?: number;
}

export interface TrialListRow {
  id: string;
  job: string;
  config: string;
  task: string;
  attempt: number;
  status: string;
  reward: number | null;
  /** 1 when the reward passes (isPassingReward, applied as the row is indexed), else 0: the page and the filter read it. */
  passed: number;
  error_class: string | null;
  failing: string;
  tests_passed: number;
  tests_failed: number;
  duration_ms: number | null;
  output_tokens: number | null;
  cost_usd: number | null;
  finished_at: string | null;
  /** Reward-consistency findings, one `code: message` a line; '' when the reward is consistent. */
  findings: string;
}

/** A store's or result's findings ({code, message} list) as the viewer's one-line-each text. */
function findingsText(raw: unknown): string {
  if (!Array.isArray(raw)) return '';
  return raw
    .filter(
      (f: unknown): f is { code: string; message?: unknown } =>
        f !== null && typeof f === 'object' && 'code' in f && typeof f.code === 'string',
    )
    .map((f) => `${f.code}: ${typeof f.message === 'string' ? f.message : ''}`)
    .join('\n');
}

const SORTABLE = new Set([
  'job',
  'config',
  'task',
  'attempt',
  'status',
  'reward',
  'error_class',
  'tests_failed',
  'duration_ms',
  'output_tokens',
  'cost_usd',
  'finished_at',
]);

interface JobSource {
  name: string;
  dir: string;
  /** The job's store, open read-only: read through its own queries (store/schema.ts defines the rows). */
  store: JobStore;
  lastRowid: number;
  lastCount: number;
  /** The job's slots in all (meta `slots`), and per configuration when the job says (`slots_by_config`). */
  total: number | null;
  planned: Record<string, number> | null;
  /** What the trials in flight were at the last look (their ids and transcripts' sizes). */
  runningSeen: string;
}

/** A folder given as a source with no job.db: a folder of job folders (watched for new jobs), or of trial folders. */
interface FolderSource {
  name: string;
  dir: string;
  jobsRoot: boolean;
}

interface ResultFile {
  trialId?: string;
  task?: { name?: string };
  agent?: { name?: string; model?: string | null };
  attempt?: number;
  reward?: number | null;
  error?: { class?: string } | null;
  tests?: Array<{ name?: string; status?: string }>;
  testsSummary?: { passed?: number; failed?: number };
  durationMs?: number;
  tokens?: { output?: number } | null;
  costUsd?: number | null;
  finishedAt?: string;
  findings?: unknown;
}

export class Catalog {
  private readonly index = new Database(':memory:');
  private readonly jobs: JobSource[] = [];
  private readonly folders: FolderSource[] = [];
  private readonly dirs = new Map<string, string>();
  /** A job trial's store and its id there: its stored record is read from it. */
  private readonly stores = new Map<string, { store: JobStore; trialId: string }>();
  private readonly insert: Database.Statement;
  private generation = 0;

  private constructor() {
    this.index.exec(`
      CREATE TABLE trials (id TEXT PRIMARY KEY, job TEXT, config TEXT, task TEXT, attempt INTEGER, status TEXT, reward REAL,
        passed INTEGER NOT NULL, error_class TEXT, failing TEXT, tests_passed INTEGER, tests_failed INTEGER, duration_ms REAL, output_tokens INTEGER,
        cost_usd REAL, finished_at TEXT, findings TEXT NOT NULL DEFAULT '');
      CREATE INDEX by_config ON trials (config); CREATE INDEX by_task ON trials (task); CREATE INDEX by_status ON trials (status);
      CREATE INDEX by_error ON trials (error_class); CREATE INDEX by_job ON trials (job, config, task, attempt);`);
    this.insert = this.index.prepare(
      `INSERT OR REPLACE INTO trials VALUES (@id, @job, @config, @task, @attempt, @status, @reward, @passed, @error_class, @failing, @tests_passed, @tests_failed, @duration_ms, @output_tokens, @cost_usd, @finished_at, @findings)`,
    );
  }

  /** Indexes one trial; whether it passed is the one rule's answer, never a rule of the index's own. */
  private put(row: Record<string, unknown> & { reward: number | null }): void {
    this.insert.run({ ...row, passed: isPassingReward(row.reward) ? 1 : 0 });
  }

  /** Job folders (job.db), check outputs and folders of trial folders; a path that is none of these is an error naming it. */
  static async open(sources: string[]): Promise<Catalog> {
    const c = new Catalog();
    for (const source of sources) {
      const kind = (await recordSource(source)).kind;
      if (kind === 'file')
        throw new TermgradeError(
          'bad_input',
          `${source}: give a job folder, a check output folder or a folder of trial folders`,
        );
      const dir = path.resolve(source);
      if (c.jobs.some((j) => j.dir === dir) || c.folders.some((f) => f.dir === dir)) continue; // given twice: one job
      if (kind === 'job') c.addJob(dir);
      else {
        // Job folders inside: a jobs folder, watched for jobs made later. Nothing at all inside:
        // the same (a jobs folder before its first job). Trial folders inside: a check output.
        const jobs = c.jobFoldersIn(dir);
        const trials = jobs.length === 0 && (await filesNamed(dir, 'result.json').next()).done !== true;
        const f: FolderSource = { name: c.uniqueName(dir), dir, jobsRoot: !trials };
        c.folders.push(f);
        for (const j of jobs) c.addJob(j);
      }
    }
    for (const f of c.folders) if (!f.jobsRoot) await c.loadFolder(f);
    c.refresh();
    return c;
  }

  /** Job folders (holding a job.db) directly inside `dir`, by name. */
  private jobFoldersIn(dir: string): string[] {
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch (err) {
      // A jobs folder that went away shows no new jobs; the ones already open stay.
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw err;
    }
    return names
      .sort()
      .map((n) => path.join(dir, n))
      .filter(isJobFolder);
  }

  private addJob(dir: string): void {
    if (this.jobs.some((j) => j.dir === dir)) return;
    const store = openJobRecords(dir);
    const j: JobSource = {
      name: this.uniqueName(dir),
      dir,
      store,
      lastRowid: 0,
      lastCount: 0,
      total: null,
      planned: null,
      runningSeen: '',
    };
    this.jobs.push(j);
    this.syncJob(j, true);
  }

  /** The configurations the job has ever run (meta `configs`: label -> fingerprint). */
  private knownConfigs(j: JobSource): Record<string, string> {
    return j.store.metaValue('configs') ?? {};
  }

  /** A job's slot counts as its store says now (a resumed run with more configurations changes them). */
  private readSlots(j: JobSource): boolean {
    const was = JSON.stringify([j.total, j.planned]);
    j.total = j.store.metaValue('slots');
    j.planned = j.store.metaValue('slots_by_config');
    return JSON.stringify([j.total, j.planned]) !== was;
  }

  /**
   * Trials of a job in flight: a trial folder with no result.json yet while the job's writer (the
   * pid in job.lock) is alive. The store records a trial only when it ends, so this is how a
   * running one is known; each is shown with status `running` under its own id.
   */
  private syncRunning(j: JobSource): boolean {
    const owner = Number(
      (() => {
        try {
          return readFileSync(path.join(j.dir, 'job.lock'), 'utf8').trim();
        } catch (err) {
          if (!isMissing(err)) log.warn("could not read a job's lock", { job: j.dir, cause: causeOf(err) });
          return ''; // no lock: nobody runs the job
        }
      })(),
    );
    const trialsDir = path.join(j.dir, 'trials');
    const found: Array<{ trialId: string; dir: string; seen: string }> = [];
    if (Number.isInteger(owner) && owner > 0 && processAlive(owner) && existsSync(trialsDir)) {
      const done = new Set(
        (
          this.index
            .prepare("SELECT id FROM trials WHERE job = ? AND status = 'completed'")
            .pluck()
            .all(j.name) as string[]
        ).map((id) => id.slice(j.name.length + 1)),
      );
      for (const trialId of readdirSync(trialsDir)) {
        if (done.has(trialId)) continue;
        const dir = path.join(trialsDir, trialId);
        if (existsSync(path.join(dir, 'result.json'))) continue;
        const traj = statSync(path.join(dir, 'agent', 'trajectory.json'), { throwIfNoEntry: false });
        found.push({ trialId, dir, seen: `${trialId}:${traj?.size ?? 0}:${traj?.mtimeMs ?? 0}` });
      }
    }
    const seen = found.map((f) => f.seen).join('\n');
    if (seen === j.runningSeen) return false;
    j.runningSeen = seen;
    const recorded = (col: 'config' | 'task'): string[] =>
      this.index
        .prepare(`SELECT DISTINCT ${col} FROM trials WHERE job = ? AND status != 'running'`)
        .pluck()
        .all(j.name) as string[];
    const labels = [
      ...new Set([...Object.keys(j.planned ?? {}), ...Object.keys(this.knownConfigs(j)), ...recorded('config')]),
    ];
    const tasks = recorded('task');
    this.index.transaction(() => {
      this.index.prepare("DELETE FROM trials WHERE job = ? AND status = 'running'").run(j.name);
      for (const f of found) {
        const slot = runningSlotOf(f.trialId, labels, tasks);
        const id = `${j.name}/running/${f.trialId}`;
        this.dirs.set(id, f.dir);
        this.put({
          id,
          job: j.name,
          config: slot.config,
          task: slot.task,
          attempt: slot.attempt,
          status: 'running',
          reward: null,
          error_class: null,
          failing: '',
          tests_passed: 0,
          tests_failed: 0,
          duration_ms: null,
          output_tokens: null,
          cost_usd: null,
          finished_at: null,
          findings: '',
        });
      }
    })();
    return true;
  }

  /**
   * A source's name in the list and the job filter: its folder's name, or more of its path when
   * another source has that name (two jobs named alike are two jobs, never one).
   */
  private uniqueName(dir: string): string {
    const taken = new Set([...this.jobs.map((j) => j.name), ...this.folders.map((f) => f.name)]);
    const parts = dir.split(path.sep).filter(Boolean);
    for (let n = 1; n <= parts.length; n++) {
      const name = parts.slice(-n).join('/');
      if (!taken.has(name)) return name;
    }
    return dir;
  }

  /** New and replaced records of a job store since the last look; all of them when `full`. */
  private syncJob(j: JobSource, full = false): boolean {
    const slotsChanged = this.readSlots(j);
    const head = j.store.head();
    if (!full && head.count === j.lastCount && head.lastRowid === j.lastRowid) return slotsChanged;
    const read = (after: number) => j.store.listingSince(after);
    let rows = full ? [] : read(j.lastRowid);
    // Only appended rows explain the new count; otherwise records were replaced or removed (a
    // resumed slot, --retry): the job is read whole again.
    if (full || j.lastCount + rows.length !== head.count) {
      this.index.prepare('DELETE FROM trials WHERE job = ?').run(j.name);
      j.runningSeen = ''; // gone with the rest: put back at the next look
      rows = read(0);
    }
    this.index.transaction(() => {
      for (const r of rows) {
        const { rowid: _r, trial_dir, findings_json, ...row } = r;
        // Trial ids repeat across jobs of the same tasks and configurations: the job is part of the id.
        const id = `${j.name}/${row.id}`;
        this.put({
          ...row,
          id,
          job: j.name,
          failing: row.failing ?? '',
          findings: findingsText(JSON.parse(findings_json)),
        });
        if (trial_dir) this.dirs.set(id, trial_dir);
        this.stores.set(id, { store: j.store, trialId: row.id });
      }
    })();
    j.lastCount = head.count;
    j.lastRowid = head.lastRowid;
    return true;
  }

  private async loadFolder(f: FolderSource): Promise<void> {
    const batch: Array<Record<string, unknown> & { reward: number | null }> = [];
    for await (const file of filesNamed(f.dir, 'result.json')) {
      let r: ResultFile;
      try {
        r = JSON.parse(await readFile(file, 'utf8')) as ResultFile;
      } catch {
        continue; // a result being written, or not a trial's
      }
      if (!r.trialId || !r.task?.name || !r.agent?.name) continue;
      const id = `${f.name}/${r.trialId}`;
      this.dirs.set(id, path.dirname(file));
      batch.push({
        id,
        job: f.name,
        config: r.agent.model ? `${r.agent.name}/${r.agent.model}` : r.agent.name,
        task: r.task.name,
        attempt: r.attempt ?? 0,
        status: trialStatusOf(r.reward, r.error?.class),
        reward: r.reward ?? null,
        error_class: r.error?.class ?? null,
        failing: (r.tests ?? [])
          .filter((t) => t.status === 'failed' || t.status === 'error')
          .map((t) => t.name)
          .join('\n'),
        tests_passed: r.testsSummary?.passed ?? 0,
        tests_failed: r.testsSummary?.failed ?? 0,
        duration_ms: r.durationMs ?? null,
        output_tokens: r.tokens?.output ?? null,
        cost_usd: r.costUsd ?? null,
        finished_at: r.finishedAt ?? null,
        findings: findingsText(r.findings),
      });
    }
    this.index.transaction(() => batch.forEach((b) => this.put(b)))();
  }

  /** Looks at every job store again, and for new jobs in jobs folders; true when anything changed (the page then refreshes). */
  refresh(): boolean {
    let changed = false;
    for (const f of this.folders.filter((x) => x.jobsRoot)) {
      for (const dir of this.jobFoldersIn(f.dir)) {
        if (this.jobs.some((j) => j.dir === dir)) continue;
        this.addJob(dir);
        changed = true;
      }
    }
    for (const j of this.jobs) {
      changed = this.syncJob(j) || changed;
      changed = this.syncRunning(j) || changed;
    }
    if (changed) this.generation += 1;
    return changed;
  }

  get version(): number {
    return this.generation;
  }

  /** The SQL condition of a query's filters, and its arguments. */
  private filterOf(q: TrialQuery): { w: string; args: unknown[] } {
    const where: string[] = [];
    const args: unknown[] = [];
    const eq = (col: string, v: string | undefined): void => {
      if (v) {
        where.push(`${col} = ?`);
        args.push(v);
      }
    };
    eq('job', q.job);
    eq('config', q.config);
    eq('status', q.status);
    eq('error_class', q.error);
    if (q.task) {
      where.push(q.exact ? 'task = ?' : 'task LIKE ?');
      args.push(q.exact ? q.task : `%${q.task}%`);
    }
    if (q.test) {
      where.push('failing LIKE ?');
      args.push(`%${q.test}%`);
    }
    if (q.consistency === 'inconsistent') where.push("findings != ''");
    if (q.reward === 'pass') where.push('passed = 1');
    else if (q.reward === 'fail') where.push('reward IS NOT NULL AND passed = 0');
    else if (q.reward === 'none') where.push('reward IS NULL');
    return { w: where.length ? `WHERE ${where.join(' AND ')}` : '', args };
  }

  /** One page of trials under the filters, and how many match in all. */
  query(q: TrialQuery): { total: number; rows: TrialListRow[] } {
    const { w, args } = this.filterOf(q);
    const sort = q.sort && SORTABLE.has(q.sort) ? q.sort : 'job, config, task, attempt';
    const dir = q.dir === 'desc' ? 'DESC' : 'ASC';
    const order = q.sort && SORTABLE.has(q.sort) ? `${sort} ${dir} NULLS LAST, id` : sort;
    const limit = Math.min(Math.max(1, q.limit ?? 50), 500);
    const offset = Math.max(0, q.offset ?? 0);
    const total = (this.index.prepare(`SELECT count(*) AS n FROM trials ${w}`).get(...args) as { n: number }).n;
    const rows = this.index
      .prepare(`SELECT * FROM trials ${w} ORDER BY ${order} LIMIT ? OFFSET ?`)
      .all(...args, limit, offset) as TrialListRow[];
    return { total, rows };
  }

  /** The values each filter can take (configurations, statuses, error classes, jobs). */
  facets(): Record<string, string[]> {
    const col = (c: string): string[] =>
      (
        this.index.prepare(`SELECT DISTINCT ${c} AS v FROM trials WHERE ${c} IS NOT NULL ORDER BY v`).all() as Array<{
          v: string;
        }>
      ).map((r) => r.v);
    return { job: col('job'), config: col('config'), status: col('status'), error: col('error_class') };
  }

  /** Every trial under the filters as (task, configuration, status, reward, error class): what the grid counts. */
  outcomes(q: TrialQuery): TrialOutcome[] {
    const { w, args } = this.filterOf(q);
    return this.index
      .prepare(`SELECT job, task, config, status, reward, error_class FROM trials ${w}`)
      .all(...args) as TrialOutcome[];
  }

  /** The jobs and trial folders shown (not the jobs folders they were found in), with where each is. */
  sources(): Array<{ name: string; dir: string; job: boolean }> {
    return [
      ...this.jobs.map((j) => ({ name: j.name, dir: j.dir, job: true })),
      ...this.folders.filter((f) => !f.jobsRoot).map((f) => ({ name: f.name, dir: f.dir, job: false })),
    ];
  }

  /**
   * Per job: trials by status, and the slots in all: per configuration the slots its last run
   * planned or, when more, those it recorded (a job run with one configuration, then with
   * another, has both's); a store from before per-configuration counts gives its one total.
   */
  jobSummaries(): Array<{ job: string; total: number | null; counts: Record<string, number>; live: boolean }> {
    const counts = this.index
      .prepare('SELECT job, status, count(*) AS n FROM trials GROUP BY job, status')
      .all() as Array<{ job: string; status: string; n: number }>;
    const recorded = this.index
      .prepare("SELECT job, config, count(*) AS n FROM trials WHERE status != 'running' GROUP BY job, config")
      .all() as Array<{ job: string; config: string; n: number }>;
    const totalOf = (j: JobSource): number | null => {
      const mine = recorded.filter((r) => r.job === j.name);
      if (!j.planned)
        return j.total === null
          ? null
          : Math.max(
              j.total,
              mine.reduce((a, r) => a + r.n, 0),
            );
      const configs = new Set([...Object.keys(j.planned), ...mine.map((r) => r.config)]);
      return [...configs].reduce(
        (a, c) => a + Math.max(j.planned![c] ?? 0, mine.find((r) => r.config === c)?.n ?? 0),
        0,
      );
    };
    return this.sources().map(({ name, job }) => ({
      job: name,
      total: job ? totalOf(this.jobs.find((j) => j.name === name)!) : null,
      counts: Object.fromEntries(counts.filter((c) => c.job === name).map((c) => [c.status, c.n])),
      live: job,
    }));
  }

  row(id: string): TrialListRow | null {
    return (this.index.prepare('SELECT * FROM trials WHERE id = ?').get(id) as TrialListRow | undefined) ?? null;
  }

  /** Everything the job's store holds of the trial (null for a trial folder outside a job). */
  stored(id: string): StoredTrialRecord | null {
    const at = this.stores.get(id);
    return at ? storedTrialRecord(at.store, at.trialId) : null;
  }

  /** The trial's folder, when it has one. */
  dirOf(id: string): string | null {
    return this.dirs.get(id) ?? null;
  }

  close(): void {
    for (const j of this.jobs) j.store.close();
    this.index.close();
  }
}
