import { onEachDockerExecPath } from './helpers.js';
import { neighbourAttacks } from './support/neighbour-suite.js';

// The verifier's neighbours (the agent's processes left running) against the Docker backend, on
// both of its command paths.
onEachDockerExecPath((label, provider) => neighbourAttacks(label, provider));
