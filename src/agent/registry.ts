import { readFile } from 'node:fs/promises';
import { ModelClient } from '../model/client.js';
import { DEFAULT_PRICES, ModelConfigSchema, PriceSchema, type ModelConfigInput, type Price } from '../model/config.js';
import { z } from 'zod';
import { TermgradeError } from '../util/errors.js';
import type { Agent } from './agent.js';
import { createBashToolAgent } from './bash-tool.js';
import { nopAgent, oracleAgent } from './oracle.js';
import { createTerminusAgent } from './terminus/terminus.js';

/** What a job or the CLI says about an agent; the same shape for every run. */
export interface AgentSpec {
  name: string;
  model?: ModelConfigInput;
  maxTurns?: number;
  commandTimeoutSec?: number;
}

export interface CreatedAgent {
  agent: Agent;
  /** Values to scrub from everything recorded (the API key). */
  secrets: string[];
}

export const AGENT_NAMES = ['oracle', 'nop', 'terminus', 'bash-tool'] as const;
const MODEL_AGENTS = new Set(['terminus', 'bash-tool']);

/** Agents by the name users type: a plain switch, no import-time registration. */
export function createAgent(spec: AgentSpec): CreatedAgent {
  if (spec.name === 'oracle') return { agent: oracleAgent, secrets: [] };
  if (spec.name === 'nop') return { agent: nopAgent, secrets: [] };
  if (!MODEL_AGENTS.has(spec.name)) throw new TermgradeError('usage', `unknown agent "${spec.name}" (known: ${AGENT_NAMES.join(', ')})`);
  if (!spec.model) throw new TermgradeError('usage', `agent "${spec.name}" needs a model: give --model and --base-url`);
  const parsed = ModelConfigSchema.safeParse(spec.model);
  if (!parsed.success) throw new TermgradeError('usage', `model settings: ${parsed.error.issues[0]!.path.join('.')}: ${parsed.error.issues[0]!.message}`);
  const client = new ModelClient(parsed.data);
  const secrets = [client.secret()].filter((s): s is string => s !== null);
  const agent =
    spec.name === 'terminus'
      ? createTerminusAgent({ client, maxTurns: spec.maxTurns })
      : createBashToolAgent({ client, maxTurns: spec.maxTurns, commandTimeoutSec: spec.commandTimeoutSec });
  return { agent, secrets };
}

/** The built-in price table, extended or overridden by a JSON file {model: {input, cachedInput, output}}. */
export async function loadPrices(file?: string): Promise<Record<string, Price>> {
  if (!file) return { ...DEFAULT_PRICES };
  let raw: unknown;
  try {
    raw = JSON.parse(await readFile(file, 'utf8'));
  } catch (err) {
    throw new TermgradeError('bad_input', `${file}: cannot read the price table: ${(err as Error).message}`);
  }
  const parsed = z.record(z.string(), PriceSchema).safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue?.path.length ? ` (at ${issue.path.join('.')}: ${issue.message})` : '';
    throw new TermgradeError('bad_input', `${file}: expected {"model": {"input": n, "output": n, "cachedInput"?: n}} (USD per 1M tokens)${where}`);
  }
  return { ...DEFAULT_PRICES, ...parsed.data };
}
