"""A verl agent loop whose environment is a `termgrade serve` session.

Register it by importing this module (verl's agent-loop config `agent_loop_config_path`, or an
import in your entry point) and select it per dataset row with the `agent_name` column, which
`termgrade export tasks` writes as `termgrade_agent`. The server is found through TERMGRADE_URL
(and TERMGRADE_TOKEN when it needs one).

One rollout: open a session for the row's task (extra_info.task) at the start of `run()`, then
generate token-in/token-out through verl's server manager (never re-applying the chat template to
the model's own tokens), run each bash tool call in the session, append the observation as
tokens with mask 0 (model tokens have mask 1), and at the end verify: the reward is the session's
grade; `extra_fields.reward_extra_info.acc` feeds DAPO's filter_groups. A grade whose reward is
None (infrastructure failure) is returned as reward 0 with `extra_fields.termgrade_status` saying
so and `extra_fields.is_infra_failure = True`, so a trainer can drop it rather than learn from it.
"""
import json
import os
import re
import sys
import uuid

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from termgrade_client import TermgradeClient  # noqa: E402

try:  # verl >= 0.5
    from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput, register
except ImportError:  # pragma: no cover - older layouts
    from verl.experimental.agent_loop import AgentLoopBase, AgentLoopOutput, register

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
    node = config
    for part in path.split("."):
        node = getattr(node, part, None) if not isinstance(node, dict) else node.get(part)
        if node is None:
            return default
    return node


@register("termgrade_agent")
class TermgradeAgentLoop(AgentLoopBase):
    def __init__(self, trainer_config, server_manager, tokenizer, **kwargs):
        super().__init__(trainer_config, server_manager, tokenizer, **kwargs)
        self.client = TermgradeClient(os.environ.get("TERMGRADE_URL", "http://127.0.0.1:8080"), os.environ.get("TERMGRADE_TOKEN"))
        self.max_turns = int(_setting(trainer_config, "actor_rollout_ref.rollout.multi_turn.max_assistant_turns", 30) or 30)
        self.response_length = int(_setting(trainer_config, "actor_rollout_ref.rollout.response_length", 8192) or 8192)
        self.observation_chars = 10000
        # Templates prepend a default system prompt to a conversation that has none; what they add
        # for an empty conversation is cut from each observation (as verl's own tool loop does).
        try:
            self.system_prefix = tokenizer.apply_chat_template([{}], add_generation_prompt=False, tokenize=True)
        except Exception:
            self.system_prefix = []

    def _encode_observation(self, content):
        """A tool message's tokens, as the chat template renders it after an assistant turn."""
        ids = self.tokenizer.apply_chat_template([{"role": "tool", "content": content}], add_generation_prompt=True, tokenize=True)
        n = len(self.system_prefix)
        return ids[n:] if n and ids[:n] == self.system_prefix else ids

    async def run(self, sampling_params, **kwargs):
        extra = kwargs.get("extra_info") or {}
        task = extra.get("task") or (kwargs.get("reward_model") or {}).get("ground_truth")
        session = self.client.session(task, policy=kwargs.get("policy"))
        try:
            messages = [{"role": "user", "content": session.instruction}]
            prompt_ids = self.tokenizer.apply_chat_template(messages, tools=session.tools, add_generation_prompt=True, tokenize=True)
            response_ids, response_mask, response_logprobs = [], [], []
            turns = 0
            request_id = uuid.uuid4().hex
            while turns < self.max_turns and len(response_ids) < self.response_length:
                out = await self.server_manager.generate(request_id=request_id, prompt_ids=prompt_ids + response_ids, sampling_params=sampling_params)
                ids = list(getattr(out, "token_ids", out))
                logprobs = getattr(out, "log_probs", None)
                turns += 1
                response_ids += ids
                response_mask += [1] * len(ids)
                response_logprobs += list(logprobs) if logprobs is not None else [0.0] * len(ids)
                commands = parse_tool_calls(self.tokenizer.decode(ids, skip_special_tokens=False))
                if not commands:
                    break
                outputs = []
                for command in commands:
                    r = session.exec(command)
                    outputs.append(f"exit code {r['exit_code']}{' (timed out)' if r['timed_out'] else ''}\n{r['output']}"[: self.observation_chars])
                obs = self._encode_observation("\n".join(outputs))
                response_ids += obs
                response_mask += [0] * len(obs)
                response_logprobs += [0.0] * len(obs)
            # The budget is the trainer's: never hand back more than response_length tokens.
            response_ids = response_ids[: self.response_length]
            response_mask = response_mask[: self.response_length]
            response_logprobs = response_logprobs[: self.response_length]
            grade = session.verify()
        finally:
            session.close()
        infra = grade["reward"] is None
        acc = grade["metrics"]["acc"] if grade["metrics"]["acc"] is not None else 0
        return AgentLoopOutput(
            prompt_ids=prompt_ids,
            response_ids=response_ids,
            response_mask=response_mask,
            response_logprobs=response_logprobs,
            reward_score=0.0 if infra else float(grade["reward"]),
            num_turns=turns * 2,
            metrics={},
            extra_fields={"reward_extra_info": {"acc": acc}, "termgrade_status": grade["status"], "is_infra_failure": infra, "tests": grade["tests"]},
        )
