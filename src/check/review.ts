import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { ModelClient } from '../model/client.js';
import type { ModelConfig } from '../model/config.js';
import type { Task } from '../task/task.js';
import { ReviewSchema, type Review } from './schema.js';
import { errorMessage } from '../util/errors.js';

/**
 * An optional LLM review of a task against the field's rubric. Advisory only: recorded next to the
 * execution evidence, it never admits or rejects a task (the probes prove; a reader only suspects).
 */
export const REVIEW_CRITERIA = [
  'behavior_in_instruction',
  'behavior_in_tests',
  'anti_cheating',
  'hardcoded_solution',
] as const;

const RUBRIC = `You review a terminal task for training AI agents. Judge four criteria and answer with JSON only:
{"criteria": [{"name": "<criterion>", "verdict": "pass" | "fail", "reason": "<one sentence>"}]}
Criteria:
- behavior_in_instruction: every behaviour the tests check is asked for in the instruction.
- behavior_in_tests: every behaviour the instruction asks for is checked by the tests.
- anti_cheating: an agent cannot pass by reading or editing the tests, the expected outputs or the grading files.
- hardcoded_solution: the reference solution derives its answer rather than printing a memorised one.`;

async function folderText(dir: string, limit: number): Promise<string> {
  const parts: string[] = [];
  let size = 0;
  const walk = async (d: string): Promise<void> => {
    for (const e of (await readdir(d, { withFileTypes: true })).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) await walk(p);
      else if (size < limit) {
        const text = (await readFile(p, 'utf8')).slice(0, limit - size);
        size += text.length;
        parts.push(`--- ${path.relative(dir, p)}\n${text}`);
      }
    }
  };
  await walk(dir);
  return parts.join('\n');
}

/** Asks the model; a reply that is not the rubric's JSON is recorded as the review's error. */
export async function reviewTask(task: Task, model: ModelConfig, signal?: AbortSignal): Promise<Review> {
  const client = new ModelClient(model);
  const content = [
    `# Instruction\n${task.instruction}`,
    `# Tests\n${await folderText(task.testsDir, 20_000)}`,
    task.solutionDir
      ? `# Reference solution\n${await folderText(task.solutionDir, 10_000)}`
      : '# Reference solution\n(none)',
  ].join('\n\n');
  try {
    const reply = await client.complete({
      messages: [
        { role: 'system', content: RUBRIC },
        { role: 'user', content },
      ],
      signal,
    });
    const json = /\{[\s\S]*\}/.exec(reply.content)?.[0];
    const parsed = ReviewSchema.shape.criteria.safeParse(
      json ? (JSON.parse(json) as { criteria?: unknown }).criteria : undefined,
    );
    if (!parsed.success)
      return {
        model: model.model,
        criteria: [],
        error: `the reply is not the rubric's JSON: ${reply.content.slice(0, 200)}`,
      };
    return { model: model.model, criteria: parsed.data, error: null };
  } catch (err) {
    return { model: model.model, criteria: [], error: errorMessage(err) };
  }
}
