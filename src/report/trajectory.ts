import { COMPLETION_MARKER } from '../agent/bash-tool.js';

/**
 * What one trial's trajectory (ATIF, agent/trajectory.json) says about how the agent behaved:
 * the measures of trajectory behaviour in the report, read from any scaffold's steps. A turn has
 * a valid action when it made a tool call or (terminus) its reply parsed into commands or a
 * completion; a command is any action but the completion marker itself.
 */
export interface TrajectorySummary {
  turns: number;
  /** Agent turns with no valid action (no tool call, an unparseable reply), and their output tokens. */
  noActionTurns: number;
  noActionTokens: number[];
  /** Commands run (tool calls, terminus keystroke batches), the completion marker not counted. */
  commands: number;
  /** The agent declared the task complete. */
  declaredComplete: boolean;
  /** Declared complete within two turns without running a single command. */
  quitEarly: boolean;
}

interface Step {
  source?: string;
  tool_calls?: Array<{ function_name?: string; arguments?: unknown }>;
  metrics?: { completion_tokens?: number };
  extra?: { commands?: number; task_complete?: boolean; parse_error?: unknown; summary?: boolean };
}

const isCompletion = (args: unknown): boolean => JSON.stringify(args ?? '').includes(COMPLETION_MARKER);

export function summarizeTrajectory(trajectory: unknown): TrajectorySummary | null {
  const steps = (trajectory as { steps?: unknown })?.steps;
  if (!Array.isArray(steps)) return null;
  const out: TrajectorySummary = {
    turns: 0,
    noActionTurns: 0,
    noActionTokens: [],
    commands: 0,
    declaredComplete: false,
    quitEarly: false,
  };
  let turnOfCompletion = 0;
  let commandsAtCompletion = 0;
  for (const raw of steps as Step[]) {
    if (raw.source !== 'agent' || raw.extra?.summary) continue;
    out.turns += 1;
    const calls = raw.tool_calls ?? [];
    const completes = calls.some((c) => isCompletion(c.arguments)) || raw.extra?.task_complete === true;
    const commands = calls.filter((c) => !isCompletion(c.arguments)).length + (raw.extra?.commands ?? 0);
    out.commands += commands;
    if (!calls.length && raw.extra?.commands === undefined && !raw.extra?.task_complete) {
      out.noActionTurns += 1;
      out.noActionTokens.push(raw.metrics?.completion_tokens ?? 0);
    }
    if (completes && !out.declaredComplete) {
      out.declaredComplete = true;
      turnOfCompletion = out.turns;
      commandsAtCompletion = out.commands;
    }
  }
  out.quitEarly = out.declaredComplete && turnOfCompletion <= 2 && commandsAtCompletion === 0;
  return out;
}
