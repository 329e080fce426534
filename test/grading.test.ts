import { onDockerExecPath } from './helpers.js';
import { gradingAttacks, gradingAttacksWithTools } from './support/attack-suite.js';

// The attack suite against the Docker backend through its helper shell (the engine-exec path has a
// file of its own, grading-engine-exec.test.ts, so the two run side by side).
onDockerExecPath('helper shell', (label, provider) => {
  gradingAttacks(label, provider);
  gradingAttacksWithTools(label, provider);
});
