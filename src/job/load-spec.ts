import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { parse as parseToml } from 'smol-toml';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { TermgradeError } from '../util/errors.js';
import { JobSpecSchema, type JobSpec } from './spec.js';
import { agentNeedsModel, isModuleFile } from '../agent/registry.js';
import { DEFAULT_RISK } from '../stats/adaptive.js';

/** Reads a job file (.toml, .yaml/.yml, or .json); task paths are relative to the file. */
export async function readJobFile(file: string): Promise<JobSpec> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch {
    throw new TermgradeError('bad_input', `${file}: cannot read the job file`);
  }
  let raw: unknown;
  try {
    raw = file.endsWith('.toml') ? parseToml(text) : file.endsWith('.json') ? JSON.parse(text) : parseYaml(text);
  } catch (err) {
    throw new TermgradeError('bad_input', `${file}: not valid ${file.endsWith('.toml') ? 'TOML' : file.endsWith('.json') ? 'JSON' : 'YAML'}: ${(err as Error).message.split('\n')[0]}`);
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

/** Edit distance, for naming the key a typo meant. */
function distance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0]![j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) d[i]![j] = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
  }
  return d[a.length]![b.length]!;
}

/** The keys the schema allows at a path of the input (objects by key, arrays by index). */
function keysAt(schema: z.ZodType, pathParts: PropertyKey[]): string[] {
  let s: z.ZodType = schema;
  for (const part of pathParts) {
    while (s instanceof z.ZodOptional || s instanceof z.ZodDefault || s instanceof z.ZodPrefault) s = s.unwrap() as z.ZodType;
    if (s instanceof z.ZodArray) s = s.element as z.ZodType;
    else if (s instanceof z.ZodObject) s = (s.shape as Record<string, z.ZodType>)[String(part)]!;
    if (!s) return [];
  }
  while (s instanceof z.ZodOptional || s instanceof z.ZodDefault || s instanceof z.ZodPrefault) s = s.unwrap() as z.ZodType;
  return s instanceof z.ZodObject ? Object.keys(s.shape) : [];
}

/**
 * A job spec, validated whole: an unknown key is an error that names the key, where it is, and the
 * valid key it most likely meant (a typo such as `kk: 4` must not run at the default k).
 */
export function parseSpec(raw: unknown, where: string): JobSpec {
  const parsed = JobSpecSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const at = issue.path.join('.') || '(top level)';
    if (issue.code === 'unrecognized_keys') {
      const valid = keysAt(JobSpecSchema, issue.path);
      const key = issue.keys[0]!;
      const near = valid.map((k) => [k, distance(key.toLowerCase(), k.toLowerCase())] as const).sort((a, b) => a[1] - b[1])[0];
      const hint = near && near[1] <= Math.max(2, Math.floor(key.length / 3)) ? `; did you mean "${near[0]}"?` : `; valid keys here: ${valid.join(', ')}`;
      throw new TermgradeError('bad_input', `${where}: unknown key "${key}" in ${at}${hint}`);
    }
    throw new TermgradeError('bad_input', `${where}: ${at}: ${issue.message}`);
  }
  // The default risk is the stopping rule's: each rule has its own scale (see spec.ts).
  if (parsed.data.adaptive && parsed.data.adaptive.risk === undefined) parsed.data.adaptive.risk = DEFAULT_RISK[parsed.data.adaptive.method];
  const labels = parsed.data.agents.map((a) => a.label ?? (a.model ? `${a.agent}/${a.model.model}` : a.agent));
  const dup = labels.find((l, i) => labels.indexOf(l) !== i);
  if (dup) throw new TermgradeError('bad_input', `${where}: two agent configurations are both labelled "${dup}"; give each a distinct label`);
  for (const a of parsed.data.agents) {
    if (agentNeedsModel(a.agent) && !a.model) throw new TermgradeError('bad_input', `${where}: agent ${a.agent} needs a model (baseUrl and model)`);
  }
  return parsed.data;
}
