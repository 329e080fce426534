import { isPassingReward } from '../trial/accounting.js';
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { Sandbox, SandboxProvider } from '../sandbox/sandbox.js';
import type { Task } from '../task/task.js';
import { readTextIfThere } from '../util/files.js';
import { walk } from '../util/walk.js';
import { parseRewardFiles } from '../verifier/reward.js';
import { TESTS_DIR, VERIFIER_LOGS } from '../verifier/verify.js';
import { gradeAgentSandbox } from '../trial/phases/verification.js';
import {
  instructionLeak,
  isOutputPath,
  keepsFinalState,
  leakPlacements,
  splitCommands,
  testPorts,
} from './probe-logic.js';
import { textOnlyTests } from './text-probe.js';
import { classifySources, solutionReads, type LeakSource, type SolutionReads } from './leak-trace.js';
import { acquireSandbox } from '../sandbox/lease.js';
import type { ProtectionRecord } from '../verifier/protection.js';
import { playHacks, playProcessHacks, type HackAttempt } from './hack-probes.js';
import { isCleanPass } from './verdict.js';
import { CancelledError, TermgradeError, errorMessage, isEngineLost } from '../util/errors.js';
import { causeOf, log } from '../util/log.js';

/** Text less trailing whitespace: how most checkers compare (strip()). */
const trimEnd = (text: string): string => text.replace(/[ \t\r\n]+$/, '');
const sha256 = (text: string): string => createHash('sha256').update(text, 'latin1').digest('hex');

/** What the leak scan leaves out: the kernel's and the harness's folders, and system data. */
const SCAN_PRUNE =
  '-path /proc -o -path /sys -o -path /dev -o -path /solution -o -path /tests -o -path /logs -o -path /usr/share -o -path /usr/lib -o -path /var/lib';

