import { createProvider, loadBackendModule } from '../sandbox/registry.js';
import { selfcheck } from '../selfcheck/selfcheck.js';
import { EXIT } from './signals.js';
import { enginesFromFlags } from '../sandbox/pool/engine-spec.js';

/** The Sandbox contract's checks against a backend, one line per check; exit 1 on any failure. */
export async function selfcheckCommand(flags: {
  engine?: string[];
  backend?: string;
  backendModule?: string;
  image?: string;
  only?: string[];
  json?: boolean;
}): Promise<number> {
  const loaded = flags.backendModule ? await loadBackendModule(flags.backendModule) : undefined;
  const backend = flags.backend ?? loaded;
  const provider = createProvider({ backend, engines: enginesFromFlags(flags.engine) ?? [] });
  try {
    for (const w of await provider.ping()) process.stderr.write(`termgrade: warning: ${w}\n`);
    const report = await selfcheck(provider, {
      image: flags.image,
      only: flags.only,
      onResult: (r) => {
        if (!flags.json)
          process.stdout.write(
            `${r.status.toUpperCase().padEnd(4)}  ${r.name}${r.detail ? `: ${r.detail}` : ''}${r.status === 'skip' ? '' : ` (${r.ms} ms)`}\n`,
          );
      },
    });
    if (flags.json) process.stdout.write(`${JSON.stringify(report)}\n`);
    else {
      const count = (s: string): number => report.results.filter((r) => r.status === s).length;
      process.stdout.write(
        `${report.provider}: ${count('pass')} passed, ${count('fail')} failed, ${count('skip')} skipped\n`,
      );
    }
    return report.ok ? EXIT.ok : EXIT.rejected;
  } finally {
    await provider.closeAll();
  }
}
