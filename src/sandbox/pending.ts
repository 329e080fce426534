import type { Sandbox } from './sandbox.js';

/**
 * A sandbox that is still starting, handed to an agent whose first step needs none of it (a model
 * call): every method waits for the start and then acts, so the start hides behind the model's
 * latency. If the start fails, every method rejects with the start's error (the trial records it
 * as the environment's failure, not the agent's).
 */
export function pendingSandbox(starting: Promise<Sandbox>): Sandbox {
  let ready: Sandbox | null = null;
  // Also handles a start that fails before anyone asked (no unhandled rejection; the trial awaits it).
  void starting.then(
    (s) => (ready = s),
    () => undefined,
  );
  const later =
    (name: keyof Sandbox) =>
    async (...args: unknown[]): Promise<unknown> => {
      const s = await starting;
      return (s[name] as (...a: unknown[]) => Promise<unknown>).apply(s, args);
    };
  return {
    get id() {
      return ready?.id ?? 'starting';
    },
    get engine() {
      return ready?.engine;
    },
    exec: later('exec') as Sandbox['exec'],
    shell: later('shell') as Sandbox['shell'],
    copyIn: later('copyIn') as Sandbox['copyIn'],
    putFiles: later('putFiles') as Sandbox['putFiles'],
    copyOut: later('copyOut') as Sandbox['copyOut'],
    readFile: later('readFile') as Sandbox['readFile'],
    changes: later('changes') as Sandbox['changes'],
    diskUsage: later('diskUsage') as Sandbox['diskUsage'],
    snapshot: later('snapshot') as Sandbox['snapshot'],
    stop: later('stop') as Sandbox['stop'],
    setNetwork: later('setNetwork') as Sandbox['setNetwork'],
    // Closing a sandbox whose start failed has nothing to remove.
    close: () =>
      starting.then(
        (s) => s.close(),
        () => undefined,
      ),
  };
}
