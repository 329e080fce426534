import { z } from 'zod';
import { CheckReportSchema } from '../check/schema.js';
import { JobEventSchema } from '../job/events.js';
import { JobSpecSchema } from '../job/spec.js';
import {
  CompareOutputSchema,
  DriftOutputSchema,
  OverlapOutputSchema,
  SelectManifestSchema,
  StatsOutputSchema,
} from '../report/outputs.js';
import { TrialRowSchema } from '../store/store.js';
import { TrialResultSchema } from '../trial/schema.js';
import { EnginesOutputSchema } from '../sandbox/pool/inspect.js';
import { STAT_DESCRIPTION } from '../util/json.js';
import { SynthReportSchema } from '../synth/schema.js';

/**
 * Every machine-readable output of the CLI, with the zod contract it is made from. The JSON
 * Schemas published in schemas/ are generated from these (`termgrade schema --out schemas`), and
 * the test suite validates real output against the published files.
 */
export const OUTPUT_SCHEMAS = {
  check: { schema: CheckReportSchema, io: 'output', what: '`check --json`, and check.json under --out' },
  'trial-result': {
    schema: TrialResultSchema,
    io: 'output',
    what: '`run-trial --json`, and result.json in every trial folder',
  },
  'job-event': { schema: JobEventSchema, io: 'output', what: 'each line of `run --jsonl`' },
  'trial-row': { schema: TrialRowSchema, io: 'output', what: 'each line of `trials --json`' },
  stats: { schema: StatsOutputSchema, io: 'output', what: '`stats --json`' },
  compare: { schema: CompareOutputSchema, io: 'output', what: '`compare --json`' },
  select: { schema: SelectManifestSchema, io: 'output', what: '`select --json`, and manifest.json of `select --out`' },
  overlap: { schema: OverlapOutputSchema, io: 'output', what: '`overlap --json`' },
  drift: { schema: DriftOutputSchema, io: 'output', what: '`drift --json`' },
  engines: { schema: EnginesOutputSchema, io: 'output', what: '`engines --json`' },
  synth: { schema: SynthReportSchema, io: 'output', what: '`synth --json` (the funnel)' },
  'job-spec': { schema: JobSpecSchema, io: 'input', what: 'a job file for `run` (.json, .yaml or .toml)' },
} as const satisfies Record<string, { schema: z.ZodType; io: 'input' | 'output'; what: string }>;

export type OutputName = keyof typeof OUTPUT_SCHEMAS;

/** The JSON Schema (draft 2020-12) of one output; a statistic also allows "Infinity", "-Infinity" and null. */
export function jsonSchemaOf(name: OutputName): Record<string, unknown> {
  const { schema, io, what } = OUTPUT_SCHEMAS[name];
  const json = z.toJSONSchema(schema, {
    io,
    target: 'draft-2020-12',
    unrepresentable: 'any',
    override: (ctx) => {
      const js = ctx.jsonSchema as Record<string, unknown>;
      if (js.description !== STAT_DESCRIPTION) return;
      const { description, ...number } = js;
      for (const k of Object.keys(js)) Reflect.deleteProperty(js, k);
      Object.assign(js, { description, anyOf: [number, { enum: ['Infinity', '-Infinity'] }, { type: 'null' }] });
    },
  }) as Record<string, unknown>;
  return {
    $id: `urn:termgrade:schema:${name}`,
    title: `termgrade ${name}`,
    description: `The shape of ${what}.`,
    ...json,
  };
}
