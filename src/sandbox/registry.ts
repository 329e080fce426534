import { z } from 'zod';
import { TermgradeError } from '../util/errors.js';
import { importModule } from '../util/modules.js';
import { completeProvider, type BackendProvider } from './backend.js';
import { dockerBackend } from './backends/docker.js';
import { enginesBackend } from './backends/engines.js';
import type { BuildNetwork } from './docker/build-network.js';
import type { PoolEvent, EnginePoolOptions } from './pool/provider.js';
import type { EngineSpec } from './pool/engine-spec.js';
import type { SandboxProvider } from './sandbox.js';

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
 * One sandbox backend, as termgrade finds it by name. The bundled ones are files in
 * sandbox/backends/; one from outside the package is registered with registerBackend, or loaded
 * with `--backend-module` (a module whose default export is a Backend). `termgrade selfcheck
 * --backend NAME` then checks it against the contract.
 */
export interface Backend {
  /** The name users type (`--backend NAME`). */
  readonly name: string;
  /** Whether it is the backend chosen when engines are given (--engine): one backend says so. */
  readonly takesEngines?: boolean;
  /** Makes the provider (the least it gives: see BackendProvider); throws TermgradeError `usage` for options it cannot serve. */
  create(options: BackendOptions): BackendProvider | SandboxProvider;
}

const registry = new Map<string, Backend>();
const BUNDLED = [dockerBackend, enginesBackend];

/** Makes a backend known by its name (a later backend of the same name replaces the earlier; a bundled one's name is refused). */
export function registerBackend(backend: Backend): void {
  const bundled = BUNDLED.find((b) => b.name === backend.name);
  if (bundled && bundled !== backend)
    throw new TermgradeError('usage', `backend "${backend.name}" is a bundled backend's name; choose another`);
  registry.set(backend.name, backend);
}

for (const b of BUNDLED) registerBackend(b);

/** Every registered backend, bundled and loaded. */
export function knownBackends(): Backend[] {
  return [...registry.values()];
}

/** The backend called `name`; `usage` error naming the known ones otherwise. */
export function backendNamed(name: string): Backend {
  const found = registry.get(name);
  if (!found)
    throw new TermgradeError(
      'usage',
      `--backend ${name}: no such backend (known: ${[...registry.keys()].join(', ')}; one from outside is loaded with --backend-module)`,
    );
  return found;
}

const BackendShape = z.object({
  name: z.string().regex(/^[A-Za-z0-9._-]+$/, 'letters, digits, dot, dash and underscore only'),
  takesEngines: z.boolean().optional(),
  create: z.custom<Backend['create']>((v) => typeof v === 'function', 'must be a function (options) => provider'),
});

/**
 * Loads a backend module from outside the package (a path or a package name) and registers the
 * Backend it exports (default export, or a named `backend`). Returns its name. Errors name the
 * module and what is wrong with it.
 */
export async function loadBackendModule(spec: string, from = process.cwd()): Promise<string> {
  const mod = await importModule(spec, from, 'backend');
  const candidate = mod.default ?? mod.backend;
  const parsed = BackendShape.safeParse(candidate);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new TermgradeError(
      'usage',
      `backend module ${spec}: its default export must be a backend { name, create(options) }${issue.path.length ? `; ${issue.path.join('.')}: ${issue.message}` : ''}`,
    );
  }
  if (BUNDLED.some((b) => b.name === parsed.data.name))
    throw new TermgradeError(
      'usage',
      `backend module ${spec}: the name "${parsed.data.name}" is a bundled backend's; choose another`,
    );
  registerBackend(candidate as Backend);
  return parsed.data.name;
}

/**
 * The provider for a command: the named backend, else the one that takes engines when engines are
 * given, else the local Docker engine. Completed with the contract's defaults (see backend.ts).
 */
export function createProvider(options: BackendOptions & { backend?: string }): SandboxProvider {
  const { backend, ...rest } = options;
  const chosen = backend ? backendNamed(backend) : rest.engines.length > 0 ? enginesBackend : dockerBackend;
  if (rest.engines.length && !chosen.takesEngines)
    throw new TermgradeError('usage', `--engine is not used by the ${chosen.name} backend`);
  return completeProvider(chosen.create(rest));
}
