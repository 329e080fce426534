import type { Agent, AgentContext, AgentExitReason, AgentOutcome } from '../agent.js';
import { ModelClient, type Completion, type Message } from '../../model/client.js';
import { ModelError } from '../../model/errors.js';
import type { Shell } from '../../sandbox/sandbox.js';
import { TermgradeError } from '../../util/errors.js';
import { sleep } from '../../util/time.js';
import { Transcript, type AtifStep } from '../transcript.js';
import { truncateMiddle } from '../truncate.js';
import { shellQuote } from '../../util/shell-quote.js';
import type { AgentPlugin } from '../registry.js';
import { parseTurn, type Turn } from './parse.js';
import {
  CONFIRM_COMPLETE,
  firstMessage,
  OUTPUT_CUT,
  parseErrorMessage,
  resumeMessage,
  SUMMARY_REQUEST,
  SYSTEM_PROMPT,
} from './prompt.js';
import { newOutput, sendKeysCommand } from './screen.js';

export const TMUX_LAYER =
  'RUN command -v tmux >/dev/null 2>&1 || (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends tmux && rm -rf /var/lib/apt/lists/*) || apk add --no-cache tmux || dnf install -y tmux || yum install -y tmux';

const SESSION = 'termgrade';
const HISTORY_LINES = 3000;
/** Summarise when fewer tokens than this would be left for the next reply. */
const CONTEXT_RESERVE = 8000;

export interface TerminusOptions {
  client: ModelClient;
  maxTurns?: number;
  /** Consecutive unreadable replies before the episode ends. */
  maxParseErrors?: number;
}

async function tmux(shell: Shell, command: string): Promise<string> {
  const r = await shell.run(command, { timeoutSec: 30 });
  if (r.exitCode !== 0)
    throw new TermgradeError('agent_error', `tmux failed (${r.exitCode}): ${r.output.trim().slice(0, 300)}`);
  return r.output;
}
const history = (shell: Shell): Promise<string> =>
  tmux(shell, `tmux capture-pane -p -J -t ${SESSION} -S -${HISTORY_LINES}`);
const screen = (shell: Shell): Promise<string> => tmux(shell, `tmux capture-pane -p -J -t ${SESSION}`);
const end = (exitReason: AgentExitReason, message: string | null = null): AgentOutcome => ({ exitReason, message });

/** What one round of the loop decided: the episode's outcome, or null to go round again. */
type Next = AgentOutcome | null;

/** One episode: the messages sent, its transcript, and the counters the loop decides on. */
class Episode {
  readonly transcript: Transcript;
  private messages: Message[] = [];
  private lastHistory = '';
  private lastPromptTokens = 0;
  private parseErrors = 0;
  private askedToConfirm = false;

  constructor(
    private readonly ctx: AgentContext,
    private readonly shell: Shell,
    private readonly client: ModelClient,
    private readonly maxParseErrors: number,
  ) {
    this.transcript = new Transcript('terminus', client.config.model);
  }

  async open(): Promise<void> {
    this.lastHistory = await history(this.shell);
    this.transcript.system(SYSTEM_PROMPT);
    const opening = firstMessage(this.ctx.task.instruction, truncateMiddle(await screen(this.shell)));
    this.transcript.user(opening);
    this.messages = [
      { role: 'system', content: SYSTEM_PROMPT },
      { role: 'user', content: opening },
    ];
  }

  /** One round: ask the model (summarising first when the context is nearly full), then act on its reply. */
  async turn(): Promise<Next> {
    const window = this.client.config.contextWindow;
    if (window && this.lastPromptTokens + (this.client.config.maxTokens ?? 4096) > window - CONTEXT_RESERVE) {
      if (!(await this.summarise()))
        return end('context_exhausted', 'the summary itself no longer fits the context window');
    }
    let c: Completion;
    try {
      c = await this.client.complete({ messages: this.messages, signal: this.ctx.signal });
    } catch (err) {
      if (err instanceof ModelError && err.kind === 'context_length') {
        if (await this.summarise()) return null;
        return end('context_exhausted', err.message);
      }
      if (err instanceof ModelError)
        return { ...end('model_error', `${err.kind}: ${err.message}`), modelErrorKind: err.kind };
      throw err;
    }
    return this.answer(c);
  }

  private record(c: Completion, extra?: Record<string, unknown>): AtifStep {
    const step = this.transcript.agent(c, extra);
    const usage = this.ctx.usage;
    usage.turns = this.transcript.totals.turns;
    usage.tokens = { ...this.transcript.totals.tokens };
    usage.costUsd = this.transcript.totals.costUsd;
    this.lastPromptTokens = c.usage.prompt;
    return step;
  }

  private reply(step: AtifStep, text: string): void {
    this.messages.push({ role: 'user', content: text });
    this.transcript.observe(step, text);
  }

