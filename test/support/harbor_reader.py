#!/usr/bin/env python3
"""TEST DOUBLE, second and independent: Harbor's job folder read the way Harbor's pydantic models read it.

Written in Python with the standard library only, from the published models (models/job/config.py
JobConfig + RetryConfig + DatasetConfig, models/job/result.py JobResult + JobStats + the per-eval
stats, models/trial/result.py TrialResult + TimingInfo + ExceptionInfo + AgentInfo + ModelInfo,
models/trial/config.py TrialConfig + TaskConfig + AgentConfig + EnvironmentConfig + VerifierConfig,
models/agent/context.py AgentContext, the RolloutDetail typed dict, models/verifier/result.py
VerifierResult, models/task/id.py LocalTaskId). It shares no code with termgrade (TypeScript) nor
with test/support/harbor-models.ts, and reads JSON as Python does: an int is not a float here, a
dict key is a string that pydantic must turn into the declared key type.

What it checks, as pydantic's default (lax) validation does: every field without a default is
present, each value has a type pydantic accepts for its annotation (datetime strings parse, UUIDs
parse, int fields hold whole numbers, float | int dict keys are numbers), and, stricter than
pydantic, no field is written under a name these models do not have (a misspelt field would be
dropped silently by Harbor).

Usage: harbor_reader.py JOB_DIR
  exit 0: prints one JSON object, what Harbor would know of the folder (see summary()).
  exit 1: one line per problem on stderr, each `FILE: field.path: problem`.
"""

import json
import os
import sys
import uuid
from datetime import datetime


class Problems(Exception):
    pass


def fail(where, problem):
    raise Problems(f"{where}: {problem}")


# ---- the types pydantic accepts (lax mode) ----

def t_str(v, where):
    if not isinstance(v, str):
        fail(where, f"expected a string, got {type(v).__name__}")
    return v


def t_bool(v, where):
    if not isinstance(v, bool):
        fail(where, f"expected a boolean, got {type(v).__name__}")
    return v


def t_int(v, where):
    # pydantic takes a float with no fraction for an int; never a bool here (JSON true is not a count).
    if isinstance(v, bool) or not (isinstance(v, int) or (isinstance(v, float) and v.is_integer())):
        fail(where, f"expected an integer, got {v!r}")
    return int(v)


def t_float(v, where):
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        fail(where, f"expected a number, got {v!r}")
    return float(v)


def t_datetime(v, where):
    if not isinstance(v, str):
        fail(where, f"expected an ISO 8601 datetime string, got {v!r}")
    s = v[:-1] + "+00:00" if v.endswith("Z") else v
    try:
        return datetime.fromisoformat(s)
    except ValueError:
        fail(where, f"not a datetime: {v!r}")


def t_uuid(v, where):
    try:
        return uuid.UUID(t_str(v, where))
    except ValueError:
        fail(where, f"not a UUID: {v!r}")


def t_any(v, where):
    return v


def nullable(t):
    return lambda v, where: None if v is None else t(v, where)


def list_of(t):
    def check(v, where):
        if not isinstance(v, list):
            fail(where, f"expected a list, got {type(v).__name__}")
        return [t(x, f"{where}[{i}]") for i, x in enumerate(v)]

    return check


def dict_of(t, key=t_str):
    def check(v, where):
        if not isinstance(v, dict):
            fail(where, f"expected an object, got {type(v).__name__}")
        return {key(k, f"{where} key {k!r}"): t(x, f"{where}.{k}") for k, x in v.items()}

    return check


def key_number(k, where):
    # dict[float | int, ...]: pydantic turns a JSON key into the number it spells.
    try:
        n = float(k)
    except ValueError:
        fail(where, "a key that is not a number (float | int)")
    if n != n or n in (float("inf"), float("-inf")):
        fail(where, "a key that is not a finite number")
    return n


def key_int(k, where):
    try:
        return int(k)
    except ValueError:
        fail(where, "a key that is not an integer")


REQUIRED = object()


