import { z } from 'zod';

/**
 * The job store's schema, defined once: its tables (as an ordered list of migrations), the zod
 * types of the rows and meta values read back, for the writer (store.ts) and every reader
 * (records/, view/catalog.ts, export, harbor).
 */

/**
 * The tables, as an ordered list of migrations. `PRAGMA user_version` holds how many
 * have run; a store from a newer termgrade (more than we know) is refused rather than guessed at.
 */
export const MIGRATIONS: string[] = [
  `
  CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);

  -- One row per trial slot (configuration, task, attempt index): the unique key is what makes a
  -- resumed job unable to record a trial twice. status: completed (graded), error (no reward),
  -- not_run (budget or interrupt; run again on resume).
  CREATE TABLE trials (
    trial_id TEXT PRIMARY KEY,
    config TEXT NOT NULL,
    task TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    agent TEXT NOT NULL,
    model TEXT,
    status TEXT NOT NULL CHECK (status IN ('completed', 'error', 'not_run')),
    reward REAL,
    rewards_json TEXT NOT NULL DEFAULT '{}',
    passed INTEGER NOT NULL DEFAULT 0,
    error_class TEXT,
    error_message TEXT,
    error_phase TEXT,
    exit_reason TEXT,
    turns INTEGER NOT NULL DEFAULT 0,
    input_tokens INTEGER,
    cached_tokens INTEGER,
    output_tokens INTEGER,
    cost_usd REAL,
    task_path TEXT,
    task_checksum TEXT,
    image TEXT,
    tests_source TEXT,
    tests_total INTEGER NOT NULL DEFAULT 0,
    tests_passed INTEGER NOT NULL DEFAULT 0,
    tests_failed INTEGER NOT NULL DEFAULT 0,
    phases_json TEXT NOT NULL DEFAULT '{}',
    started_at TEXT,
    finished_at TEXT,
    duration_ms REAL,
    infra_attempts INTEGER NOT NULL DEFAULT 1,
    retry_reasons_json TEXT NOT NULL DEFAULT '[]',
    trial_dir TEXT,
    source TEXT NOT NULL DEFAULT 'termgrade',
    UNIQUE (config, task, attempt)
  );
  CREATE INDEX trials_task ON trials (task);

  CREATE TABLE tests (
    trial_id TEXT NOT NULL REFERENCES trials (trial_id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    status TEXT NOT NULL,
    duration_ms REAL,
    message TEXT,
    PRIMARY KEY (trial_id, name)
  );
  `,
  // 2: which image a trial really ran on (engine id, and where it came from), and what the
  // verifier found the agent had tampered with.
  `
  ALTER TABLE trials ADD COLUMN image_id TEXT;
  ALTER TABLE trials ADD COLUMN image_source TEXT;
  ALTER TABLE trials ADD COLUMN tampering_json TEXT NOT NULL DEFAULT '[]';
  `,
  // 3: `check --job`: each checked task's verdict, recorded whole when the task is done, so a
  // killed check resumes with the tasks it had not finished.
  `
  CREATE TABLE checked_tasks (
    path TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    verdict TEXT NOT NULL,
    result_json TEXT NOT NULL,
    checked_at TEXT NOT NULL
  );
  `,
  // 4: a slot run again (an infrastructure retry on resume, `run --retry`) keeps what it replaced.
  `
  CREATE TABLE trial_history (
    trial_id TEXT NOT NULL,
    config TEXT NOT NULL,
    task TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    status TEXT NOT NULL,
    error_class TEXT,
    row_json TEXT NOT NULL,
    replaced_at TEXT NOT NULL
  );
  CREATE INDEX trial_history_slot ON trial_history (config, task, attempt);
  `,
  // 5: where a graded trial's reward disagrees with the verifier's other evidence (the reward is kept).
  `
  ALTER TABLE trials ADD COLUMN findings_json TEXT NOT NULL DEFAULT '[]';
  `,
  // 6: which protected set a trial's tamper scan used (the task's from admission, or the fixed rules).
  `
  ALTER TABLE trials ADD COLUMN protection TEXT NOT NULL DEFAULT 'rules';
  `,
  // 7: the job's own id, random, made once: trials of two jobs with the same tasks and
  // configurations have the same trial ids, and are told apart by it wherever jobs are combined.
  `
  INSERT OR IGNORE INTO meta (key, value) VALUES ('job_id', lower(hex(randomblob(8))));
  `,
  // 8: Harbor's newer task schema: a multi-step trial's steps (name, reward, rewards, ...), and the
  // task's and its dataset's versions as they were when the trial ran.
  `
  ALTER TABLE trials ADD COLUMN steps_json TEXT NOT NULL DEFAULT '[]';
  ALTER TABLE trials ADD COLUMN task_version TEXT;
  ALTER TABLE trials ADD COLUMN dataset_name TEXT;
  ALTER TABLE trials ADD COLUMN dataset_version TEXT;
  `,
];

