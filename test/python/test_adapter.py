"""The Python adapters against a live `termgrade serve` (TERMGRADE_URL), with the machine's python3.

The verl loop runs against the stand-in verl classes in verl_standin/ (verl cannot be installed
here), a character-level tokenizer and a scripted server manager: test doubles, labelled as such.
The sessions and grades are real: real HTTP, real sandboxes.
"""
import asyncio
import json
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(HERE, "verl_standin"))
sys.path.insert(0, os.path.join(ROOT, "integrations"))
sys.path.insert(0, os.path.join(ROOT, "integrations", "verl"))

from termgrade_client import TermgradeAPIError, TermgradeClient  # noqa: E402
import termgrade_agent_loop  # noqa: E402,F401  (registers the loop)
from verl.experimental.agent_loop.agent_loop import registered  # noqa: E402

URL = os.environ["TERMGRADE_URL"]
TOKEN = os.environ.get("TERMGRADE_TOKEN")


class CharTokenizer:
    """TEST DOUBLE: one token per character, a plain-text chat template."""

    def apply_chat_template(self, messages, tools=None, add_generation_prompt=False, tokenize=True):
        text = "".join(f"<|{m.get('role', 'system')}|>{m.get('content', '')}\n" for m in messages)
        if add_generation_prompt:
            text += "<|assistant|>"
        return [ord(c) for c in text]

    def decode(self, ids, skip_special_tokens=False):
        return "".join(chr(i) for i in ids)


class TokenOutput:
    def __init__(self, token_ids):
        self.token_ids = token_ids
        self.log_probs = [-0.5] * len(token_ids)


class ScriptedServerManager:
    """TEST DOUBLE for verl's server manager: replies from a script, token-in/token-out."""

    def __init__(self, replies):
        self.replies = list(replies)
        self.prompts = []

    async def generate(self, request_id, *, prompt_ids, sampling_params, image_data=None):
        self.prompts.append(list(prompt_ids))
        return TokenOutput([ord(c) for c in self.replies.pop(0)])


def tool_call(command):
    return '<tool_call>\n{"name": "bash", "arguments": {"command": %s}}\n</tool_call>' % json.dumps(command)


class ClientTests(unittest.TestCase):
    def setUp(self):
        self.tg = TermgradeClient(URL, TOKEN)

    def test_tasks(self):
        self.assertIn("hello", [t["task"] for t in self.tg.tasks()])

    def test_session_solves_and_fails(self):
        with self.tg.session("hello", policy="py") as s:
            self.assertEqual(s.exec("echo hello > /app/out.txt")["exit_code"], 0)
            grade = s.verify()
        self.assertEqual(grade["reward"], 1)
        self.assertEqual(grade["metrics"]["acc"], 1)
        with self.tg.session("hello") as s:
            self.assertEqual(s.verify()["reward"], 0)
            with self.assertRaises(TermgradeAPIError) as e:
                s.exec("true")
            self.assertEqual((e.exception.status, e.exception.code), (410, "gone"))

    def test_errors(self):
        with self.assertRaises(TermgradeAPIError) as e:
            self.tg.session("no-such-task")
        self.assertEqual((e.exception.status, e.exception.code), (404, "not_found"))


class VerlLoopTests(unittest.TestCase):
    def run_loop(self, replies):
        loop_cls = registered("termgrade_agent")
        manager = ScriptedServerManager(replies)
        config = {"actor_rollout_ref": {"rollout": {"response_length": 4096, "multi_turn": {"max_assistant_turns": 5}}}}
        loop = loop_cls(config, manager, CharTokenizer())
        out = asyncio.run(loop.run({"temperature": 1.0}, extra_info={"task": "hello"}, reward_model={"ground_truth": "hello"}))
        return out, manager

    def test_a_rollout_that_solves_the_task(self):
        out, manager = self.run_loop([tool_call("echo hello > /app/out.txt") + "<|end|>", "Done.<|end|>"])
        self.assertEqual(out.reward_score, 1.0)
        self.assertEqual(out.extra_fields["reward_extra_info"]["acc"], 1)
        self.assertFalse(out.extra_fields["is_infra_failure"])
        self.assertEqual(len(out.response_ids), len(out.response_mask))
        self.assertEqual(len(out.response_ids), len(out.response_logprobs))
        # model tokens (mask 1), then the observation (mask 0), then model tokens again
        first = len(tool_call("echo hello > /app/out.txt") + "<|end|>")
        self.assertEqual(out.response_mask[:first], [1] * first)
        self.assertIn(0, out.response_mask)
        self.assertEqual(out.response_mask[-1], 1)
        observation = "".join(chr(t) for t, m in zip(out.response_ids, out.response_mask) if m == 0)
        self.assertIn("exit code 0", observation)
        # token-in/token-out: the second call's prompt is the first prompt plus every response token so far
        self.assertEqual(manager.prompts[1][: len(manager.prompts[0])], manager.prompts[0])
        self.assertEqual(manager.prompts[1][len(manager.prompts[0]):], out.response_ids[: len(manager.prompts[1]) - len(manager.prompts[0])])

    def test_a_rollout_that_does_nothing(self):
        out, _ = self.run_loop(["I give up.<|end|>"])
        self.assertEqual(out.reward_score, 0.0)
        self.assertEqual(out.extra_fields["reward_extra_info"]["acc"], 0)
        self.assertEqual(out.response_mask, [1] * len(out.response_ids))


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=1).result
    failed = len(result.failures) + len(result.errors)
    print(f"python adapter tests: {result.testsRun - failed} ok of {result.testsRun}")
    sys.exit(1 if failed else 0)
