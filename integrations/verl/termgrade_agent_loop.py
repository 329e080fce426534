"""A verl agent loop whose environment is a `termgrade serve` session.

Supported: verl at volcengine/verl b178a3cd (0.8.0.dev, January 2026) with `main_ppo`; written for
its agent-loop surface (loops built by `hydra.utils.instantiate` with the trainer config wrapped in
`DictConfigWrap`, `run(sampling_params, **kwargs)` called with the dataset row's fields).

Register it with `actor_rollout_ref.rollout.agent.agent_loop_config_path=integrations/verl/agent_loops.yaml`;
rows choose it by `agent_name` (`termgrade export tasks` writes `termgrade_agent`). The server is
found through TERMGRADE_URL (and TERMGRADE_TOKEN).

One rollout: a session on the row's task (`extra_info.task`), or with TERMGRADE_TASK=auto on the
live curriculum's pick, the n rollouts of one prompt (same verl `uid`) taking the n members of one
serve group so they share a task; generation token-in/token-out through verl's server manager;
each bash tool call run in the session, its observation appended with mask 0; then verify.

Every row has the same shape whatever happened, so verl's per-worker merge and
`DataProto.concat` never see two kinds of rows: the same `extra_fields` keys (ROW_EXTRA_KEYS), the
same `reward_extra_info` keys in the same order (REWARD_EXTRA_KEYS), and `response_logprobs` a list
exactly when `rollout.calculate_log_probs` is on (zeros under mask 0 where no token was generated,
as verl pads), else None.

What is left out is decided by the server's accounting (termgrade's one table, src/trial/accounting.ts:
a grade's `status`), never by the loop: whatever the policy does (a tool call that kills its
sandbox, output the chat template cannot render) ends its turns and the session is verified; the
server's grade stands, usually a graded 0. Only an attempt the infrastructure failed is tried again
in a fresh session (TERMGRADE_INFRA_RETRIES, default 2): a grade with status `infra`, the server
unreachable or answering badly (an empty body, a grade without `metrics.acc`), a session gone, the
generation server failing or returning no tokens. What still fails is a row with every response
token masked (`response_mask` all 0), `reward_extra_info.graded` 0, and reward 0 that the
`termgrade_grpo` estimator (termgrade_advantage.py) leaves out of its group's statistics.
Waiting on a full server (429) is bounded per rollout, over all its attempts (TERMGRADE_QUEUE_SEC).
Validation rows open the member group of their verl uid (n = val_kwargs.n), so the duplicates verl
pads a validation batch with are answered without running (their rows are dropped by verl anyway).
With TERMGRADE_TASK=auto a training row must carry its verl `uid` (main_ppo assigns it before
generation): the DAPO recipe assigns it after, and such a row is refused with an error saying so.
The policy label sent with every session is `<TERMGRADE_POLICY or trainer.experiment_name>/ckpt-N`,
N the checkpoint verl last wrote (`latest_checkpointed_iteration.txt` in trainer.default_local_dir).
"""
import asyncio
import json
import os
import re
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from termgrade_client import TermgradeAPIError, TermgradeClient, over_capacity_wait  # noqa: E402

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput, register  # noqa: E402

TOOL_CALL = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.S)


def parse_tool_calls(text):
    """Hermes-style tool calls (`<tool_call>{"name": ..., "arguments": {...}}</tool_call>`), as Qwen writes them."""
    calls = []
    for raw in TOOL_CALL.findall(text):
        try:
            call = json.loads(raw)
        except json.JSONDecodeError:
            continue
        args = call.get("arguments") or {}
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except json.JSONDecodeError:
                args = {}
        if call.get("name") == "bash" and isinstance(args.get("command"), str):
            calls.append(args["command"])
    return calls


def _setting(config, path, default):
    """A value of verl's (OmegaConf) trainer config, or of a plain dict shaped like it."""
    node = config
    for part in path.split("."):
        if node is None:
            return default
        node = node.get(part) if hasattr(node, "get") else getattr(node, part, None)
    return default if node is None else node


ROW_EXTRA_KEYS = ("reward_extra_info", "termgrade_status", "is_infra_failure", "infra_reason", "tests", "termgrade_task", "termgrade_policy", "termgrade_group", "termgrade_attempts")
REWARD_EXTRA_KEYS = ("acc", "graded")
AUTO = "auto"


