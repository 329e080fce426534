/** One model call of an episode, as the endpoint returned it. */
export interface TokenTurn {
  prompt_token_ids: number[] | null;
  completion_token_ids: number[] | null;
  logprobs: number[] | null;
}

/**
 * The episode's conversation as one token stream: `ids` in order, `loss_mask` 1 on the tokens the
 * policy produced and 0 on the prompt and observations, `logprobs` the endpoint's for produced
 * tokens (null elsewhere, and null throughout a turn whose logprobs did not come back whole).
 */
export interface TokenStream {
  ids: number[];
  loss_mask: number[];
  logprobs: Array<number | null>;
}

/**
 * Joins an episode's turns into one stream, each turn's prompt being the stream so far followed
 * by the new observation tokens. Pure. Refuses (a reason, no stream) rather than guess when the
 * turns cannot be joined exactly: a turn without ids, or a prompt that does not start with the
 * stream so far (the endpoint re-tokenised earlier text differently, or the conversation was
 * rewritten between calls), since a trainer would then learn on tokens the policy never produced.
 */
export function joinTurns(
  turns: TokenTurn[],
): { stream: TokenStream; problem: null } | { stream: null; problem: string } {
  const stream: TokenStream = { ids: [], loss_mask: [], logprobs: [] };
  for (const [i, t] of turns.entries()) {
    if (!t.prompt_token_ids || !t.completion_token_ids)
      return { stream: null, problem: `turn ${i + 1}: the endpoint returned no token ids` };
    const prompt = t.prompt_token_ids;
    const at = firstDifference(stream.ids, prompt);
    if (at !== null)
      return { stream: null, problem: `turn ${i + 1}: its prompt differs from the conversation so far at token ${at}` };
    const observed = prompt.slice(stream.ids.length);
    stream.ids.push(...observed);
    stream.loss_mask.push(...observed.map(() => 0));
    stream.logprobs.push(...observed.map(() => null));
    const whole = t.logprobs !== null && t.logprobs.length === t.completion_token_ids.length;
    stream.ids.push(...t.completion_token_ids);
    stream.loss_mask.push(...t.completion_token_ids.map(() => 1));
    stream.logprobs.push(...t.completion_token_ids.map((_, k) => (whole ? t.logprobs![k]! : null)));
  }
  return { stream, problem: null };
}

/** Where `prefix` stops being a prefix of `ids` (null: it is one). */
function firstDifference(prefix: number[], ids: number[]): number | null {
  if (ids.length < prefix.length) return ids.length;
  for (let k = 0; k < prefix.length; k += 1) if (prefix[k] !== ids[k]) return k;
  return null;
}

/**
 * A tree's streams by the same rule: the prefix's turns joined, and each branch's own part (the
 * stream of the prefix's turns followed by the branch's, past the prefix's stream), so the
 * prefix's tokens are given once. A branch's part begins with the observation of the prefix's last
 * turn (the same in every branch). Refused per branch, with its reason, as joinTurns refuses.
 */
export function treeStreams(
  prefix: TokenTurn[],
  branches: TokenTurn[][],
): {
  prefix: ReturnType<typeof joinTurns>;
  branches: Array<ReturnType<typeof joinTurns>>;
} {
  const head = joinTurns(prefix);
  return {
    prefix: head,
    branches: branches.map((own) => {
      const whole = joinTurns([...prefix, ...own]);
      // A prefix that cannot be joined fails the whole at the same turn: a stream here means the prefix's is there.
      if (!whole.stream || !head.stream) return whole;
      const from = head.stream.ids.length;
      return {
        stream: {
          ids: whole.stream.ids.slice(from),
          loss_mask: whole.stream.loss_mask.slice(from),
          logprobs: whole.stream.logprobs.slice(from),
        },
        problem: null,
      };
    }),
  };
}
