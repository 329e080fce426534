import { DockerProvider } from '../index.js';
import { EXIT } from './signals.js';

export async function cleanupCommand(flags: { all?: boolean }): Promise<number> {
  const provider = new DockerProvider();
  await provider.ping();
  const removed = await provider.cleanup({ all: flags.all });
  process.stdout.write(`removed ${removed} container(s)\n`);
  return EXIT.ok;
}
