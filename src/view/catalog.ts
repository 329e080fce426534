import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import Database from 'better-sqlite3';
import { TermgradeError } from '../util/errors.js';
import { filesNamed } from '../util/files.js';

/**
 * Every trial the viewer shows, from job stores (read live: new records appear within a second),
 * check outputs and folders of trial folders, in one in-memory index so that filters, sorting and
 * paging are one indexed SQL query whatever the number of trials.
 */
export interface TrialQuery {
  job?: string;
  config?: string;
  task?: string;
  status?: string;
  /** pass (reward >= 1), fail (graded, < 1), none (no reward). */
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
    .filter((f): f is { code: string; message?: unknown } => f !== null && typeof f === 'object' && typeof f.code === 'string')
    .map((f) => `${f.code}: ${typeof f.message === 'string' ? f.message : ''}`)
    .join('\n');
}

const SORTABLE = new Set(['job', 'config', 'task', 'attempt', 'status', 'reward', 'error_class', 'tests_failed', 'duration_ms', 'output_tokens', 'cost_usd', 'finished_at']);

interface JobSource {
  name: string;
  dir: string;
  db: Database.Database;
  lastRowid: number;
  lastCount: number;
  total: number | null;
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
  private readonly folders: Array<{ name: string; dir: string }> = [];
  private readonly dirs = new Map<string, string>();
  private readonly insert: Database.Statement;
  private generation = 0;

  private constructor() {
    this.index.exec(`
      CREATE TABLE trials (id TEXT PRIMARY KEY, job TEXT, config TEXT, task TEXT, attempt INTEGER, status TEXT, reward REAL,
        error_class TEXT, failing TEXT, tests_passed INTEGER, tests_failed INTEGER, duration_ms REAL, output_tokens INTEGER,
        cost_usd REAL, finished_at TEXT, findings TEXT NOT NULL DEFAULT '');
      CREATE INDEX by_config ON trials (config); CREATE INDEX by_task ON trials (task); CREATE INDEX by_status ON trials (status);
      CREATE INDEX by_error ON trials (error_class); CREATE INDEX by_job ON trials (job, config, task, attempt);`);
    this.insert = this.index.prepare(
      `INSERT OR REPLACE INTO trials VALUES (@id, @job, @config, @task, @attempt, @status, @reward, @error_class, @failing, @tests_passed, @tests_failed, @duration_ms, @output_tokens, @cost_usd, @finished_at, @findings)`,
    );
  }

  /** Job folders (job.db), check outputs and folders of trial folders; a path that is none of these is an error naming it. */
  static async open(sources: string[]): Promise<Catalog> {
    const c = new Catalog();
    for (const source of sources) {
      const st = await stat(source).catch(() => null);
      if (!st) throw new TermgradeError('bad_input', `${source}: no such file or folder`);
      if (!st.isDirectory()) throw new TermgradeError('bad_input', `${source}: give a job folder, a check output folder or a folder of trial folders`);
      const dir = path.resolve(source);
      if (c.jobs.some((j) => j.dir === dir) || c.folders.some((f) => f.dir === dir)) continue; // given twice: one job
      const name = c.uniqueName(dir);
      if (await stat(path.join(source, 'job.db')).catch(() => null)) {
        const db = new Database(path.join(source, 'job.db'), { readonly: true, fileMustExist: true });
        const slots = (db.prepare("SELECT value FROM meta WHERE key = 'slots'").get() as { value?: string } | undefined)?.value;
        const total = slots ? Number(slots) : null;
        c.jobs.push({ name, dir, db, lastRowid: 0, lastCount: 0, total });
      } else c.folders.push({ name, dir });
    }
    for (const j of c.jobs) c.syncJob(j, true);
    for (const f of c.folders) await c.loadFolder(f);
    return c;
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
    const head = j.db.prepare('SELECT count(*) AS n, coalesce(max(rowid), 0) AS m FROM trials').get() as { n: number; m: number };
    if (!full && head.n === j.lastCount && head.m === j.lastRowid) return false;
    // A store recorded before reward findings existed (schema < 5) has no findings_json column.
    const findingsCol = (j.db.prepare("SELECT COUNT(*) FROM pragma_table_info('trials') WHERE name = 'findings_json'").pluck().get() as number) > 0 ? 't.findings_json' : "'[]'";
    const read = (after: number) =>
      j.db
        .prepare(
          `SELECT t.rowid AS rowid, t.trial_id AS id, t.config, t.task, t.attempt, t.status, t.reward, t.error_class, t.tests_passed, t.tests_failed,
             t.duration_ms, t.output_tokens, t.cost_usd, t.finished_at, t.trial_dir, ${findingsCol} AS findings_json,
             (SELECT group_concat(name, char(10)) FROM tests s WHERE s.trial_id = t.trial_id AND s.status IN ('failed', 'error')) AS failing
           FROM trials t WHERE t.rowid > ?`,
        )
        .all(after) as Array<Omit<TrialListRow, 'job' | 'findings'> & { rowid: number; trial_dir: string | null; findings_json: string }>;
    let rows = full ? [] : read(j.lastRowid);
    // Only appended rows explain the new count; otherwise records were replaced or removed (a
    // resumed slot, --retry): the job is read whole again.
    if (full || j.lastCount + rows.length !== head.n) {
      this.index.prepare('DELETE FROM trials WHERE job = ?').run(j.name);
      rows = read(0);
    }
    this.index.transaction(() => {
      for (const r of rows) {
        const { rowid: _r, trial_dir, findings_json, ...row } = r;
        // Trial ids repeat across jobs of the same tasks and configurations: the job is part of the id.
        const id = `${j.name}/${row.id}`;
        this.insert.run({ ...row, id, job: j.name, failing: row.failing ?? '', findings: findingsText(JSON.parse(findings_json)) });
        if (trial_dir) this.dirs.set(id, trial_dir);
      }
    })();
    j.lastCount = head.n;
    j.lastRowid = head.m;
    return true;
  }

