import path from 'node:path';
import { tokenFromEnv } from './token-env.js';
import { poolEventLine } from './job-progress.js';
import { loadAgentModule } from '../index.js';
import { enginesFromFlags, providerFor } from '../sandbox/engines.js';
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

/** Serves until SIGINT / SIGTERM, then removes every sandbox it made. */
export async function serveCommand(flags: ServeFlags): Promise<number> {
  const token = tokenFromEnv(flags.tokenEnv);
  for (const m of flags.agentImportPath ?? []) await loadAgentModule(m);
  const provider = providerFor(enginesFromFlags(flags.engine), { buildNetwork: resolveBuildNetwork(flags.buildNetwork), onEvent: (e) => process.stderr.write(`termgrade serve: ${poolEventLine(e)}\n`) });
  for (const w of await provider.ping()) process.stderr.write(`termgrade: warning: ${w}\n`);
  const tasks = await loadServedTasks(flags.tasks, flags.selection);
  const dataDir = serveDataDir(flags);
  const server = await startServer({ provider, tasks, dataDir, host: flags.host, port: flags.port, token, maxSessions: flags.maxSessions, idleTtlSec: flags.idleTtl });
  process.stderr.write(`termgrade serve: ${tasks.length} task(s) on ${server.url} (up to ${flags.maxSessions} sandboxes; grades in ${path.join(dataDir, 'grades.jsonl')})\n`);
  process.stdout.write(`${JSON.stringify({ url: server.url, tasks: tasks.length })}\n`);
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await server.close();
  return 0;
}
