import { DockerProvider } from '../sandbox/docker/provider.js';
import { removeLeftovers } from '../sandbox/docker/cleanup.js';
import { EXIT } from './signals.js';

export async function cleanupCommand(flags: { all?: boolean }): Promise<number> {
  const provider = new DockerProvider();
  await provider.ping();
  const removed = await removeLeftovers(provider.docker, { all: flags.all });
  process.stdout.write(`removed ${removed} container(s)\n`);
  return EXIT.ok;
}
