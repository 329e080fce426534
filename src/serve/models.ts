import { readFile } from 'node:fs/promises';
import { parse as parseToml } from 'smol-toml';
import { z } from 'zod';
import type { ModelConfigInput } from '../model/config.js';
import { TermgradeError } from '../util/errors.js';
import { ServeError, type ModelBody } from './contract.js';

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * A model the server's episodes may call, from the operator's configuration (never from a client):
 * the endpoint, the model id sent to it and the variable holding its key are fixed here; a client
 * picks an entry by `name`.
 */
export const ServedModelSchema = z.strictObject({
  /** What clients send as `model.model`. */
  name: z.string().min(1).max(200),
  base_url: z.url({ protocol: /^https?$/ }),
  /** The model id sent to the endpoint (default: name). */
  model: z.string().min(1).optional(),
  /** The variable holding the key sent to this endpoint (default: the server's --api-key-env). */
  api_key_env: z.string().regex(ENV_NAME, 'an environment variable name').optional(),
  /** Seconds per model request (default: the server's --request-timeout). */
  request_timeout_sec: z.number().positive().max(2_147_483).optional(),
  /** Retries of a failed model request (default: the server's --model-retries). */
  max_retries: z.number().int().nonnegative().max(20).optional(),
});
export type ServedModel = Required<
  Pick<
    z.infer<typeof ServedModelSchema>,
    'name' | 'base_url' | 'model' | 'api_key_env' | 'request_timeout_sec' | 'max_retries'
  >
>;

/** A `serve --model-config` file (TOML `[[models]]` tables, or JSON `{"models": [...]}`). */
export const ServedModelsFileSchema = z.strictObject({ models: z.array(ServedModelSchema).min(1) });

export interface ServedModelDefaults {
  apiKeyEnv: string;
  requestTimeoutSec: number;
  maxRetries: number;
}

function complete(m: z.infer<typeof ServedModelSchema>, d: ServedModelDefaults): ServedModel {
  return {
    name: m.name,
    base_url: m.base_url,
    model: m.model ?? m.name,
    api_key_env: m.api_key_env ?? d.apiKeyEnv,
    request_timeout_sec: m.request_timeout_sec ?? d.requestTimeoutSec,
    max_retries: m.max_retries ?? d.maxRetries,
  };
}

/** `--model NAME@URL`: the model id and the endpoint that serves it. */
export function parseModelFlag(value: string, d: ServedModelDefaults): ServedModel {
  const m = /^(.+?)@(https?:\/\/.+)$/.exec(value);
  const parsed = m ? ServedModelSchema.safeParse({ name: m[1], base_url: m[2] }) : null;
  if (!parsed?.success)
    throw new TermgradeError(
      'usage',
      `--model ${value}: expected NAME@URL, e.g. Qwen/Qwen3-8B@http://127.0.0.1:8000/v1${parsed ? ` (${parsed.error.issues[0]!.message})` : ''}`,
    );
  return complete(parsed.data, d);
}

/** The models of a `--model-config` file, each completed with the server's defaults. */
export async function loadServedModels(file: string, d: ServedModelDefaults): Promise<ServedModel[]> {
  let raw: unknown;
  try {
    const text = await readFile(file, 'utf8');
    raw = file.endsWith('.json') ? JSON.parse(text) : parseToml(text);
  } catch (err) {
    throw new TermgradeError('bad_input', `${file}: cannot read the model configuration: ${(err as Error).message}`);
  }
  const parsed = ServedModelsFileSchema.safeParse(raw);
  if (!parsed.success) {
    const i = parsed.error.issues[0]!;
    throw new TermgradeError(
      'bad_input',
      `${file}: ${i.path.join('.') || 'models'}: ${i.message} (expected [[models]] tables with name, base_url, and optionally model, api_key_env, request_timeout_sec, max_retries)`,
    );
  }
  return parsed.data.models.map((m) => complete(m, d));
}

/** Two entries of one name would make a client's choice ambiguous. */
export function checkServedModels(models: ServedModel[]): ServedModel[] {
  const seen = new Set<string>();
  for (const m of models) {
    if (seen.has(m.name))
      throw new TermgradeError(
        'usage',
        `model "${m.name}" is configured twice (--model / --model-config): names must be unique`,
      );
    seen.add(m.name);
  }
  return models;
}

/** An endpoint as a client may see it: no credentials, no query. */
export function shownUrl(url: string): string {
  const u = new URL(url);
  return `${u.protocol}//${u.host}${u.pathname}`;
}

type ModelRequest = z.infer<typeof ModelBody>;

/**
 * The model settings of an episode: the served entry the client named, with the sampling settings
 * it may choose. A client that names a model the server does not serve, or an endpoint or key
 * variable other than that entry's, is refused (400) with the allowed set; a timeout or retry
 * count may only be lowered.
 */
export function episodeModel(served: ServedModel[], req: ModelRequest): ModelConfigInput {
  const names = served.map((m) => `"${m.name}"`).join(', ');
  if (!served.length)
    throw new ServeError(
      'bad_request',
      'model: this server runs no episodes (it was started without --model or --model-config)',
    );
  const name = req.model ?? (served.length === 1 ? served[0]!.name : undefined);
  const m = served.find((s) => s.name === name);
  if (req.base_url !== undefined && req.base_url !== m?.base_url) {
    throw new ServeError(
      'bad_request',
      `model.base_url: the server chooses the endpoint${m ? `; "${m.name}" is served at ${shownUrl(m.base_url)}` : ''} (served: ${served.map((s) => `"${s.name}" at ${shownUrl(s.base_url)}`).join(', ')})`,
    );
  }
  if (name === undefined)
    throw new ServeError('bad_request', `model.model: name one of the models this server serves: ${names}`);
  if (!m) throw new ServeError('bad_request', `model.model: "${name}" is not served here (served: ${names})`);
  if (req.api_key_env !== undefined && req.api_key_env !== m.api_key_env)
    throw new ServeError(
      'bad_request',
      `model.api_key_env: the server chooses the key; "${m.name}" uses ${m.api_key_env} (allowed: ${[...new Set(served.map((s) => s.api_key_env))].join(', ')})`,
    );
  if (req.request_timeout_sec !== undefined && req.request_timeout_sec > m.request_timeout_sec)
    throw new ServeError('bad_request', `model.request_timeout_sec: at most ${m.request_timeout_sec} for "${m.name}"`);
  if (req.max_retries !== undefined && req.max_retries > m.max_retries)
    throw new ServeError('bad_request', `model.max_retries: at most ${m.max_retries} for "${m.name}"`);
  return {
    baseUrl: m.base_url,
    model: m.model,
    apiKeyEnv: m.api_key_env,
    temperature: req.temperature,
    topP: req.top_p,
    maxTokens: req.max_tokens,
    extraBody: req.extra_body ?? {},
    requestTimeoutSec: req.request_timeout_sec ?? m.request_timeout_sec,
    maxRetries: req.max_retries ?? m.max_retries,
  };
}
