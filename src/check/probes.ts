import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { Sandbox, SandboxProvider } from '../sandbox/sandbox.js';
import type { Task } from '../task/task.js';
import { readTextIfThere } from '../util/files.js';
import { walk } from '../util/walk.js';
import { parseRewardFiles } from '../verifier/reward.js';
import { verify, TESTS_DIR, VERIFIER_LOGS } from '../verifier/verify.js';
import { instructionLeak, isOutputPath, keepsFinalState, splitCommands } from './probe-logic.js';
import { DEFAULT_START_TIMEOUT_SEC, startSandbox } from '../sandbox/start.js';

/**
 * check's probes: each proves a weakness of a task by executing it, never by reading alone.
 * - reward_forgeable: an agent that only writes success into the verifier's places passes.
 * - solution_leaked: the image (or the instruction) already holds the solution or its outputs.
 * - verifier_nondeterministic: the same final state verified twice grades differently.
 * - weak_tests (all): a damaged output or a strict prefix of the solution passes every test.
 * (`duplicate` compares tasks with each other: see checkTasks.)
 */
export type ProbeLevel = 'none' | 'fast' | 'all';
export type ProbeCode = 'reward_forgeable' | 'solution_leaked' | 'weak_tests' | 'verifier_nondeterministic' | 'duplicate';

export interface Finding {
  probe: ProbeCode;
  /** What the probe did. */
  did: string;
  /** What it saw: the evidence. */
  saw: string;
}

interface Graded {
  passed: boolean;
  reward: number | null;
  tests: string;
}

// Distinctive bytes, so a reward file still holding them is known not to be the verifier's.
const PLANTED_TXT = '1.000000\n';
const PLANTED_JSON = '{"reward": 1.0, "planted_by": "termgrade-probe"}\n';

export class TaskProber {
  private n = 0;

  constructor(
    private readonly task: Task,
    private readonly provider: SandboxProvider,
    private readonly logsDir: string,
    private readonly signal?: AbortSignal,
  ) {}

  private async sandbox(): Promise<Sandbox> {
    const prepared = await this.provider.prepare(this.task, { signal: this.signal });
    return startSandbox(this.provider, this.task, prepared, { deadlineMs: DEFAULT_START_TIMEOUT_SEC * 1000, signal: this.signal });
  }

  /** The reference solution (or its first `commands` top-level commands) run in the sandbox. */
  private async solve(s: Sandbox, commands?: number): Promise<void> {
    await s.copyIn(this.task.solutionDir!, '/solution');
    let entry = '/solution/solve.sh';
    if (commands !== undefined) {
      const script = await readFile(path.join(this.task.solutionDir!, 'solve.sh'), 'utf8');
      const shebang = script.startsWith('#!') ? `${script.split('\n')[0]}\n` : '#!/bin/bash\n';
      await s.putFiles([{ path: '/solution/.termgrade-prefix.sh', content: `${shebang}${splitCommands(script).slice(0, commands).join('\n')}\n`, mode: 0o755 }]);
      entry = '/solution/.termgrade-prefix.sh';
    }
    await s.exec(['bash', entry], { env: this.task.config.solution.env, timeoutSec: this.task.config.agent.timeout_sec, signal: this.signal, cwd: this.task.config.environment.workdir });
  }

  /** Output files of the sandbox's current state (changed or added since the image), with content hashes. */
  private async finalState(s: Sandbox): Promise<Map<string, string>> {
    const paths = (await s.changes()).filter((c) => c.kind !== 'deleted' && isOutputPath(c.path)).map((c) => c.path).slice(0, 500);
    const state = new Map<string, string>();
    if (!paths.length) return state;
    const r = await s.exec(['sh', '-c', 'for f; do if [ -f "$f" ] && [ ! -L "$f" ]; then sha256sum "$f"; fi; done', 'termgrade-hash', ...paths], { maxOutputBytes: 4 * 1024 * 1024 });
    for (const line of r.stdout.text.split('\n')) {
      const m = /^([0-9a-f]{64}) {2}(.+)$/.exec(line);
      if (m) state.set(m[2]!, m[1]!);
    }
    return state;
  }

