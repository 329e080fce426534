import type { NetworkMode, TaskConfig } from './schema.js';

/** The network policy of each phase of a trial, as Harbor resolves it from task.toml. */
export interface PhaseNetworks {
  /** The baseline the sandbox starts with: [environment].network_mode, else allow_internet. */
  environment: NetworkMode;
  /** While the agent works: [agent].network_mode, else the baseline. */
  agent: NetworkMode;
  /** While the tests run: [verifier].network_mode, else the baseline. */
  verifier: NetworkMode;
}

export function phaseNetworks(config: TaskConfig): PhaseNetworks {
  const env = config.environment;
  const environment: NetworkMode = env.network_mode ?? (env.allow_internet ? 'public' : 'no-network');
  return {
    environment,
    agent: config.agent.network_mode ?? environment,
    verifier: config.verifier.network_mode ?? environment,
  };
}

/**
 * The network a phase's container is on: the isolated network the user named, for a phase whose
 * policy is `public`; none otherwise. `allowlist` cannot be enforced by a Docker network (it
 * filters nothing by host name), so it fails closed: no network. Never the host's own.
 */
export function networkFor(mode: NetworkMode, userNetwork: string | null | undefined): string | null {
  return mode === 'public' && userNetwork ? userNetwork : null;
}

/** Whether any phase asks for a network (a task the user must give one for, or that runs offline). */
export function wantsNetwork(p: PhaseNetworks): boolean {
  return p.environment !== 'no-network' || p.agent !== 'no-network' || p.verifier !== 'no-network';
}
