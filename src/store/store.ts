import { accessSync, constants, mkdirSync, statfsSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import Database from 'better-sqlite3';
import type { TrialResult } from '../trial/schema.js';
import { TermgradeError } from '../util/errors.js';
import {
  MIGRATIONS,
  slotKey,
  type MetaKey,
  MetaSchemas,
  type ListingRow,
  type Slot,
  type TrialRow,
  type TrialStatus,
} from './schema.js';
import { INFRA_ERROR_CLASSES, isPassingReward } from '../trial/accounting.js';
import { parseRetries, type RetriedAttempt } from '../trial/retries.js';

export type { RetriedAttempt } from '../trial/retries.js';
// The row types live with the tables (schema.ts); named here too for the store's callers.
export {
  SlotSchema,
  slotKey,
  TrialRowSchema,
  TrialStatusSchema,
  type Slot,
  type TrialRow,
  type TrialStatus,
} from './schema.js';

export interface RecordExtra {
  slot: Slot;
  trialDir: string;
  infraAttempts: number;
  /** The runs of this slot before the recorded one, discarded for infrastructure failures. */
  retryReasons: RetriedAttempt[];
  source?: string;
}

/** A write error on a disk with (almost) no room left: SQLite reports some of those as I/O errors. */
function diskNearlyFull(file: string): boolean {
  try {
    const st = statfsSync(path.dirname(file));
    return st.bavail * st.bsize < 1024 * 1024;
  } catch {
    // Cannot tell (the folder gone meanwhile): the I/O error is reported as it came.
    return false;
  }
}

function dirWritable(file: string): boolean {
  try {
    accessSync(path.dirname(file), constants.W_OK);
    return true;
  } catch {
    // access() fails exactly when the folder cannot be written (EACCES, EROFS) or is gone: the answer.
    return false;
  }
}

/** Turns SQLite's failures into messages that say what to do; nothing already committed is lost. */
export function storeError(file: string, err: unknown): TermgradeError {
  const code = (err as { code?: string }).code ?? '';
  const msg = (err as Error).message ?? String(err);
  if (
    code === 'SQLITE_FULL' ||
    /ENOSPC|disk is full|database or disk is full/i.test(msg) ||
    (code.startsWith('SQLITE_IOERR') && diskNearlyFull(file))
  ) {
    return new TermgradeError(
      'store_full',
      `cannot write to the job store ${file}: the disk is full. Every trial finished before this is kept; free space and run the job again to resume.`,
    );
  }
  if (
    code.startsWith('SQLITE_READONLY') ||
    /readonly|read-only|EROFS/i.test(msg) ||
    ((code === 'SQLITE_CANTOPEN' || code.startsWith('SQLITE_IOERR')) && !dirWritable(file))
  ) {
    return new TermgradeError(
      'store_readonly',
      `cannot write to the job store ${file}: it is read-only. Every trial finished before this is kept; make it writable and run the job again to resume.`,
    );
  }
  if (code === 'SQLITE_CORRUPT' || code === 'SQLITE_NOTADB') {
    return new TermgradeError('store_corrupt', `the job store ${file} is damaged or not a termgrade store (${msg})`);
  }
  return new TermgradeError('store_error', `job store ${file}: ${msg}`);
}

/**
 * A job's embedded store (SQLite, WAL): one row per trial slot plus its per-test results, written
 * in one transaction per trial, so a trial is recorded whole or not at all, and a crash or
 * kill loses only trials that were still running.
 */
/**
 * A SQLite file opened as every termgrade store is: WAL with normal sync when writable (one writer,
 * readers never blocked), foreign keys on, a wait on a busy lock; its folder made when writable.
 * Failures name the file (storeError).
 */
export function openDatabase(file: string, options: { readonly?: boolean } = {}): Database.Database {
  try {
    if (!options.readonly) mkdirSync(path.dirname(file), { recursive: true });
    const db = new Database(file, { readonly: options.readonly ?? false, fileMustExist: options.readonly ?? false });
    if (!options.readonly) {
      db.pragma('journal_mode = WAL');
      db.pragma('synchronous = NORMAL');
    }
    db.pragma('foreign_keys = ON');
    db.pragma('busy_timeout = 5000');
    return db;
  } catch (err) {
    throw storeError(file, err);
  }
}

/** A trial's row status: not_run when cancelled, else completed with a reward, error without (the store and the viewer's folders alike). */
export function trialStatusOf(reward: number | null | undefined, errorClass: string | null | undefined): TrialStatus {
  if (errorClass === 'cancelled') return 'not_run';
  return reward === null || reward === undefined ? 'error' : 'completed';
}

/**
 * Brings a store's schema up to date: `migrations` in order, each in its own transaction with the
 * PRAGMA user_version that counts those run, so a crash leaves a schema that the next open resumes.
 * A file written by a newer termgrade (more migrations than `migrations`) is refused, named `what`.
 * The one migration runner of every termgrade store (jobs, synth).
 */
export function migrate(db: Database.Database, file: string, migrations: readonly string[], what: string): void {
  const version = db.pragma('user_version', { simple: true }) as number;
  if (version > migrations.length) throw tooNew(file, what, version, migrations.length);
  try {
    for (let v = version; v < migrations.length; v++) {
      db.transaction(() => {
        db.exec(migrations[v]!);
        db.pragma(`user_version = ${v + 1}`);
      })();
    }
  } catch (err) {
    throw storeError(file, err);
  }
}

function tooNew(file: string, what: string, version: number, known: number): TermgradeError {
  return new TermgradeError(
    'store_error',
    `${file} was written by a newer termgrade (${what} ${version}, this one knows ${known})`,
  );
}

export class JobStore {
  private readonly db: Database.Database;

  private constructor(
    readonly file: string,
    db: Database.Database,
    /** Test hook: a trial's write stalls this long before committing (see faultDelay). */
    private readonly writeDelayMs = 0,
  ) {
    this.db = db;
  }

  static open(file: string, options: { readonly?: boolean; writeDelayMs?: number } = {}): JobStore {
    const db = openDatabase(file, options);
    const store = new JobStore(file, db, options.writeDelayMs);
    try {
      const version = db.pragma('user_version', { simple: true }) as number;
      if (!options.readonly) migrate(db, file, MIGRATIONS, 'schema');
      else if (version > MIGRATIONS.length) throw tooNew(file, 'schema', version, MIGRATIONS.length);
      // A damaged file can open and fail only at its first read: read the schema now, to say so here.
      db.prepare("SELECT COUNT(*) FROM sqlite_master WHERE name = 'trials'").get();
    } catch (err) {
      db.close();
      throw err instanceof TermgradeError ? err : storeError(file, err);
    }
    return store;
  }

  /**
   * The job's id: random, made when the store is created (or first opened by a termgrade that
   * knows it), and kept by a copy of the folder. Trial ids are unique only within a job; the job id
   * tells apart two jobs of the same tasks and configurations. A store too old to hold one, opened
   * read-only, is named by its file's real path instead.
   */
  jobId(): string {
    return (this.cachedJobId ??= this.getMeta('job_id') ?? `path:${path.resolve(this.file)}`);
  }

  private cachedJobId: string | null = null;

  schemaVersion(): number {
    return this.db.pragma('user_version', { simple: true }) as number;
  }

  getMeta(key: string): string | null {
    const row = this.db.prepare('SELECT value FROM meta WHERE key = ?').get(key) as { value: string } | undefined;
    return row?.value ?? null;
  }

  /** A meta value read against its schema (schema.ts MetaSchemas); null when absent, an error naming the key when malformed. */
  metaValue<K extends MetaKey>(key: K): z.infer<(typeof MetaSchemas)[K]> | null {
    const raw = this.getMeta(key);
    if (raw === null) return null;
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw);
    } catch (err) {
      throw new TermgradeError('store_corrupt', `${this.file}: meta "${key}" is not JSON: ${(err as Error).message}`);
    }
    const checked = MetaSchemas[key].safeParse(parsed);
    if (!checked.success)
      throw new TermgradeError(
        'store_corrupt',
        `${this.file}: meta "${key}": ${checked.error.issues[0]?.message ?? 'malformed'}`,
      );
    return checked.data as z.infer<(typeof MetaSchemas)[K]>;
  }

  /** How many trial rows there are and the last rowid: a reader's cheap look for anything new. */
  head(): { count: number; lastRowid: number } {
    const row = this.db.prepare('SELECT count(*) AS n, coalesce(max(rowid), 0) AS m FROM trials').get() as {
      n: number;
      m: number;
    };
    return { count: row.n, lastRowid: row.m };
  }

  /** Trials as the viewer lists them, those after `afterRowid` (0: all), with their failing tests. */
  listingSince(afterRowid: number): ListingRow[] {
    // A store recorded before reward findings existed (schema < 5) has no findings_json column.
    return this.db
      .prepare(
        `SELECT t.rowid AS rowid, t.trial_id AS id, t.config, t.task, t.attempt, t.status, t.reward, t.error_class, t.tests_passed, t.tests_failed,
           t.duration_ms, t.output_tokens, t.cost_usd, t.finished_at, t.trial_dir, ${this.column('findings_json', "'[]'")},
           (SELECT group_concat(name, char(10)) FROM tests s WHERE s.trial_id = t.trial_id AND s.status IN ('failed', 'error')) AS failing
         FROM trials t WHERE t.rowid > ?`,
      )
      .all(afterRowid) as ListingRow[];
  }

  setMeta(key: string, value: string): void {
    this.write(() =>
      this.db
        .prepare('INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value')
        .run(key, value),
    );
  }

  private write<T>(fn: () => T): T {
    try {
      return fn();
    } catch (err) {
      throw storeError(this.file, err);
    }
  }

  /**
   * Slots whose record is final: graded, or ungraded by the verifier. Slots not run and slots that
   * ended in an infrastructure failure are run again when the job resumes (see trial/accounting.ts);
   * `retry` names more to run again: error classes, or every trial without a reward (`errors`).
   */
  finishedSlots(retry: { classes?: string[]; errors?: boolean } = {}): Set<string> {
    const again = new Set([...INFRA_ERROR_CLASSES, ...(retry.classes ?? [])]);
    const rows = (
      this.db.prepare('SELECT config, task, attempt, status, error_class FROM trials').all() as Array<
        Slot & { status: string; error_class: string | null }
      >
    ).filter(
      (r) =>
        r.status !== 'not_run' &&
        !(r.error_class && again.has(r.error_class)) &&
        !(retry.errors && r.status === 'error'),
    );
    return new Set(rows.map(slotKey));
  }

  /** Verdicts of a check job, by task path (see `check --job`). */
  checkedTasks(): Map<string, unknown> {
    const rows = this.db.prepare('SELECT path, result_json FROM checked_tasks').all() as Array<{
      path: string;
      result_json: string;
    }>;
    return new Map(rows.map((r) => [r.path, JSON.parse(r.result_json) as unknown]));
  }

  /** Records one checked task whole (replacing an earlier verdict of the same path). */
  recordChecked(task: { path: string; name: string; verdict: string }): void {
    this.write(() =>
      this.db
        .prepare(
          'INSERT INTO checked_tasks (path, name, verdict, result_json, checked_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (path) DO UPDATE SET name = excluded.name, verdict = excluded.verdict, result_json = excluded.result_json, checked_at = excluded.checked_at',
        )
        .run(task.path, task.name, task.verdict, JSON.stringify(task), new Date().toISOString()),
    );
  }

  /** Earlier records of a slot that were replaced by a re-run, oldest first. */
  historyOf(slot: Slot): Array<{
    trial_id: string;
    status: string;
    error_class: string | null;
    row: Record<string, unknown>;
    replaced_at: string;
  }> {
    const rows = this.db
      .prepare(
        'SELECT trial_id, status, error_class, row_json, replaced_at FROM trial_history WHERE config = ? AND task = ? AND attempt = ? ORDER BY rowid',
      )
      .all(slot.config, slot.task, slot.attempt) as Array<{
      trial_id: string;
      status: string;
      error_class: string | null;
      row_json: string;
      replaced_at: string;
    }>;
    return rows.map((r) => ({
      trial_id: r.trial_id,
      status: r.status,
      error_class: r.error_class,
      row: JSON.parse(r.row_json) as Record<string, unknown>,
      replaced_at: r.replaced_at,
    }));
  }

  /** The tests that failed (or errored) in each trial, by trial id. */
  failedTests(): Map<string, string[]> {
    const out = new Map<string, string[]>();
    for (const r of this.db
      .prepare("SELECT trial_id, name FROM tests WHERE status IN ('failed', 'error') ORDER BY trial_id, name")
      .iterate() as Iterable<{ trial_id: string; name: string }>) {
      const list = out.get(r.trial_id);
      if (list) list.push(r.name);
      else out.set(r.trial_id, [r.name]);
    }
    return out;
  }

  /** Every replaced record (by `run --retry`), with its slot: sandbox time spent and discarded. */
  allHistory(): Array<{
    config: string;
    task: string;
    attempt: number;
    error_class: string | null;
    duration_ms: number;
    retries: RetriedAttempt[];
  }> {
    const rows = this.db
      .prepare('SELECT config, task, attempt, error_class, row_json FROM trial_history ORDER BY rowid')
      .all() as Array<{ config: string; task: string; attempt: number; error_class: string | null; row_json: string }>;
    return rows.map((r) => {
      const row = JSON.parse(r.row_json) as { duration_ms?: number | null; retry_reasons_json?: string };
      return {
        config: r.config,
        task: r.task,
        attempt: r.attempt,
        error_class: r.error_class,
        duration_ms: row.duration_ms ?? 0,
        retries: parseRetries(row.retry_reasons_json),
      };
    });
  }

  /** Every trial id the store holds. */
  trialIds(): Set<string> {
    return new Set(this.db.prepare('SELECT trial_id FROM trials').pluck().all() as string[]);
  }

  /** Per configuration and task (`config\0task`), the attempt index after the highest recorded. */
  nextAttempts(): Map<string, number> {
    const rows = this.db
      .prepare('SELECT config, task, MAX(attempt) + 1 AS next FROM trials GROUP BY config, task')
      .all() as Array<{ config: string; task: string; next: number }>;
    return new Map(rows.map((r) => [`${r.config}\u0000${r.task}`, r.next]));
  }

  /**
   * The checksum each task had when its trials were recorded (for refusing changed tasks). Imported
   * trials keep the checksum Harbor recorded, which another harness computes its own way: not compared.
   */
  taskChecksums(): Map<string, string> {
    const rows = this.db
      .prepare(
        "SELECT DISTINCT task, task_checksum FROM trials WHERE task_checksum IS NOT NULL AND task_checksum != '' AND status != 'not_run' AND source != 'harbor'",
      )
      .all() as Array<{ task: string; task_checksum: string }>;
    return new Map(rows.map((r) => [r.task, r.task_checksum]));
  }

  private statements: ReturnType<JobStore['prepareWrites']> | null = null;

  /** Statements prepared once: preparing per trial costs more than the write itself. */
  private prepareWrites() {
    return {
      deleteSlot: this.db.prepare('DELETE FROM trials WHERE config = ? AND task = ? AND attempt = ?'),
      // The row a slot's new record replaces, kept whole (a not_run placeholder is not history).
      keepHistory: this.db.prepare(
        `INSERT INTO trial_history (trial_id, config, task, attempt, status, error_class, row_json, replaced_at)
         SELECT trial_id, config, task, attempt, status, error_class, json_object('trial_id', trial_id, 'status', status, 'reward', reward, 'error_class', error_class, 'error_message', error_message, 'duration_ms', duration_ms, 'trial_dir', trial_dir, 'infra_attempts', infra_attempts, 'retry_reasons_json', retry_reasons_json), ?
         FROM trials WHERE config = ? AND task = ? AND attempt = ? AND status != 'not_run'`,
      ),
      insertTest: this.db.prepare(
        'INSERT OR REPLACE INTO tests (trial_id, name, status, duration_ms, message) VALUES (?, ?, ?, ?, ?)',
      ),
      insertTrial: this.db.prepare(
        `INSERT INTO trials (trial_id, config, task, attempt, agent, model, status, reward, rewards_json, passed, error_class,
            error_message, error_phase, exit_reason, turns, input_tokens, cached_tokens, output_tokens, cost_usd, task_path,
            task_checksum, image, tests_source, tests_total, tests_passed, tests_failed, phases_json, started_at, finished_at,
            duration_ms, infra_attempts, retry_reasons_json, trial_dir, source, image_id, image_source, tampering_json, findings_json, protection,
            steps_json, task_version, dataset_name, dataset_version)
           VALUES (@trial_id, @config, @task, @attempt, @agent, @model, @status, @reward, @rewards_json, @passed, @error_class,
            @error_message, @error_phase, @exit_reason, @turns, @input_tokens, @cached_tokens, @output_tokens, @cost_usd, @task_path,
            @task_checksum, @image, @tests_source, @tests_total, @tests_passed, @tests_failed, @phases_json, @started_at, @finished_at,
            @duration_ms, @infra_attempts, @retry_reasons_json, @trial_dir, @source, @image_id, @image_source, @tampering_json, @findings_json, @protection,
            @steps_json, @task_version, @dataset_name, @dataset_version)`,
      ),
    };
  }

  /** Records one trial, with its tests, atomically; replaces a not_run row of the same slot. */
  recordTrial(result: TrialResult, extra: RecordExtra): void {
    const status = trialStatusOf(result.reward, result.error?.class);
    const s = extra.slot;
    const st = (this.statements ??= this.prepareWrites());
    const tx = this.db.transaction(() => {
      st.keepHistory.run(new Date().toISOString(), s.config, s.task, s.attempt);
      st.deleteSlot.run(s.config, s.task, s.attempt);
      st.insertTrial.run({
        trial_id: result.trialId,
        config: s.config,
        task: s.task,
        attempt: s.attempt,
        agent: result.agent.name,
        model: result.agent.model,
        status,
        reward: result.reward,
        rewards_json: JSON.stringify(result.rewards),
        // The one pass rule, applied here: the column never trusts a `passed` a result (or an import) carried.
        passed: isPassingReward(result.reward) ? 1 : 0,
        error_class: result.error?.class ?? null,
        error_message: result.error?.message ?? null,
        error_phase: result.error?.phase ?? null,
        exit_reason: result.exitReason,
        turns: result.turns,
        input_tokens: result.tokens?.input ?? null,
        cached_tokens: result.tokens?.cached ?? null,
        output_tokens: result.tokens?.output ?? null,
        cost_usd: result.costUsd,
        task_path: result.task.path,
        task_checksum: result.task.checksum,
        image: result.image,
        tests_source: result.testsSource,
        tests_total: result.testsSummary.total,
        tests_passed: result.testsSummary.passed,
        tests_failed: result.testsSummary.failed,
        phases_json: JSON.stringify(result.phases),
        started_at: result.startedAt,
        finished_at: result.finishedAt,
        duration_ms: result.durationMs,
        infra_attempts: extra.infraAttempts,
        retry_reasons_json: JSON.stringify(extra.retryReasons),
        trial_dir: extra.trialDir,
        source: extra.source ?? 'termgrade',
        // Records written before these fields existed (imports, older result.json) lack them.
        image_id: result.imageId ?? null,
        image_source: result.imageSource ?? null,
        tampering_json: JSON.stringify(result.tampering ?? []),
        protection: result.protection ?? 'rules',
        findings_json: JSON.stringify(result.findings ?? []),
        steps_json: JSON.stringify(result.steps ?? []),
        task_version: result.taskVersion ?? null,
        dataset_name: result.dataset?.name ?? null,
        dataset_version: result.dataset?.version ?? null,
      });
      for (const t of result.tests) st.insertTest.run(result.trialId, t.name, t.status, t.durationMs, t.message);
      faultDelay(this.writeDelayMs);
    });
    this.write(() => tx());
  }

  /**
   * A slot the job did not get to (budget, interrupt): listed as not_run, run again on resume.
   * `from` names the folder and source of a pending trial imported from elsewhere (Harbor's).
   */
  recordNotRun(
    slot: Slot,
    trialId: string,
    agent: string,
    model: string | null,
    reason: string,
    from: { trialDir: string; source: string } | null = null,
  ): void {
    this.write(() =>
      this.db.transaction(() => {
        this.db
          .prepare('DELETE FROM trials WHERE config = ? AND task = ? AND attempt = ?')
          .run(slot.config, slot.task, slot.attempt);
        this.db
          .prepare(
            "INSERT INTO trials (trial_id, config, task, attempt, agent, model, status, error_class, error_message, exit_reason, trial_dir, source) VALUES (?, ?, ?, ?, ?, ?, 'not_run', 'cancelled', ?, 'not_run', ?, ?)",
          )
          .run(
            trialId,
            slot.config,
            slot.task,
            slot.attempt,
            agent,
            model,
            reason,
            from?.trialDir ?? null,
            from?.source ?? 'termgrade',
          );
      })(),
    );
  }

  /** Many trials in one transaction (imports, benchmarks); all or nothing. */
  recordMany(items: Array<{ result: TrialResult; extra: RecordExtra }>): void {
    this.write(() => this.db.transaction(() => items.forEach((i) => this.recordTrial(i.result, i.extra)))());
  }

  /**
   * A column's name, or a constant standing in for it in a store opened read-only before the
   * migration that added it (a job recorded by an older termgrade, read by `stats` or `report`).
   */
  private column(name: string, absent: string): string {
    const has =
      (this.db
        .prepare('SELECT COUNT(*) FROM pragma_table_info(?) WHERE name = ?')
        .pluck()
        .get('trials', name) as number) > 0;
    return has ? name : `${absent} AS ${name}`;
  }

  /** The job's trial rows, in slot order; `status` or `trialId` keep only those. */
  *listTrials(filter: { status?: TrialStatus; trialId?: string } = {}): Generator<TrialRow> {
    const where: string[] = [];
    const params: string[] = [];
    if (filter.status) {
      where.push('status = ?');
      params.push(filter.status);
    }
    if (filter.trialId) {
      where.push('trial_id = ?');
      params.push(filter.trialId);
    }
    const sql = `SELECT ? AS job_id, trial_id, config, task, attempt, agent, model, status, reward, passed, error_class, error_message, exit_reason,
      turns, input_tokens, cached_tokens, output_tokens, cost_usd, task_checksum, tests_total, tests_passed, tests_failed, duration_ms,
      infra_attempts, retry_reasons_json, trial_dir, source, image_id, image_source, tampering_json, ${this.column('findings_json', "'[]'")}, ${this.column('protection', "'rules'")},
      rewards_json, ${this.column('steps_json', "'[]'")}, ${this.column('task_version', 'NULL')}, ${this.column('dataset_name', 'NULL')}, ${this.column('dataset_version', 'NULL')} FROM trials ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY config, task, attempt`;
    yield* this.db.prepare(sql).iterate(this.jobId(), ...params) as IterableIterator<TrialRow>;
  }

  count(status?: TrialStatus): number {
    const row = (
      status
        ? this.db.prepare('SELECT COUNT(*) n FROM trials WHERE status = ?').get(status)
        : this.db.prepare('SELECT COUNT(*) n FROM trials').get()
    ) as { n: number };
    return row.n;
  }

  /**
   * Everything the store holds of one trial (its row, with the columns `listTrials` leaves out,
   * and its per-test results with messages); null when there is no such trial.
   */
  trialStored(trialId: string): {
    row: TrialRow & {
      error_phase: string | null;
      phases_json: string;
      started_at: string | null;
      finished_at: string | null;
      tests_source: string | null;
      image: string | null;
      task_path: string | null;
    };
    tests: Array<{ name: string; status: string; duration_ms: number | null; message: string | null }>;
  } | null {
    const row = this.db
      .prepare(
        `SELECT ? AS job_id, trial_id, config, task, attempt, agent, model, status, reward, passed, error_class, error_message,
           error_phase, exit_reason, turns, input_tokens, cached_tokens, output_tokens, cost_usd, task_checksum, task_path, image,
           tests_source, tests_total, tests_passed, tests_failed, phases_json, started_at, finished_at, duration_ms,
           infra_attempts, retry_reasons_json, trial_dir, source, image_id, image_source, tampering_json,
           ${this.column('findings_json', "'[]'")}, ${this.column('protection', "'rules'")}, rewards_json,
           ${this.column('steps_json', "'[]'")}, ${this.column('task_version', 'NULL')}, ${this.column('dataset_name', 'NULL')},
           ${this.column('dataset_version', 'NULL')} FROM trials WHERE trial_id = ?`,
      )
      .get(this.jobId(), trialId) as NonNullable<ReturnType<JobStore['trialStored']>>['row'] | undefined;
    if (!row) return null;
    const tests = this.db
      .prepare('SELECT name, status, duration_ms, message FROM tests WHERE trial_id = ? ORDER BY rowid')
      .all(trialId) as Array<{ name: string; status: string; duration_ms: number | null; message: string | null }>;
    return { row, tests };
  }

  testsOf(trialId: string): Array<{ name: string; status: string }> {
    return this.db.prepare('SELECT name, status FROM tests WHERE trial_id = ? ORDER BY name').all(trialId) as Array<{
      name: string;
      status: string;
    }>;
  }

  integrityOk(): boolean {
    return (this.db.pragma('integrity_check', { simple: true }) as string) === 'ok';
  }

  close(): void {
    this.db.close();
  }
}

/**
 * TEST HOOK (`JobStore.open`'s writeDelayMs; `run`'s hidden --fault-store-write-delay-ms): a
 * trial's write transaction stalls that long before committing, so tests can kill the process in
 * the middle of a write.
 */
function faultDelay(ms: number): void {
  if (ms > 0) {
    process.stdout.write(`${JSON.stringify({ type: 'store-write-stalled', ms })}\n`);
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
  }
}
