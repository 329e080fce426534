import type { Agent, AgentContext, AgentExitReason, AgentOutcome } from './agent.js';
import { ModelClient, type Completion, type Message, type Tool, type ToolCall } from '../model/client.js';
import { ModelError } from '../model/errors.js';
import { Transcript, type TranscriptState } from './transcript.js';
import { truncateMiddle } from './truncate.js';
import type { AgentPlugin } from './registry.js';

export const COMPLETION_MARKER = 'TERMGRADE_TASK_COMPLETE';

export const BASH_TOOL: Tool = {
  type: 'function',
  function: {
    name: 'bash',
    description:
      'Run a command with bash -lc in a fresh shell in the task environment and return its exit code and output.',
    parameters: {
      type: 'object',
      properties: { command: { type: 'string', description: 'The command to run.' } },
      required: ['command'],
    },
  },
};

const SYSTEM_PROMPT = `You are an agent completing a task in a Linux environment. You have one tool, bash, which runs a command in a fresh bash shell (state such as the working directory or variables does not carry over between calls; files do) and returns its exit code and output. Long outputs are shortened in the middle.

Work step by step: inspect, act, check. There is no internet access. When the task is fully done and checked, run exactly: echo ${COMPLETION_MARKER}`;

const NO_TOOL_CALL = `Use the bash tool to act. When the task is done, call it with: echo ${COMPLETION_MARKER}`;
const OUTPUT_CUT =
  'Your reply was cut off by the output token limit, so nothing was run. Use shorter commands and less text.';

export interface BashToolOptions {
  client: ModelClient;
  maxTurns?: number;
  /** Per command; the command's process group is killed at this limit. */
  commandTimeoutSec?: number;
  /** Replies in a row without a tool call before the episode ends. */
  maxNoToolCalls?: number;
  /** Stop once the episode has cost this much (USD), when prices are known. */
  maxCostUsd?: number;
}

/** What one episode of the bash-tool agent carries from turn to turn. */
interface RunState {
  ctx: AgentContext;
  client: ModelClient;
  maxNoTool: number;
  commandTimeoutSec: number;
  options: BashToolOptions;
  transcript: Transcript;
  messages: Message[];
  /** Replies in a row without a tool call. */
  noTool: number;
}

function end(exitReason: AgentExitReason, message: string | null = null): AgentOutcome {
  return { exitReason, message };
}

/** One model call; a model error ends the episode (the outcome is returned), anything else is thrown. */
async function callModel(state: RunState): Promise<Completion | AgentOutcome> {
  try {
    return await state.client.complete({ messages: state.messages, tools: [BASH_TOOL], signal: state.ctx.signal });
  } catch (err) {
    if (err instanceof ModelError)
      return {
        ...end(err.kind === 'context_length' ? 'context_exhausted' : 'model_error', `${err.kind}: ${err.message}`),
        modelErrorKind: err.kind,
      };
    throw err;
  }
}

/** Runs one tool call; returns the tool message's content and whether the completion marker was printed. */
async function runToolCall(state: RunState, call: ToolCall): Promise<{ content: string; done: boolean }> {
  const { ctx, commandTimeoutSec } = state;
  let command: unknown;
  try {
    command = (JSON.parse(call.arguments) as { command?: unknown }).command;
  } catch {
    // Arguments that are not JSON: answered below as a call with no command.
    command = undefined;
  }
  if (call.name !== 'bash')
    return { content: `error: unknown tool "${call.name}"; the only tool is bash`, done: false };
  if (typeof command !== 'string')
    return { content: 'error: the arguments must be JSON of the form {"command": "..."}', done: false };
  const r = await ctx.sandbox.exec(['bash', '-lc', command], {
    timeoutSec: commandTimeoutSec,
    signal: ctx.signal,
    env: ctx.env,
  });
  const output =
    r.stdout.text + (r.stderr.text ? (r.stdout.text && !r.stdout.text.endsWith('\n') ? '\n' : '') + r.stderr.text : '');
  const content = r.timedOut
    ? `timed out after ${commandTimeoutSec} s\n${truncateMiddle(output)}`
    : `exit code: ${r.exitCode}\n${truncateMiddle(output)}`;
  return { content, done: r.stdout.text.includes(COMPLETION_MARKER) };
}

