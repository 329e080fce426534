import { z } from 'zod';

/** Price per million tokens, in US dollars. */
export const PriceSchema = z.strictObject({
  input: z.number().nonnegative(),
  cachedInput: z.number().nonnegative().optional(),
  output: z.number().nonnegative(),
});
export type Price = z.infer<typeof PriceSchema>;

/**
 * How to reach a model on any OpenAI-compatible chat-completions endpoint (vLLM, SGLang, hosted
 * APIs). The key is never part of the config: only the *name* of the environment variable holding
 * it, so configs, records and logs can be written anywhere.
 */
export const ModelConfigSchema = z.strictObject({
  baseUrl: z.url(),
  model: z.string().min(1),
  apiKeyEnv: z.string().default('OPENAI_API_KEY'),
  temperature: z.number().min(0).optional(),
  topP: z.number().gt(0).max(1).optional(),
  maxTokens: z.number().int().positive().optional(),
  /** Passed through in the request body as is (e.g. vLLM's return_token_ids, top_k). */
  extraBody: z.record(z.string(), z.unknown()).default({}),
  /** Sent with every request (a trainer's session id for its gateway, say). Never a key: use apiKeyEnv. */
  headers: z.record(z.string(), z.string()).default({}),
  requestTimeoutSec: z.number().positive().max(2_147_483).default(600),
  /** Retries of rate-limit / overload / transient failures inside the trial, with backoff. */
  maxRetries: z.number().int().nonnegative().default(6),
  backoffBaseSec: z.number().positive().default(1),
  backoffMaxSec: z.number().positive().default(60),
  /** Context window in tokens, when known: the agents summarise before it fills. */
  contextWindow: z.number().int().positive().optional(),
  price: PriceSchema.optional(),
});
export type ModelConfig = z.infer<typeof ModelConfigSchema>;
export type ModelConfigInput = z.input<typeof ModelConfigSchema>;

/** Built-in prices (USD per 1M tokens); users extend or override them with a JSON file. */
export const DEFAULT_PRICES: Record<string, Price> = {};

export function costUsd(
  price: Price | undefined,
  usage: { prompt: number; cached: number; completion: number },
): number | null {
  if (!price) return null;
  const uncached = Math.max(0, usage.prompt - usage.cached);
  return (
    (uncached * price.input + usage.cached * (price.cachedInput ?? price.input) + usage.completion * price.output) / 1e6
  );
}