class RolloutFailed(Exception):
    """An attempt that ended without a grade; `retry` False when trying again cannot help."""

    def __init__(self, status, reason, retry=True, task=None):
        super().__init__(reason)
        self.status, self.reason, self.retry, self.task = status, reason, retry, task


class ValidationPadding(Exception):
    """A validation row past its prompt's n: a duplicate verl padded the batch with (dropped after generation)."""


class RowRefused(Exception):
    """A row this loop cannot run as the trainer is set up (raised out of run(): the step fails, saying why)."""


class PolicyEnded(Exception):
    """The policy's turns ended by what the policy did (its command broke its sandbox, or printed what
    the chat template cannot render): the session is graded as it stands, as any other ending."""


def checked_grade(grade):
    """A grade as serve answers it, or RolloutFailed (infra: the server answered badly) naming what is wrong."""
    if not isinstance(grade, dict):
        raise RolloutFailed("infra", f"malformed grade: {'an empty body' if grade is None else type(grade).__name__}")
    status, reward = grade.get("status"), grade.get("reward")
    if status not in ("graded", "infra", "ungraded"):
        raise RolloutFailed("infra", f"malformed grade: status {status!r}")
    if status == "graded":
        acc = (grade.get("metrics") or {}).get("acc")
        if not _number(reward) or not _number(acc):
            raise RolloutFailed("infra", f"malformed grade: graded with reward {reward!r} and metrics.acc {acc!r}")
    elif reward is not None:
        raise RolloutFailed("infra", f"malformed grade: status {status} with reward {reward!r}")
    return grade


def _number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def policy_label(base, checkpoint_dir):
    """`<base>/ckpt-N`: N the last checkpoint verl wrote under checkpoint_dir (0 before the first)."""
    step = 0
    if checkpoint_dir:
        try:
            with open(os.path.join(str(checkpoint_dir), "latest_checkpointed_iteration.txt")) as f:
                step = int(f.read().strip())
        except (OSError, ValueError):
            step = 0
    return f"{base}/ckpt-{step}"


