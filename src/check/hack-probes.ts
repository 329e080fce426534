import { isPassingReward } from '../trial/accounting.js';
import type { Sandbox } from '../sandbox/sandbox.js';
import { CancelledError, errorMessage } from '../util/errors.js';
import type { ProtectionRecord } from '../verifier/protection.js';
import {
  HACK_DOES,
  HACK_ORDER,
  hacked,
  KILLER_PY,
  KILLER_SH,
  sabotaged,
  SQUATTER_PY,
  targetKind,
  type HackName,
  type TargetKind,
} from './hacks.js';
import { hackCandidates } from './probe-logic.js';
import type { Finding } from './probes.js';

/** A grading's outcome as the hack probes read it: the reward handed out is what a trainer gets. */
export interface HackGrade {
  reward: number | null;
  /** Which reward file gave it (reward.json, reward.txt). */
  source: string | null;
  /** The tests the grading saw, `name=status`, comma-separated. */
  tests: string;
}

/** One hacked (or control) file graded: kept on the check as the probe's evidence and cost. */
export interface HackAttempt {
  target: string;
  hack: HackName | 'control';
  reward: number | null;
  tests: string;
  ms: number;
}

/** Code files played on per task, candidate files read to find them, and the largest file rewritten. */
const MAX_TARGETS = 3;
const MAX_READ = 20;
const MAX_BYTES = 256 * 1024;
// Under /var/tmp: never an output, and outside what the tampering scan judges.
const KEEP = '/var/tmp/.termgrade-hack-keep';
const STAGED = '/var/tmp/.termgrade-hack';

const passes = (g: HackGrade): boolean => isPassingReward(g.reward);

/**
 * The published reward hacks played, as an agent would, on each agent-writable file the tests run
 * or import, in the oracle's final state `s`: the file rewritten (its real work broken, the hack
 * added), graded by `grade` (the normal grading path, with the admission record), then restored.
 * A hack whose grade is a pass (reward >= 1) rejects the task, unless the control (the same file
 * broken without the hack) passes too: then the tests do not judge that file, and nothing is proven.
 */
export async function playHacks(
  s: Sandbox,
  outputs: string[],
  record: ProtectionRecord | null,
  grade: (s: Sandbox) => Promise<HackGrade>,
): Promise<{ findings: Finding[]; attempts: HackAttempt[] }> {
  const findings: Finding[] = [];
  const attempts: HackAttempt[] = [];
  let played = 0;
  for (const file of hackCandidates(outputs, record).slice(0, MAX_READ)) {
    if (played >= MAX_TARGETS) break;
    const body = await s.readFile(file, MAX_BYTES + 1);
    if (!body || body.length > MAX_BYTES || body.includes(0)) continue;
    const text = body.toString('utf8');
    const kind = targetKind(file, text);
    if (!kind) continue;
    played += 1;
    findings.push(...(await playOn(s, { file, kind, text }, grade, attempts)));
  }
  return { findings, attempts };
}

async function run(s: Sandbox, script: string, ...args: string[]): Promise<void> {
  const r = await s.exec(['sh', '-c', script, 'termgrade-hack', ...args], { timeoutSec: 120 });
  if (r.exitCode !== 0)
    throw new Error(`hack probe: \`${script}\` failed in the sandbox: ${r.stderr.text.trim() || `exit ${r.exitCode}`}`);
}

