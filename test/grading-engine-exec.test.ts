import { onDockerExecPath } from './helpers.js';
import { gradingAttacks, gradingAttacksWithTools } from './support/attack-suite.js';

// The attack suite's smoke subset with every command through a new engine exec: the attacks meet
// this path's own code only through exec (the sandbox suite runs it in full on both paths) and the
// change scan (the flood, the replaced program); grading-bounds.test.ts runs the snapshot's reads
// in full on both paths.
onDockerExecPath('engine exec', 'smoke', (label, provider, coverage) => {
  gradingAttacks(label, provider, coverage);
  gradingAttacksWithTools(label, provider, coverage);
});