  /** Replaces the history with a summary the model writes; false when even that does not fit. */
  private async summarise(): Promise<boolean> {
    let c: Completion;
    try {
      const messages: Message[] = [...this.messages, { role: 'user', content: SUMMARY_REQUEST }];
      c = await this.client.complete({ messages, signal: this.ctx.signal });
    } catch (err) {
      if (err instanceof ModelError && err.kind === 'context_length') return false;
      throw err;
    }
    this.record(c, { summary: true });
    const resumed = resumeMessage(this.ctx.task.instruction, c.content, truncateMiddle(await screen(this.shell)));
    this.messages = [
      { role: 'system', content: SYSTEM_PROMPT },
      { role: 'user', content: resumed },
    ];
    this.transcript.user(resumed);
    this.lastPromptTokens = 0;
    return true;
  }

  /** Records the model's reply and answers it: a cut reply, an unreadable one, or keystrokes to run. */
  private async answer(c: Completion): Promise<Next> {
    const step = this.record(c);
    this.messages.push({ role: 'assistant', content: c.content });
    if (c.finishReason === 'length') {
      this.reply(step, OUTPUT_CUT);
      return null;
    }
    const parsed = parseTurn(c.content);
    if (!parsed.ok) {
      // Kept on the step so a reader of the trajectory can count turns with no valid action.
      step.extra = { ...step.extra, parse_error: parsed.error };
      this.parseErrors += 1;
      if (this.parseErrors >= this.maxParseErrors) {
        return end('parse_errors', `${this.parseErrors} unreadable replies in a row; last: ${parsed.error}`);
      }
      this.reply(step, parseErrorMessage(parsed.error));
      return null;
    }
    this.parseErrors = 0;
    const { turn: t, warnings } = parsed;
    step.extra = { ...step.extra, commands: t.commands.length, ...(t.task_complete ? { task_complete: true } : {}) };
    if (t.task_complete && this.askedToConfirm) return end('completed');
    await this.act(step, t.commands, warnings, t.task_complete);
    return null;
  }

  /** Types the commands, waits their durations, and shows the model what the terminal printed. */
  private async act(
    step: AtifStep,
    commands: Turn['commands'],
    warnings: string[],
    taskComplete: boolean,
  ): Promise<void> {
    const { shell, ctx } = this;
    for (const cmd of commands) {
      const send = sendKeysCommand(SESSION, cmd.keystrokes);
      if (send) await tmux(shell, send);
      if (cmd.duration > 0) await sleep(cmd.duration * 1000, ctx.signal, 'agent');
    }
    const now = await history(shell);
    const fresh = newOutput(this.lastHistory, now);
    this.lastHistory = now;
    const view =
      fresh && fresh.trim() !== ''
        ? `New terminal output:\n${truncateMiddle(fresh)}`
        : `Current terminal screen:\n${truncateMiddle(await screen(shell))}`;
    const notes = warnings.length ? `Warnings: ${warnings.join('; ')}.\n\n` : '';
    this.askedToConfirm = taskComplete;
    this.reply(step, `${notes}${view}${taskComplete ? `\n\n${CONFIRM_COMPLETE}` : ''}`);
    await this.transcript.checkpoint(ctx.logsDir, ctx.sessionId, ctx.scrub);
  }
}

/** The keystrokes-into-tmux scaffold public leaderboards use (Terminus-2 style). */
export function createTerminusAgent(options: TerminusOptions): Agent {
  const client = options.client;
  const maxTurns = options.maxTurns ?? 100;
  const maxParseErrors = options.maxParseErrors ?? 5;
  return {
    name: 'terminus',
    model: client.config.model,
    imageLayer: TMUX_LAYER,

    async setup({ sandbox, env }: AgentContext): Promise<void> {
      const shell = await sandbox.shell();
      await tmux(shell, 'command -v tmux >/dev/null || { echo "tmux is not installed in the image"; exit 1; }');
      await sandbox.putFiles([
        { path: '/tmp/.termgrade-tmux.conf', content: 'set -g history-limit 100000\nset -g status off\n' },
      ]);
      // The configuration's variables are in the session's environment, so every command typed sees them.
      const vars = Object.entries(env ?? {})
        .map(([k, v]) => ` -e ${shellQuote(`${k}=${v}`)}`)
        .join('');
      await tmux(
        shell,
        `tmux -f /tmp/.termgrade-tmux.conf new-session -d -s ${SESSION}${vars} -x 160 -y 40 -c "$(pwd)"`,
      );
    },

    async run(ctx: AgentContext): Promise<AgentOutcome> {
      const episode = new Episode(ctx, await ctx.sandbox.shell(), client, maxParseErrors);
      await episode.open();
      try {
        for (let turn = 0; turn < maxTurns; turn++) {
          const outcome = await episode.turn();
          if (outcome) return outcome;
        }
        return end('max_turns', `stopped after ${maxTurns} turns`);
      } finally {
        await episode.transcript.write(ctx.logsDir, ctx.sessionId, ctx.scrub);
      }
    },
  };
}

export const terminusPlugin: AgentPlugin = {
  name: 'terminus',
  needsModel: true,
  create: ({ client, maxTurns }) => createTerminusAgent({ client: client!, maxTurns }),
};
