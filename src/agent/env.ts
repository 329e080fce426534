import { readFile } from 'node:fs/promises';
import { TermgradeError } from '../util/errors.js';

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * Parses a dotenv-style file: `KEY=VALUE` lines, `export ` allowed before the key, `#` comments
 * and blank lines skipped, one pair of surrounding quotes removed. No interpolation: a value is
 * taken as written, so what the agent sees is what the file says.
 */
export function parseEnvFile(text: string, file: string): Record<string, string> {
  const env: Record<string, string> = {};
  text.split(/\r?\n/).forEach((raw, i) => {
    const line = raw.trim();
    if (!line || line.startsWith('#')) return;
    const eq = line.indexOf('=');
    const key = (eq < 0 ? line : line.slice(0, eq)).replace(/^export\s+/, '').trim();
    if (eq < 0 || !NAME.test(key))
      throw new TermgradeError('bad_input', `${file}:${i + 1}: expected KEY=VALUE, got "${line.slice(0, 60)}"`);
    let value = line.slice(eq + 1).trim();
    if (value.length >= 2 && (value[0] === '"' || value[0] === "'") && value.endsWith(value[0]))
      value = value.slice(1, -1);
    env[key] = value;
  });
  return env;
}

export async function readEnvFile(file: string): Promise<Record<string, string>> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    throw new TermgradeError(
      'bad_input',
      `${file}: cannot read the env file (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`,
    );
  }
  return parseEnvFile(text, file);
}

/** `K=V` from the command line. */
export function parseEnvAssignment(text: string): [string, string] {
  const eq = text.indexOf('=');
  const key = eq < 0 ? '' : text.slice(0, eq);
  if (!NAME.test(key)) throw new TermgradeError('usage', `--agent-env "${text}": expected KEY=VALUE`);
  return [key, text.slice(eq + 1)];
}

/**
 * An agent configuration's environment: its env files (later files win), then its literal `env`.
 * Values read from files are returned as secrets too: they are scrubbed from everything recorded.
 */
export async function agentEnvOf(config: {
  env?: Record<string, string>;
  envFiles?: string[];
}): Promise<{ env: Record<string, string>; secrets: string[] }> {
  const fromFiles: Record<string, string> = {};
  for (const f of config.envFiles ?? []) Object.assign(fromFiles, await readEnvFile(f));
  // Short values ("1", "yes") would scrub every occurrence of themselves from the records.
  const secrets = Object.values(fromFiles).filter((v) => v.length >= 6);
  return { env: { ...fromFiles, ...(config.env ?? {}) }, secrets };
}
