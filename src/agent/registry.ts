import { readFile } from 'node:fs/promises';
import { ModelClient } from '../model/client.js';
import { DEFAULT_PRICES, ModelConfigSchema, PriceSchema, type ModelConfigInput, type Price } from '../model/config.js';
import { z } from 'zod';
import { TermgradeError } from '../util/errors.js';
import { importModule } from '../util/modules.js';
export { isModuleFile } from '../util/modules.js';
import type { Agent } from './agent.js';
import { bashToolPlugin } from './bash-tool.js';
import { nopPlugin, oraclePlugin } from './oracle.js';
import { terminusPlugin } from './terminus/terminus.js';

/** What a job or the CLI says about an agent; the same shape for every run. */
export interface AgentSpec {
  name: string;
  model?: ModelConfigInput;
  maxTurns?: number;
  commandTimeoutSec?: number;
}

/** What a plugin's `create` is given: the configuration's settings, with a ready model client. */
export interface AgentOptions {
  /** A client for the configuration's model; present whenever a model is configured. */
  client?: ModelClient;
  maxTurns?: number;
  commandTimeoutSec?: number;
}

/**
 * A scaffold, as termgrade finds it by name. Every agent (the bundled ones too) is one of these:
 * a module whose default export is an AgentPlugin is a new scaffold, loaded with
 * `--agent-import-path` (or `importPath` in a job file), with no edits anywhere else.
 */
export interface AgentPlugin {
  /** The name users type (`--agent NAME`). */
  name: string;
  /** True when the agent talks to a model: a configuration without one is refused. */
  needsModel?: boolean;
  create(options: AgentOptions): Agent;
}

export interface CreatedAgent {
  agent: Agent;
  /** Values to scrub from everything recorded (the API key). */
  secrets: string[];
}

const registry = new Map<string, AgentPlugin>();

/** Makes an agent known by its name (a later plugin of the same name replaces the earlier). */
export function registerAgent(plugin: AgentPlugin): void {
  registry.set(plugin.name, plugin);
}

for (const p of [oraclePlugin, nopPlugin, terminusPlugin, bashToolPlugin]) registerAgent(p);

export const AGENT_NAMES = ['oracle', 'nop', 'terminus', 'bash-tool'] as const;

/** Names of every registered agent, bundled and loaded. */
export function knownAgents(): string[] {
  return [...registry.keys()];
}

export function agentNeedsModel(name: string): boolean {
  return registry.get(name)?.needsModel === true;
}

const PluginShape = z.object({
  name: z.string().regex(/^[A-Za-z0-9._-]+$/, 'letters, digits, dot, dash and underscore only'),
  needsModel: z.boolean().optional(),
  create: z.custom<AgentPlugin['create']>((v) => typeof v === 'function', 'must be a function (options) => Agent'),
});

/**
 * Loads a custom agent module and registers the AgentPlugin it exports (default export, or a
 * named `plugin`). Returns the plugin's name. Errors name the module and what is wrong with it.
 */
export async function loadAgentModule(spec: string, from = process.cwd()): Promise<string> {
  const mod = await importModule(spec, from, 'agent');
  const candidate = mod.default ?? mod.plugin;
  const parsed = PluginShape.safeParse(candidate);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new TermgradeError(
      'usage',
      `agent module ${spec}: its default export must be an agent plugin { name, needsModel?, create(options) }${issue.path.length ? `; ${issue.path.join('.')}: ${issue.message}` : ''}`,
    );
  }
  const known = registry.get(parsed.data.name);
  if (known && (AGENT_NAMES as readonly string[]).includes(parsed.data.name)) {
    throw new TermgradeError(
      'usage',
      `agent module ${spec}: the name "${parsed.data.name}" is a bundled agent's; choose another`,
    );
  }
  registerAgent(candidate as AgentPlugin);
  return parsed.data.name;
}

/**
 * Loads the modules a job's configurations name (importPath) and checks that every configuration's
 * agent is then known, so a typo fails before anything starts.
 */
export async function loadAgentModules(configs: Array<{ agent: string; importPath?: string }>): Promise<void> {
  for (const c of configs) {
    if (!c.importPath) continue;
    const name = await loadAgentModule(c.importPath);
    if (name !== c.agent)
      throw new TermgradeError(
        'usage',
        `agent module ${c.importPath} registers "${name}", but the configuration names agent "${c.agent}"`,
      );
  }
  const unknown = configs.find((c) => !registry.has(c.agent));
  if (unknown)
    throw new TermgradeError(
      'usage',
      `unknown agent "${unknown.agent}" (known: ${knownAgents().join(', ')}; a custom agent is loaded with --agent-import-path or importPath)`,
    );
}

/** The checks a created agent must pass before any sandbox is given to it. */
function checkAgent(name: string, agent: unknown): Agent {
  const a = agent as Partial<Agent> | null;
  if (
    !a ||
    typeof a !== 'object' ||
    typeof a.run !== 'function' ||
    typeof a.setup !== 'function' ||
    typeof a.name !== 'string'
  ) {
    throw new TermgradeError(
      'usage',
      `agent "${name}": create() must return an Agent { name, model, setup(ctx), run(ctx) }`,
    );
  }
  return a as Agent;
}

/** An agent by the name users type, from the registry (bundled agents and loaded modules alike). */
export function createAgent(spec: AgentSpec): CreatedAgent {
  const plugin = registry.get(spec.name);
  if (!plugin)
    throw new TermgradeError(
      'usage',
      `unknown agent "${spec.name}" (known: ${knownAgents().join(', ')}; a custom agent is loaded with --agent-import-path)`,
    );
  if (plugin.needsModel && !spec.model)
    throw new TermgradeError('usage', `agent "${spec.name}" needs a model: give --model and --base-url`);
  let client: ModelClient | undefined;
  if (spec.model) {
    const parsed = ModelConfigSchema.safeParse(spec.model);
    if (!parsed.success)
      throw new TermgradeError(
        'usage',
        `model settings: ${parsed.error.issues[0]!.path.join('.')}: ${parsed.error.issues[0]!.message}`,
      );
    client = new ModelClient(parsed.data);
  }
  const agent = checkAgent(
    spec.name,
    plugin.create({ client, maxTurns: spec.maxTurns, commandTimeoutSec: spec.commandTimeoutSec }),
  );
  const secrets = [client?.secret()].filter((s): s is string => typeof s === 'string');
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
    throw new TermgradeError(
      'bad_input',
      `${file}: expected {"model": {"input": n, "output": n, "cachedInput"?: n}} (USD per 1M tokens)${where}`,
    );
  }
  return { ...DEFAULT_PRICES, ...parsed.data };
}
