import { DockerProvider } from './docker/provider.js';
import { parseEngineFlag, type EngineSpec } from './pool/engine-spec.js';
import { EnginePool, type EnginePoolOptions } from './pool/provider.js';
import type { SandboxProvider } from './sandbox.js';

/** What the commands need of Docker-backed providers beyond sandboxes: a ping with warnings, a network check. */
export interface EngineProvider extends SandboxProvider {
  /** Throws when no engine answers; returns a warning per engine that does not. */
  ping(): Promise<string[]>;
  checkNetwork(name: string): Promise<void>;
}

/** The provider for a list of engines: the local engine when none is given, else a pool of them. */
export function providerFor(engines: EngineSpec[] | undefined, options: EnginePoolOptions = {}): EngineProvider {
  return engines?.length ? new EnginePool(engines, options) : new DockerProvider({ buildNetwork: options.buildNetwork });
}

/** Engines from repeated `--engine` flags (undefined when none was given). */
export function enginesFromFlags(flags: string[] | undefined): EngineSpec[] | undefined {
  return flags?.length ? flags.map(parseEngineFlag) : undefined;
}
