import {
  RepairablePart,
  STAGES,
  type CandidateOutcome,
  type CandidateState,
  type StageName,
  type SynthReport,
} from './schema.js';
import type { StageRecord } from './store.js';

/**
 * The funnel, from what the store holds (pure). A stage counts a candidate once however many
 * rounds ran it; it passed if any round got through. A repair succeeded when its candidate was
 * admitted in the end (a later repair of another part may also have been needed).
 */
export function funnel(
  candidates: CandidateState[],
  stages: StageRecord[],
  outDir: string,
  job: { elapsedMs: number; resumed: number } = { elapsedMs: 0, resumed: 0 },
): SynthReport {
  const totalMs = stages.reduce((a, s) => a + s.durationMs, 0);
  const byStage = STAGES.map((stage) => {
    const rows = stages.filter((s) => s.stage === stage);
    const entered = new Set(rows.map((r) => r.candidateId));
    const passed = new Set(rows.filter((r) => r.outcome === 'passed').map((r) => r.candidateId));
    const wallMs = rows.reduce((a, r) => a + r.durationMs, 0);
    return {
      stage,
      candidates: entered.size,
      passed: passed.size,
      yield: entered.size ? passed.size / entered.size : null,
      runs: rows.length,
      wallMs,
      timeShare: totalMs ? wallMs / totalMs : 0,
    };
  });
  const admitted = candidates.filter((c) => c.status === 'admitted');
  const rejected = candidates.filter((c) => c.status === 'rejected');
  const repairs = RepairablePart.options.map((part) => {
    const tried = candidates.filter((c) => c.repairs.some((r) => r.part === part));
    return {
      part,
      attempts: candidates.reduce((a, c) => a + c.repairs.filter((r) => r.part === part).length, 0),
      candidates: tried.length,
      admitted: tried.filter((c) => c.status === 'admitted').length,
    };
  });
  const rejections: Record<string, number> = {};
  for (const c of rejected) for (const r of c.rejected) rejections[r] = (rejections[r] ?? 0) + 1;
  const testCounts = admitted.map((c) => c.tests.length);
  const costs = stages.map((s) => s.costUsd).filter((c): c is number => c !== null);
  return {
    candidates: candidates.length,
    admitted: admitted.length,
    rejected: rejected.length,
    unfinished: candidates.length - admitted.length - rejected.length,
    waitingOnGenerator: candidates.filter((c) => c.status === 'active' && c.waiting !== null).length,
    resumed: job.resumed,
    endToEndYield: candidates.length ? admitted.length / candidates.length : null,
    stages: byStage,
    repairs,
    rejections,
    testsPerAdmitted: {
      mean: testCounts.length ? testCounts.reduce((a, b) => a + b, 0) / testCounts.length : null,
      min: testCounts.length ? Math.min(...testCounts) : null,
      max: testCounts.length ? Math.max(...testCounts) : null,
    },
    tokens: {
      prompt: stages.reduce((a, s) => a + s.promptTokens, 0),
      completion: stages.reduce((a, s) => a + s.completionTokens, 0),
      calls: stages.reduce((a, s) => a + s.calls, 0),
      malformedReplies: stages.reduce((a, s) => a + s.malformed, 0),
    },
    costUsd: costs.length ? costs.reduce((a, b) => a + b, 0) : null,
    wallMs: totalMs,
    elapsedMs: job.elapsedMs,
    candidateList: candidates.map((c) => candidateOutcome(c, stages)),
    admittedTasks: admitted.map((c) => ({
      candidate: c.id,
      seed: c.seedId,
      path: c.admittedPath ?? '',
      rounds: c.round,
      tests: c.tests.length,
    })),
    outDir,
  };
}

/** One candidate's line of the funnel: where it is or ended, and why. */
function candidateOutcome(c: CandidateState, stages: StageRecord[]): CandidateOutcome {
  const last = stages.filter((r) => r.candidateId === c.id).at(-1);
  const stage: StageName | null = c.status === 'active' ? (c.plan[0] ?? null) : (last?.stage ?? null);
  const state =
    c.status !== 'active' ? c.status : c.waiting !== null ? ('waiting_generator' as const) : ('unfinished' as const);
  const reason =
    c.status === 'rejected'
      ? c.rejected.join(', ')
      : c.status === 'active'
        ? (c.waiting?.why ?? 'interrupted: run the same command again')
        : null;
  return {
    candidate: c.id,
    seed: c.seedId,
    state,
    reason,
    rounds: c.round,
    stage,
    tests: c.tests.length,
    path: c.admittedPath,
  };
}

const pct = (x: number | null): string => (x === null ? '-' : `${(100 * x).toFixed(1)}%`);

/** The funnel as a table for people. */
export function formatFunnel(r: SynthReport): string {
  const lines: string[] = [];
  const row = (cells: string[]): string => cells.map((c, i) => (i === 0 ? c.padEnd(12) : c.padStart(10))).join(' ');
  lines.push(row(['stage', 'entered', 'passed', 'yield', 'runs', 'time s', 'time %']));
  for (const s of r.stages)
    lines.push(
      row([
        s.stage,
        String(s.candidates),
        String(s.passed),
        pct(s.yield),
        String(s.runs),
        (s.wallMs / 1000).toFixed(1),
        pct(s.timeShare),
      ]),
    );
  lines.push('');
  const waiting = r.waitingOnGenerator ? ` (${r.waitingOnGenerator} waiting on the generator)` : '';
  lines.push(
    `candidates ${r.candidates}: admitted ${r.admitted}, rejected ${r.rejected}${r.unfinished ? `, unfinished ${r.unfinished}${waiting} (run the same command again to resume)` : ''}; end-to-end yield ${pct(r.endToEndYield)}`,
  );
  lines.push(
    `repairs: ${r.repairs.map((p) => `${p.part} ${p.attempts} on ${p.candidates} candidate(s), ${p.admitted} admitted`).join(', ')}`,
  );
  if (Object.keys(r.rejections).length)
    lines.push(
      `rejected for: ${Object.entries(r.rejections)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ')}`,
    );
  lines.push(
    `tests per admitted task: ${r.testsPerAdmitted.mean === null ? '-' : `mean ${r.testsPerAdmitted.mean.toFixed(1)} (min ${r.testsPerAdmitted.min}, max ${r.testsPerAdmitted.max})`}`,
  );
  lines.push(
    `generator: ${r.tokens.calls} calls, ${r.tokens.prompt} prompt + ${r.tokens.completion} completion tokens, ${r.tokens.malformedReplies} malformed replies, cost ${r.costUsd === null ? 'unknown (no price)' : `$${r.costUsd.toFixed(4)}`}`,
  );
  lines.push(
    `elapsed ${(r.elapsedMs / 1000).toFixed(1)} s over every run of the job; stage time ${(r.wallMs / 1000).toFixed(1)} s summed over candidates`,
  );
  lines.push(`admitted tasks in ${r.outDir}`);
  return lines.join('\n');
}
