import { createHash } from 'node:crypto';
import { mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import type { Task } from '../task/task.js';
import { TermgradeError, errorMessage } from '../util/errors.js';
import { ProtectionRecordSchema, type ProtectionRecord } from './protection.js';
import { writeFileAtomic } from '../util/files.js';

/**
 * Where admission records are kept unless a command names another folder: one place per project
 * (relative to the working directory), whatever folders a command's jobs, checks or outputs go to,
 * so `check` and every command that grades find the same records.
 */
export const DEFAULT_PROTECTION_DIR = path.join('.termgrade', 'protection');

/** The environment variable that names the records' folder for every command (CI sets it once). */
export const ADMISSION_DIR_ENV = 'TERMGRADE_ADMISSION_DIR';

/** A task's admission record and the file it was read from (named on every trial graded with it). */
export interface AdmissionFound {
  record: ProtectionRecord;
  file: string;
}

/**
 * Protected sets by task content: `check` writes one when a task's reference solution passes
 * (and so does an oracle trial of `run`, for a task never checked); every later trial of exactly
 * that task content is scanned against it. The file name is a hash of the checksum: a name, never
 * a path a task could choose. Records are written to `dir`; they are looked up there first, then in
 * `alsoIn` (where earlier versions kept them), read only.
 */
export class ProtectionStore {
  private readonly cache = new Map<string, AdmissionFound>();
  readonly dir: string;
  readonly alsoIn: readonly string[];

  constructor(dir: string = DEFAULT_PROTECTION_DIR, alsoIn: readonly string[] = []) {
    this.dir = path.resolve(dir);
    this.alsoIn = [...new Set(alsoIn.map((d) => path.resolve(d)))].filter((d) => d !== this.dir);
  }

  /** The file that holds (or would hold) the record of this content in `dir`. */
  fileOf(checksum: string, dir: string = this.dir): string {
    return path.join(dir, `${createHash('sha256').update(checksum).digest('hex').slice(0, 32)}.json`);
  }

  /** The task's protected set, or null when none was recorded. A file that cannot be read is an error naming it. */
  async load(task: Task): Promise<ProtectionRecord | null> {
    return (await this.find(task))?.record ?? null;
  }

  /** The task's record and its file, from the first folder that holds one; null when none does. */
  async find(task: Task): Promise<AdmissionFound | null> {
    const known = this.cache.get(task.checksum);
    if (known) return known;
    for (const dir of [this.dir, ...this.alsoIn]) {
      const file = this.fileOf(task.checksum, dir);
      const record = await readRecord(file, task);
      if (!record) continue;
      const found = { record, file };
      this.cache.set(task.checksum, found);
      return found;
    }
    return null;
  }

  async save(record: ProtectionRecord): Promise<void> {
    await mkdir(this.dir, { recursive: true });
    const file = this.fileOf(record.checksum);
    await writeFileAtomic(file, `${JSON.stringify(record)}\n`);
    this.cache.set(record.checksum, { record, file });
  }
}

/** The record in `file` for this task content; null when there is no file. Anything else wrong with it is an error. */
async function readRecord(file: string, task: Task): Promise<ProtectionRecord | null> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new TermgradeError(
      'bad_input',
      `${file}: cannot read the protected set of task ${task.name}: ${errorMessage(err)}`,
    );
  }
  let record: ProtectionRecord;
  try {
    record = ProtectionRecordSchema.parse(JSON.parse(text));
  } catch (err) {
    throw new TermgradeError(
      'bad_input',
      `${file}: not a protected set termgrade wrote (remove it, and check the task again to record it): ${errorMessage(err).slice(0, 300)}`,
    );
  }
  if (record.checksum !== task.checksum)
    throw new TermgradeError(
      'bad_input',
      `${file}: holds the protected set of another task content (${record.task}); remove it`,
    );
  return record;
}

/** Where a command finds admission records: the folder it names, if any, and its own job or output folders. */
export interface AdmissionDirFlags {
  /** `--admission-dir`: the one folder records are read from and written to. */
  admissionDir?: string;
  /**
   * The command's job or output folders (`--jobs-dir`, a Harbor config's jobs_dir): earlier
   * versions kept records beside them (`<parent>/protection`), still read when no folder is named.
   */
  near?: Array<string | undefined>;
}

/**
 * The one admission store every command uses (`check`, `run`, `run-trial`, `serve`, `synth`): the
 * folder named by --admission-dir, else by TERMGRADE_ADMISSION_DIR, and then that folder only;
 * else .termgrade/protection under the working directory, also reading the folders beside the
 * command's jobs where earlier versions wrote them.
 */
export function admissionStore(flags: AdmissionDirFlags = {}, env: NodeJS.ProcessEnv = process.env): ProtectionStore {
  const named = flags.admissionDir ?? (env[ADMISSION_DIR_ENV] || undefined);
  if (named !== undefined) {
    if (named.trim() === '')
      throw new TermgradeError('usage', '--admission-dir: give a folder (admission records are kept there)');
    return new ProtectionStore(named);
  }
  const beside = (flags.near ?? [])
    .filter((d): d is string => !!d)
    .map((d) => path.join(path.dirname(path.resolve(d)), 'protection'));
  return new ProtectionStore(DEFAULT_PROTECTION_DIR, beside);
}
