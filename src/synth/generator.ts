import { z } from 'zod';
import { ModelClient, type Message } from '../model/client.js';
import type { ModelConfig } from '../model/config.js';
import { ModelError, RETRYABLE } from '../model/errors.js';
import { CancelledError } from '../util/errors.js';
import { summaryLine } from '../verifier/test-report.js';
import { hideInLogs } from '../util/log.js';
import { preflightModel } from '../model/preflight.js';

/** What one part's generation cost and returned (value null: the model never gave a valid one). */
export interface Generated<T> {
  value: T | null;
  /** Why the last reply was refused, when value is null. */
  problem: string | null;
  calls: number;
  malformed: number;
  usage: { prompt: number; completion: number };
  costUsd: number | null;
}

export interface GeneratorOptions {
  /** Replies that are not valid JSON of the part's schema, re-asked before the part fails. */
  maxMalformed?: number;
  /** Model calls in flight at once against this endpoint. */
  concurrency?: number;
}

/**
 * The per-test lines test.sh is asked to print, made by the parser's own grammar (summaryLine):
 * a task written exactly as asked has per-test results.
 */
export const REPORT_EXAMPLES = [
  summaryLine('PASSED', 'test_outputs.py::test_report_exists'),
  summaryLine('FAILED', 'test_outputs.py::test_total_is_42', 'expected 42, got 41'),
] as const;

export const SYSTEM_PROMPT = `You write one part of a terminal task for a benchmark: an instruction an agent is given, an environment (a Dockerfile and its files) the agent works in offline, a reference solution (solve.sh) and a verifier (tests/test.sh).
tests/test.sh prints one line per test, the status word, a space, the test's id (FILE::NAME, no spaces), and for a failure " - " and why, exactly like these two lines:
${REPORT_EXAMPLES.join('\n')}
and writes 1 (every test passed) or 0 to /logs/verifier/reward.txt.
Every part you write must rest on the facts given in the request: the recorded state of the built environment and what the reference solution really did. Never guess a value the request records.
Reply with exactly one JSON object matching the JSON Schema given, and nothing else.`;

/** A counting semaphore: the per-endpoint cap on calls in flight. */
class Gate {
  private active = 0;
  private readonly waiting: Array<() => void> = [];
  constructor(private readonly limit: number) {}
  async run<T>(work: () => Promise<T>): Promise<T> {
    if (this.active >= this.limit) await new Promise<void>((resolve) => this.waiting.push(resolve));
    this.active++;
    try {
      return await work();
    } finally {
      this.active--;
      this.waiting.shift()?.();
    }
  }
}

/**
 * The generator model behind synth: asks for one part at a time with a structured-output request
 * (the part's JSON Schema as response_format), validates the reply with zod and, when it is not
 * valid, shows the model the problem and asks again, a bounded number of times.
 */
export class Generator {
  private readonly clients = new Map<string, ModelClient>();
  private readonly gate: Gate;
  private readonly maxMalformed: number;

  constructor(
    readonly config: ModelConfig,
    options: GeneratorOptions = {},
  ) {
    this.gate = new Gate(Math.max(1, options.concurrency ?? 4));
    hideInLogs(this.secret());
    this.maxMalformed = Math.max(0, options.maxMalformed ?? 2);
  }

  private client(name: string, schema: z.ZodType): ModelClient {
    let c = this.clients.get(name);
    if (!c) {
      const jsonSchema = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' });
      c = new ModelClient({
        ...this.config,
        extraBody: {
          response_format: { type: 'json_schema', json_schema: { name, schema: jsonSchema } },
          ...this.config.extraBody,
        },
      });
      this.clients.set(name, c);
    }
    return c;
  }

  /**
   * Whether the endpoint answers now, asked the way `run` and synth preflight it (preflightModel:
   * one GET /models, no retries, a short timeout). After an outage, what decides whether the next
   * part is asked for at all: a job whose endpoint stays down leaves each later candidate waiting
   * at once, instead of spending the client's retries (about a minute by default) on each.
   */
  async answers(timeoutSec = 5): Promise<boolean> {
    return (await preflightModel(this.config, timeoutSec)).ok;
  }