def model(name, fields):
    """A pydantic BaseModel: fields = {name: (type, default or REQUIRED)}."""

    def check(v, where):
        if not isinstance(v, dict):
            fail(where, f"expected an object ({name}), got {type(v).__name__}")
        extra = sorted(set(v) - set(fields))
        if extra:
            fail(where, f"{', '.join(extra)}: not a field of Harbor's {name}")
        out = {}
        for k, (t, default) in fields.items():
            if k in v:
                out[k] = t(v[k], f"{where}.{k}" if where else k)
            elif default is REQUIRED:
                fail(where or name, f"{k}: missing (Harbor's {name} requires it)")
            else:
                out[k] = default
        return out

    return check


def opt(t):
    return (nullable(t), None)


# ---- Harbor's models ----

TimingInfo = model("TimingInfo", {"started_at": opt(t_datetime), "finished_at": opt(t_datetime)})
ExceptionInfo = model(
    "ExceptionInfo",
    {
        "exception_type": (t_str, REQUIRED),
        "exception_message": (t_str, REQUIRED),
        "exception_traceback": (t_str, REQUIRED),
        "occurred_at": (t_datetime, REQUIRED),
    },
)
ModelInfo = model("ModelInfo", {"name": (t_str, REQUIRED), "provider": (t_str, REQUIRED)})
AgentInfo = model(
    "AgentInfo", {"name": (t_str, REQUIRED), "version": (t_str, REQUIRED), "model_info": opt(ModelInfo)}
)
ids = list_of(list_of(t_int))
# A TypedDict with total=False: any of its keys, no other.
RolloutDetail = model(
    "RolloutDetail",
    {"prompt_token_ids": opt(ids), "completion_token_ids": opt(ids), "logprobs": opt(list_of(list_of(t_float)))},
)
AgentContext = model(
    "AgentContext",
    {
        "n_input_tokens": opt(t_int),
        "n_cache_tokens": opt(t_int),
        "n_output_tokens": opt(t_int),
        "cost_usd": opt(t_float),
        "rollout_details": opt(list_of(RolloutDetail)),
        "metadata": opt(dict_of(t_any)),
    },
)
VerifierResult = model("VerifierResult", {"rewards": opt(dict_of(t_float))})
LocalTaskId = model("LocalTaskId", {"path": (t_str, REQUIRED)})

TaskConfig = model(
    "TaskConfig",
    {
        "path": opt(t_str),
        "git_url": opt(t_str),
        "git_commit_id": opt(t_str),
        "overwrite": (t_bool, False),
        "download_dir": opt(t_str),
        "source": opt(t_str),
    },
)
AgentConfig = model(
    "AgentConfig",
    {
        "name": opt(t_str),
        "import_path": opt(t_str),
        "model_name": opt(t_str),
        "override_timeout_sec": opt(t_float),
        "override_setup_timeout_sec": opt(t_float),
        "max_timeout_sec": opt(t_float),
        "kwargs": (dict_of(t_any), {}),
        "env": (dict_of(t_str), {}),
    },
)
ENVIRONMENT_TYPES = {"docker", "daytona", "e2b", "modal", "runloop", "gke"}


def t_env_type(v, where):
    if t_str(v, where) not in ENVIRONMENT_TYPES:
        fail(where, f"{v!r}: not one of Harbor's environment types")
    return v


