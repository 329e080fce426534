"""TEST STAND-IN for the parts of verl.trainer.ppo.ray_trainer (volcengine/verl b178a3cd) a step's
batch goes through after generation, written from its source, not copied:

- compute_advantage (ray_trainer.py:130-219): "grpo" calls GRPO with index = the uid column and
  the norm_adv_by_std_in_grpo argument (:178-190); any other name is looked up in the registry and
  called with token_level_rewards, response_mask, config and (when there is a uid column) index
  (:191-218). token_level_rewards are the agent loop's rm_scores here (no KL in the reward);
- validation (`validation_metrics`, from _validate :553-678, _compute_or_extract_reward :480-517
  and _val_metrics_update :680-700): the score of a row is its rm_scores summed ("reward"), the
  reward_extra_keys of meta_info are read from the batch, and process_validation_metrics, bound by
  name when this module is imported (:46-51, as verl does), gives each data source's metrics; the
  "core" variable is acc when present, else reward; a metric is val-core when it is the core
  variable's mean, maj or best at the largest size any of its metric names carries, val-aux
  otherwise.
"""
from verl.trainer.ppo import core_algos
from verl.trainer.ppo.metric_utils import process_validation_metrics


def compute_advantage(data, adv_estimator, norm_adv_by_std_in_grpo=True, config=None):
    rewards, mask = data.batch["rm_scores"], data.batch["response_mask"]
    if adv_estimator == "grpo":
        adv, ret = core_algos.compute_grpo_outcome_advantage(token_level_rewards=rewards, response_mask=mask, index=data.non_tensor_batch["uid"], norm_adv_by_std_in_grpo=norm_adv_by_std_in_grpo)
    else:
        fn = core_algos.get_adv_estimator_fn(adv_estimator)
        kwargs = {"token_level_rewards": rewards, "response_mask": mask, "config": config}
        if "uid" in data.non_tensor_batch:
            kwargs["index"] = data.non_tensor_batch["uid"]
        adv, ret = fn(**kwargs)
    data.batch["advantages"], data.batch["returns"] = adv, ret
    return data


def validation_metrics(data):
    scores = data.batch["rm_scores"].sum(dim=-1).tolist()
    infos = {"reward": scores}
    for key in data.meta_info.get("reward_extra_keys", []):
        infos[key] = list(data.non_tensor_batch[key])
    by_source = process_validation_metrics(list(data.non_tensor_batch["data_source"]), list(data.non_tensor_batch["uid"]), infos)
    metrics = {}
    for source, per_var in by_source.items():
        core = "acc" if "acc" in per_var else "reward"
        for var, named in per_var.items():
            n_max = max(int(name.split("@")[-1].split("/")[0]) for name in named)
            for name, value in named.items():
                core_metric = var == core and name.startswith(("mean", "maj", "best")) and f"@{n_max}" in name
                metrics[f"{'val-core' if core_metric else 'val-aux'}/{source}/{var}/{name}"] = value
    return metrics