@register("termgrade_agent")
class TermgradeAgentLoop(AgentLoopBase):
    def __init__(self, trainer_config, server_manager, tokenizer, **kwargs):
        super().__init__(trainer_config, server_manager, tokenizer, **kwargs)
        # verl passes the trainer config wrapped (DictConfigWrap); the base class unwraps it into self.config.
        config = self.config
        self.client = TermgradeClient(os.environ.get("TERMGRADE_URL", "http://127.0.0.1:8080"), os.environ.get("TERMGRADE_TOKEN"))
        self.max_turns = int(_setting(config, "actor_rollout_ref.rollout.multi_turn.max_assistant_turns", 0) or 30)
        self.response_length = int(_setting(config, "actor_rollout_ref.rollout.response_length", 0))
        if self.response_length <= 0:
            raise ValueError("termgrade_agent: actor_rollout_ref.rollout.response_length is not set in the trainer config")
        self.prompt_length = int(_setting(config, "actor_rollout_ref.rollout.prompt_length", 0) or 0)
        self.want_logprobs = bool(_setting(config, "actor_rollout_ref.rollout.calculate_log_probs", False))
        self.group_size = int(_setting(config, "actor_rollout_ref.rollout.n", 1) or 1)
        self.val_group_size = int(_setting(config, "actor_rollout_ref.rollout.val_kwargs.n", 1) or 1)
        self.chat_kwargs = dict(_setting(config, "data.apply_chat_template_kwargs", {}) or {})
        self.observation_chars = 10000
        self.queue_sec = float(os.environ.get("TERMGRADE_QUEUE_SEC", "3600"))
        self.retries = int(os.environ.get("TERMGRADE_INFRA_RETRIES", "2"))
        self.curriculum = os.environ.get("TERMGRADE_TASK", "") == AUTO
        self.policy_base = os.environ.get("TERMGRADE_POLICY") or str(_setting(config, "trainer.experiment_name", "verl"))
        self.checkpoint_dir = _setting(config, "trainer.default_local_dir", None)
        # Templates prepend a default system prompt to a conversation that has none; what they add
        # for an empty conversation is cut from each observation (as verl's own tool loop does).
        try:
            self.system_prefix = self._template([{}], add_generation_prompt=False)
        except Exception:
            self.system_prefix = []

    def _template(self, messages, **kwargs):
        return self.tokenizer.apply_chat_template(messages, tokenize=True, **{**self.chat_kwargs, **kwargs})

    async def _call(self, fn, *args):
        """A blocking client call, run in a worker thread so this event loop keeps serving other rollouts."""
        return await asyncio.to_thread(fn, *args)

    async def _open(self, deadline, fn, *args):
        """A session, waiting while the server is at capacity (429) until the rollout's deadline
        (TERMGRADE_QUEUE_SEC from its start, over all its attempts), rather than failing the batch."""
        while True:
            try:
                return await self._call(fn, *args)
            except TermgradeAPIError as e:
                wait = over_capacity_wait(e)
                if wait is None or time.monotonic() + wait > deadline:
                    raise
                await asyncio.sleep(wait)

    async def _session(self, deadline, task, named, split, uid, policy):
        """This attempt's session: the task this row is bound to, else the row's or the curriculum's."""
        if task is not None:
            return await self._open(deadline, self.client.session, task, policy)
        if split == "validation":
            return await self._validation_session(deadline, named, uid, policy)
        if not self.curriculum:
            return await self._open(deadline, self.client.session, named, policy)
        if uid is None:
            raise RowRefused(
                "termgrade_agent: TERMGRADE_TASK=auto needs each row's verl uid during generation, so that a "
                "prompt's n rollouts share one task; this row has none (verl's DAPO recipe assigns uid after "
                "generation). Use main_ppo, or name the tasks (unset TERMGRADE_TASK: each row's extra_info.task)"
            )
        try:
            return await self._open(deadline, self.client.group_member, str(uid), AUTO, self.group_size, policy)
        except TermgradeAPIError as e:
            if e.status != 409:
                raise
            # Every member was handed out (an answer lost on the way): a fresh session of the group's task.
            group = await self._call(self.client.group, str(uid))
            return await self._open(deadline, self.client.session, group["task"], policy)

    async def _validation_session(self, deadline, named, uid, policy):
        """A validation rollout: one of the val_kwargs.n members of its prompt's group (its verl uid).
        verl pads a validation batch to a multiple of its workers with copies of its first rows (same
        uid), runs them, then drops them: the copy past n is answered 409 and never runs."""
        if uid is None:
            return await self._open(deadline, self.client.session, named, policy)
        try:
            return await self._open(deadline, self.client.group_member, f"val-{uid}", named, self.val_group_size, policy)
        except TermgradeAPIError as e:
            if e.status == 409:
                raise ValidationPadding(str(uid)) from None
            raise

    def _encode_observation(self, content):
        """A tool message's tokens, as the chat template renders it after an assistant turn."""
        ids = self._template([{"role": "tool", "content": content}], add_generation_prompt=True)
        n = len(self.system_prefix)
        return ids[n:] if n and ids[:n] == self.system_prefix else ids

    def _decode(self, ids):
        try:
            return self.tokenizer.decode(ids, skip_special_tokens=False)
        except Exception as e:  # noqa: BLE001  the policy's own tokens
            raise PolicyEnded(f"its reply cannot be decoded: {type(e).__name__}: {e}") from e

    def _prompt(self, instruction, tools):
        """The prompt's tokens, the instruction cut (with a note) until they fit rollout.prompt_length."""
        text = instruction
        for _ in range(40):
            try:
                ids = self._template([{"role": "user", "content": text}], tools=tools, add_generation_prompt=True)
            except Exception as e:  # noqa: BLE001  the task's instruction and the tokenizer: the same on every try
                raise RolloutFailed("prompt_template", f"the chat template cannot render the task's prompt: {type(e).__name__}: {e}", retry=False) from e
            over = len(ids) - self.prompt_length if self.prompt_length else 0
            if over <= 0:
                return ids
            if not text:
                break
            keep = max(0, len(text) - max(over, len(instruction) // 20) - 60)
            text = instruction[:keep] + "\n[instruction cut to fit the prompt length]" if keep else ""
        raise RolloutFailed("prompt_too_long", f"the prompt does not fit rollout.prompt_length={self.prompt_length}", retry=False)

    async def run(self, sampling_params, **kwargs):
        extra = kwargs.get("extra_info") or {}
        named = extra.get("task") or (kwargs.get("reward_model") or {}).get("ground_truth")
        split = extra.get("split")
        policy = policy_label(self.policy_base, self.checkpoint_dir)
        timings = {"generate_sequences": 0.0, "tool_calls": 0.0}
        deadline = time.monotonic() + self.queue_sec
        task, group, reasons, last = None, "", [], None
        for attempt in range(1, self.retries + 2):
            session = None
            try:
                session = await self._session(deadline, task, named, split, kwargs.get("uid"), policy)
                task = session.task
                group = group or session.group_id or ""
                done = await self._attempt(session, sampling_params, timings)
                grade = checked_grade(done["grade"])
            except ValidationPadding:
                return self._failed(RolloutFailed("validation_padding", "a copy verl padded the validation batch with: not run", retry=False), [], timings, named, policy, "", 0)
            except TermgradeAPIError as e:
                if e.status in (400, 404) and session is None:
                    raise  # a wrong task name is the dataset's (or the command's) mistake, not the infrastructure's
                last = RolloutFailed("infra", f"{e.status} {e.code}: {e.message}")
            except RolloutFailed as e:
                last = e
            except RowRefused:
                raise
            except Exception as e:  # noqa: BLE001  an answer cut short, a malformed body, a dead socket: the connection's
                # (what the policy causes never gets here: it ends its turns and is graded, see _attempt)
                last = RolloutFailed("infra", f"{type(e).__name__}: {e}")
            else:
                if grade["status"] == "graded":
                    return self._row(done, timings, task, policy, group, attempt)
                # The server's accounting: infra is tried again; ungraded (no reward, not infra) is not.
                last = RolloutFailed(grade["status"], f"no grade: {grade['status']} ({grade.get('error_class')})", retry=grade["status"] == "infra", task=done)
            reasons.append(last.reason)
            if not last.retry:
                break
        return self._failed(last, reasons, timings, task, policy, group, attempt)

    async def _generate(self, prompt_ids, response_ids, sampling_params, left, timings):
        """One model turn's tokens and logprobs; RolloutFailed (infra) when the generation server fails or gives none."""
        started = time.monotonic()
        try:
            out = await self.server_manager.generate(request_id=self.request_id, prompt_ids=prompt_ids + response_ids, sampling_params={**sampling_params, "max_tokens": left})
        except Exception as e:  # noqa: BLE001  the trainer's generation server: the model endpoint, infrastructure
            raise RolloutFailed("infra", f"generation failed: {type(e).__name__}: {e}") from e
        finally:
            timings["generate_sequences"] += time.monotonic() - started
        ids = list(getattr(out, "token_ids", None) or [])[:left]
        if not ids:
            raise RolloutFailed("infra", "generation failed: the server manager returned no tokens")
        logprobs = getattr(out, "log_probs", None)
        if self.want_logprobs and (logprobs is None or len(logprobs) < len(ids)):
            raise RolloutFailed("no_logprobs", "rollout.calculate_log_probs is on but the server manager returned no logprobs", retry=False)
        return ids, list(logprobs or [])[: len(ids)] if self.want_logprobs else []

    async def _attempt(self, session, sampling_params, timings):
        """One rollout in one session: generate, run the tool calls, verify. Closes the session.

        Whatever the policy causes ends its turns and the session is graded as it stands
        (PolicyEnded); the infrastructure's failures leave as exceptions (the attempt is retried)."""
        try:
            prompt_ids = self._prompt(session.instruction, session.tools)
            response_ids, response_mask, logprobs_all = [], [], []
            turns = 0
            self.request_id = uuid.uuid4().hex
            try:
                while turns < self.max_turns:
                    left = self.response_length - len(response_ids)
                    if left <= 0:
                        break
                    ids, logprobs = await self._generate(prompt_ids, response_ids, sampling_params, left, timings)
                    turns += 1
                    response_ids += ids
                    response_mask += [1] * len(ids)
                    logprobs_all += logprobs
                    commands = parse_tool_calls(self._decode(ids))
                    if not commands or len(response_ids) >= self.response_length:
                        break
                    obs = await self._observe(session, commands, timings)
                    obs = obs[: self.response_length - len(response_ids)]
                    response_ids += obs
                    response_mask += [0] * len(obs)
                    logprobs_all += [0.0] * len(obs) if self.want_logprobs else []
            except PolicyEnded:
                pass  # graded as it stands: the server's accounting says what the policy's doing counts
            grade = await self._call(session.verify)
        finally:
            try:
                await self._call(session.close)
            except Exception:  # noqa: BLE001  the server removes the sandbox itself when the session expires
                pass
        return {"prompt_ids": prompt_ids, "response_ids": response_ids, "response_mask": response_mask, "logprobs": logprobs_all, "grade": grade, "turns": turns}

    async def _observe(self, session, commands, timings):
        """The tool calls run in the session, their outputs as one observation's tokens; PolicyEnded
        when a command broke its sandbox (serve's exec answers 503) or the template cannot render the output."""
        started = time.monotonic()
        outputs = []
        try:
            for command in commands:
                try:
                    r = await self._call(session.exec, command)
                except TermgradeAPIError as e:
                    if e.status == 503:
                        raise PolicyEnded(f"its command broke its sandbox: {e.message}") from e
                    raise
                outputs.append(f"exit code {r['exit_code']}{' (timed out)' if r['timed_out'] else ''}\n{r['output']}"[: self.observation_chars])
        finally:
            timings["tool_calls"] += time.monotonic() - started
        try:
            return self._encode_observation("\n".join(outputs))
        except Exception as e:  # noqa: BLE001  the tokenizer's template on the policy's command output
            raise PolicyEnded(f"the chat template cannot render its command's output: {type(e).__name__}: {e}") from e

    def _extra(self, acc, graded, status, reason, tests, task, policy, group, attempts):
        """extra_fields with the one key set and order every row has (see ROW_EXTRA_KEYS)."""
        values = {
            "reward_extra_info": {"acc": float(acc), "graded": 1 if graded else 0},
            "termgrade_status": str(status),
            "is_infra_failure": not graded,
            "infra_reason": str(reason)[:500],
            "tests": list(tests or []),
            "termgrade_task": task or "",
            "termgrade_policy": policy,
            "termgrade_group": group or "",
            "termgrade_attempts": attempts,
        }
        return {key: values[key] for key in ROW_EXTRA_KEYS}

    def _row(self, done, timings, task, policy, group, attempts):
        grade = done["grade"]
        return AgentLoopOutput(
            prompt_ids=done["prompt_ids"],
            response_ids=done["response_ids"],
            response_mask=done["response_mask"],
            response_logprobs=done["logprobs"] if self.want_logprobs else None,
            reward_score=float(grade["reward"]),
            num_turns=done["turns"] * 2 + 1,
            metrics=timings,
            extra_fields=self._extra(grade["metrics"]["acc"], True, grade["status"], "", grade.get("tests"), task, policy, group, attempts),
        )

    def _failed(self, last, reasons, timings, task, policy, group, attempts):
        """No grade after every attempt: every token masked out of the loss, the failure said in extra_fields."""
        done = last.task if isinstance(last.task, dict) else {}
        pad = getattr(self.tokenizer, "pad_token_id", None)
        # verl pads each sample to response_length; one masked token keeps the row well formed.
        ids = [pad if pad is not None else 0]
        prompt_ids = done.get("prompt_ids") or self._template([{"role": "user", "content": ""}], add_generation_prompt=True)
        if self.prompt_length:
            prompt_ids = prompt_ids[-self.prompt_length:]
        grade = done.get("grade") or {}
        return AgentLoopOutput(
            prompt_ids=prompt_ids,
            response_ids=ids,
            response_mask=[0],
            response_logprobs=[0.0] if self.want_logprobs else None,
            reward_score=0.0,
            num_turns=done.get("turns", 0) * 2 + 1,
            metrics=timings,
            extra_fields=self._extra(0.0, False, last.status, " | ".join(reasons), grade.get("tests"), task, policy, group, attempts),
        )
