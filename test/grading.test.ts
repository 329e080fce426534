import { docker, onEachDockerExecPath } from './helpers.js';
import { gradingAttacks } from './support/attack-suite.js';

// The attack suite against the Docker backend, on both of its command paths.
onEachDockerExecPath((label) => gradingAttacks(label, docker));
