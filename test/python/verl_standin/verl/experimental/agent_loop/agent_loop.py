"""TEST STAND-IN for verl's agent-loop surface (verl cannot be installed here), written from verl's
source (verl/experimental/agent_loop/agent_loop.py, v0.6.0 to its January 2026 main), not copied:

- AgentLoopBase.__init__(trainer_config, server_manager, tokenizer, processor, dataset_cls,
  dataset_config, **kwargs) receives the trainer config wrapped in DictConfigWrap and keeps the
  unwrapped config as self.config;
- loops are built by hydra.utils.instantiate from an agent-loop config entry ({name, _target_})
  with those keyword arguments (`instantiate` below does what hydra does for such an entry);
- AgentLoopOutput: prompt_ids, response_ids, response_mask and metrics are required; metrics
  holds generate_sequences, tool_calls (seconds) and num_preempted;
- `postprocess` stands for what verl does to each output: pads the response to
  rollout.response_length (a longer one cannot be padded) and the logprobs with zeros when given;
- the vLLM server's max_tokens: sampling_params' max_tokens, else response_length + prompt_length
  minus the prompt, clamped to [0, room left in the context];
- from volcengine/verl b178a3cd, verl/experimental/agent_loop/agent_loop.py: the per-sample
  padding (`pad_output`, _agent_loop_postprocess at :521-640; logprobs padded with zeros only when
  given, :580-583), a worker's merge of its rows (`worker_postprocess`, _postprocess at :732-806:
  rollout_log_probs only if the FIRST row has them, :742-743, then torch.cat of every row's;
  rm_scores only when every row has a reward_score, each at index valid_response_length - 1 (for an
  empty response -1: the last position, as torch indexes), :761-767; reward_extra_info keys taken from the
  first row and read from every row, :774-777; extra_fields keys the union over the worker's rows,
  a row without one giving None, :786-793; reward_extra_keys in meta_info, :797-800), and the
  manager's split over workers and DataProto.concat of their batches (`manager_generate`, :947-968).
Nothing here is verl's code or ships with termgrade.
"""
import asyncio
import importlib

from verl._tensor import Tensor, cat
from verl.protocol import DataProto

_REGISTRY = {}

METRIC_KEYS = {"generate_sequences", "tool_calls", "num_preempted"}


def register(name):
    def wrap(cls):
        _REGISTRY[name] = {"_target_": f"{cls.__module__}.{cls.__qualname__}"}
        return cls
    return wrap


def registered(name):
    return _REGISTRY[name]


class DictConfigWrap:
    def __init__(self, config):
        self.config = config


class Config(dict):
    """Attribute and .get access over nested dicts, as OmegaConf's DictConfig gives."""

    def __getattr__(self, key):
        try:
            value = self[key]
        except KeyError:
            raise AttributeError(key) from None
        return Config(value) if isinstance(value, dict) else value

    def get(self, key, default=None):
        value = super().get(key, default)
        return Config(value) if isinstance(value, dict) else value


def instantiate(config, **kwargs):
    module, _, name = config["_target_"].rpartition(".")
    return getattr(importlib.import_module(module), name)(**kwargs)


class AgentLoopBase:
    def __init__(self, trainer_config, server_manager, tokenizer, processor, dataset_cls, dataset_config, **kwargs):
        if not isinstance(trainer_config, DictConfigWrap) or not isinstance(dataset_config, DictConfigWrap):
            raise TypeError("trainer_config and dataset_config come wrapped in DictConfigWrap")
        self.config = trainer_config.config
        self.server_manager = server_manager
        self.tokenizer = tokenizer
        self.processor = processor
        self.dataset_cls = dataset_cls
        self.dataset_config = dataset_config.config


class AgentLoopOutput:
    REQUIRED = ("prompt_ids", "response_ids", "response_mask", "metrics")
    OPTIONAL = {"response_logprobs": None, "routed_experts": None, "multi_modal_data": None, "reward_score": None, "num_turns": 0, "extra_fields": None}

    def __init__(self, **kwargs):
        unknown = set(kwargs) - set(self.REQUIRED) - set(self.OPTIONAL)
        if unknown:
            raise TypeError(f"unknown AgentLoopOutput fields: {unknown}")
        missing = [f for f in self.REQUIRED if f not in kwargs]
        if missing:
            raise TypeError(f"AgentLoopOutput needs {missing}")
        if not isinstance(kwargs["metrics"], dict) or set(kwargs["metrics"]) - METRIC_KEYS:
            raise TypeError(f"metrics: a dict of {sorted(METRIC_KEYS)}")
        for f in self.REQUIRED:
            setattr(self, f, kwargs[f])
        for f, default in self.OPTIONAL.items():
            setattr(self, f, kwargs.get(f, default))
        if self.extra_fields is None:
            self.extra_fields = {}


