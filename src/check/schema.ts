import { z } from 'zod';
import { ReasonCode } from './verdict.js';

/** An LLM review of a task (check --review, check/review.ts): advisory, never a verdict. */
export const ReviewSchema = z.object({
  model: z.string(),
  criteria: z.array(z.object({ name: z.string(), verdict: z.enum(['pass', 'fail']), reason: z.string() })),
  error: z.string().nullable(),
});
export type Review = z.infer<typeof ReviewSchema>;

export const CheckedTaskSchema = z.object({
  path: z.string(),
  name: z.string(),
  verdict: z.enum(['admissible', 'rejected']),
  reasons: z.array(ReasonCode),
  /** Test names seen in the oracle run(s). */
  tests: z.array(z.string()),
  /** Human-readable detail for each problem found (file, trial, message). */
  details: z.array(z.string()),
  image: z.string().nullable(),
  imageCached: z.boolean().nullable(),
  buildMs: z.number().nullable(),
  oracle: z.object({ runs: z.number(), passed: z.number(), rewards: z.array(z.number().nullable()) }),
  nop: z.object({ reward: z.number().nullable() }).nullable(),
  trials: z.array(z.string()),
  /**
   * What each probe did and saw. `rejects`: execution confirmed the exploit, and the probe's code is
   * among `reasons`; false is a warning (a suspicion execution did not confirm), never a reason.
   */
  findings: z
    .array(z.object({ probe: ReasonCode, did: z.string(), saw: z.string(), rejects: z.boolean().default(true) }))
    .default([]),
  /** An LLM's advisory review against the rubric (check --review); never decides the verdict. */
  review: ReviewSchema.nullable().default(null),
  /**
   * Each file the hack probes (--probes all) rewrote and graded: the file, the hack (or `control`:
   * the file broken without a hack), the reward and tests the grading saw, and its cost, ms.
   */
  hacks: z
    .array(
      z.object({
        target: z.string(),
        hack: z.string(),
        reward: z.number().nullable(),
        tests: z.string(),
        ms: z.number(),
      }),
    )
    .default([]),
  /**
   * What stood in for what the task asked (the offline verifier toolchain's Python, pytest, Debian
   * packages or wheels for pinned requirements): `asked -> served`, from the oracle's run.
   */
  substitutions: z.array(z.string()).default([]),
  /** Probes that did not run on this task, each with why (`weak_tests: --probes fast`). */
  probesNotRun: z.array(z.string()).default([]),
  /** Time spent probing, ms (null when no probe ran). */
  probeMs: z.number().nullable().default(null),
  durationMs: z.number(),
});
export type CheckedTask = z.infer<typeof CheckedTaskSchema>;

export const CheckReportSchema = z.object({
  tasks: z.array(CheckedTaskSchema),
  summary: z.object({
    total: z.number().int(),
    admissible: z.number().int(),
    rejected: z.number().int(),
    yield: z.number(),
    reasons: z.record(z.string(), z.number().int()),
    cancelled: z.boolean(),
    /** The probe level, and the time all probing took, ms. */
    probes: z.enum(['none', 'fast', 'all']).default('none'),
    probeMs: z.number().default(0),
    durationMs: z.number(),
    outDir: z.string(),
  }),
});
export type CheckReport = z.infer<typeof CheckReportSchema>;
