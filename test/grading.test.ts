import { onDockerExecPath } from './helpers.js';
import { gradingAttacks, gradingAttacksWithTools } from './support/attack-suite.js';

// The attack suite in full against the Docker backend through its helper shell (the engine-exec
// path has a file of its own, grading-engine-exec.test.ts, so the two run side by side).
onDockerExecPath('helper shell', 'full', (label, provider, coverage) => {
  gradingAttacks(label, provider, coverage);
  gradingAttacksWithTools(label, provider, coverage);
});