def postprocess(output, response_length):
    """The padded row verl builds from an output; raises where verl's batch would break."""
    n = len(output.response_ids)
    if n > response_length:
        raise ValueError(f"response of {n} tokens does not fit response_length {response_length}")
    if len(output.response_mask) != n:
        raise ValueError("response_mask and response_ids differ in length")
    row = {"responses": output.response_ids + [0] * (response_length - n), "response_mask": output.response_mask + [0] * (response_length - n)}
    if output.response_logprobs is not None:
        if len(output.response_logprobs) != n:
            raise ValueError("response_logprobs and response_ids differ in length")
        row["rollout_log_probs"] = output.response_logprobs + [0.0] * (response_length - n)
    return row


def vllm_max_tokens(sampling_params, prompt_ids, prompt_length, response_length, max_model_len):
    room = max_model_len - len(prompt_ids)
    if "max_tokens" in sampling_params:
        wanted = sampling_params["max_tokens"]
    else:
        wanted = response_length + prompt_length - len(prompt_ids)
    return max(0, min(wanted, room))


def pad_output(output, raw_prompt, prompt_length, response_length, pad_id=0):
    """One row padded as verl pads it: prompt on the left, response on the right."""
    output.extra_fields["raw_prompt"] = raw_prompt
    p, r = list(output.prompt_ids), list(output.response_ids)
    if len(p) > prompt_length or len(r) > response_length:
        raise ValueError(f"prompt {len(p)} / response {len(r)} tokens do not fit {prompt_length} / {response_length}")
    if len(output.response_mask) != len(r):
        raise ValueError("response_mask and response_ids differ in length")
    row = {
        "prompts": Tensor([[pad_id] * (prompt_length - len(p)) + p]),
        "responses": Tensor([r + [pad_id] * (response_length - len(r))]),
        "response_mask": Tensor([list(output.response_mask) + [0] * (response_length - len(r))]),
        "attention_mask": Tensor([[0] * (prompt_length - len(p)) + [1] * (len(p) + len(r)) + [0] * (response_length - len(r))]),
        "response_logprobs": None,
    }
    if output.response_logprobs is not None:
        if len(output.response_logprobs) != len(r):
            raise ValueError("response_logprobs and response_ids differ in length")
        row["response_logprobs"] = Tensor([list(output.response_logprobs) + [0.0] * (response_length - len(r))])
    row.update(reward_score=output.reward_score, num_turns=output.num_turns, extra_fields=output.extra_fields, metrics=output.metrics, prompt_length=prompt_length)
    return row


def worker_postprocess(inputs):
    """One worker's rows merged into its DataProto, with verl's rules (see the module docstring)."""
    batch = {key: cat([row[key] for row in inputs]) for key in ("prompts", "responses", "response_mask", "attention_mask")}
    if inputs[0]["response_logprobs"] is not None:
        parts = [row["response_logprobs"] for row in inputs]
        if any(part is None for part in parts):
            raise TypeError("expected Tensor as element in torch.cat, got NoneType")
        batch["rollout_log_probs"] = cat(parts)
    scores = [row["reward_score"] for row in inputs]
    if all(score is not None for score in scores):
        plen = inputs[0]["prompt_length"]
        rm = []
        for row, score in zip(inputs, scores):
            width = len(row["response_mask"].data[0])
            # scores[i, valid_length - 1] = reward: for an empty response that is index -1, which
            # torch reads as the last position (a masked one): the reward is kept, not dropped
            last = (sum(row["attention_mask"].data[0][plen:]) - 1) % width
            rm.append([score if j == last else 0.0 for j in range(width)])
        batch["rm_scores"] = Tensor(rm)
    non_tensor = {"__num_turns__": [row["num_turns"] for row in inputs]}
    infos = [row["extra_fields"].get("reward_extra_info", {}) for row in inputs]
    reward_extra_keys = list(infos[0].keys())
    for key in reward_extra_keys:
        non_tensor[key] = [info[key] for info in infos]
    keys = set(k for row in inputs for k in row["extra_fields"])
    for key in keys:
        non_tensor[key] = [row["extra_fields"].get(key) for row in inputs]
    meta = {"metrics": [row["metrics"] for row in inputs]}
    if "rm_scores" in batch:
        meta["reward_extra_keys"] = reward_extra_keys
    return DataProto(batch, non_tensor, meta)


def manager_generate(batch, num_workers, run_row, prompt_length, response_length):
    """The step's generation: the batch split in equal parts over the workers, each worker running
    its rows concurrently (`run_row(fields) -> AgentLoopOutput`), the parts concatenated."""

    async def worker(part):
        rows = [{k: v[i] for k, v in part.non_tensor_batch.items()} for i in range(len(part))]
        outputs = await asyncio.gather(*(run_row(fields) for fields in rows))
        return worker_postprocess([pad_output(o, f.get("raw_prompt"), prompt_length, response_length) for o, f in zip(outputs, rows)])

    return DataProto.concat([asyncio.run(worker(part)) for part in batch.chunk(num_workers)])
