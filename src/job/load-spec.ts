import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { parse as parseToml } from 'smol-toml';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { readFailure, TermgradeError } from '../util/errors.js';
import { JobSpecSchema, type JobSpec } from './spec.js';
import { agentNeedsModel, isModuleFile } from '../agent/registry.js';
import { DEFAULT_RISK } from '../stats/adaptive.js';
import { nearestName } from '../util/nearest.js';

/** Reads a job file (.toml, .yaml/.yml, or .json); task paths are relative to the file. */
export async function readJobFile(file: string): Promise<JobSpec> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new TermgradeError('bad_input', `${file}: cannot read the job file (${readFailure(err)})`);
  }
  let raw: unknown;
  try {
    raw = file.endsWith('.toml') ? parseToml(text) : file.endsWith('.json') ? JSON.parse(text) : parseYaml(text);
  } catch (err) {
    throw new TermgradeError(
      'bad_input',
      `${file}: not valid ${file.endsWith('.toml') ? 'TOML' : file.endsWith('.json') ? 'JSON' : 'YAML'}: ${(err as Error).message.split('\n')[0]}`,
    );
  }
  const spec = parseSpec(raw, file);
  const base = path.dirname(path.resolve(file));
  spec.tasks.paths = spec.tasks.paths.map((p) => path.resolve(base, p));
  if (spec.tasks.split) spec.tasks.split = path.resolve(base, spec.tasks.split);
  if (spec.adaptive?.prior) spec.adaptive.prior.source = path.resolve(base, spec.adaptive.prior.source);
  // Files named in the job are relative to it, as task paths are; a package name stays as written.
  for (const a of spec.agents) {
    a.envFiles = a.envFiles.map((f) => path.resolve(base, f));
    if (a.importPath && isModuleFile(a.importPath)) a.importPath = path.resolve(base, a.importPath);
  }
  return spec;
}

/** The keys the schema allows at a path of the input (objects by key, arrays by index). */
function keysAt(schema: z.ZodType, pathParts: PropertyKey[]): string[] {
  let s: z.ZodType = schema;
  for (const part of pathParts) {
    while (s instanceof z.ZodOptional || s instanceof z.ZodDefault || s instanceof z.ZodPrefault)
      s = s.unwrap() as z.ZodType;
    if (s instanceof z.ZodArray) s = s.element as z.ZodType;
    else if (s instanceof z.ZodObject) s = (s.shape as Record<string, z.ZodType>)[String(part)]!;
    if (!s) return [];
  }
  while (s instanceof z.ZodOptional || s instanceof z.ZodDefault || s instanceof z.ZodPrefault)
    s = s.unwrap() as z.ZodType;
  return s instanceof z.ZodObject ? Object.keys(s.shape) : [];
}

/** One unknown key, where it is, and the valid key it most likely meant (or the valid keys there). */
function unknownKeyLine(key: string, at: PropertyKey[]): string {
  const valid = keysAt(JobSpecSchema, at);
  const near = nearestName(key, valid);
  const hint = near ? `; did you mean "${near}"?` : `; valid keys here: ${valid.join(', ')}`;
  return `unknown key "${key}" in ${at.join('.') || '(top level)'}${hint}`;
}

/**
 * A job spec, validated whole: an unknown key is an error that names the key, where it is, and the
 * valid key it most likely meant (a typo such as `kk: 4` must not run at the default k).
 */
export function parseSpec(raw: unknown, where: string): JobSpec {
  const parsed = JobSpecSchema.safeParse(raw);
  if (!parsed.success) {
    // Every unknown key at once (a file with three typos is fixed in one go, not three runs);
    // otherwise every problem the schema found.
    const unknown = parsed.error.issues.flatMap((issue) =>
      issue.code === 'unrecognized_keys' ? issue.keys.map((key) => unknownKeyLine(key, issue.path)) : [],
    );
    const problems = unknown.length
      ? unknown
      : parsed.error.issues.map((issue) => `${issue.path.join('.') || '(top level)'}: ${issue.message}`);
    throw new TermgradeError(
      'bad_input',
      problems.length === 1
        ? `${where}: ${problems[0]}`
        : `${where}: ${problems.length} problems:\n  ${problems.join('\n  ')}`,
    );
  }
  // The default risk is the stopping rule's: each rule has its own scale (see spec.ts).
  if (parsed.data.adaptive && parsed.data.adaptive.risk === undefined)
    parsed.data.adaptive.risk = DEFAULT_RISK[parsed.data.adaptive.method];
  const labels = parsed.data.agents.map((a) => a.label ?? (a.model ? `${a.agent}/${a.model.model}` : a.agent));
  const dup = labels.find((l, i) => labels.indexOf(l) !== i);
  if (dup)
    throw new TermgradeError(
      'bad_input',
      `${where}: two agent configurations are both labelled "${dup}"; give each a distinct label`,
    );
  for (const a of parsed.data.agents) {
    if (agentNeedsModel(a.agent) && !a.model)
      throw new TermgradeError('bad_input', `${where}: agent ${a.agent} needs a model (baseUrl and model)`);
  }
  return parsed.data;
}
