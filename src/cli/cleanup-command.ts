import { EXIT } from './signals.js';
import { enginesFromFlags } from '../sandbox/pool/engine-spec.js';
import { createProvider } from '../sandbox/registry.js';

export async function cleanupCommand(flags: { all?: boolean; engine?: string[] }): Promise<number> {
  const provider = createProvider({ engines: enginesFromFlags(flags.engine) ?? [] });
  for (const w of await provider.ping()) process.stderr.write(`termgrade: warning: ${w}\n`);
  const removed = await provider.cleanup({ all: flags.all });
  process.stdout.write(`removed ${removed} container(s)\n`);
  return EXIT.ok;
}
