import type { Sandbox } from '../sandbox/sandbox.js';
import type { ProtectionRecord } from '../verifier/protection.js';
import { mutant, sourceKind } from './mutants.js';
import { hackCandidates } from './probe-logic.js';
import type { Finding } from './probes.js';

/** Source files tried per task, candidates read to find them, and the largest file rewritten. */
const MAX_TARGETS = 3;
const MAX_READ = 20;
const MAX_BYTES = 256 * 1024;
// Under /var/tmp: never an output, and outside what the tampering scan judges.
const KEEP = '/var/tmp/.termgrade-text-keep';
const STAGED = '/var/tmp/.termgrade-text';

async function run(s: Sandbox, script: string, ...args: string[]): Promise<void> {
  const r = await s.exec(['sh', '-c', script, 'termgrade-text', ...args], { timeoutSec: 120 });
  if (r.exitCode !== 0)
    throw new Error(`text probe: \`${script}\` failed in the sandbox: ${r.stderr.text.trim() || `exit ${r.exitCode}`}`);
}

/**
 * weak_tests by tests that read code instead of running it: in the oracle's final state `s`, each
 * source file among the outputs the tests touched (admission's record; every output without one)
 * is rewritten with its text kept and its behaviour removed (mutants.ts), and graded. Tests that
 * import, run or build it fail; if they still pass, the file is removed and graded again: when its
 * absence fails them, the tests read it and judge its text alone (rejected, the mutant shown); when
 * not, they do not look at it at all and nothing is proven. Each file is restored after.
 */
export async function textOnlyTests(
  s: Sandbox,
  outputs: string[],
  record: ProtectionRecord | null,
  grade: (s: Sandbox) => Promise<{ passed: boolean; reward: number | null; tests: string }>,
): Promise<Finding[]> {
  let tried = 0;
  for (const file of hackCandidates(outputs, record).slice(0, MAX_READ)) {
    if (tried >= MAX_TARGETS) break;
    const body = await s.readFile(file, MAX_BYTES + 1);
    if (!body || body.length > MAX_BYTES || body.includes(0)) continue;
    const text = body.toString('utf8');
    const kind = sourceKind(file, text);
    if (!kind) continue;
    tried += 1;
    const m = mutant(kind, text);
    await run(s, 'cp -a -- "$1" "$2"', file, KEEP);
    try {
      await s.putFiles([{ path: STAGED, content: m.content }]);
      // Written through the file itself: its owner and mode stay the oracle's.
      await run(s, 'cat "$1" > "$2"', STAGED, file);
      const g = await grade(s);
      if (!g.passed) continue;
      await run(s, 'rm -f -- "$1"', file);
      const gone = await grade(s);
      if (gone.passed) continue; // the tests never look at this file
      return [
        {
          probe: 'weak_tests',
          rejects: true,
          did: `kept every line of ${file} (${kind}) and removed its behaviour by adding one line: \`${m.added}\`, then graded it (and, as the control, graded it with the file removed)`,
          saw: `every test still passes (${g.tests || `reward ${g.reward}`}) though any use of the file now fails, while removing it fails them (${gone.tests || `reward ${gone.reward}`}): the tests read its text and never run it`,
        },
      ];
    } finally {
      await run(s, 'cp -a -- "$1" "$2" && rm -f -- "$1" "$3"', KEEP, file, STAGED);
    }
  }
  return [];
}
