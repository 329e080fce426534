import path from 'node:path';
import { ModelConfigSchema, type ModelConfig } from '../model/config.js';
import { TermgradeError } from '../util/errors.js';
import { checkTasks, DockerProvider, findTaskDirs } from '../index.js';
import { formatCheckReport } from './format.js';
import { checkProgress } from './progress.js';
import { EXIT, handleSignals } from './signals.js';

export interface CheckFlags {
  repeat: number;
  concurrency: number;
  out?: string;
  timeoutMultiplier: number;
  json?: boolean;
  quiet?: boolean;
  forceBuild?: boolean;
  probes: 'none' | 'fast' | 'all';
  review?: boolean;
  reviewModel?: string;
  reviewBaseUrl?: string;
  reviewApiKeyEnv: string;
}

const stamp = (): string => new Date().toISOString().replace(/[:.]/g, '-');

export async function checkCommand(dirs: string[], flags: CheckFlags): Promise<number> {
  const log = (msg: string): void => {
    if (!flags.quiet) process.stderr.write(`${msg}\n`);
  };
  let review: ModelConfig | undefined;
  if (flags.review) {
    if (!flags.reviewModel || !flags.reviewBaseUrl) throw new TermgradeError('usage', '--review needs --review-model and --review-base-url');
    const parsed = ModelConfigSchema.safeParse({ baseUrl: flags.reviewBaseUrl, model: flags.reviewModel, apiKeyEnv: flags.reviewApiKeyEnv, temperature: 0 });
    if (!parsed.success) throw new TermgradeError('usage', `review model: ${parsed.error.issues[0]!.path.join('.')}: ${parsed.error.issues[0]!.message}`);
    review = parsed.data;
  }
  const taskDirs = await findTaskDirs(dirs);
  const provider = new DockerProvider();
  await provider.ping();
  const removed = await provider.cleanup();
  if (removed) log(`removed ${removed} container(s) left by earlier runs that were killed`);

  const outDir = path.resolve(flags.out ?? path.join('.termgrade', 'check', stamp()));
  const signals = handleSignals(provider, log);
  const progress = checkProgress(taskDirs.length, flags.quiet ?? false);
  let report;
  try {
    report = await checkTasks(taskDirs, {
      provider,
      outDir,
      repeat: flags.repeat,
      concurrency: flags.concurrency,
      timeouts: { agentMultiplier: flags.timeoutMultiplier, verifierMultiplier: flags.timeoutMultiplier },
      forceBuild: flags.forceBuild,
      probes: flags.probes,
      review,
      signal: signals.signal,
      onEvent: progress.onEvent,
    });
  } finally {
    progress.stop();
    await provider.closeAll();
    signals.dispose();
  }
  if (flags.json) process.stdout.write(`${JSON.stringify(report)}\n`);
  else process.stdout.write(`${formatCheckReport(report)}\n`);
  const interrupted = signals.exitCode();
  if (interrupted !== null) return interrupted;
  return report.summary.rejected === 0 ? EXIT.ok : EXIT.rejected;
}
