"""verl's validation scores for termgrade rollouts: a failed rollout is left out, not counted as 0.

verl's validation groups each variable's values by data source and prompt (uid) and averages them
(`process_validation_metrics`); a rollout that failed for infrastructure (no grade: the agent loop
returns it with `reward_extra_info.graded` 0, acc 0 and reward 0) would count as a failure of the
policy. Imported, this module wraps that function, in verl's metric_utils and wherever the trainer
bound it by name, so that every variable but `graded` is computed over the graded rows only:

- mean@n and std@n of a prompt are over its graded rows, named with the prompt's row count n as
  verl names them, so every prompt with a graded row counts in val-core's mean@n;
- best@m / worst@m (maj@m) are bootstrap draws of m of the graded rows: a prompt keeps the sizes m
  below its graded count; a size equal to a graded count below n is dropped (best of n cannot be
  drawn from fewer than n graded rows, and a separate `best@7` would average a few prompts only);
- a prompt with no graded row is in no metric but `graded`;
- `graded` itself keeps every row: val-aux/<source>/graded/mean@n is the share of rows graded.

Rows without a `graded` value (another agent loop's) are scored as verl scores them. verl imports
this module in every process that imports verl when its name is in VERL_USE_EXTERNAL_MODULES,
before the trainer module binds the function:

    VERL_USE_EXTERNAL_MODULES=termgrade_advantage,termgrade_validation
"""
import re
import sys
from collections import defaultdict

from verl.trainer.ppo import metric_utils

_SIZE = re.compile(r"^([a-z]+)@(\d+)(/.*)?$")


def _rename(name, graded, rows):
    """A prompt's metric name over its graded rows, or None when it must be dropped (see above)."""
    match = _SIZE.match(name)
    if not match or graded == rows or int(match.group(2)) != graded:
        return name
    if match.group(1) in ("mean", "std"):
        return f"{match.group(1)}@{rows}{match.group(3) or ''}"
    return None


def graded_only(process):
    if getattr(process, "termgrade_graded_only", False):
        return process

    def wrapped(data_sources, sample_uids, infos_dict, *args, **kwargs):
        graded = infos_dict.get("graded")
        if graded is None:
            return process(data_sources, sample_uids, infos_dict, *args, **kwargs)
        prompts = defaultdict(list)
        for i, (source, uid) in enumerate(zip(data_sources, sample_uids)):
            prompts[(source, uid)].append(i)
        values = defaultdict(list)  # (source, variable, metric name) -> one value per prompt

        def score(source, uid, rows, infos, total):
            named = process([source] * len(rows), [uid] * len(rows), infos, *args, **kwargs)
            for var, metrics in named.get(source, {}).items():
                for name, value in metrics.items():
                    name = name if var == "graded" else _rename(name, len(rows), total)
                    if name is not None:
                        values[(source, var, name)].append(value)

        for (source, uid), rows in prompts.items():
            kept = [i for i in rows if graded[i]]
            score(source, uid, rows, {"graded": [graded[i] for i in rows]}, len(rows))
            if kept:
                others = {var: [column[i] for i in kept] for var, column in infos_dict.items() if var != "graded"}
                score(source, uid, kept, others, len(rows))
        out = defaultdict(lambda: defaultdict(dict))
        for (source, var, name), per_prompt in values.items():
            out[source][var][name] = float(sum(per_prompt) / len(per_prompt))
        return out

    wrapped.termgrade_graded_only = True
    wrapped.original = process
    return wrapped


metric_utils.process_validation_metrics = graded_only(metric_utils.process_validation_metrics)
_trainer = sys.modules.get("verl.trainer.ppo.ray_trainer")
if _trainer is not None and hasattr(_trainer, "process_validation_metrics"):
    _trainer.process_validation_metrics = metric_utils.process_validation_metrics
