import { z } from 'zod';
import { nearestName } from '../util/nearest.js';
import { TaskConfigSchema } from './schema.js';

/**
 * Keys Harbor's task.toml defines that termgrade does not read (so they are no typo), by table;
 * '' is the top level. Everything in TaskConfigSchema is known without being listed here.
 */
const HARBOR_ONLY: Record<string, readonly string[]> = {
  '': ['source'],
  environment: ['gpu_types', 'skip_build', 'mcp_servers'],
};

/** A schema with its optional / default / prefault wrappers taken off. */
function bare(s: z.ZodType): z.ZodType {
  while (
    s instanceof z.ZodOptional ||
    s instanceof z.ZodDefault ||
    s instanceof z.ZodPrefault ||
    s instanceof z.ZodNullable
  )
    s = s.unwrap() as z.ZodType;
  return s;
}

const isTable = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/**
 * The keys of a parsed task.toml that no table of the task schema (nor Harbor's) defines, each as
 * a warning with the nearest valid name: `[agnet] timeout_sec` would otherwise pass silently with
 * the default timeout. Tables are loose (unknown keys are kept, never rejected, so a task written
 * for a newer harness still loads): these are warnings. Free-form tables ([metadata], env maps)
 * are not looked into. Pure: the caller says which file and prints.
 */
export function unknownTaskKeys(raw: unknown): string[] {
  const warnings: string[] = [];
  const walk = (schema: z.ZodType, value: unknown, at: string[]): void => {
    const s = bare(schema);
    if (s instanceof z.ZodArray) {
      if (Array.isArray(value))
        value.forEach((v, i) => walk(s.element as z.ZodType, v, [...at.slice(0, -1), `${at.at(-1)}[${i}]`]));
      return;
    }
    if (!(s instanceof z.ZodObject) || !isTable(value)) return;
    const shape = s.shape as Record<string, z.ZodType>;
    const table = at.join('.');
    const valid = [...Object.keys(shape), ...(HARBOR_ONLY[table.replace(/\[\d+\]/g, '')] ?? [])];
    for (const [key, v] of Object.entries(value)) {
      const child = shape[key];
      if (child) {
        walk(child, v, [...at, key]);
        continue;
      }
      if (valid.includes(key)) continue;
      if (at.length === 0 && isTable(v)) {
        // A section is compared with the sections only: [agnet] means [agent], not `version`.
        const sections = Object.keys(shape).filter(
          (k) => bare(shape[k]!) instanceof z.ZodObject || bare(shape[k]!) instanceof z.ZodRecord,
        );
        const near = nearestName(key, sections);
        warnings.push(
          `unknown section [${key}]${near ? `; did you mean [${near}]?` : `; known sections: ${sections.join(', ')}`} (ignored)`,
        );
      } else {
        const near = nearestName(key, valid);
        warnings.push(
          `unknown key "${key}" ${at.length ? `in [${table}]` : 'at the top level'}${near ? `; did you mean "${near}"?` : `; known keys there: ${valid.join(', ')}`} (ignored)`,
        );
      }
    }
  };
  walk(TaskConfigSchema, raw, []);
  return warnings;
}
