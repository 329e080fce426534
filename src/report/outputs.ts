import { z } from 'zod';
import { PairedComparisonSchema } from '../stats/paired.js';
import { stat } from '../util/json.js';
import { ConfigStatsSchema, TaskRateSchema } from './aggregate.js';
import { DriftRowSchema } from './drift.js';

/**
 * What the measuring commands print with --json: one object each, numbers written by statsJson
 * (infinite as "Infinity", undefined as null). Their JSON Schemas are generated from these.
 */

const band = z.tuple([z.number(), z.number()]);

/** `stats --json`; `tasks` only with --tasks. */
export const StatsOutputSchema = z.strictObject({
  /** Every job the records came from (id, short name, where read) with its trial count. */
  jobs: z.array(z.strictObject({ id: z.string(), name: z.string(), source: z.string(), trials: z.number().int() })),
  configs: z.array(ConfigStatsSchema),
  tasks: z.array(TaskRateSchema).optional(),
});
export type StatsOutput = z.infer<typeof StatsOutputSchema>;

/** `compare A B --json`: the paired test over common tasks, and how many were only in one. */
export const CompareOutputSchema = PairedComparisonSchema.extend({
  a: z.string(),
  b: z.string(),
  /** The test named in words (pairedMethodNote). */
  method: z.string(),
  onlyA: z.number().int(),
  onlyB: z.number().int(),
});
export type CompareOutput = z.infer<typeof CompareOutputSchema>;

const SelectedTaskSchema = z.strictObject({
  task: z.string(),
  trials: z.number().int(),
  successes: z.number().int(),
  rate: stat(),
  interval: z.tuple([stat(), stat()]),
  intervalMethod: z.literal('jeffreys-95'),
  bandProbability: stat(),
});

/** `select --json`, and manifest.json of `select --out`. */
export const SelectManifestSchema = z.strictObject({
  model: z.string(),
  rule: z.strictObject({
    band,
    target: z.number(),
    n: z.number().int().nullable(),
    minTrials: z.number().int(),
    excluded: z.number().int(),
  }),
  training: z.array(SelectedTaskSchema),
  skipped: z.strictObject({
    outOfBand: z.number().int(),
    tooFewTrials: z.number().int(),
    excluded: z.number().int(),
    beyondN: z.number().int(),
    unmeasured: z.number().int(),
  }),
  /** Tasks attempted with no graded trial (infrastructure or verifier failures): no rate, not selectable. */
  unmeasured: z.array(z.string()),
  validation: z.array(SelectedTaskSchema.extend({ target: z.number() })),
});
export type SelectManifest = z.infer<typeof SelectManifestSchema>;

/** `overlap --json`: Jaccard of band sets between configurations, and each one's same-model ceiling. */
export const OverlapOutputSchema = z.strictObject({
  models: z.array(z.string()),
  band,
  sizes: z.array(z.number().int()),
  /** null where both band sets are empty. */
  jaccard: z.array(z.array(stat().nullable())),
  /** null where a configuration has too few tasks to tell. */
  sameModelCeiling: z.array(stat().nullable()),
});
export type OverlapOutput = z.infer<typeof OverlapOutputSchema>;

/** `drift --json`. */
export const DriftOutputSchema = z.strictObject({
  band,
  recent: z.number().int(),
  rows: z.array(DriftRowSchema),
  leftBand: z.array(z.strictObject({ policy: z.string(), task: z.string(), verdict: DriftRowSchema.shape.verdict })),
});
export type DriftOutput = z.infer<typeof DriftOutputSchema>;