/** One turn: a model call and its tool calls. Returns the outcome if the episode ends here. */
async function step(state: RunState): Promise<AgentOutcome | undefined> {
  const { ctx, transcript, messages } = state;
  const c = await callModel(state);
  if ('exitReason' in c) return c;
  const atifStep = transcript.agent(c);
  ctx.usage.turns = transcript.totals.turns;
  ctx.usage.tokens = { ...transcript.totals.tokens };
  ctx.usage.costUsd = transcript.totals.costUsd;
  messages.push(transcript.episode[transcript.episode.length - 1]!);

  if (c.finishReason === 'length' && c.toolCalls.length === 0) {
    messages.push({ role: 'user', content: OUTPUT_CUT });
    transcript.observe(atifStep, OUTPUT_CUT);
    return undefined;
  }
  if (c.toolCalls.length === 0) {
    state.noTool += 1;
    if (state.noTool >= state.maxNoTool)
      return end('parse_errors', `${state.noTool} replies in a row without a tool call`);
    messages.push({ role: 'user', content: NO_TOOL_CALL });
    transcript.observe(atifStep, NO_TOOL_CALL);
    return undefined;
  }
  state.noTool = 0;
  let done = false;
  for (const call of c.toolCalls) {
    const r = await runToolCall(state, call);
    if (r.done) done = true;
    messages.push({ role: 'tool', tool_call_id: call.id, content: r.content });
    transcript.toolResult(atifStep, call.id, r.content);
  }
  if (done) return end('completed');
  await transcript.checkpoint(ctx.logsDir, ctx.sessionId, ctx.scrub);
  if (state.options.maxCostUsd !== undefined && (transcript.totals.costUsd ?? 0) >= state.options.maxCostUsd)
    return end('max_turns', `cost limit of $${state.options.maxCostUsd} reached`);
  return undefined;
}

/** The single-bash-tool scaffold RL training uses (mini-swe-agent shape). */
export function createBashToolAgent(options: BashToolOptions): Agent {
  const client = options.client;
  const maxTurns = options.maxTurns ?? 100;
  const maxNoTool = options.maxNoToolCalls ?? 3;
  const commandTimeoutSec = options.commandTimeoutSec ?? 180;

  return {
    name: 'bash-tool',
    model: client.config.model,
    // The first turn is a model call on the instruction alone: the sandbox may still be starting.
    modelFirst: true,
    // Its state is the conversation (files and services are the sandbox's): a branch continues it.
    canBranch: true,
    async setup(): Promise<void> {},

    async run(ctx: AgentContext): Promise<AgentOutcome> {
      const state = openRun(ctx, { client, maxNoTool, commandTimeoutSec, options });
      try {
        for (let turn = state.turns; turn < maxTurns; turn++) {
          const outcome = (await step(state)) ?? pauseAfter(state, turn + 1);
          if (outcome) return outcome;
        }
        return end('max_turns', `stopped after ${maxTurns} turns`);
      } finally {
        await state.transcript.write(ctx.logsDir, ctx.sessionId, ctx.scrub);
      }
    },
  };
}

/** What a paused bash-tool run hands its branches (AgentPause.state). */
interface PausedRun {
  transcript: TranscriptState;
  messages: Message[];
  noTool: number;
}

/** A run's state: from the instruction, or (a branch) from the paused run it continues. */
function openRun(
  ctx: AgentContext,
  how: Pick<RunState, 'client' | 'maxNoTool' | 'commandTimeoutSec' | 'options'>,
): RunState & { turns: number } {
  const transcript = new Transcript('bash-tool', how.client.config.model, [BASH_TOOL]);
  const from = ctx.resumeFrom;
  if (from) {
    if (from.agent !== 'bash-tool') throw new Error(`a bash-tool run cannot continue a ${from.agent} run`);
    const paused = structuredClone(from.state as PausedRun);
    transcript.restore(paused.transcript);
    ctx.usage.turns = transcript.totals.turns;
    ctx.usage.tokens = { ...transcript.totals.tokens };
    ctx.usage.costUsd = transcript.totals.costUsd;
    return { ...how, ctx, transcript, messages: paused.messages, noTool: paused.noTool, turns: from.turns };
  }
  transcript.system(SYSTEM_PROMPT);
  transcript.user(ctx.task.instruction);
  const messages: Message[] = [
    { role: 'system', content: SYSTEM_PROMPT },
    { role: 'user', content: ctx.task.instruction },
  ];
  return { ...how, ctx, transcript, messages, noTool: 0, turns: 0 };
}

/** The run paused after `turn` when ctx.pauseWhen says so (its state copied for the branches), else nothing. */
function pauseAfter(state: RunState, turn: number): AgentOutcome | undefined {
  const last = state.transcript.steps.at(-1);
  const commands = (last?.source === 'agent' ? (last.tool_calls ?? []) : []).flatMap((c) => {
    const command = (c.arguments as { command?: unknown } | null)?.command;
    return typeof command === 'string' ? [command] : [];
  });
  if (!state.ctx.pauseWhen?.({ turn, commands })) return undefined;
  const paused: PausedRun = {
    transcript: state.transcript.snapshot(),
    messages: structuredClone(state.messages),
    noTool: state.noTool,
  };
  return {
    exitReason: 'paused',
    message: `paused after turn ${turn}`,
    pause: { agent: 'bash-tool', turns: turn, state: paused },
  };
}

export const bashToolPlugin: AgentPlugin = {
  name: 'bash-tool',
  needsModel: true,
  create: ({ client, maxTurns, commandTimeoutSec }) =>
    createBashToolAgent({ client: client!, maxTurns, commandTimeoutSec }),
};