  private async loadFolder(f: { name: string; dir: string }): Promise<void> {
    const batch: Array<Record<string, unknown>> = [];
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
        status: r.reward === null || r.reward === undefined ? (r.error?.class === 'cancelled' ? 'not_run' : 'error') : 'completed',
        reward: r.reward ?? null,
        error_class: r.error?.class ?? null,
        failing: (r.tests ?? []).filter((t) => t.status === 'failed' || t.status === 'error').map((t) => t.name).join('\n'),
        tests_passed: r.testsSummary?.passed ?? 0,
        tests_failed: r.testsSummary?.failed ?? 0,
        duration_ms: r.durationMs ?? null,
        output_tokens: r.tokens?.output ?? null,
        cost_usd: r.costUsd ?? null,
        finished_at: r.finishedAt ?? null,
        findings: findingsText(r.findings),
      });
    }
    this.index.transaction(() => batch.forEach((b) => this.insert.run(b)))();
  }

  /** Looks at every job store again; true when anything changed (the page then refreshes). */
  refresh(): boolean {
    let changed = false;
    for (const j of this.jobs) changed = this.syncJob(j) || changed;
    if (changed) this.generation += 1;
    return changed;
  }

  get version(): number {
    return this.generation;
  }

  /** One page of trials under the filters, and how many match in all. */
  query(q: TrialQuery): { total: number; rows: TrialListRow[] } {
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
      where.push('task LIKE ?');
      args.push(`%${q.task}%`);
    }
    if (q.test) {
      where.push('failing LIKE ?');
      args.push(`%${q.test}%`);
    }
    if (q.consistency === 'inconsistent') where.push("findings != ''");
    if (q.reward === 'pass') where.push('reward >= 1');
    else if (q.reward === 'fail') where.push('reward < 1');
    else if (q.reward === 'none') where.push('reward IS NULL');
    const w = where.length ? `WHERE ${where.join(' AND ')}` : '';
    const sort = q.sort && SORTABLE.has(q.sort) ? q.sort : 'job, config, task, attempt';
    const dir = q.dir === 'desc' ? 'DESC' : 'ASC';
    const order = q.sort && SORTABLE.has(q.sort) ? `${sort} ${dir} NULLS LAST, id` : sort;
    const limit = Math.min(Math.max(1, q.limit ?? 50), 500);
    const offset = Math.max(0, q.offset ?? 0);
    const total = (this.index.prepare(`SELECT count(*) AS n FROM trials ${w}`).get(...args) as { n: number }).n;
    const rows = this.index.prepare(`SELECT * FROM trials ${w} ORDER BY ${order} LIMIT ? OFFSET ?`).all(...args, limit, offset) as TrialListRow[];
    return { total, rows };
  }

  /** The values each filter can take (configurations, statuses, error classes, jobs). */
  facets(): Record<string, string[]> {
    const col = (c: string): string[] => (this.index.prepare(`SELECT DISTINCT ${c} AS v FROM trials WHERE ${c} IS NOT NULL ORDER BY v`).all() as Array<{ v: string }>).map((r) => r.v);
    return { job: col('job'), config: col('config'), status: col('status'), error: col('error_class') };
  }

  /** Per job: trials by status, and the slots in all when the job says. */
  jobSummaries(): Array<{ job: string; total: number | null; counts: Record<string, number>; live: boolean }> {
    const counts = this.index.prepare('SELECT job, status, count(*) AS n FROM trials GROUP BY job, status').all() as Array<{ job: string; status: string; n: number }>;
    const names = [...this.jobs.map((j) => j.name), ...this.folders.map((f) => f.name)];
    return names.map((job) => ({
      job,
      total: this.jobs.find((j) => j.name === job)?.total ?? null,
      counts: Object.fromEntries(counts.filter((c) => c.job === job).map((c) => [c.status, c.n])),
      live: this.jobs.some((j) => j.name === job),
    }));
  }

  row(id: string): TrialListRow | null {
    return (this.index.prepare('SELECT * FROM trials WHERE id = ?').get(id) as TrialListRow | undefined) ?? null;
  }

  /** The trial's folder, when it has one. */
  dirOf(id: string): string | null {
    return this.dirs.get(id) ?? null;
  }

  close(): void {
    for (const j of this.jobs) j.db.close();
    this.index.close();
  }
}
