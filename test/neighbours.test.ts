import { onEachDockerExecPath } from './helpers.js';
import { neighbourAttacks } from './support/neighbour-suite.js';

// The verifier's neighbours (the agent's processes left running) against the Docker backend: in
// full through the helper shell (which lets go of its shell while processes are held), the smoke
// subset through engine exec (the hold itself is the same code on both paths).
onEachDockerExecPath('smoke', (label, provider, coverage) => neighbourAttacks(label, provider, coverage));
