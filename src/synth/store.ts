import Database from 'better-sqlite3';
import { migrate, openDatabase, storeError } from '../store/store.js';
import { CandidateStateSchema, type CandidateState, type StageName } from './schema.js';

/**
 * synth's store's schema, as ordered migrations (PRAGMA user_version counts those run), kept apart
 * from a run job's store: a synth job is its own folder and never mixes with trial records.
 */
const MIGRATIONS: string[] = [
  `
  CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
  -- One row per candidate: its whole state, rewritten with every stage it finishes.
  CREATE TABLE candidates (
    id TEXT PRIMARY KEY,
    seed_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('active', 'admitted', 'rejected')),
    state_json TEXT NOT NULL,
    updated_at TEXT NOT NULL
  );
  -- One row per stage run. The key (candidate, round, stage) is what makes a resumed job unable
  -- to record a stage twice: a stage is recorded with the candidate's new state or not at all.
  CREATE TABLE stages (
    candidate_id TEXT NOT NULL REFERENCES candidates (id),
    round INTEGER NOT NULL,
    stage TEXT NOT NULL,
    outcome TEXT NOT NULL CHECK (outcome IN ('passed', 'failed')),
    started_at TEXT NOT NULL,
    duration_ms REAL NOT NULL,
    calls INTEGER NOT NULL DEFAULT 0,
    malformed INTEGER NOT NULL DEFAULT 0,
    prompt_tokens INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd REAL,
    detail_json TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (candidate_id, round, stage)
  );
  `,
];

export interface StageRecord {
  candidateId: string;
  round: number;
  stage: StageName;
  outcome: 'passed' | 'failed';
  startedAt: string;
  durationMs: number;
  calls: number;
  malformed: number;
  promptTokens: number;
  completionTokens: number;
  costUsd: number | null;
  detail: Record<string, unknown>;
}

/** The durable record of a synth job (SQLite, WAL): every candidate, every stage of every round. */
export class SynthStore {
  private constructor(
    readonly file: string,
    private readonly db: Database.Database,
  ) {}

  static open(file: string): SynthStore {
    const db = openDatabase(file);
    try {
      migrate(db, file, MIGRATIONS, 'synth schema');
    } catch (err) {
      db.close();
      throw err;
    }
    return new SynthStore(file, db);
  }

  private write<T>(fn: () => T): T {
    try {
      return fn();
    } catch (err) {
      throw storeError(this.file, err);
    }
  }

  getMeta(key: string): string | null {
    return (this.db.prepare('SELECT value FROM meta WHERE key = ?').pluck().get(key) as string | undefined) ?? null;
  }

  setMeta(key: string, value: string): void {
    this.write(() =>
      this.db
        .prepare('INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value')
        .run(key, value),
    );
  }

  /** Adds candidates not yet known (a resumed job keeps the ones it has, whatever their state). */
  addCandidates(states: CandidateState[]): void {
    const insert = this.db.prepare(
      'INSERT OR IGNORE INTO candidates (id, seed_id, position, status, state_json, updated_at) VALUES (?, ?, ?, ?, ?, ?)',
    );
    const now = new Date().toISOString();
    this.write(() =>
      this.db.transaction(() =>
        states.forEach((s, i) => insert.run(s.id, s.seedId, i, s.status, JSON.stringify(s), now)),
      )(),
    );
  }

  candidates(): CandidateState[] {
    const rows = this.db.prepare('SELECT state_json FROM candidates ORDER BY position').pluck().all() as string[];
    return rows.map((r) => CandidateStateSchema.parse(JSON.parse(r)));
  }

  /**
   * Records one finished stage and the candidate's state after it, in one transaction. A stage
   * already recorded for this round is refused: resuming must never run a stage twice.
   */
  recordStage(record: StageRecord, state: CandidateState): void {
    const tx = this.db.transaction(() => {
      this.db
        .prepare(
          `INSERT INTO stages (candidate_id, round, stage, outcome, started_at, duration_ms, calls, malformed, prompt_tokens, completion_tokens, cost_usd, detail_json)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        )
        .run(
          record.candidateId,
          record.round,
          record.stage,
          record.outcome,
          record.startedAt,
          record.durationMs,
          record.calls,
          record.malformed,
          record.promptTokens,
          record.completionTokens,
          record.costUsd,
          JSON.stringify(record.detail),
        );
      this.db
        .prepare('UPDATE candidates SET status = ?, state_json = ?, updated_at = ? WHERE id = ?')
        .run(state.status, JSON.stringify(state), new Date().toISOString(), state.id);
    });
    this.write(() => tx());
  }

  /**
   * Rewrites a candidate's state with no stage recorded: a candidate left waiting (the stage it was
   * in did not finish, so it runs again when the job resumes).
   */
  saveState(state: CandidateState): void {
    this.write(() =>
      this.db
        .prepare('UPDATE candidates SET status = ?, state_json = ?, updated_at = ? WHERE id = ?')
        .run(state.status, JSON.stringify(state), new Date().toISOString(), state.id),
    );
  }

  /** The job's elapsed wall-clock time over every run of the command so far. */
  elapsedMs(): number {
    return Number(this.getMeta('elapsed_ms') ?? 0);
  }

  /** Adds one run's elapsed time. */
  addElapsed(ms: number): void {
    this.setMeta('elapsed_ms', String(this.elapsedMs() + ms));
  }

  stages(): StageRecord[] {
    const rows = this.db.prepare('SELECT * FROM stages ORDER BY started_at, candidate_id').all() as Array<
      Record<string, unknown>
    >;
    return rows.map((r) => ({
      candidateId: r.candidate_id as string,
      round: r.round as number,
      stage: r.stage as StageName,
      outcome: r.outcome as 'passed' | 'failed',
      startedAt: r.started_at as string,
      durationMs: r.duration_ms as number,
      calls: r.calls as number,
      malformed: r.malformed as number,
      promptTokens: r.prompt_tokens as number,
      completionTokens: r.completion_tokens as number,
      costUsd: r.cost_usd as number | null,
      detail: JSON.parse(r.detail_json as string) as Record<string, unknown>,
    }));
  }

  close(): void {
    this.db.close();
  }
}
