import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { loadAgentModule } from '../agent/registry.js';
import { parseSpec } from '../job/load-spec.js';
import type { JobSpec } from '../job/spec.js';
import { TermgradeError } from '../util/errors.js';
import { harborConfigToSpec, ignoredWarning, isHarborJobConfig } from './job-config.js';

export interface HarborJobFile {
  spec: JobSpec;
  /** One warning naming every field not carried over, or null when all were. */
  warning: string | null;
}

/**
 * A job file written as Harbor writes it (job.yaml or config.json), read as a termgrade job spec;
 * null when the file is not a Harbor job config (it is then a termgrade job file). Relative paths
 * resolve against the working directory, as Harbor resolves them.
 */
export async function readHarborJobFile(file: string, cwd = process.cwd()): Promise<HarborJobFile | null> {
  if (file.endsWith('.toml')) return null; // Harbor writes its job configs as YAML or JSON
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new TermgradeError(
      'bad_input',
      `${file}: cannot read the job file (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`,
    );
  }
  let raw: unknown;
  try {
    raw = file.endsWith('.json') ? JSON.parse(text) : parseYaml(text);
  } catch {
    return null; // not parseable: the termgrade reader says why, in its own words
  }
  if (!isHarborJobConfig(raw)) return null;
  const fallback = `harbor-${path
    .basename(file)
    .replace(/\.[^.]+$/, '')
    .replace(/[^A-Za-z0-9._-]/g, '-')}`;
  const converted = harborConfigToSpec(raw, file, cwd, fallback);
  // A JavaScript agent module names its agent: loaded now, as `run` loads modules before anything starts.
  for (const m of converted.modules) {
    const importPath = path.resolve(cwd, m.importPath);
    const name = await loadAgentModule(importPath, cwd);
    converted.spec.agents[m.index] = { ...converted.spec.agents[m.index]!, agent: name, importPath };
  }
  return {
    spec: parseSpec(converted.spec, `${file} (Harbor job config)`),
    warning: ignoredWarning(file, converted.ignored),
  };
}
