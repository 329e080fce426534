import path from 'node:path';
import { getAgent } from '../agent/registry.js';
import { DockerProvider } from '../sandbox/docker/provider.js';
import { loadTask } from '../task/load.js';
import { runTrial } from '../trial/run.js';
import { EXIT, handleSignals } from './signals.js';

export async function runTrialCommand(taskDir: string, flags: { agent: string; out: string; timeoutMultiplier: number; json?: boolean }): Promise<number> {
  const task = await loadTask(taskDir);
  const agent = getAgent(flags.agent);
  const provider = new DockerProvider();
  await provider.ping();
  const signals = handleSignals(provider, (m) => process.stderr.write(`${m}\n`));
  try {
    const result = await runTrial({
      task,
      agent,
      provider,
      outDir: path.resolve(flags.out),
      timeouts: { agentMultiplier: flags.timeoutMultiplier, verifierMultiplier: flags.timeoutMultiplier },
      signal: signals.signal,
    });
    if (flags.json) process.stdout.write(`${JSON.stringify(result)}\n`);
    else {
      const s = result.testsSummary;
      process.stdout.write(
        `${task.name} / ${agent.name}: reward ${result.reward ?? 'none'} (${s.passed}/${s.total} tests passed)` +
          `${result.error ? `, ${result.error.class}: ${result.error.message}` : ''}\n` +
          `trial folder: ${path.join(path.resolve(flags.out), result.trialId)}\n`,
      );
    }
    return signals.exitCode() ?? (result.passed ? EXIT.ok : EXIT.rejected);
  } finally {
    await provider.closeAll();
    signals.dispose();
  }
}
