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
  otherwise;
- the validation batch (`validate`, _validate :565-612): a uid per prompt when the rows carry none
  (:568-571), the batch repeated val_kwargs.n times interleaved (:574-576), padded to a multiple of
  the agent-loop workers with copies of its first rows (pad_dataproto_to_divisor, :598-603), every
  padded row generated (run: the copies too), then the copies dropped (unpad_dataproto, :609);
- the training step's metrics (`train_step_metrics`): compute_advantage, then compute_data_metrics
  (:1586 and :1682), token_level_scores and token_level_rewards both the rm_scores here.

And the DAPO recipe's generation (`dapo_generate`, recipe/dapo/dapo_ray_trainer.py, as the
review of issue 48 read it): the batch repeated n times interleaved and generated WITHOUT a uid
column; uids are assigned after generation.
"""
import uuid
from verl.trainer.ppo import core_algos
from verl.protocol import DataProto, pad_dataproto_to_divisor, unpad_dataproto
from verl.trainer.ppo.metric_utils import compute_data_metrics, process_validation_metrics


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


def validate(batch, val_n, num_workers, generate):
    """One validation batch as _validate runs it; `generate(padded) -> DataProto` is the rollout."""
    if "uid" not in batch.non_tensor_batch:
        batch.non_tensor_batch["uid"] = [str(uuid.uuid4()) for _ in range(len(batch))]
    batch = batch.repeat(val_n, interleave=True)
    padded, pad_size = pad_dataproto_to_divisor(batch, num_workers)
    out = unpad_dataproto(generate(padded), pad_size)
    return validation_metrics(DataProto({}, dict(batch.non_tensor_batch)).union(out))


def train_step_metrics(data, adv_estimator, config=None, norm_adv_by_std_in_grpo=True):
    data.batch["token_level_scores"] = data.batch["rm_scores"]
    data.batch["token_level_rewards"] = data.batch["rm_scores"]
    compute_advantage(data, adv_estimator, norm_adv_by_std_in_grpo=norm_adv_by_std_in_grpo, config=config)
    return compute_data_metrics(data)


def dapo_generate(batch, n, generate):
    """The DAPO recipe's generation: rows repeated n times with no uid yet, uids given afterwards."""
    out = generate(batch.repeat(n, interleave=True))
    batch.non_tensor_batch["uid"] = [str(uuid.uuid4()) for _ in range(len(batch))]
    return batch.repeat(n, interleave=True).union(out)
