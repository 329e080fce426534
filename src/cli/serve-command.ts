import path from 'node:path';
import { tokenFromEnv } from './token-env.js';
import { poolEventLine } from './job-progress.js';
import { warnAboutTasks } from './format.js';
import { EXIT } from './signals.js';
import { loadAgentModule } from '../agent/registry.js';
import { checkServedModels, loadServedModels, parseModelFlag, shownUrl, type ServedModel } from '../serve/models.js';
import { checkWarm, startServer } from '../serve/server.js';
import { CurriculumConfigSchema, type CurriculumConfig } from '../serve/curriculum.js';
import { loadServedTasks } from '../serve/tasks.js';
import { TermgradeError } from '../util/errors.js';
import { resolveBuildNetwork } from '../sandbox/docker/build-network.js';
import { admissionStore } from '../verifier/protection-store.js';
import type { GradingPolicy } from '../verifier/evidence.js';
import { enginesFromFlags } from '../sandbox/pool/engine-spec.js';
import { createProvider } from '../sandbox/registry.js';

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
  warm: number;
  dataDir?: string;
  /** --admission-dir: where tasks' admission records are looked up (see admissionStore). */
  admissionDir?: string;
  timeoutMultiplier?: number;
  grading?: GradingPolicy;
  record?: string;
  agentImportPath?: string[];
  band?: string;
  explore?: string;
  forget?: string;
  priorWeight?: string;
}

/** A number flag, or a usage error naming the flag. */
function numberFlag(flag: string, value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n)) throw new TermgradeError('usage', `${flag} ${value}: not a number`);
  return n;
}

/** The live curriculum's settings from --band LO:HI (or LO,HI), --explore, --forget and --prior-weight (unset: the defaults). */
export function curriculumFlags(
  flags: Pick<ServeFlags, 'band' | 'explore' | 'forget' | 'priorWeight'>,
): Partial<CurriculumConfig> {
  const out: Partial<CurriculumConfig> = {};
  if (flags.band !== undefined) {
    // LO:HI as every other command takes it, or LO,HI.
    const parts = flags.band.split(/[:,]/);
    if (parts.length !== 2)
      throw new TermgradeError('usage', `--band ${flags.band}: give two rates LO:HI (e.g. 0.25:0.75)`);
    const [lo, hi] = parts.map((p) => numberFlag('--band', p));
    if (!(lo! >= 0 && hi! <= 1 && lo! < hi!))
      throw new TermgradeError('usage', `--band ${flags.band}: need 0 <= LO < HI <= 1`);
    Object.assign(out, { lo, hi });
  }
  if (flags.explore !== undefined) out.explore = numberFlag('--explore', flags.explore);
  if (flags.forget !== undefined) out.decay = numberFlag('--forget', flags.forget);
  if (flags.priorWeight !== undefined) out.priorTrials = numberFlag('--prior-weight', flags.priorWeight);
  const checked = CurriculumConfigSchema.partial().safeParse(out);
  if (!checked.success) {
    const issue = checked.error.issues[0]!;
    const flag =
      { explore: '--explore', decay: '--forget', priorTrials: '--prior-weight', lo: '--band', hi: '--band' }[
        String(issue.path[0])
      ] ?? '--band';
    throw new TermgradeError(
      'usage',
      `${flag}: ${issue.message} (--explore in 0..1, --forget in (0, 1], --prior-weight > 0)`,
    );
  }
  return out;
}

/** Where a server keeps its records: --data-dir, else .termgrade/serve/NAME for --record NAME. */
export function serveDataDir(flags: { dataDir?: string; record?: string }): string {
  if (flags.record && !/^[A-Za-z0-9._-]+$/.test(flags.record))
    throw new TermgradeError('usage', `--record ${flags.record}: letters, digits, dot, dash and underscore only`);
  return path.resolve(flags.dataDir ?? path.join('.termgrade', 'serve', flags.record ?? ''));
}

