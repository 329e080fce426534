import { createHash } from 'node:crypto';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Task } from '../task/task.js';
import { TermgradeError, errorMessage } from '../util/errors.js';
import { ProtectionRecordSchema, type ProtectionRecord } from './protection.js';

/** Where protected sets are kept unless a command names another folder (beside .termgrade/jobs). */
export const DEFAULT_PROTECTION_DIR = path.join('.termgrade', 'protection');

/**
 * Protected sets by task content: `check` writes one when a task's reference solution passes
 * (and so does an oracle trial of `run`, for a task never checked); every later trial of exactly
 * that task content is scanned against it. The file name is a hash of the checksum: a name, never
 * a path a task could choose.
 */
export class ProtectionStore {
  private readonly cache = new Map<string, ProtectionRecord | null>();

  constructor(readonly dir: string = DEFAULT_PROTECTION_DIR) {}

  private file(checksum: string): string {
    return path.join(this.dir, `${createHash('sha256').update(checksum).digest('hex').slice(0, 32)}.json`);
  }

  /** The task's protected set, or null when none was recorded. A file that cannot be read is an error naming it. */
  async load(task: Task): Promise<ProtectionRecord | null> {
    const known = this.cache.get(task.checksum);
    if (known) return known;
    const file = this.file(task.checksum);
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
    this.cache.set(task.checksum, record);
    return record;
  }

  async save(record: ProtectionRecord): Promise<void> {
    await mkdir(this.dir, { recursive: true });
    const file = this.file(record.checksum);
    const tmp = `${file}.${process.pid}.tmp`;
    await writeFile(tmp, `${JSON.stringify(record)}\n`);
    await rename(tmp, file);
    this.cache.set(record.checksum, record);
  }
}
