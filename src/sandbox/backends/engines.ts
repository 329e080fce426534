import { EnginePool } from '../pool/provider.js';
import type { Backend } from '../registry.js';

/** A pool of Docker engines (local sockets, TLS, SSH), each with a capacity: the default with --engine. */
export const enginesBackend: Backend = {
  name: 'engines',
  takesEngines: true,
  create: (options) =>
    new EnginePool(options.engines, {
      buildNetwork: options.buildNetwork,
      onEvent: options.onEvent,
      docker: options.docker,
    }),
};
