import path from 'node:path';
import { tokenFromEnv } from './token-env.js';
import { poolEventLine } from './job-progress.js';
import { loadAgentModule } from '../index.js';
import { enginesFromFlags, providerFor } from '../sandbox/engines.js';
import { checkServedModels, loadServedModels, parseModelFlag, shownUrl, type ServedModel } from '../serve/models.js';
import { startServer } from '../serve/server.js';
import { loadServedTasks } from '../serve/tasks.js';
import { TermgradeError } from '../util/errors.js';
import { resolveBuildNetwork } from '../sandbox/docker/build-network.js';

export interface ServeFlags {
  buildNetwork?: string;
  engine?: string[];
  tasks: string[];
  selection?: string;
  host: string;
  port: number;
  tokenEnv?: string;
  allowedHost?: string[];
  model?: string[];
  modelConfig?: string;
  apiKeyEnv: string;
  requestTimeout: number;
  modelRetries: number;
  maxSessions: number;
  idleTtl: number;
  dataDir?: string;
  record?: string;
  agentImportPath?: string[];
}

/** Where a server keeps its records: --data-dir, else .termgrade/serve/NAME for --record NAME. */
export function serveDataDir(flags: { dataDir?: string; record?: string }): string {
  if (flags.record && !/^[A-Za-z0-9._-]+$/.test(flags.record)) throw new TermgradeError('usage', `--record ${flags.record}: letters, digits, dot, dash and underscore only`);
  return path.resolve(flags.dataDir ?? path.join('.termgrade', 'serve', flags.record ?? ''));
}

/** The models episodes may call: --model NAME@URL flags and a --model-config file. */
export async function servedModels(flags: Pick<ServeFlags, 'model' | 'modelConfig' | 'apiKeyEnv' | 'requestTimeout' | 'modelRetries'>): Promise<ServedModel[]> {
  const defaults = { apiKeyEnv: flags.apiKeyEnv, requestTimeoutSec: flags.requestTimeout, maxRetries: flags.modelRetries };
  const fromFlags = (flags.model ?? []).map((m) => parseModelFlag(m, defaults));
  const fromFile = flags.modelConfig ? await loadServedModels(flags.modelConfig, defaults) : [];
  return checkServedModels([...fromFlags, ...fromFile]);
}

/** Serves until SIGINT / SIGTERM, then removes every sandbox it made. */
export async function serveCommand(flags: ServeFlags): Promise<number> {
  const token = tokenFromEnv(flags.tokenEnv);
  const models = await servedModels(flags);
  for (const m of flags.agentImportPath ?? []) await loadAgentModule(m);
  const provider = providerFor(enginesFromFlags(flags.engine), { buildNetwork: resolveBuildNetwork(flags.buildNetwork), onEvent: (e) => process.stderr.write(`termgrade serve: ${poolEventLine(e)}\n`) });
  for (const w of await provider.ping()) process.stderr.write(`termgrade: warning: ${w}\n`);
  const tasks = await loadServedTasks(flags.tasks, flags.selection);
  const dataDir = serveDataDir(flags);
  const server = await startServer({ provider, tasks, dataDir, host: flags.host, port: flags.port, token, allowedHosts: flags.allowedHost, models, maxSessions: flags.maxSessions, idleTtlSec: flags.idleTtl });
  const modelsLine = models.length ? models.map((m) => `${m.name} at ${shownUrl(m.base_url)} (key ${m.api_key_env})`).join(', ') : 'none (episodes refused; give --model NAME@URL)';
  process.stderr.write(`termgrade serve: ${tasks.length} task(s) on ${server.url} (up to ${flags.maxSessions} sandboxes; grades in ${path.join(dataDir, 'grades.jsonl')}); episode models: ${modelsLine}\n`);
  // A token the operator chose (--token-env) is never printed; a generated one must be, or no client could connect.
  if (server.tokenGenerated) process.stderr.write(`termgrade serve: clients send "Authorization: Bearer ${server.token}" (a token generated for this run; give --token-env VAR to choose one)\n`);
  process.stdout.write(`${JSON.stringify({ url: server.url, tasks: tasks.length, ...(server.tokenGenerated ? { token: server.token } : {}) })}\n`);
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await server.close();
  return 0;
}