const quote = (p: string): string => `'${p.replace(/'/g, `'\\''`)}'`;

/**
 * check's probes: each proves a weakness of a task by executing it, never by reading alone.
 * - reward_forgeable: an agent that only writes success into the verifier's places passes.
 * - solution_leaked: the outputs copied from where the image already holds them pass the tests.
 * - verifier_nondeterministic: two fresh copies of the oracle's final state grade differently.
 * A probe rejects only what execution confirmed; what it saw short of that is a warning.
 * - weak_tests (all): a damaged output, a source file with its text kept and its behaviour removed,
 *   or a strict prefix of the solution passes every test.
 * - reward_hackable (all): a published reward hack played on a file the tests run or import
 *   (os._exit(0), always-equal values, pytest report patching, reward files written) is graded a pass.
 * (`duplicate` compares tasks with each other: see checkTasks.)
 */
export type ProbeLevel = 'none' | 'fast' | 'all';
export type ProbeCode =
  'reward_forgeable' | 'solution_leaked' | 'weak_tests' | 'verifier_nondeterministic' | 'reward_hackable' | 'duplicate';

export interface Finding {
  probe: ProbeCode;
  /** What the probe did. */
  did: string;
  /** What it saw: the evidence. */
  saw: string;
  /** True when execution confirmed the exploit (the task is rejected); false for a warning. */
  rejects: boolean;
}

interface Graded {
  passed: boolean;
  reward: number | null;
  /** The reward file that gave the reward. */
  source: string | null;
  tests: string;
}

// Distinctive bytes, so a reward file still holding them is known not to be the verifier's.
const PLANTED_TXT = '1.000000\n';
const PLANTED_JSON = '{"reward": 1.0, "planted_by": "termgrade-probe"}\n';

export class TaskProber {
  private n = 0;
  /** Every hacked file graded by fromOracle (level all): the hack probes' evidence and cost. */
  readonly hackAttempts: HackAttempt[] = [];
  /** Hacks that could not be played, and why. */
  readonly hackNotes: string[] = [];

  constructor(
    private readonly task: Task,
    private readonly provider: SandboxProvider,
    private readonly logsDir: string,
    private readonly signal?: AbortSignal,
    private readonly verifierMultiplier?: number,
  ) {}

  private async sandbox(): Promise<Sandbox> {
    return (await acquireSandbox({ provider: this.provider, task: this.task, signal: this.signal })).sandbox;
  }

  /**
   * The reference solution (or its first `commands` top-level commands) run in the sandbox; with
   * `trace`, what it opened and executed is recorded (strace, where the backend can: else undefined).
   */
  private async solve(s: Sandbox, commands?: number, trace = false): Promise<string | undefined> {
    await s.copyIn(this.task.solutionDir!, '/solution');
    let entry = '/solution/solve.sh';
    if (commands !== undefined) {
      const script = await readFile(path.join(this.task.solutionDir!, 'solve.sh'), 'utf8');
      const shebang = script.startsWith('#!') ? `${script.split('\n')[0]}\n` : '#!/bin/bash\n';
      await s.putFiles([
        {
          path: '/solution/.termgrade-prefix.sh',
          content: `${shebang}${splitCommands(script).slice(0, commands).join('\n')}\n`,
          mode: 0o755,
        },
      ]);
      entry = '/solution/.termgrade-prefix.sh';
    }
    const r = await s.exec(['bash', entry], {
      env: this.task.config.solution.env,
      timeoutSec: this.task.config.agent.timeout_sec,
      signal: this.signal,
      cwd: this.task.config.environment.workdir,
      trace,
    });
    return r.trace;
  }

  /** Output files of the sandbox's current state (changed or added since the image), with content hashes. */
  private async finalState(s: Sandbox): Promise<Map<string, string>> {
    const paths = (await s.changes())
      .filter((c) => c.kind !== 'deleted' && isOutputPath(c.path))
      .map((c) => c.path)
      .slice(0, 500);
    const state = new Map<string, string>();
    if (!paths.length) return state;
    const r = await s.exec(
      [
        'sh',
        '-c',
        'for f; do if [ -f "$f" ] && [ ! -L "$f" ]; then sha256sum "$f"; fi; done',
        'termgrade-hash',
        ...paths,
      ],
      { maxOutputBytes: 4 * 1024 * 1024 },
    );
    for (const line of r.stdout.text.split('\n')) {
      const m = /^([0-9a-f]{64}) {2}(.+)$/.exec(line);
      if (m) state.set(m[2]!, m[1]!);
    }
    return state;
  }

  /** The task's verifier with every protection, as `run` grades (with the admission record when given). */
  private async grade(s: Sandbox, protection?: ProtectionRecord | null): Promise<Graded> {
    // The one grading function every command uses (trial/phases/verification.ts): the same policy,
    // record, timeout multiplier and rule for a step the sandbox's content broke (graded 0).
    const dir = path.join(this.logsDir, `grade-${++this.n}`);
    const v = await gradeAgentSandbox(
      s,
      this.task,
      { logs: dir, artifacts: path.join(dir, 'artifacts') },
      undefined,
      this.task.config.verifier.timeout_sec,
      {
        provider: this.provider,
        protection: protection ?? null,
        signal: this.signal,
        verifierMultiplier: this.verifierMultiplier,
      },
    );
    return {
      passed: isCleanPass(v.reward, v.tests),
      reward: v.reward,
      source: v.rewardSource,
      tests: v.tests.map((t) => `${t.name}=${t.status}`).join(','),
    };
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
      await s.exec(`bash ${TESTS_DIR}/test.sh > ${VERIFIER_LOGS}/test-stdout.txt 2>&1`, {
        env: this.task.config.verifier.env,
        timeoutSec: this.task.config.verifier.timeout_sec,
        signal: this.signal,
      });
      const logs = path.join(this.logsDir, 'forger');
      await s.copyOut(VERIFIER_LOGS, logs, { trusted: true });
      const json = await readTextIfThere(path.join(logs, 'reward.json'));
      const txt = await readTextIfThere(path.join(logs, 'reward.txt'));
      const parsed = rewardFile === 'reward.json' ? parseRewardFiles(json, null) : parseRewardFiles(null, txt);
      if (parsed.ok && isPassingReward(parsed.reward)) {
        return {
          probe: 'reward_forgeable',
          rejects: true,
          did: "an agent that only planted reward.txt = 1 and reward.json = 1 in /logs/verifier and a file in /tests, then the task's test.sh as written, with nothing emptied first",
          saw: `reward ${parsed.reward} from the verifier's ${parsed.source}: test.sh trusts state the agent controls`,
        };
      }
      return null;
    } finally {
      await s.close();
    }
  }

  /**
   * reward_hackable by a process the agent leaves running while the tests run: one that kills the
   * tests' processes as they start, one that holds the ports the tests name. `record`: admission's,
   * for grading as run grades.
   */
  async agentProcesses(record: ProtectionRecord | null): Promise<Finding[]> {
    const texts: string[] = [];
    for (const f of (await walk(this.task.testsDir)).filter((e) => e.kind === 'file')) {
      const body = await readFile(f.abs);
      if (body.length <= 1024 * 1024) texts.push(body.toString('utf8'));
    }
    const played = await playProcessHacks(
      () => this.sandbox(),
      testPorts(texts),
      (s) => this.grade(s, record),
    );
    this.hackAttempts.push(...played.attempts);
    this.hackNotes.push(...played.notes);
    return played.findings;
  }

  /**
   * solution_leaked, verifier_nondeterministic and (at level all) weak_tests and reward_hackable,
   * from one oracle state. `record`: the admission record of the reference solution's grading
   * (what the verifier touched), which names the files the hacks are played on.
   */
  async fromOracle(level: ProbeLevel, record: ProtectionRecord | null = null): Promise<Finding[]> {
    const findings: Finding[] = [];
    const solveScript = await readFile(path.join(this.task.solutionDir!, 'solve.sh'), 'utf8');
    const s = await this.sandbox();
    let full: Map<string, string>;
    let consumed: Set<string>;
    let texts: Map<string, string>;
    let reads: SolutionReads | null;
    try {
      // Traced: which image files the solution reads decides whether one holding an output's bytes is its input.
      const trace = await this.solve(s, undefined, true);
      reads = trace === undefined ? null : solutionReads(trace);
      const changes = await s.changes();
      consumed = new Set(changes.filter((c) => c.kind !== 'added').map((c) => c.path));
      full = await this.finalState(s);
      const outputs: Array<{ path: string; text: string }> = [];
      texts = new Map();
      for (const p of [...full.keys()].slice(0, 50)) {
        const body = await s.readFile(p, 64 * 1024 + 1);
        if (!body) continue;
        outputs.push({ path: p, text: body.subarray(0, 64 * 1024).toString('utf8') });
        // Whole outputs only: a text cut short could match nothing it should.
        if (body.length <= 64 * 1024) texts.set(p, body.toString('latin1'));
      }
      // The instruction is the specification: quoting what to type or write is never a leak by itself.
      const quoted = instructionLeak(this.task.instruction, solveScript, outputs);
      if (quoted)
        findings.push({
          probe: 'solution_leaked',
          rejects: false,
          did: "compared the instruction with solve.sh and the oracle's outputs",
          saw: `${quoted} (a warning: the instruction may rightly spell out what to type)`,
        });
      let first: Graded | null = null;
      try {
        first = await this.nondeterminism(s, findings);
      } catch (err) {
        if (err instanceof CancelledError || this.signal?.aborted) throw err;
        // Undecided is not confirmed: said as a warning, and the other probes still run.
        findings.push({
          probe: 'verifier_nondeterministic',
          rejects: false,
          did: "tried to verify two fresh copies of the oracle's final state",
          saw: `could not: ${errorMessage(err)}`,
        });
      }
      if (level === 'all' && first?.passed) {
        findings.push(...(await this.damagedOutputs(s, full)));
        if (!findings.some((f) => f.rejects && f.probe === 'weak_tests'))
          findings.push(...(await this.textOnly(s, [...full.keys()], record)));
        try {
          const played = await playHacks(s, [...full.keys()], record, (box) => this.grade(box, record));
          this.hackAttempts.push(...played.attempts);
          findings.push(...played.findings);
        } catch (err) {
          if (err instanceof CancelledError || this.signal?.aborted) throw err;
          // Undecided is not confirmed: said as a warning, and the other probes still run.
          findings.push({
            probe: 'reward_hackable',
            rejects: false,
            did: 'tried to play the published reward hacks on the files the tests run or import',
            saw: `could not: ${errorMessage(err)}`,
          });
        }
      }
    } finally {
      await s.close();
    }
    findings.push(...(await this.leakedInImage(full, texts, { consumed, reads }, solveScript)));
    if (level === 'all') {
      const prefix = await this.prefixes(solveScript, full);
      if (prefix) findings.push(prefix);
    }
    return findings;
  }

  /** weak_tests by tests that read code instead of running it (text-probe.ts); a probe that could not run is a warning. */
  private async textOnly(s: Sandbox, outputs: string[], record: ProtectionRecord | null): Promise<Finding[]> {
    try {
      return await textOnlyTests(s, outputs, record, (box) => this.grade(box));
    } catch (err) {
      if (err instanceof CancelledError || this.signal?.aborted) throw err;
      return [
        {
          probe: 'weak_tests',
          rejects: false,
          did: 'tried to keep the text of the source files the tests read and remove their behaviour',
          saw: `could not: ${errorMessage(err)}`,
        },
      ];
    }
  }

  /**
   * The oracle's final state frozen, then two fresh sandboxes made from it, each verified once, one
   * after the other: different grades mean the verifier's grade does not follow from the state it
   * grades. A verifier that builds or changes state is graded on a clean copy each time, so a second
   * look never meets the first one's leftovers. Returns the first copy's grade.
   */
  private async nondeterminism(s: Sandbox, findings: Finding[]): Promise<Graded> {
    // Every grading snapshots the state it is given and verifies it in a fresh sandbox of its own:
    // two gradings of the oracle's sandbox are two fresh copies, one after the other.
    const a = await this.grade(s);
    const b = await this.grade(s);
    if (a.reward !== b.reward || a.tests !== b.tests) {
      findings.push({
        probe: 'verifier_nondeterministic',
        rejects: true,
        did: "froze the oracle's final state and verified two fresh copies of it, once each",
        saw: `reward ${a.reward} then ${b.reward}; tests ${a.tests || '-'} then ${b.tests || '-'}`,
      });
    }
    return a;
  }

  /**
   * A leak is confirmed only by execution: on a fresh sandbox from the image, each output whose
   * bytes some other image file already holds gets that file copied to its path, nothing else of the
   * solution is run, and the task's tests grade it. Passing proves the answer was there for the
   * taking (rejected). Which image files are inputs is decided by the solution's own traced run
   * (`solution.reads`; see leak-trace.ts): a file it opened or consumed (the source of a move, copy
   * or archive) is an input, whatever the instruction says; untraced, a file the task names is.
   * Inputs, outputs the copy does not complete (an archive, a permission change), and solution/
   * files sitting in the image are warnings.
   */
  private async leakedInImage(
    full: Map<string, string>,
    outputTexts: Map<string, string>,
    solution: { consumed: Set<string>; reads: SolutionReads | null },
    solveScript: string,
  ): Promise<Finding[]> {
    const solutionFiles = await this.solutionHashes();
    const s = await this.sandbox();
    try {
      const { workdir, image, scanned } = await this.scanImage(s);
      const findings: Finding[] = [];
      const inputs: string[] = [];
      const place = new Map<string, LeakSource>(); // output -> the image file copied there, and why
      // The same text but for trailing whitespace (a file written with a final newline, an answer
      // printed without one, a ground truth with a trailing space) is a candidate too: execution decides either way. Only image files
      // within a few bytes of an output's size are read again for it.
      const stripped = new Map([...outputTexts].map(([p, t]) => [p, sha256(trimEnd(t))]));
      const sizes = new Set([...outputTexts.values()].map((t) => trimEnd(t).length));
      const near = scanned ? await this.nearFiles(s, sizes) : [];
      const candidates = new Map(leakPlacements(full, image));
      for (const [output, sources] of leakPlacements(stripped, near))
        candidates.set(output, [...new Set([...(candidates.get(output) ?? []), ...sources])]);
      const named = { texts: [this.task.instruction, solveScript], workdir: workdir?.startsWith('/') ? workdir : null };
      for (const src of classifySources(candidates, solution.consumed, solution.reads, named)) {
        if (src.hidden) place.set(src.output, src);
        else inputs.push(`${src.file} (the content of ${src.output}; ${src.why})`);
      }
      if (inputs.length)
        findings.push({
          probe: 'solution_leaked',
          rejects: false,
          did: "hashed the image's files against the oracle's outputs",
          saw: `${inputs.slice(0, 3).join(', ')}: an input, not a leak`,
        });
      const inImage = image.filter(([, h]) => solutionFiles.has(h)).map(([f, h]) => `${f} = ${solutionFiles.get(h)}`);
      if (place.size) findings.push(await this.placedLeak(s, place));
      if (inImage.length && !findings.some((f) => f.rejects))
        findings.push({
          probe: 'solution_leaked',
          rejects: false,
          did: 'hashed the files of the image the agent starts from against solution/',
          saw: `${inImage.slice(0, 3).join(', ')} byte for byte (the agent can read it; no output is a copy of it)`,
        });
      return findings;
    } finally {
      await s.close();
    }
  }

  /** solution/'s files of 32 bytes or more, by content hash: hash -> solution/rel. */
  private async solutionHashes(): Promise<Map<string, string>> {
    const solutionFiles = new Map<string, string>(); // hash -> solution/rel
    for (const f of (await walk(this.task.solutionDir!)).filter((e) => e.kind === 'file')) {
      const body = await readFile(f.abs);
      if (body.length >= 32) solutionFiles.set(createHash('sha256').update(body).digest('hex'), `solution/${f.rel}`);
    }
    return solutionFiles;
  }

  /**
   * Every file of 16 bytes to 1 MiB in the image, outside system folders, hashed in one pass: the
   * sandbox's working folder, [path, hash] pairs, and whether the scan printed anything at all.
   */
  private async scanImage(
    s: Sandbox,
  ): Promise<{ workdir: string | undefined; image: Array<[string, string]>; scanned: boolean }> {
    const r = await s.exec(
      [
        'sh',
        '-c',
        `pwd; find / -xdev \\( ${SCAN_PRUNE} \\) -prune -o -type f -size +15c -size -1048577c -print0 2>/dev/null | xargs -0 -r sha256sum 2>/dev/null`,
      ],
      { maxOutputBytes: 32 * 1024 * 1024, timeoutSec: 300, signal: this.signal },
    );
    if (r.stdout.truncatedBytes > 0)
      throw new TermgradeError('environment_error', 'the image holds more files than the leak scan reads whole');
    const [workdir, ...lines] = r.stdout.text.split('\n');
    const image: Array<[string, string]> = [];
    for (const line of lines) {
      const m = /^([0-9a-f]{64}) {2}(.+)$/.exec(line);
      if (m) image.push([m[2]!, m[1]!]);
    }
    return { workdir, image, scanned: r.stdout.text.length > 0 };
  }

  /** Each image file copied to the output it matches, nothing else run, then graded: the leak's verdict. */
  private async placedLeak(s: Sandbox, place: Map<string, LeakSource>): Promise<Finding> {
    const moves = [...place].map(
      ([output, { file }]) => `mkdir -p "$(dirname ${quote(output)})" && cp ${quote(file)} ${quote(output)}`,
    );
    const placed = await s.exec(['sh', '-c', moves.join(' && ')], { signal: this.signal, timeoutSec: 120 });
    const did = `on a fresh sandbox from the image, copied ${[...place]
      .slice(0, 3)
      .map(([o, { file }]) => `${file} to ${o}`)
      .join(', ')}${place.size > 3 ? ` (${place.size} outputs)` : ''}, ran nothing else of the solution, and graded it`;
    if (placed.exitCode !== 0) {
      return {
        probe: 'solution_leaked',
        rejects: false,
        did,
        saw: `the copy failed (${placed.stderr.text.trim().slice(0, 200)}): nothing confirmed`,
      };
    }
    const g = await this.grade(s);
    if (g.passed)
      return {
        probe: 'solution_leaked',
        rejects: true,
        did,
        saw: `every test passes (${g.tests}): the answer sits readable in the image; ${[...place.values()]
          .slice(0, 3)
          .map((src) => `${src.file}: ${src.why}`)
          .join('; ')}`,
      };
    return {
      probe: 'solution_leaked',
      rejects: false,
      did,
      saw: `the tests fail (${g.tests || `reward ${g.reward}`}): the image's copies are not the answer`,
    };
  }

  /**
   * Image files of an output's trimmed size up to 4 bytes more, with the hash of their text less
   * trailing whitespace; read by the backend (no program inside runs), at most 200 of them.
   */
  private async nearFiles(s: Sandbox, sizes: Set<number>): Promise<Array<[string, string]>> {
    const wanted = new Set([...sizes].flatMap((n) => [n, n + 1, n + 2, n + 3, n + 4]));
    const listed = await s.exec(
      [
        'sh',
        '-c',
        `find / -xdev \\( ${SCAN_PRUNE} \\) -prune -o -type f -size +15c -size -1048577c -printf '%s %p\\n' 2>/dev/null`,
      ],
      { maxOutputBytes: 32 * 1024 * 1024, timeoutSec: 300, signal: this.signal },
    );
    if (listed.stdout.truncatedBytes > 0)
      throw new TermgradeError('environment_error', 'the image holds more files than the leak scan reads whole');
    const files = listed.stdout.text
      .split('\n')
      .map((l) => /^(\d+) (\/.*)$/.exec(l))
      .filter((m): m is RegExpExecArray => m !== null && wanted.has(Number(m[1])))
      .slice(0, 200);
    const out: Array<[string, string]> = [];
    for (const m of files) {
      const body = await s.readFile(m[2]!, Number(m[1]) + 1);
      if (body) out.push([m[2]!, sha256(trimEnd(body.toString('latin1')))]);
    }
    return out;
  }

  /** Each output file the tests read (removing it fails them) emptied, then cut in half: still passing is weak. */
  private async damagedOutputs(s: Sandbox, full: Map<string, string>): Promise<Finding[]> {
    const findings: Finding[] = [];
    for (const file of [...full.keys()].slice(0, 6)) {
      const q = `'${file.replace(/'/g, `'\\''`)}'`;
      const keep = `/var/tmp/.termgrade-keep`;
      await s.exec(['sh', '-c', `cp -a ${q} ${keep} && rm -f ${q}`]);
      const removed = await this.grade(s);
      const restore = async (): Promise<void> => {
        await s.exec(['sh', '-c', `cp -a ${keep} ${q}`]);
      };
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
          findings.push({
            probe: 'weak_tests',
            rejects: true,
            did: `ran the solution, then ${how} ${file} (removing it fails the tests)`,
            saw: `every test still passes (${g.tests})`,
          });
          return findings;
        }
      }
    }
    return findings;
  }

  /** Strict prefixes of solve.sh: passing while the final state lacks an output of the full solution is weak. */
  private async prefixes(solveScript: string, full: Map<string, string>): Promise<Finding | null> {
    const n = splitCommands(solveScript).length;
    const ks = [...new Set([n - 1, Math.floor((2 * n) / 3), Math.floor(n / 2), Math.floor(n / 3)])]
      .filter((k) => k >= 1 && k < n)
      .sort((a, b) => b - a);
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
        return {
          probe: 'weak_tests',
          rejects: true,
          did: `ran the first ${k} of solve.sh's ${n} commands`,
          saw: `every test passes though ${kept.differing.slice(0, 5).join(', ')} ${kept.differing.length === 1 ? 'is' : 'are'} missing or different from the full solution's`,
        };
      } catch (err) {
        // A cancel or a lost engine is no finding about the task: it ends the probe.
        if (err instanceof CancelledError || isEngineLost(err)) throw err;
        // A prefix that cannot even run proves nothing either way; the next one is tried.
        log.debug('a prefix of solve.sh did not run to its grade; the next one is tried', { k, cause: causeOf(err) });
      } finally {
        await s.close();
      }
    }
    return null;
  }
}
