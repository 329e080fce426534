import type { SandboxProvider } from '../sandbox/sandbox.js';

/** Exit codes live beside the error codes that map to them (util/errors.ts); the CLI imports them from here. */
import { EXIT } from '../util/errors.js';
export { EXIT };

/**
 * Turns Ctrl-C / SIGTERM into an aborted signal so running trials stop and tear down, and removes
 * every open sandbox right away as well. A second signal exits at once (sandboxes still removed).
 * Returns the exit code to use if the run ends because of a signal, and a disposer.
 */
export function handleSignals(
  provider: SandboxProvider,
  log: (msg: string) => void,
): {
  signal: AbortSignal;
  exitCode: () => number | null;
  dispose: () => void;
} {
  const ctl = new AbortController();
  let code: number | null = null;
  const onSignal = (name: NodeJS.Signals): void => {
    const exit = name === 'SIGINT' ? EXIT.sigint : EXIT.sigterm;
    if (code !== null) {
      log(`${name} again: removing sandboxes and exiting now`);
      void provider.closeAll().finally(() => process.exit(exit));
      return;
    }
    code = exit;
    log(`${name}: stopping; removing sandboxes (send again to exit at once)`);
    ctl.abort();
    void provider.closeAll();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return {
    signal: ctl.signal,
    exitCode: () => code,
    dispose: () => {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    },
  };
}