EnvironmentConfig = model(
    "EnvironmentConfig",
    {
        "type": opt(t_env_type),
        "import_path": opt(t_str),
        "force_build": (t_bool, False),
        "delete": (t_bool, True),
        "override_cpus": opt(t_int),
        "override_memory_mb": opt(t_int),
        "override_storage_mb": opt(t_int),
        "override_gpus": opt(t_int),
        "kwargs": (dict_of(t_any), {}),
    },
)
VerifierConfig = model(
    "VerifierConfig",
    {"override_timeout_sec": opt(t_float), "max_timeout_sec": opt(t_float), "disable": (t_bool, False)},
)
TrialConfig = model(
    "TrialConfig",
    {
        "task": (TaskConfig, REQUIRED),
        "trial_name": (t_str, ""),
        "trials_dir": (t_str, "trials"),
        "timeout_multiplier": (t_float, 1.0),
        "agent_timeout_multiplier": opt(t_float),
        "verifier_timeout_multiplier": opt(t_float),
        "agent": (AgentConfig, None),
        "environment": (EnvironmentConfig, None),
        "verifier": (VerifierConfig, None),
        "artifacts": (list_of(t_any), []),
        "job_id": opt(t_uuid),
    },
)
TrialResult = model(
    "TrialResult",
    {
        "id": (t_uuid, None),
        "task_name": (t_str, REQUIRED),
        "trial_name": (t_str, REQUIRED),
        "trial_uri": (t_str, REQUIRED),
        "task_id": (LocalTaskId, REQUIRED),
        "source": opt(t_str),
        "task_checksum": (t_str, REQUIRED),
        "config": (TrialConfig, REQUIRED),
        "agent_info": (AgentInfo, REQUIRED),
        "agent_result": opt(AgentContext),
        "verifier_result": opt(VerifierResult),
        "exception_info": opt(ExceptionInfo),
        "started_at": opt(t_datetime),
        "finished_at": opt(t_datetime),
        "environment_setup": opt(TimingInfo),
        "agent_setup": opt(TimingInfo),
        "agent_execution": opt(TimingInfo),
        "verifier": opt(TimingInfo),
    },
)
EvalStats = model(
    "AgentDatasetStats",
    {
        "n_trials": (t_int, 0),
        "n_errors": (t_int, 0),
        "metrics": (list_of(dict_of(t_any)), []),
        "pass_at_k": (dict_of(t_float, key=key_int), {}),
        "reward_stats": (dict_of(dict_of(list_of(t_str), key=key_number)), {}),
        "exception_stats": (dict_of(list_of(t_str)), {}),
    },
)
# JobStats in Harbor's two spellings: n_trials / n_errors (older), n_completed_trials ... (newer).
JobStats = model(
    "JobStats",
    {
        "n_trials": (t_int, 0),
        "n_errors": (t_int, 0),
        "n_completed_trials": (t_int, 0),
        "n_errored_trials": (t_int, 0),
        "n_running_trials": (t_int, 0),
        "n_pending_trials": (t_int, 0),
        "n_cancelled_trials": (t_int, 0),
        "n_retries": (t_int, 0),
        "evals": (dict_of(EvalStats), {}),
        "n_input_tokens": opt(t_int),
        "n_cache_tokens": opt(t_int),
        "n_output_tokens": opt(t_int),
        "cost_usd": opt(t_float),
    },
)
JobResult = model(
    "JobResult",
    {
        "id": (t_uuid, REQUIRED),
        "started_at": (t_datetime, REQUIRED),
        "updated_at": opt(t_datetime),
        "finished_at": opt(t_datetime),
        "n_total_trials": (t_int, REQUIRED),
        "stats": (JobStats, REQUIRED),
        "trial_results": (list_of(TrialResult), []),
    },
)
DatasetConfig = model(
    "DatasetConfig",
    {
        "path": opt(t_str),
        "name": opt(t_str),
        "version": opt(t_str),
        "task_names": opt(list_of(t_str)),
        "exclude_task_names": opt(list_of(t_str)),
        "n_tasks": opt(t_int),
    },
)
RetryConfig = model(
    "RetryConfig",
    {
        "max_retries": (t_int, 0),
        "include_exceptions": opt(list_of(t_str)),
        "exclude_exceptions": opt(list_of(t_str)),
        "wait_multiplier": (t_float, 1.0),
        "min_wait_sec": (t_float, 1.0),
        "max_wait_sec": (t_float, 60.0),
    },
)
JobConfig = model(
    "JobConfig",
    {
        "job_name": (t_str, None),
        "jobs_dir": (t_str, "jobs"),
        "n_attempts": (t_int, 1),
        "timeout_multiplier": (t_float, 1.0),
        "agent_timeout_multiplier": opt(t_float),
        "verifier_timeout_multiplier": opt(t_float),
        "debug": (t_bool, False),
        "n_concurrent_trials": (t_int, 4),
        "quiet": (t_bool, False),
        "retry": (RetryConfig, None),
        "environment": (EnvironmentConfig, None),
        "verifier": (VerifierConfig, None),
        "metrics": (list_of(t_any), []),
        "agents": (list_of(AgentConfig), []),
        "datasets": (list_of(DatasetConfig), []),
        "tasks": (list_of(TaskConfig), []),
        "artifacts": (list_of(t_any), []),
    },
)


