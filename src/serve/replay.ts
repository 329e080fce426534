import { isPassingReward } from '../trial/accounting.js';
import { z } from 'zod';
import { readTextIfThere } from '../util/files.js';
import { TermgradeError } from '../util/errors.js';

/** The fields of a grades.jsonl line the curriculum is rebuilt from (the line holds more). */
const RecordedGrade = z.looseObject({
  task: z.string(),
  model: z.string().nullable(),
  status: z.string(),
  reward: z.number().nullable(),
});

/** A graded rollout of the record: who (policy label, null when unlabelled), what, solved or not. */
export interface ReplayedGrade {
  policy: string | null;
  task: string;
  success: boolean;
}

/**
 * The graded rollouts of a server's grade record, in order, for the curriculum to take in again
 * after a restart. Ungraded lines (status error: infrastructure, verifier) are not evidence, as
 * when they were recorded. A line that cannot be read is an error naming the file and the line:
 * a curriculum rebuilt from part of its evidence would serve the wrong band without saying so.
 */
export async function readRecordedGrades(file: string): Promise<ReplayedGrade[]> {
  const text = await readTextIfThere(file);
  if (text === null) return [];
  const out: ReplayedGrade[] = [];
  for (const [i, line] of text.split('\n').entries()) {
    if (line.trim() === '') continue;
    let json: unknown;
    try {
      json = JSON.parse(line);
    } catch (err) {
      throw new TermgradeError(
        'usage',
        `${file}: line ${i + 1} is not JSON (${(err as Error).message}); the live curriculum is rebuilt from every line`,
      );
    }
    const r = RecordedGrade.safeParse(json);
    if (!r.success)
      throw new TermgradeError(
        'usage',
        `${file}: line ${i + 1}: ${r.error.issues[0]!.path.join('.') || 'line'}: ${r.error.issues[0]!.message}`,
      );
    if (r.data.status !== 'completed' || r.data.reward === null) continue;
    out.push({ policy: r.data.model, task: r.data.task, success: isPassingReward(r.data.reward) });
  }
  return out;
}
