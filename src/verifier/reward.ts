/**
 * Reward files, as Harbor writes them: reward.json (a flat name -> number map) wins over
 * reward.txt (one number). Pure: takes file contents, returns a reward or says why there is none.
 */
export type RewardParse =
  | { ok: true; reward: number; rewards: Record<string, number>; source: 'reward.json' | 'reward.txt' }
  | { ok: false; problem: 'missing' | 'malformed'; message: string };

/** The reward a trial needs to pass: a primary reward of at least this much. */
export const PASS_REWARD = 1;

/** The one rule for a passing reward (the stored `passed`, listings, imports, serve's `acc`). */
export function isPassingReward(reward: number | null | undefined): boolean {
  return reward !== null && reward !== undefined && Number.isFinite(reward) && reward >= PASS_REWARD;
}

/** The primary reward of a map: its `reward` key, else its only value, else the mean of all. */
export function primaryReward(rewards: Record<string, number>): number {
  if ('reward' in rewards) return rewards.reward;
  const values = Object.values(rewards);
  if (values.length === 1) return values[0]!;
  return values.reduce((a, b) => a + b, 0) / values.length;
}

/** reward.json on its own: a number, or an object of named numbers (booleans count as 0/1). */
export function parseRewardJson(json: string): RewardParse {
  let data: unknown;
  try {
    data = JSON.parse(json);
  } catch (err) {
    return { ok: false, problem: 'malformed', message: `reward.json is not JSON: ${(err as Error).message}` };
  }
  if (typeof data === 'number' && Number.isFinite(data)) {
    return { ok: true, reward: data, rewards: { reward: data }, source: 'reward.json' };
  }
  if (data === null || typeof data !== 'object' || Array.isArray(data)) {
    return { ok: false, problem: 'malformed', message: 'reward.json must be an object mapping names to numbers' };
  }
  const rewards: Record<string, number> = {};
  for (const [k, v] of Object.entries(data as Record<string, unknown>)) {
    const n = typeof v === 'boolean' ? Number(v) : v;
    if (typeof n !== 'number' || !Number.isFinite(n)) {
      return { ok: false, problem: 'malformed', message: `reward.json: "${k}" is not a number` };
    }
    rewards[k] = n;
  }
  if (Object.keys(rewards).length === 0) return { ok: false, problem: 'malformed', message: 'reward.json is empty' };
  return { ok: true, reward: primaryReward(rewards), rewards, source: 'reward.json' };
}

/** reward.txt on its own: one number. */
export function parseRewardTxt(txt: string): RewardParse {
  const t = txt.trim();
  const n = Number(t);
  if (t === '' || !Number.isFinite(n)) {
    return { ok: false, problem: 'malformed', message: `reward.txt must hold one number, found "${t.slice(0, 40)}"` };
  }
  return { ok: true, reward: n, rewards: { reward: n }, source: 'reward.txt' };
}

/** The trial's reward: reward.json when the verifier wrote it (even a malformed one), else reward.txt. */
export function parseRewardFiles(json: string | null, txt: string | null): RewardParse {
  if (json !== null) return parseRewardJson(json);
  if (txt !== null) return parseRewardTxt(txt);
  return {
    ok: false,
    problem: 'missing',
    message: 'the verifier wrote neither /logs/verifier/reward.json nor reward.txt',
  };
}

/** Each reward file parsed on its own (null: not written), for checks that compare the two. */
export interface RewardFiles {
  json: RewardParse | null;
  txt: RewardParse | null;
}

export function parseEachRewardFile(json: string | null, txt: string | null): RewardFiles {
  return { json: json === null ? null : parseRewardJson(json), txt: txt === null ? null : parseRewardTxt(txt) };
}
