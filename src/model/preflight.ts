import OpenAI, { APIConnectionError, APIConnectionTimeoutError, APIError } from 'openai';
import { makeScrub } from '../util/scrub.js';
import { TermgradeError } from '../util/errors.js';
import type { ModelConfig } from './config.js';

export interface PreflightResult {
  baseUrl: string;
  model: string;
  /** The endpoint answered and serves the model (or cannot list its models, see `warning`). */
  ok: boolean;
  problem: string | null;
  /** Said but not fatal: no key set though the endpoint accepts that, or no model listing. */
  warning: string | null;
}

/**
 * Asks one endpoint for its model list before any sandbox starts: it answers, it accepts the key
 * (or needs none), and it serves the model. One request (GET /models, what vLLM, SGLang and hosted
 * APIs all serve), no retries, a short timeout: a wrong URL costs seconds, not a job of failed
 * trials. A server with no model listing (404) is taken at its word, with a warning.
 */
export async function preflightModel(
  config: Pick<ModelConfig, 'baseUrl' | 'model' | 'apiKeyEnv' | 'headers'>,
  timeoutSec = 10,
): Promise<PreflightResult> {
  const key = process.env[config.apiKeyEnv] || null;
  const scrub = makeScrub(key ? [key] : []);
  const base = { baseUrl: config.baseUrl, model: config.model };
  const client = new OpenAI({
    baseURL: config.baseUrl,
    apiKey: key ?? 'none',
    maxRetries: 0,
    timeout: timeoutSec * 1000,
    defaultHeaders: config.headers,
  });
  const noKey = key
    ? null
    : `${config.apiKeyEnv} is not set, so no API key is sent (fine for a local server that needs none)`;
  try {
    const ids: string[] = [];
    for await (const m of client.models.list()) ids.push(m.id);
    if (ids.length > 0 && !ids.includes(config.model)) {
      return {
        ...base,
        ok: false,
        problem: `${config.baseUrl} does not serve model "${config.model}" (it serves: ${ids.slice(0, 10).join(', ')}${ids.length > 10 ? ', ...' : ''})`,
        warning: null,
      };
    }
    return { ...base, ok: true, problem: null, warning: noKey };
  } catch (err) {
    if (err instanceof APIConnectionTimeoutError)
      return { ...base, ok: false, problem: `${config.baseUrl} did not answer within ${timeoutSec} s`, warning: null };
    if (err instanceof APIConnectionError) {
      // The SDK wraps fetch's error, which wraps the socket's: the innermost code says most.
      let cause: string = err.message;
      for (let c: unknown = err.cause; c instanceof Error; c = (c as Error & { cause?: unknown }).cause)
        cause = (c as NodeJS.ErrnoException).code ?? cause;
      return {
        ...base,
        ok: false,
        problem: `${config.baseUrl} does not answer (${cause}); is the server running, and is the URL right (it usually ends in /v1)?`,
        warning: null,
      };
    }
    if (err instanceof APIError && (err.status === 401 || err.status === 403)) {
      const why = key
        ? `rejects the key in ${config.apiKeyEnv}`
        : `needs an API key, and ${config.apiKeyEnv} is not set`;
      return { ...base, ok: false, problem: `${config.baseUrl} ${why} (HTTP ${err.status})`, warning: null };
    }
    if (err instanceof APIError && err.status === 404) {
      return {
        ...base,
        ok: true,
        problem: null,
        warning: [noKey, `${config.baseUrl} lists no models (GET /models: 404); assuming it serves "${config.model}"`]
          .filter(Boolean)
          .join('; '),
      };
    }
    const message = scrub(err instanceof Error ? err.message : String(err));
    return { ...base, ok: false, problem: `${config.baseUrl}: GET /models failed: ${message}`, warning: null };
  }
}

/**
 * Every distinct endpoint and model of a job, checked at once. Throws a usage error naming every
 * problem; returns the warnings to show.
 */
export async function preflightModels(
  configs: Array<Pick<ModelConfig, 'baseUrl' | 'model' | 'apiKeyEnv' | 'headers'>>,
  timeoutSec = 10,
): Promise<string[]> {
  const distinct = new Map(configs.map((c) => [`${c.baseUrl}\u0000${c.model}\u0000${c.apiKeyEnv}`, c]));
  const results = await Promise.all([...distinct.values()].map((c) => preflightModel(c, timeoutSec)));
  const problems = results.filter((r) => !r.ok).map((r) => r.problem!);
  if (problems.length)
    throw new TermgradeError(
      'bad_input',
      `model endpoint preflight failed (nothing was started; --no-preflight skips this check):\n  ${problems.join('\n  ')}`,
    );
  return [...new Set(results.map((r) => r.warning).filter((w): w is string => w !== null))];
}