  /** The task's verifier with every protection, as `run` grades. */
  private async grade(s: Sandbox): Promise<Graded> {
    const v = await verify(s, this.task, { hostLogsDir: path.join(this.logsDir, `grade-${++this.n}`), signal: this.signal });
    return { passed: v.reward !== null && v.reward >= 1 && v.tests.every((t) => t.status === 'passed' || t.status === 'skipped'), reward: v.reward, tests: v.tests.map((t) => `${t.name}=${t.status}`).join(',') };
  }

  /**
   * `rewardFile`: the file this task's verifier writes (seen on an honest run); only it is read,
   * so a file the verifier never writes, planted or not, is a matter for the harness, not the task.
   */
  async forgeable(rewardFile: 'reward.json' | 'reward.txt'): Promise<Finding | null> {
    const s = await this.sandbox();
    try {
      // The forger: success written into every place a verifier reads, nothing else.
      await s.putFiles([
        { path: `${VERIFIER_LOGS}/reward.txt`, content: PLANTED_TXT },
        { path: `${VERIFIER_LOGS}/reward.json`, content: PLANTED_JSON },
        { path: `${TESTS_DIR}/.termgrade-planted`, content: 'planted by the forger probe\n' },
      ]);
      // Graded as a harness without termgrade's protections would (the task's own test.sh decides):
      // the tests copied over what is there, nothing emptied. If the file the verifier writes still
      // says 1 afterwards (planted and left standing, or written 1), test.sh trusted agent state.
      await s.copyIn(this.task.testsDir, TESTS_DIR);
      await s.exec(`bash ${TESTS_DIR}/test.sh > ${VERIFIER_LOGS}/test-stdout.txt 2>&1`, { env: this.task.config.verifier.env, timeoutSec: this.task.config.verifier.timeout_sec, signal: this.signal });
      const logs = path.join(this.logsDir, 'forger');
      await s.copyOut(VERIFIER_LOGS, logs, { trusted: true });
      const json = await readTextIfThere(path.join(logs, 'reward.json'));
      const txt = await readTextIfThere(path.join(logs, 'reward.txt'));
      const parsed = rewardFile === 'reward.json' ? parseRewardFiles(json, null) : parseRewardFiles(null, txt);
      if (parsed.ok && parsed.reward >= 1) {
        return { probe: 'reward_forgeable', did: "an agent that only planted reward.txt = 1 and reward.json = 1 in /logs/verifier and a file in /tests, then the task's test.sh as written, with nothing emptied first", saw: `reward ${parsed.reward} from the verifier's ${parsed.source}: test.sh trusts state the agent controls` };
      }
      return null;
    } finally {
      await s.close();
    }
  }

  /** solution_leaked, verifier_nondeterministic and (at level all) weak_tests, from one oracle state. */
  async fromOracle(level: ProbeLevel): Promise<Finding[]> {
    const findings: Finding[] = [];
    const solveScript = await readFile(path.join(this.task.solutionDir!, 'solve.sh'), 'utf8');
    const s = await this.sandbox();
    let full: Map<string, string>;
    try {
      await this.solve(s);
      full = await this.finalState(s);
      const outputs: Array<{ path: string; text: string }> = [];
      for (const p of [...full.keys()].slice(0, 50)) {
        const body = await s.readFile(p, 64 * 1024);
        if (body) outputs.push({ path: p, text: body.toString('utf8') });
      }
      const leakInInstruction = instructionLeak(this.task.instruction, solveScript, outputs);
      if (leakInInstruction) findings.push({ probe: 'solution_leaked', did: "compared the instruction with solve.sh and the oracle's outputs", saw: leakInInstruction });
      const first = await this.grade(s);
      const second = await this.grade(s);
      if (first.reward !== second.reward || first.tests !== second.tests) {
        findings.push({ probe: 'verifier_nondeterministic', did: "verified the oracle's final state twice", saw: `reward ${first.reward} then ${second.reward}; tests ${first.tests || '-'} then ${second.tests || '-'}` });
      }
      if (level === 'all' && first.passed) findings.push(...(await this.damagedOutputs(s, full)));
    } finally {
      await s.close();
    }
    const leak = await this.leakedInImage(full);
    if (leak) findings.push(leak);
    if (level === 'all') {
      const prefix = await this.prefixes(solveScript, full);
      if (prefix) findings.push(prefix);
    }
    return findings;
  }