  /** The key's value, so what synth records can be scrubbed of it. */
  secret(): string | null {
    return process.env[this.config.apiKeyEnv] || null;
  }

  /**
   * One part. `request` is the whole context (stage, seed, recorded state, earlier parts, the
   * failure to repair) as JSON. Fatal model errors (auth, model not found) and cancellation throw;
   * a reply that stays invalid gives value null with the problem.
   */
  async generate<S extends z.ZodType>(
    name: string,
    schema: S,
    request: Record<string, unknown>,
    signal?: AbortSignal,
  ): Promise<Generated<z.infer<S>>> {
    const client = this.client(name, schema);
    const jsonSchema = JSON.stringify(z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }));
    const messages: Message[] = [
      { role: 'system', content: `${SYSTEM_PROMPT}\nJSON Schema of your reply: ${jsonSchema}` },
      { role: 'user', content: JSON.stringify(request) },
    ];
    const out: Generated<z.infer<S>> = {
      value: null,
      problem: null,
      calls: 0,
      malformed: 0,
      usage: { prompt: 0, completion: 0 },
      costUsd: null,
    };
    for (let attempt = 0; attempt <= this.maxMalformed; attempt++) {
      if (signal?.aborted) throw new CancelledError('generation');
      const reply = await this.gate.run(() => client.complete({ messages, signal }));
      out.calls++;
      out.usage.prompt += reply.usage.prompt;
      out.usage.completion += reply.usage.completion;
      if (reply.costUsd !== null) out.costUsd = (out.costUsd ?? 0) + reply.costUsd;
      const problem = readProblem(reply.content, schema, reply.finishReason);
      if (problem.ok) {
        out.value = problem.value as z.infer<S>;
        out.problem = null;
        return out;
      }
      out.malformed++;
      out.problem = problem.why;
      messages.push(
        { role: 'assistant', content: reply.content },
        { role: 'user', content: `Your reply was refused: ${problem.why}. Reply again with only the JSON object.` },
      );
    }
    return out;
  }
}

/** Parses and validates one reply; a reply cut by the token limit is refused as such. */
function readProblem(
  content: string,
  schema: z.ZodType,
  finishReason: string,
): { ok: true; value: unknown } | { ok: false; why: string } {
  if (finishReason === 'length') return { ok: false, why: 'the reply was cut by the token limit' };
  const text = content.trim().replace(/^```(?:json)?\s*\n([\s\S]*)\n```$/, '$1');
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    return { ok: false, why: `not JSON (${(err as Error).message.slice(0, 120)})` };
  }
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    return { ok: false, why: `field ${issue.path.join('.') || '(root)'}: ${issue.message}` };
  }
  return { ok: true, value: parsed.data };
}

/**
 * The endpoint did not serve the request: it did not answer, timed out, was overloaded or rate
 * limited, or failed with a 5xx, and the client's own retries (RETRYABLE) did not get an answer.
 * What waiting may cure: the candidate is left unfinished, and the same command resumes it.
 */
export function isEndpointOutage(err: unknown): boolean {
  return err instanceof ModelError && RETRYABLE.has(err.kind);
}

/**
 * Model errors that end the whole job rather than one candidate, with nothing rejected: the
 * endpoint refused the key (auth), does not serve the model (not_found), or refused the request as
 * malformed (bad_request: a 400 that is not a full context, such as a response_format or an
 * extraBody field the server does not take). synth builds every candidate's request the same way,
 * so every later call would fail too; rejecting candidates for it would be a dead end (they would
 * stay rejected once the configuration is fixed), so the job stops and the same command resumes it.
 */
export function isFatalModelError(err: unknown): err is ModelError {
  return err instanceof ModelError && (err.kind === 'auth' || err.kind === 'not_found' || err.kind === 'bad_request');
}
