"""TEST STAND-IN for verl.trainer.ppo.metric_utils (volcengine/verl b178a3cd), written from its
source, not copied.

compute_data_metrics (metric_utils.py:81-200, with _compute_response_info :51-78), the training
step's metrics after the advantages: a row's response length is its attention mask over the
response (a failed termgrade row keeps one masked token: length 1); rows of length 0 are
"aborted", and when every row is, it raises ValueError("All samples are aborted ..."); score and
reward statistics are over the rows not aborted; the advantages' mean, max and min are over
torch.masked_select(advantages, response_mask), and torch.max of an empty selection raises
RuntimeError (a step whose every row has response_mask all 0).

process_validation_metrics (metric_utils.py:511-660). Per data source and per
uid (a prompt's n rows), for every variable whose first value is not a string: mean@k and, when
k > 1, std@k (population), and best@m / worst@m for m in 2, 4, 8, ... below k and k itself, by
bootstrap (1,000 draws with replacement, seeded: the real one seeds numpy, this one Python's random,
so the values differ but the names and what they average do not); then, per data source, variable
and metric name, the mean over the uids that have that metric name. maj@ (needs a "pred" variable)
is not modelled: the agent loop never sends one.
"""
import random
from collections import defaultdict


def _sizes(k):
    sizes, m = [], 2
    while m < k:
        sizes.append(m)
        m *= 2
    return sizes + [k] if k > 1 else []


def _bootstrap(values, m, reduce, seed, draws=1000):
    rng = random.Random(seed)
    picks = [reduce(rng.choice(values) for _ in range(m)) for _ in range(draws)]
    mean = sum(picks) / draws
    return mean, (sum((p - mean) ** 2 for p in picks) / draws) ** 0.5


def process_validation_metrics(data_sources, sample_uids, infos_dict, seed=42):
    grouped = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for i, source in enumerate(data_sources):
        for var, values in infos_dict.items():
            grouped[source][sample_uids[i]][var].append(values[i])
    per_name = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for source, uids in grouped.items():
        for var_values in uids.values():
            for var, values in var_values.items():
                if not values or isinstance(values[0], str):
                    continue
                k = len(values)
                mean = sum(values) / k
                metric = {f"mean@{k}": float(mean)}
                if k > 1:
                    metric[f"std@{k}"] = float((sum((v - mean) ** 2 for v in values) / k) ** 0.5)
                for m in _sizes(k):
                    metric[f"best@{m}/mean"], metric[f"best@{m}/std"] = _bootstrap(values, m, max, seed)
                    metric[f"worst@{m}/mean"], metric[f"worst@{m}/std"] = _bootstrap(values, m, min, seed)
                for name, value in metric.items():
                    per_name[source][var][name].append(value)
    return {source: {var: {name: sum(v) / len(v) for name, v in names.items()} for var, names in per_var.items()} for source, per_var in per_name.items()}


def _reduce(name, values):
    """torch.mean / max / min of a 1-d selection: max and min of an empty one raise, as torch does."""
    if not values:
        if name == "mean":
            return float("nan")
        raise RuntimeError(f"{name}(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with the 'dim' argument.")
    return {"mean": sum(values) / len(values), "max": max(values), "min": min(values)}[name]


def compute_data_metrics(batch, use_critic=False):
    width = len(batch.batch["responses"].data[0])
    attention = batch.batch["attention_mask"].data
    lengths = [sum(row[-width:]) for row in attention]
    kept = [i for i, n in enumerate(lengths) if n > 0]
    if not kept:
        raise ValueError("All samples are aborted, this should not happen.")
    scores = [sum(row) for row in batch.batch["token_level_scores"].data]
    rewards = [sum(row) for row in batch.batch["token_level_rewards"].data]
    mask = batch.batch["response_mask"].data
    valid_adv = [a for row, m in zip(batch.batch["advantages"].data, mask) for a, k in zip(row, m) if k]
    valid_ret = [a for row, m in zip(batch.batch["returns"].data, mask) for a, k in zip(row, m) if k]
    metrics = {}
    for name, values in (("critic/score", [scores[i] for i in kept]), ("critic/rewards", [rewards[i] for i in kept]), ("critic/advantages", valid_adv), ("critic/returns", valid_ret), ("response_length", lengths)):
        for stat in ("mean", "max", "min"):
            metrics[f"{name}/{stat}"] = _reduce(stat, values)
    return metrics
