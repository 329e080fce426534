import { parseEngineFlag, type EngineSpec } from './pool/engine-spec.js';
import type { EnginePoolOptions } from './pool/provider.js';
import { createProvider } from './registry.js';
import type { SandboxProvider } from './sandbox.js';

/** The provider for a list of engines: the local engine when none is given, else a pool of them (see registry.ts). */
export function providerFor(engines: EngineSpec[] | undefined, options: EnginePoolOptions = {}): SandboxProvider {
  return createProvider({
    engines: engines ?? [],
    buildNetwork: options.buildNetwork,
    onEvent: options.onEvent,
    docker: options.docker,
  });
}

/** Engines from repeated `--engine` flags (undefined when none was given). */
export function enginesFromFlags(flags: string[] | undefined): EngineSpec[] | undefined {
  return flags?.length ? flags.map(parseEngineFlag) : undefined;
}
