import { createHash } from 'node:crypto';
import { cp, mkdir, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { stringify as toToml } from 'smol-toml';
import { loadTask } from '../task/load.js';
import type { Task } from '../task/task.js';
import type { CandidateState } from './schema.js';

/** sha256 of a part's canonical JSON: what "the other parts are unchanged" is checked against. */
export function partHash(part: unknown): string {
  return createHash('sha256').update(JSON.stringify(part)).digest('hex');
}

export interface TaskLimits {
  agentTimeoutSec: number;
  verifierTimeoutSec: number;
}

/** task.toml of a candidate, with its provenance in [metadata.synth]. */
export function taskToml(state: CandidateState, model: string, limits: TaskLimits): string {
  return toToml({
    task: { name: state.id, description: state.parts.scenario?.goal ?? '' },
    metadata: {
      category: state.parts.scenario?.domain ?? 'synthesized',
      synth: {
        seed: state.seedId,
        candidate: state.id,
        rounds: state.round,
        repaired: state.repairs.map((r) => r.part),
        model,
        environment_sha256: state.hashes.environment ?? '',
        instruction_sha256: state.hashes.instruction ?? '',
        solution_sha256: state.hashes.solution ?? '',
        tests_sha256: state.hashes.tests ?? '',
      },
    },
    verifier: { timeout_sec: limits.verifierTimeoutSec },
    agent: { timeout_sec: limits.agentTimeoutSec },
    // Admission and every trial are offline: the environment must hold what the task needs.
    environment: { allow_internet: false },
  });
}

/**
 * Writes the candidate's task folder from the parts it has so far (a fresh folder each time, so a
 * part regenerated leaves nothing of its earlier version behind), and loads it. A part not yet
 * generated is written as a placeholder that fails: the folder is a task only once all are there.
 */
export async function writeCandidate(
  dir: string,
  state: CandidateState,
  model: string,
  limits: TaskLimits,
): Promise<Task> {
  await rm(dir, { recursive: true, force: true });
  const { environment, instruction, solution, tests } = state.parts;
  const put = async (rel: string, content: string, mode = 0o644): Promise<void> => {
    const file = path.join(dir, rel);
    await mkdir(path.dirname(file), { recursive: true });
    await writeFile(file, content, { mode });
  };
  await put('task.toml', taskToml(state, model, limits));
  await put('instruction.md', instruction?.instruction ?? '(not generated yet)\n');
  if (environment) {
    await put('environment/Dockerfile', environment.dockerfile);
    for (const f of environment.files)
      await put(path.join('environment', f.path), f.content, f.path.endsWith('.sh') ? 0o755 : 0o644);
  }
  if (solution) await put('solution/solve.sh', solution.solveSh, 0o755);
  await put('tests/test.sh', tests?.testSh ?? '#!/bin/sh\necho 0 > /logs/verifier/reward.txt\n', 0o755);
  for (const f of tests?.files ?? [])
    await put(path.join('tests', f.path), f.content, f.path.endsWith('.sh') ? 0o755 : 0o644);
  return loadTask(dir);
}

/** Copies an admitted candidate to the output folder whole (through a temporary name, then renamed). */
export async function publish(candidateDir: string, outDir: string, name: string): Promise<string> {
  const dest = path.join(outDir, name);
  const partial = path.join(outDir, `.${name}.partial`);
  await rm(partial, { recursive: true, force: true });
  await cp(candidateDir, partial, { recursive: true });
  await rm(dest, { recursive: true, force: true });
  await rename(partial, dest);
  return dest;
}
