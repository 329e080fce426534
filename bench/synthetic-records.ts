import { seededUniform } from '../src/stats/random.js';
import type { TrialResult } from '../src/trial/schema.js';

/** The shape the scale benchmarks share: four configurations, k = 8, as many tasks as `n` trials need. */
export function scaleShape(n: number): { configs: string[]; tasks: number; k: number } {
  const configs = ['bash-tool/model-a', 'bash-tool/model-b', 'terminus/model-a', 'terminus/model-c'];
  const k = 8;
  return { configs, k, tasks: Math.ceil(n / (configs.length * k)) };
}

/** A synthetic record as a job store takes it: four per-test results (the share passed follows its summary) and its configuration label. */
export function asStoredTrial(record: Record<string, unknown>): { result: TrialResult; config: string } {
  const result = record as unknown as TrialResult;
  result.tests = Array.from({ length: 4 }, (_, i) => ({
    name: `test_outputs.py::test_${i}`,
    status: i < result.testsSummary.passed / 2.5 ? 'passed' : 'failed',
    durationMs: 3,
    message: null,
  }));
  return { result, config: result.agent.model ? `${result.agent.name}/${result.agent.model}` : result.agent.name };
}

/**
 * Synthetic trial results in the shape `result.json` has (the fields measurement reads, plus the
 * bulk of a real record), with known true rates per task: for benchmarks and tests of the
 * measurement commands at scale.
 */
export function* syntheticRecords(options: {
  configs: string[];
  tasks: number;
  k: number;
  seed?: number;
}): Generator<Record<string, unknown>> {
  const u = seededUniform(options.seed ?? 11);
  const truth = Array.from({ length: options.tasks }, () => {
    const m = u();
    return m < 0.4 ? u() * 0.1 : m < 0.75 ? 0.9 + u() * 0.1 : u();
  });
  let id = 0;
  for (const [ci, config] of options.configs.entries()) {
    const [agent, model] = config.split('/');
    for (let t = 0; t < options.tasks; t++) {
      const p = Math.min(1, Math.max(0, truth[t]! + (ci - 1) * 0.05));
      for (let attempt = 0; attempt < options.k; attempt++) {
        const infra = u() < 0.01;
        const passed = !infra && u() < p;
        const testsTotal = 10;
        const testsPassed = passed ? testsTotal : Math.floor(u() * testsTotal);
        yield {
          schemaVersion: 1,
          trialId: `syn-${id++}`,
          task: { name: `task-${String(t).padStart(5, '0')}`, path: `/tasks/task-${t}`, checksum: 'c0ffee' },
          agent: { name: agent, model: model ?? null },
          attempt,
          reward: infra ? null : passed ? 1 : 0,
          rewards: infra ? {} : { reward: passed ? 1 : 0 },
          passed,
          tests: [],
          testsSource: 'ctrf',
          testsSourceCounts: { ctrf: testsTotal },
          testsSummary: {
            total: testsTotal,
            passed: testsPassed,
            failed: testsTotal - testsPassed,
            skipped: 0,
            other: 0,
          },
          error: infra ? { class: 'environment_error', message: 'sandbox lost', phase: 'environment_setup' } : null,
          errors: [],
          exitReason: 'completed',
          turns: 1 + Math.floor(u() * 40),
          tokens: { input: Math.floor(u() * 200000), cached: 0, output: Math.floor(u() * 20000) },
          costUsd: u() * 0.5,
          image: 'termgrade-env:0123456789abcdef0123',
          imageId: 'sha256:0123456789abcdef',
          imageSource: 'dockerfile',
          imageCached: true,
          tampering: [],
          findings: [],
          phases: {},
          startedAt: '2026-11-30T00:00:00.000Z',
          finishedAt: '2026-11-30T00:05:00.000Z',
          durationMs: Math.floor(u() * 600000),
        };
      }
    }
  }
}
