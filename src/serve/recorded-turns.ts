import path from 'node:path';
import { readJsonIfThere } from '../util/files.js';
import type { RecordedTurn } from './tree.js';

interface AtifStep {
  source: string;
  metrics?: {
    prompt_tokens?: number;
    completion_tokens?: number;
    prompt_token_ids?: number[] | null;
    completion_token_ids?: number[] | null;
    logprobs?: number[] | null;
  };
}

/** An episode's model calls as its trajectory recorded them (ids and logprobs as the endpoint returned them). */
export async function recordedTurns(dir: string): Promise<RecordedTurn[]> {
  const trajectory = (await readJsonIfThere(path.join(dir, 'agent', 'trajectory.json'))) as {
    steps?: AtifStep[];
  } | null;
  return (trajectory?.steps ?? [])
    .filter((s) => s.source === 'agent')
    .map((s) => ({
      prompt_tokens: s.metrics?.prompt_tokens ?? null,
      completion_tokens: s.metrics?.completion_tokens ?? null,
      prompt_token_ids: s.metrics?.prompt_token_ids ?? null,
      completion_token_ids: s.metrics?.completion_token_ids ?? null,
      logprobs: s.metrics?.logprobs ?? null,
    }));
}
