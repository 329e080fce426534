import { DockerProvider } from '../docker/provider.js';
import type { Backend } from '../registry.js';

/** The local Docker engine (DOCKER_HOST or /var/run/docker.sock): the default with no --engine. */
export const dockerBackend: Backend = {
  name: 'docker',
  takesEngines: false,
  create: (options) => new DockerProvider({ buildNetwork: options.buildNetwork, ...options.docker }),
};
