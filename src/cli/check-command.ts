import path from 'node:path';
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
}

const stamp = (): string => new Date().toISOString().replace(/[:.]/g, '-');

export async function checkCommand(dirs: string[], flags: CheckFlags): Promise<number> {
  const log = (msg: string): void => {
    if (!flags.quiet) process.stderr.write(`${msg}\n`);
  };
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