/** Which trial of a job a row is: configuration, task, attempt index (0..k-1). */
export const SlotSchema = z.strictObject({ config: z.string(), task: z.string(), attempt: z.number().int() });
export type Slot = z.infer<typeof SlotSchema>;

export const slotKey = (s: Slot): string => `${s.config}\u0000${s.task}\u0000${s.attempt}`;

export const TrialStatusSchema = z.enum(['completed', 'error', 'not_run']);
export type TrialStatus = z.infer<typeof TrialStatusSchema>;

/** One stored trial: a row of the store, and a line of `termgrade trials --json`. */
export const TrialRowSchema = z.strictObject({
  /** The job's id (see JobStore.jobId): with trial_id, the trial's identity across jobs. */
  job_id: z.string(),
  trial_id: z.string(),
  config: z.string(),
  task: z.string(),
  /** Which of the k trials of this task and configuration (0-based). */
  attempt: z.number().int(),
  agent: z.string(),
  model: z.string().nullable(),
  status: TrialStatusSchema,
  reward: z.number().nullable(),
  passed: z.number().int(),
  error_class: z.string().nullable(),
  error_message: z.string().nullable(),
  exit_reason: z.string().nullable(),
  turns: z.number().int(),
  input_tokens: z.number().int().nullable(),
  cached_tokens: z.number().int().nullable(),
  output_tokens: z.number().int().nullable(),
  cost_usd: z.number().nullable(),
  task_checksum: z.string().nullable(),
  tests_total: z.number().int(),
  tests_passed: z.number().int(),
  tests_failed: z.number().int(),
  duration_ms: z.number().nullable(),
  /** Runs of this slot: 1 plus infrastructure retries. */
  infra_attempts: z.number().int(),
  retry_reasons_json: z.string(),
  trial_dir: z.string().nullable(),
  source: z.string(),
  image_id: z.string().nullable(),
  image_source: z.string().nullable(),
  tampering_json: z.string(),
  protection: z.string().default('rules'),
  /** Reward-consistency findings, a JSON array of {code, message} (see verifier/consistency.ts). */
  findings_json: z.string(),
  /** Every named reward, a JSON object (`reward` is the primary one, the one rates use). */
  rewards_json: z.string().default('{}'),
  /** A multi-step trial's steps, a JSON array of StepResult; '[]' for a single-step one. */
  steps_json: z.string().default('[]'),
  task_version: z.string().nullable().default(null),
  dataset_name: z.string().nullable().default(null),
  dataset_version: z.string().nullable().default(null),
});
export type TrialRow = z.infer<typeof TrialRowSchema>;

/**
 * One trial as the viewer lists it (JobStore.listingSince): the row's place in the table (rowid,
 * to read only what was appended since), its failing tests one per line, its findings as stored.
 */
export const ListingRowSchema = z.strictObject({
  rowid: z.number().int(),
  id: z.string(),
  config: z.string(),
  task: z.string(),
  attempt: z.number().int(),
  status: TrialStatusSchema,
  reward: z.number().nullable(),
  error_class: z.string().nullable(),
  tests_passed: z.number().int(),
  tests_failed: z.number().int(),
  duration_ms: z.number().nullable(),
  output_tokens: z.number().int().nullable(),
  cost_usd: z.number().nullable(),
  finished_at: z.string().nullable(),
  trial_dir: z.string().nullable(),
  findings_json: z.string(),
  failing: z.string().nullable(),
});
export type ListingRow = z.infer<typeof ListingRowSchema>;

/**
 * Earlier counts per configuration label and task (meta `priors`): the informed priors of an
 * adaptive job, with the mean duration of those trials (ms), by which the job runs its longest
 * tasks first. Read once, when the job is made, and kept.
 */
export const PriorsSchema = z.record(
  z.string(),
  z.record(z.string(), z.object({ n: z.number(), c: z.number(), ms: z.number().optional() })),
);
export type Priors = z.infer<typeof PriorsSchema>;

/** Meta values other than the spec, each a JSON text: what a key holds. */
export const MetaSchemas = {
  /** Every configuration the job has run: label -> fingerprint (job/spec.ts configFingerprint). */
  configs: z.record(z.string(), z.string()),
  /** The job's slots in all (k x configurations x tasks). */
  slots: z.number(),
  /** Slots per configuration, kept across runs with other configurations. */
  slots_by_config: z.record(z.string(), z.number()),
  priors: PriorsSchema,
} as const;
export type MetaKey = keyof typeof MetaSchemas;
