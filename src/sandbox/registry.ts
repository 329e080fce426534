import { TermgradeError } from '../util/errors.js';
import { dockerBackend } from './backends/docker.js';
import { enginesBackend } from './backends/engines.js';
import type { BuildNetwork } from './docker/build-network.js';
import type { PoolEvent, EnginePoolOptions } from './pool/provider.js';
import type { EngineSpec } from './pool/engine-spec.js';
import type { ProviderCapabilities, SandboxProvider } from './sandbox.js';

/** What every command hands a backend's factory; a backend reads what applies to it. */
export interface BackendOptions {
  /** Engines from --engine flags or a job file (empty when none was given). */
  engines: EngineSpec[];
  /** The network image builds run on (see build-network.ts). */
  buildNetwork?: BuildNetwork;
  /** What a pool says as it works (an engine lost or back). */
  onEvent?: (e: PoolEvent) => void;
  /** Docker-specific switches (how commands reach containers, a forced builder): tests and operators. */
  docker?: EnginePoolOptions['docker'];
}

/**
 * One sandbox backend. Adding one is a file in sandbox/backends/ exporting a Backend, and its line
 * in BACKENDS below; `termgrade selfcheck --backend NAME` then checks it against the contract.
 */
export interface Backend {
  readonly name: string;
  /** One line for `termgrade selfcheck --help` and error messages. */
  readonly description: string;
  readonly capabilities: ProviderCapabilities;
  /** Whether it is the backend chosen when engines are given (--engine): one backend says so. */
  readonly takesEngines: boolean;
  /** Makes the provider; throws TermgradeError `usage` for options it cannot serve. */
  create(options: BackendOptions): SandboxProvider;
}

/** Every backend, by name. */
export const BACKENDS: readonly Backend[] = [dockerBackend, enginesBackend];

/** The backend called `name`; `usage` error naming the known ones otherwise. */
export function backendNamed(name: string): Backend {
  const found = BACKENDS.find((b) => b.name === name);
  if (!found)
    throw new TermgradeError(
      'usage',
      `--backend ${name}: no such backend (known: ${BACKENDS.map((b) => b.name).join(', ')})`,
    );
  return found;
}

/**
 * The provider for a command: the named backend, else the one that takes engines when engines are
 * given, else the local Docker engine.
 */
export function createProvider(options: BackendOptions & { backend?: string }): SandboxProvider {
  const { backend, ...rest } = options;
  const chosen = backend ? backendNamed(backend) : BACKENDS.find((b) => b.takesEngines === rest.engines.length > 0)!;
  if (rest.engines.length && !chosen.takesEngines)
    throw new TermgradeError('usage', `--engine is not used by the ${chosen.name} backend`);
  return chosen.create(rest);
}
