import path from 'node:path';
import { admissionStore } from '../verifier/protection-store.js';
import { JobStore } from '../store/store.js';
import { holdJobFolder } from '../job/job.js';
import { ModelConfigSchema, type ModelConfig } from '../model/config.js';
import { TermgradeError } from '../util/errors.js';
import { checkTasks } from '../check/check.js';
import { findTaskDirs } from '../task/load.js';
import { formatCheckReport } from './format.js';
import { poolEventLine } from './job-progress.js';
import { checkProgress, stdoutIsStderr } from './progress.js';
import { EXIT, handleSignals } from './signals.js';
import { resolveBuildNetwork } from '../sandbox/docker/build-network.js';
import { wheelsIn } from '../verifier/toolchain/plan.js';
import { enginesFromFlags } from '../sandbox/pool/engine-spec.js';
import { createProvider } from '../sandbox/registry.js';

export interface CheckFlags {
  engine?: string[];
  repeat: number;
  concurrency?: number;
  out?: string;
  timeoutMultiplier: number;
  json?: boolean;
  quiet?: boolean;
  forceBuild?: boolean;
  /** commander's --no-verifier-toolchain: false turns the offline toolchain off. */
  verifierToolchain?: boolean;
  probes: 'none' | 'fast' | 'all';
  review?: boolean;
  reviewModel?: string;
  reviewBaseUrl?: string;
  reviewApiKeyEnv: string;
  job?: string;
  jobsDir: string;
  /** --admission-dir: where admission records are written (see admissionStore). */
  admissionDir?: string;
  buildNetwork?: string;
  /** --verifier-wheels DIR: wheels served for requirements the toolchain lacks. */
  verifierWheels?: string;
  /** --network NAME: tasks that ask for the internet are checked online on NAME. */
  network?: string;
}

const stamp = (): string => new Date().toISOString().replace(/[:.]/g, '-');

/** --review's model configuration (undefined without --review); bad flags are a usage error. */
function reviewConfig(flags: CheckFlags): ModelConfig | undefined {
  if (!flags.review) return undefined;
  if (!flags.reviewModel || !flags.reviewBaseUrl)
    throw new TermgradeError('usage', '--review needs --review-model and --review-base-url');
  const parsed = ModelConfigSchema.safeParse({
    baseUrl: flags.reviewBaseUrl,
    model: flags.reviewModel,
    apiKeyEnv: flags.reviewApiKeyEnv,
    temperature: 0,
  });
  if (!parsed.success)
    throw new TermgradeError(
      'usage',
      `review model: ${parsed.error.issues[0]!.path.join('.')}: ${parsed.error.issues[0]!.message}`,
    );
  return parsed.data;
}

export async function checkCommand(dirs: string[], flags: CheckFlags): Promise<number> {
  const log = (msg: string): void => {
    if (!flags.quiet) process.stderr.write(`${msg}\n`);
  };
  const review = reviewConfig(flags);
  const taskDirs = await findTaskDirs(dirs);
  if (flags.verifierWheels) await wheelsIn(flags.verifierWheels);
  const provider = createProvider({
    engines: enginesFromFlags(flags.engine) ?? [],
    buildNetwork: resolveBuildNetwork(flags.buildNetwork),
    onEvent: (e) => log(poolEventLine(e)),
  });
  for (const w of await provider.ping()) log(`warning: ${w}`);
  // Refused now (exit 2), not per task: NAME must be isolated as run --network requires.
  if (flags.network) await provider.checkNetwork(flags.network);

  const removed = await provider.cleanup();
  if (removed) log(`removed ${removed} container(s) left by earlier runs that were killed`);

  // check --job NAME: a durable record of every verdict; running it again resumes.
  let store: JobStore | undefined;
  let release: (() => Promise<void>) | undefined;
  let jobDir: string | undefined;
  if (flags.job) {
    if (!/^[A-Za-z0-9._-]+$/.test(flags.job))
      throw new TermgradeError('usage', `--job ${flags.job}: letters, digits, dot, dash and underscore only`);
    jobDir = path.resolve(flags.jobsDir, flags.job);
    release = (await holdJobFolder(jobDir, `check job "${flags.job}"`)).release;
    store = JobStore.open(path.join(jobDir, 'job.db'));
    const before = store.checkedTasks().size;
    if (before) log(`check job ${flags.job}: ${before} task(s) already checked, resuming with the rest`);
  }
  const outDir = path.resolve(
    flags.out ?? (jobDir ? path.join(jobDir, 'out') : path.join('.termgrade', 'check', stamp())),
  );
  const signals = handleSignals(provider, log);
  // Each task is listed once: by the progress display when it prints where the report goes, else by the report.
  const listedLive = !flags.quiet && !flags.json && stdoutIsStderr();
  const progress = checkProgress(taskDirs.length, flags.quiet ?? false, listedLive);
  let report;
  try {
    report = await checkTasks(taskDirs, {
      provider,
      outDir,
      repeat: flags.repeat,
      concurrency: flags.concurrency ?? provider.capacity,
      timeouts: { agentMultiplier: flags.timeoutMultiplier, verifierMultiplier: flags.timeoutMultiplier },
      forceBuild: flags.forceBuild,
      verifierToolchain: flags.verifierToolchain !== false,
      verifierWheels: flags.verifierWheels,
      network: flags.network,
      probes: flags.probes,
      review,
      store,
      // Written where every command that grades looks for it (admissionStore).
      protection: admissionStore({ admissionDir: flags.admissionDir, near: [flags.jobsDir] }),
      signal: signals.signal,
      onEvent: progress.onEvent,
    });
  } finally {
    progress.stop();
    await provider.closeAll();
    signals.dispose();
    store?.close();
    await release?.();
  }
  if (flags.json) process.stdout.write(`${JSON.stringify(report)}\n`);
  else process.stdout.write(`${formatCheckReport(report, { listed: progress.listed })}\n`);
  const interrupted = signals.exitCode();
  if (interrupted !== null) return interrupted;
  return report.summary.rejected === 0 ? EXIT.ok : EXIT.rejected;
}
