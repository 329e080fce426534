import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { parse as parseToml } from 'smol-toml';
import { parse as parseYaml } from 'yaml';
import { TermgradeError } from '../util/errors.js';
import { JobSpecSchema, type JobSpec } from './spec.js';

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
  return spec;
}

export function parseSpec(raw: unknown, where: string): JobSpec {
  const parsed = JobSpecSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new TermgradeError('bad_input', `${where}: ${issue.path.join('.') || '(root)'}: ${issue.message}`);
  }
  const labels = parsed.data.agents.map((a) => a.label ?? (a.model ? `${a.agent}/${a.model.model}` : a.agent));
  const dup = labels.find((l, i) => labels.indexOf(l) !== i);
  if (dup) throw new TermgradeError('bad_input', `${where}: two agent configurations are both labelled "${dup}"; give each a distinct label`);
  for (const a of parsed.data.agents) {
    if ((a.agent === 'terminus' || a.agent === 'bash-tool') && !a.model) throw new TermgradeError('bad_input', `${where}: agent ${a.agent} needs a model (baseUrl and model)`);
  }
  return parsed.data;
}
