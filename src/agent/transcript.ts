import path from 'node:path';
import type { Completion, Message, Tool } from '../model/client.js';
import type { Scrub } from '../util/scrub.js';
import { writeFileAtomic } from '../util/files.js';

/** ATIF v1.7 step (Harbor's trajectory interchange format). */
export interface AtifStep {
  step_id: number;
  timestamp: string;
  source: 'system' | 'user' | 'agent';
  model_name?: string;
  message: string;
  reasoning_content?: string | null;
  tool_calls?: Array<{ tool_call_id: string; function_name: string; arguments: unknown }>;
  observation?: { results: Array<{ source_call_id: string | null; content: string }> };
  metrics?: {
    prompt_tokens: number;
    completion_tokens: number;
    cached_tokens: number;
    cost_usd: number | null;
    prompt_token_ids?: number[] | null;
    completion_token_ids?: number[] | null;
    logprobs?: number[] | null;
  };
  extra?: Record<string, unknown>;
}

/** A transcript's content at one moment (Transcript.snapshot). */
export interface TranscriptState {
  steps: AtifStep[];
  totals: Totals;
  episode: Message[];
}

export interface Totals {
  turns: number;
  tokens: { input: number; cached: number; output: number };
  costUsd: number | null;
}

/**
 * What an LLM agent did, kept two ways: the OpenAI messages list (ready for a chat template, with
 * its tool definitions) and the ATIF trajectory (steps with metrics, token ids and logprobs).
 * The message list is the conversation as sent; the trajectory keeps every step even after a
 * summary replaced the history the model sees.
 */
export class Transcript {
  readonly steps: AtifStep[] = [];
  readonly totals: Totals = { turns: 0, tokens: { input: 0, cached: 0, output: 0 }, costUsd: null };
  /** Every message ever sent or received, in order (the episode), independent of summarisation. */
  readonly episode: Message[] = [];

  constructor(
    readonly agentName: string,
    readonly modelName: string,
    readonly tools: Tool[] = [],
  ) {}

  /** What the transcript holds so far, copied (a paused run's, for its branches). */
  snapshot(): TranscriptState {
    return structuredClone({ steps: this.steps, totals: this.totals, episode: this.episode });
  }

  /** Takes on a snapshot's content (a branch continuing a paused run), copied. */
  restore(s: TranscriptState): void {
    const copy = structuredClone(s);
    this.steps.splice(0, this.steps.length, ...copy.steps);
    this.episode.splice(0, this.episode.length, ...copy.episode);
    Object.assign(this.totals, copy.totals);
  }

  private push(step: Omit<AtifStep, 'step_id' | 'timestamp'>): AtifStep {
    const full = { step_id: this.steps.length + 1, timestamp: new Date().toISOString(), ...step };
    this.steps.push(full);
    return full;
  }

  system(text: string): void {
    this.episode.push({ role: 'system', content: text });
    this.push({ source: 'system', message: text });
  }

  user(text: string): void {
    this.episode.push({ role: 'user', content: text });
    this.push({ source: 'user', message: text });
  }

  /** A model turn: counts tokens and cost, and returns the step to attach observations to. */
  agent(c: Completion, extra?: Record<string, unknown>): AtifStep {
    this.totals.turns += 1;
    this.totals.tokens.input += c.usage.prompt;
    this.totals.tokens.cached += c.usage.cached;
    this.totals.tokens.output += c.usage.completion;
    if (c.costUsd !== null) this.totals.costUsd = (this.totals.costUsd ?? 0) + c.costUsd;
    this.episode.push(
      c.toolCalls.length
        ? {
            role: 'assistant',
            content: c.content || null,
            tool_calls: c.toolCalls.map((t) => ({
              id: t.id,
              type: 'function' as const,
              function: { name: t.name, arguments: t.arguments },
            })),
          }
        : { role: 'assistant', content: c.content },
    );
    return this.push({
      source: 'agent',
      model_name: this.modelName,
      message: c.content,
      reasoning_content: c.reasoning,
      tool_calls: c.toolCalls.map((t) => ({
        tool_call_id: t.id,
        function_name: t.name,
        arguments: parseArgs(t.arguments),
      })),
      metrics: {
        prompt_tokens: c.usage.prompt,
        completion_tokens: c.usage.completion,
        cached_tokens: c.usage.cached,
        cost_usd: c.costUsd,
        prompt_token_ids: c.promptTokenIds,
        completion_token_ids: c.completionTokenIds,
        logprobs: c.logprobs,
      },
      ...(extra || c.truncatedChars
        ? { extra: { ...extra, ...(c.truncatedChars ? { reply_chars_cut: c.truncatedChars } : {}) } }
        : {}),
    });
  }

  /** A tool's reply to a tool call. */
  toolResult(step: AtifStep, callId: string, content: string): void {
    this.episode.push({ role: 'tool', tool_call_id: callId, content });
    (step.observation ??= { results: [] }).results.push({ source_call_id: callId, content });
  }

  /** What the environment showed after a turn with no tool call (terminal output, an error). */
  observe(step: AtifStep, content: string): void {
    this.episode.push({ role: 'user', content });
    (step.observation ??= { results: [] }).results.push({ source_call_id: null, content });
  }

  trajectory(sessionId: string, agentVersion: string): unknown {
    return {
      schema_version: 'ATIF-v1.7',
      session_id: sessionId,
      agent: {
        name: this.agentName,
        version: agentVersion,
        model_name: this.modelName,
        tool_definitions: this.tools,
      },
      steps: this.steps,
      final_metrics: {
        total_prompt_tokens: this.totals.tokens.input,
        total_completion_tokens: this.totals.tokens.output,
        total_cached_tokens: this.totals.tokens.cached,
        total_cost_usd: this.totals.costUsd,
        total_steps: this.steps.length,
      },
    };
  }

  private lastWrite = 0;

  /**
   * The transcript so far, written while the agent runs (at most once a second, the first turn at
   * once), so a viewer shows a trial in flight; `write` at the end writes it whole.
   */
  async checkpoint(dir: string, sessionId: string, scrub: Scrub): Promise<void> {
    if (this.lastWrite && Date.now() - this.lastWrite < 1000) return;
    await this.write(dir, sessionId, scrub);
  }

  /** Writes trajectory.json (ATIF), messages.json and tools.json, with secrets scrubbed; each whole (a reader never sees half a file). */
  async write(dir: string, sessionId: string, scrub: Scrub): Promise<void> {
    this.lastWrite = Date.now();
    const out = async (name: string, data: unknown): Promise<void> => {
      await writeFileAtomic(path.join(dir, name), `${scrub(JSON.stringify(data, null, 1))}\n`);
    };
    await out('trajectory.json', this.trajectory(sessionId, '1'));
    await out('messages.json', this.episode);
    await out('tools.json', this.tools);
  }
}

function parseArgs(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    // Not JSON (a model's malformed arguments): kept as the text it sent.
    return text;
  }
}
