import { DockerProvider } from './docker/provider.js';
import { parseEngineFlag, type EngineSpec } from './pool/engine-spec.js';
import { EnginePool, type EnginePoolOptions } from './pool/provider.js';

/** The provider for a list of engines: the local engine when none is given, else a pool of them. */
export function providerFor(engines: EngineSpec[] | undefined, options: EnginePoolOptions = {}): DockerProvider | EnginePool {
  return engines?.length ? new EnginePool(engines, options) : new DockerProvider();
}

/** Engines from repeated `--engine` flags (undefined when none was given). */
export function enginesFromFlags(flags: string[] | undefined): EngineSpec[] | undefined {
  return flags?.length ? flags.map(parseEngineFlag) : undefined;
}
