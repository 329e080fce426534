"""TEST STAND-IN for verl.trainer.ppo.metric_utils.process_validation_metrics (volcengine/verl
b178a3cd, metric_utils.py:511-660), written from its source, not copied. Per data source and per
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