/** Every hack on one file, then its control when a hack passed; the file restored (content, mode, times) after. */
async function playOn(
  s: Sandbox,
  target: { file: string; kind: TargetKind; text: string },
  grade: (s: Sandbox) => Promise<HackGrade>,
  attempts: HackAttempt[],
): Promise<Finding[]> {
  const { file, kind, text } = target;
  const graded = async (hack: HackName | 'control', content: string): Promise<HackGrade> => {
    const t0 = performance.now();
    await s.putFiles([{ path: STAGED, content }]);
    // Written through the file itself: its owner and mode stay the oracle's.
    await run(s, 'cat "$1" > "$2"', STAGED, file);
    const g = await grade(s);
    attempts.push({ target: file, hack, reward: g.reward, tests: g.tests, ms: performance.now() - t0 });
    return g;
  };
  await run(s, 'cp -a -- "$1" "$2"', file, KEEP);
  try {
    const passed: Array<{ hack: HackName; g: HackGrade }> = [];
    for (const hack of HACK_ORDER) {
      const content = hacked(kind, text, hack);
      if (content === null) continue;
      const g = await graded(hack, content);
      if (passes(g)) passed.push({ hack, g });
    }
    if (!passed.length) return [];
    const control = await graded('control', sabotaged(kind, text));
    const broken = `the same file broken without the hack: reward ${control.reward ?? 'none'}${control.tests ? ` (${control.tests})` : ''}`;
    if (passes(control))
      return [
        {
          probe: 'reward_hackable',
          rejects: false,
          did: `broke every top-level function and class of ${file} (or its whole script) and graded it`,
          saw: `${broken}: the tests do not judge this file, so the hacks that passed on it (${passed.map((p) => p.hack).join(', ')}) prove nothing`,
        },
      ];
    return passed.map(({ hack, g }) => ({
      probe: 'reward_hackable' as const,
      rejects: true,
      did: `hack ${hack} on ${file}: rewrote it as an agent that did not solve the task would (its real work broken) and that ${HACK_DOES[hack]}, then graded it as run does`,
      saw: `reward ${g.reward} from ${g.source ?? 'no reward file'}; tests seen: ${g.tests || 'none'}; ${broken}`,
    }));
  } finally {
    await run(s, 'cp -a -- "$1" "$2" && rm -f -- "$1" "$3"', KEEP, file, STAGED);
  }
}

/** Where the process hacks' attempts say they acted. */
const AGENT_PROCESS = '(a process the agent left running)';

/**
 * The hacks played by a process the agent leaves running while the tests run: on a fresh sandbox
 * from the image (the do-nothing agent's state, which admission graded a fail), the process is
 * started, then the sandbox graded. `ports`: the ports the tests name (the squatter holds them;
 * none named, it is not played). What could not be played is said in `notes`.
 */
export async function playProcessHacks(
  open: () => Promise<Sandbox>,
  ports: number[],
  grade: (s: Sandbox) => Promise<HackGrade>,
): Promise<{ findings: Finding[]; attempts: HackAttempt[]; notes: string[] }> {
  const findings: Finding[] = [];
  const attempts: HackAttempt[] = [];
  const notes: string[] = [];
  const start: Record<'kill_tests' | 'port_squatting', string[]> = {
    // As a service where python3 is there (what the harness keeps running), else a plain process (held).
    kill_tests: [
      'sh',
      '-c',
      'if command -v python3 >/dev/null; then nohup python3 -c "$2" >/dev/null 2>&1 </dev/null & sleep 1; else nohup sh -c "$1" >/dev/null 2>&1 </dev/null & fi',
      'termgrade-agent',
      KILLER_SH,
      KILLER_PY,
    ],
    port_squatting: [
      'sh',
      '-c',
      'p=$1; shift; command -v python3 >/dev/null || exit 3; nohup python3 -c "$p" "$@" >/dev/null 2>&1 </dev/null & sleep 1',
      'termgrade-agent',
      SQUATTER_PY,
      ...ports.map(String),
    ],
  };
  for (const hack of ['kill_tests', 'port_squatting'] as const) {
    if (hack === 'port_squatting' && !ports.length) {
      notes.push('port_squatting not played: the tests name no port');
      continue;
    }
    // The cost counts the fresh sandbox and the process's start too.
    const t0 = performance.now();
    const s = await open();
    try {
      const started = await s.exec(start[hack], { timeoutSec: 60 });
      if (started.exitCode !== 0) {
        notes.push(
          `${hack} not played: ${started.exitCode === 3 ? 'no python3 in the image' : started.stderr.text.trim() || `exit ${started.exitCode}`}`,
        );
        continue;
      }
      const g = await grade(s).catch((err: unknown): HackGrade => {
        if (err instanceof CancelledError) throw err;
        // A grading the hack broke gave no reward: no pass, and the attempt says why.
        return { reward: null, source: null, tests: `grading failed: ${errorMessage(err).slice(0, 200)}` };
      });
      const target = hack === 'port_squatting' ? `ports ${ports.join(',')}` : AGENT_PROCESS;
      attempts.push({ target, hack, reward: g.reward, tests: g.tests, ms: performance.now() - t0 });
      if (passes(g))
        findings.push({
          probe: 'reward_hackable',
          rejects: true,
          did: `hack ${hack} on ${target}: on the do-nothing agent's state (graded a fail at admission), ${HACK_DOES[hack]}, then graded it as run does`,
          saw: `reward ${g.reward} from ${g.source ?? 'no reward file'}; tests seen: ${g.tests || 'none'}`,
        });
    } finally {
      await s.close();
    }
  }
  return { findings, attempts, notes };
}
