import { docker, onDockerExecPath } from './helpers.js';
import { gradingAttacks, gradingAttacksWithTools } from './support/attack-suite.js';

// The attack suite against the Docker backend with every command through a new engine exec.
onDockerExecPath('engine exec', (label) => {
  gradingAttacks(label, docker);
  gradingAttacksWithTools(label, docker);
});
