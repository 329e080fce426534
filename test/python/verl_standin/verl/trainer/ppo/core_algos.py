"""TEST STAND-IN for verl.trainer.ppo.core_algos (volcengine/verl b178a3cd), written from its
source, not copied: the advantage-estimator registry (register_adv_est, core_algos.py:115-133:
a name registered twice with another function is an error; get_adv_estimator_fn, :136-149) and
GRPO's outcome advantage (compute_grpo_outcome_advantage, :266-330): each row's score is its
summed token-level reward; per group (index) the mean and the sample standard deviation (torch.std,
n - 1) over EVERY row of the group, whatever its mask; a group of one has mean 0 and std 1; the
advantage (score - mean) / (std + epsilon), or score - mean without the std (Dr.GRPO), is spread
over the row's tokens times response_mask. Lists stand in for tensors.
"""
import math
from collections import defaultdict

from verl._tensor import Tensor

ADV_ESTIMATOR_REGISTRY = {}


def register_adv_est(name):
    def decorator(fn):
        if name in ADV_ESTIMATOR_REGISTRY and ADV_ESTIMATOR_REGISTRY[name] is not fn:
            raise ValueError(f"Adv estimator {name} has already been registered")
        ADV_ESTIMATOR_REGISTRY[name] = fn
        return fn

    return decorator


def get_adv_estimator_fn(name):
    if name not in ADV_ESTIMATOR_REGISTRY:
        raise ValueError(f"Unknown advantage estimator simply: {name}")
    return ADV_ESTIMATOR_REGISTRY[name]


@register_adv_est("grpo")
def compute_grpo_outcome_advantage(token_level_rewards, response_mask, index, epsilon=1e-6, norm_adv_by_std_in_grpo=True, config=None):
    scores = token_level_rewards.sum(dim=-1).tolist()
    groups = defaultdict(list)
    for i, score in enumerate(scores):
        groups[index[i]].append(score)
    stats = {}
    for key, values in groups.items():
        if len(values) == 1:
            stats[key] = (0.0, 1.0)
        else:
            mean = sum(values) / len(values)
            stats[key] = (mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1)))
    adv = []
    for i, score in enumerate(scores):
        mean, std = stats[index[i]]
        adv.append((score - mean) / (std + epsilon) if norm_adv_by_std_in_grpo else score - mean)
    out = Tensor(adv).unsqueeze(-1) * response_mask
    return out, out
