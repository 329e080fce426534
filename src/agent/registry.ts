import { TermgradeError } from '../util/errors.js';
import type { Agent } from './agent.js';
import { nopAgent, oracleAgent } from './oracle.js';

/** Agents by the name users type; a plain map, no import-time registration. */
const AGENTS: Record<string, Agent> = { oracle: oracleAgent, nop: nopAgent };

export function agentNames(): string[] {
  return Object.keys(AGENTS);
}

export function getAgent(name: string): Agent {
  const agent = AGENTS[name];
  if (!agent) throw new TermgradeError('usage', `unknown agent "${name}" (known: ${agentNames().join(', ')})`);
  return agent;
}