  /** The image already holds a solution file or an expected output, byte for byte. */
  private async leakedInImage(full: Map<string, string>): Promise<Finding | null> {
    const wanted = new Map<string, string>(); // hash -> what it is
    for (const f of (await walk(this.task.solutionDir!)).filter((e) => e.kind === 'file')) {
      const body = await readFile(f.abs);
      if (body.length >= 32) wanted.set(createHash('sha256').update(body).digest('hex'), `solution/${f.rel}`);
    }
    for (const [p, h] of full) if (!wanted.has(h)) wanted.set(h, `the oracle's output ${p}`);
    const s = await this.sandbox();
    try {
      // Every file of 16 bytes to 1 MiB in the image, outside system folders, hashed in one pass.
      const r = await s.exec(
        ['sh', '-c', 'find / -xdev \\( -path /proc -o -path /sys -o -path /dev -o -path /solution -o -path /tests -o -path /logs -o -path /usr/share -o -path /usr/lib -o -path /var/lib \\) -prune -o -type f -size +15c -size -1048577c -print0 2>/dev/null | xargs -0 -r sha256sum 2>/dev/null'],
        { maxOutputBytes: 32 * 1024 * 1024, timeoutSec: 300, signal: this.signal },
      );
      for (const line of r.stdout.text.split('\n')) {
        const m = /^([0-9a-f]{64}) {2}(.+)$/.exec(line);
        if (!m || !wanted.has(m[1]!)) continue;
        const what = wanted.get(m[1]!)!;
        if (what === `the oracle's output ${m[2]}`) continue; // the same file, as the image had it
        return { probe: 'solution_leaked', did: "hashed the files of the image the agent starts from against solution/ and the oracle's outputs", saw: `${m[2]} in the image is byte-identical to ${what}` };
      }
      return null;
    } finally {
      await s.close();
    }
  }

  /** Each output file the tests read (removing it fails them) emptied, then cut in half: still passing is weak. */
  private async damagedOutputs(s: Sandbox, full: Map<string, string>): Promise<Finding[]> {
    const findings: Finding[] = [];
    for (const file of [...full.keys()].slice(0, 6)) {
      const q = `'${file.replace(/'/g, `'\\''`)}'`;
      const keep = `/var/tmp/.termgrade-keep`;
      await s.exec(['sh', '-c', `cp -a ${q} ${keep} && rm -f ${q}`]);
      const removed = await this.grade(s);
      const restore = async (): Promise<void> => void (await s.exec(['sh', '-c', `cp -a ${keep} ${q}`]));
      await restore();
      if (removed.passed) continue; // the tests do not read this file: no evidence either way
      for (const [how, cmd] of [
        ['emptied', `: > ${q}`],
        ['cut to its first half', `n=$(wc -c < ${q}); head -c $((n / 2)) ${keep} > ${q}`],
      ] as const) {
        await s.exec(['sh', '-c', cmd]);
        const g = await this.grade(s);
        await restore();
        if (g.passed) {
          findings.push({ probe: 'weak_tests', did: `ran the solution, then ${how} ${file} (removing it fails the tests)`, saw: `every test still passes (${g.tests})` });
          return findings;
        }
      }
    }
    return findings;
  }

  /** Strict prefixes of solve.sh: passing while the final state lacks an output of the full solution is weak. */
  private async prefixes(solveScript: string, full: Map<string, string>): Promise<Finding | null> {
    const n = splitCommands(solveScript).length;
    const ks = [...new Set([n - 1, Math.floor((2 * n) / 3), Math.floor(n / 2), Math.floor(n / 3)])].filter((k) => k >= 1 && k < n).sort((a, b) => b - a);
    for (const k of ks) {
      const s = await this.sandbox();
      try {
        await this.solve(s, k);
        const state = await this.finalState(s);
        const g = await this.grade(s);
        if (!g.passed) continue;
        const kept = keepsFinalState(full, state);
        // The commands left out changed no output the full solution ends with: they only cleaned up.
        if (kept.same) continue;
        return { probe: 'weak_tests', did: `ran the first ${k} of solve.sh's ${n} commands`, saw: `every test passes though ${kept.differing.slice(0, 5).join(', ')} ${kept.differing.length === 1 ? 'is' : 'are'} missing or different from the full solution's` };
      } catch {
        // A prefix that cannot even run proves nothing either way; the next one is tried.
      } finally {
        await s.close();
      }
    }
    return null;
  }
}
