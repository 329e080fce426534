"""GRPO for termgrade rollouts: a failed rollout takes no part in its group's statistics.

verl's GRPO takes each group's mean and standard deviation over every row's summed reward,
whatever the row's mask; a rollout that failed for infrastructure (the agent loop returns it
with reward 0 and `response_mask` all 0) would count as a 0 and shift every other member's
advantage. This estimator computes the same advantages as verl's `grpo` over the group without
those rows (a row with no token to train on: mask all 0), and gives them advantage 0.

Where it departs from verl's `grpo`: a group with fewer than two graded rows gives its graded row
advantage 0, not its raw reward. verl gives a group of one mean 0 and standard deviation 1, so a lone
row's advantage is its reward: it is pushed up for a 1 with no baseline to say whether 1 was easy,
and which groups shrink to one row depends on infrastructure failures, not on the policy. With one
graded row there is nothing to compare it with, so it teaches nothing, as a group whose rewards are
all equal teaches nothing.

A step in which no row was graded (every rollout failed) cannot train: verl's compute_data_metrics
would then take torch.max of an empty selection of advantages. The estimator stops the step first
with an error that says so (check the server: GET /healthz, and the rows' infra_reason).

Registered with verl's own registry (`register_adv_est`) as `termgrade_grpo`, on import. verl
imports it in every process that imports verl when its name is in VERL_USE_EXTERNAL_MODULES:

    VERL_USE_EXTERNAL_MODULES=termgrade_advantage  (with integrations/verl on PYTHONPATH)
    python3 -m verl.trainer.main_ppo algorithm.adv_estimator=termgrade_grpo ...

`algorithm.norm_adv_by_std_in_grpo` is read from the algorithm config, as verl's registered
estimators read it.
"""
import math
from collections import defaultdict

from verl.trainer.ppo.core_algos import register_adv_est

NAME = "termgrade_grpo"


def group_advantages(scores, alive, index, epsilon=1e-6, norm_by_std=True):
    """Per row: GRPO's advantage within its group (`index`) over the rows alive only; 0 for the others.

    As verl's GRPO: the standard deviation is the sample one (n - 1); `epsilon` is added to it
    before dividing. Unlike it, a group with fewer than two graded rows gives them 0 (see above).
    """
    members = defaultdict(list)
    for score, ok, key in zip(scores, alive, index):
        if ok:
            members[key].append(float(score))
    if scores and not members:
        raise RuntimeError(
            f"termgrade_grpo: none of this step's {len(scores)} rollouts was graded (every one failed for "
            "infrastructure); the step cannot train, and verl's compute_data_metrics would fail on an empty "
            "selection. Check the server (GET /healthz) and the rows' infra_reason"
        )
    stats = {}
    for key, values in members.items():
        if len(values) >= 2:
            mean = sum(values) / len(values)
            stats[key] = (mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1)))
    out = []
    for score, ok, key in zip(scores, alive, index):
        if not ok or key not in stats:
            out.append(0.0)
            continue
        mean, std = stats[key]
        out.append((float(score) - mean) / (std + epsilon) if norm_by_std else float(score) - mean)
    return out


@register_adv_est(NAME)
def compute_termgrade_grpo_advantage(token_level_rewards, response_mask, index, epsilon=1e-6, config=None, **_):
    """verl's estimator signature: (bs, L) rewards and mask, the group ids; returns (advantages, returns)."""
    norm = True if config is None else bool(config.get("norm_adv_by_std_in_grpo", True))
    scores = token_level_rewards.sum(dim=-1).tolist()
    alive = [bool(n) for n in (response_mask.sum(dim=-1) > 0).tolist()]
    advantages = token_level_rewards.new_tensor(group_advantages(scores, alive, list(index), epsilon, norm)).unsqueeze(-1) * response_mask
    return advantages, advantages
