import { onDockerExecPath } from './helpers.js';
import { gradingAttacks, gradingAttacksWithTools } from './support/attack-suite.js';

// The attack suite against the Docker backend with every command through a new engine exec.
onDockerExecPath('engine exec', (label, provider) => {
  gradingAttacks(label, provider);
  gradingAttacksWithTools(label, provider);
});