def task_source_rules(cfg, where):
    # TaskConfig / DatasetConfig validators: a local task or dataset names its path.
    if cfg.get("path") is None and cfg.get("name") is None:
        fail(where, "neither path nor name is set")
    if cfg.get("git_commit_id") is not None and cfg.get("git_url") is None:
        fail(where, "git_commit_id without git_url")


# ---- the folder ----

def load(file):
    with open(file, encoding="utf-8") as f:
        return json.load(f)


def iso(d):
    return None if d is None else d.isoformat()


def read_job_folder(job_dir):
    cfg_file = os.path.join(job_dir, "config.json")
    res_file = os.path.join(job_dir, "result.json")
    config = JobConfig(load(cfg_file), "")
    for i, t in enumerate(config["tasks"]):
        task_source_rules(t, f"{cfg_file}: tasks[{i}]")
    for i, d in enumerate(config["datasets"]):
        task_source_rules(d, f"{cfg_file}: datasets[{i}]")
    result = JobResult(load(res_file), "")
    trials = []
    for name in sorted(os.listdir(job_dir)):
        sub = os.path.join(job_dir, name)
        if not os.path.isdir(sub):
            continue
        rf = os.path.join(sub, "result.json")
        try:
            r = TrialResult(load(rf), "")
            c = TrialConfig(load(os.path.join(sub, "config.json")), "")
        except Problems as e:
            raise Problems(f"{sub}: {e}") from None
        task_source_rules(r["config"]["task"], f"{rf}: config.task")
        if r["trial_name"] != name:
            fail(rf, f"trial_name {r['trial_name']!r} is not its folder's name {name!r}")
        trials.append((name, r, c))
    return config, result, trials


def summary(config, result, trials):
    """What Harbor knows of the job: plain JSON, numbers as Python parsed them."""

    def trial(name, r):
        a = r["agent_result"] or {}
        rollouts = a.get("rollout_details") or []
        return {
            "folder": name,
            "id": None if r["id"] is None else str(r["id"]),
            "trial_name": r["trial_name"],
            "task_name": r["task_name"],
            "task_checksum": r["task_checksum"],
            "agent": r["agent_info"]["name"],
            "model": (r["agent_info"]["model_info"] or {}).get("name"),
            "rewards": (r["verifier_result"] or {}).get("rewards"),
            "exception_type": (r["exception_info"] or {}).get("exception_type"),
            "n_input_tokens": a.get("n_input_tokens"),
            "n_cache_tokens": a.get("n_cache_tokens"),
            "n_output_tokens": a.get("n_output_tokens"),
            "cost_usd": a.get("cost_usd"),
            "rollout_turns": sum(len(x.get("completion_token_ids") or []) for x in rollouts),
            "started_at": iso(r["started_at"]),
            "finished_at": iso(r["finished_at"]),
            "phases": {
                k: None if r[k] is None else [iso(r[k]["started_at"]), iso(r[k]["finished_at"])]
                for k in ("environment_setup", "agent_setup", "agent_execution", "verifier")
            },
        }

    return {
        "job": {
            "job_name": config["job_name"],
            "id": str(result["id"]),
            "n_total_trials": result["n_total_trials"],
            "n_trials": result["stats"]["n_trials"],
            "n_errors": result["stats"]["n_errors"],
            "evals": sorted(result["stats"]["evals"]),
        },
        "trials": [trial(n, r) for n, r, _ in trials],
    }


def main(argv):
    if len(argv) != 2:
        sys.stderr.write("usage: harbor_reader.py JOB_DIR\n")
        return 2
    try:
        config, result, trials = read_job_folder(argv[1])
    except Problems as e:
        sys.stderr.write(f"{e}\n")
        return 1
    except (OSError, json.JSONDecodeError) as e:
        sys.stderr.write(f"{getattr(e, 'filename', None) or argv[1]}: {e}\n")
        return 1
    json.dump(summary(config, result, trials), sys.stdout, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