/** The models episodes may call: --model NAME@URL flags and a --model-config file. */
export async function servedModels(
  flags: Pick<ServeFlags, 'model' | 'modelConfig' | 'apiKeyEnv' | 'requestTimeout' | 'modelRetries'>,
): Promise<ServedModel[]> {
  const defaults = {
    apiKeyEnv: flags.apiKeyEnv,
    requestTimeoutSec: flags.requestTimeout,
    maxRetries: flags.modelRetries,
  };
  const fromFlags = (flags.model ?? []).map((m) => parseModelFlag(m, defaults));
  const fromFile = flags.modelConfig ? await loadServedModels(flags.modelConfig, defaults) : [];
  return checkServedModels([...fromFlags, ...fromFile]);
}

/** Serves until SIGINT / SIGTERM, then removes every sandbox it made. */
export async function serveCommand(flags: ServeFlags): Promise<number> {
  checkWarm(flags.warm, flags.maxSessions);
  const token = tokenFromEnv(flags.tokenEnv);
  const curriculum = curriculumFlags(flags);
  const models = await servedModels(flags);
  for (const m of flags.agentImportPath ?? []) await loadAgentModule(m);
  const provider = createProvider({
    engines: enginesFromFlags(flags.engine) ?? [],
    buildNetwork: resolveBuildNetwork(flags.buildNetwork),
    onEvent: (e) => process.stderr.write(`termgrade serve: ${poolEventLine(e)}\n`),
  });
  for (const w of await provider.ping()) process.stderr.write(`termgrade: warning: ${w}\n`);
  const tasks = await loadServedTasks(flags.tasks, flags.selection);
  warnAboutTasks(tasks.map((t) => t.task));
  const dataDir = serveDataDir(flags);
  const admission = admissionStore({ admissionDir: flags.admissionDir });
  let recorded = 0;
  for (const t of tasks) if (await admission.find(t.task)) recorded += 1;
  process.stderr.write(
    `termgrade serve: ${recorded} of ${tasks.length} task(s) have an admission record in ${admission.dir}${recorded < tasks.length ? ' (the others are graded with the fixed rules only until `check` records theirs)' : ''}\n`,
  );
  const server = await startServer({
    provider,
    tasks,
    dataDir,
    host: flags.host,
    port: flags.port,
    token,
    allowedHosts: flags.allowedHost,
    models,
    maxSessions: flags.maxSessions,
    idleTtlSec: flags.idleTtl,
    warm: flags.warm,
    curriculum,
    admission,
    timeoutMultiplier: flags.timeoutMultiplier,
    grading: flags.grading,
  });
  const modelsLine = models.length
    ? models.map((m) => `${m.name} at ${shownUrl(m.base_url)} (key ${m.api_key_env})`).join(', ')
    : 'none (episodes refused; give --model NAME@URL)';
  process.stderr.write(
    `termgrade serve: ${tasks.length} task(s) on ${server.url} (up to ${flags.maxSessions} sandboxes, ${flags.warm} kept warm; grades in ${path.join(dataDir, 'grades.jsonl')}); episode models: ${modelsLine}\n`,
  );
  // A token the operator chose (--token-env) is never printed; a generated one must be, or no client could connect.
  if (server.tokenGenerated)
    process.stderr.write(
      `termgrade serve: clients send "Authorization: Bearer ${server.token}" (a token generated for this run; give --token-env VAR to choose one)\n`,
    );
  process.stdout.write(
    `${JSON.stringify({ url: server.url, tasks: tasks.length, ...(server.tokenGenerated ? { token: server.token } : {}) })}\n`,
  );
  const signal = await new Promise<NodeJS.Signals>((resolve) => {
    process.once('SIGINT', () => resolve('SIGINT'));
    process.once('SIGTERM', () => resolve('SIGTERM'));
  });
  process.stderr.write(`termgrade serve: ${signal}: stopping; removing every sandbox (send again to exit at once)\n`);
  // A second signal during the stop must not kill the process before its sandboxes are gone.
  const again = (): void => {
    process.stderr.write('termgrade serve: signal again: removing sandboxes and exiting now\n');
    void provider.closeAll().finally(() => process.exit(signal === 'SIGINT' ? EXIT.sigint : EXIT.sigterm));
  };
  process.on('SIGINT', again);
  process.on('SIGTERM', again);
  await server.close();
  process.stderr.write('termgrade serve: stopped; every sandbox removed\n');
  return 0;
}
