"""The Python adapters against a live `termgrade serve` (TERMGRADE_URL), with the machine's python3.

The verl loop runs against the stand-in verl classes in verl_standin/ (verl cannot be installed
here), a character-level tokenizer and a scripted server manager: test doubles, labelled as such.
The sessions and grades are real: real HTTP, real sandboxes.
"""
import asyncio
import json
import os
import re
import sys
import tempfile
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(HERE, "verl_standin"))
sys.path.insert(0, os.path.join(ROOT, "integrations"))
sys.path.insert(0, os.path.join(ROOT, "integrations", "verl"))

from termgrade_client import TermgradeAPIError, TermgradeClient  # noqa: E402
import termgrade_agent_loop  # noqa: E402,F401  (registers the loop)
from verl.experimental.agent_loop.agent_loop import Config, DictConfigWrap, instantiate, postprocess, registered, vllm_max_tokens  # noqa: E402

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
    def __init__(self, token_ids, log_probs):
        self.token_ids = token_ids
        self.log_probs = log_probs


class ScriptedServerManager:
    """TEST DOUBLE for verl's server manager: replies from a script, token-in/token-out, with the
    vLLM server's max_tokens rule (stand-in) applied, so a request for 0 tokens is caught."""

    def __init__(self, replies, logprobs=True, delay=0.0, prompt_length=4096, response_length=4096, max_model_len=16384):
        self.replies = list(replies)
        self.prompts = []
        self.max_tokens = []
        self.logprobs = logprobs
        self.delay = delay
        self.lengths = (prompt_length, response_length, max_model_len)

    async def generate(self, request_id, *, prompt_ids, sampling_params, image_data=None, video_data=None):
        self.prompts.append(list(prompt_ids))
        limit = vllm_max_tokens(dict(sampling_params), prompt_ids, *self.lengths)
        if limit <= 0:
            raise AssertionError("vLLM was asked for max_tokens=0")
        self.max_tokens.append(limit)
        if self.delay:
            await asyncio.sleep(self.delay)
        ids = [ord(c) for c in self.replies.pop(0)][:limit]
        return TokenOutput(ids, [-0.5] * len(ids) if self.logprobs else None)


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


def agent_loop_entry():
    """The agent-loop config entry integrations/verl/agent_loops.yaml gives verl."""
    with open(os.path.join(ROOT, "integrations", "verl", "agent_loops.yaml")) as f:
        text = f.read()
    name = re.search(r"name:\s*(\S+)", text).group(1)
    target = re.search(r"_target_:\s*(\S+)", text).group(1)
    return name, {"_target_": target}


def make_loop(manager, response_length=4096, max_turns=5, calculate_log_probs=True):
    """The loop as verl builds it: hydra-style instantiate of the config entry, wrapped configs."""
    name, entry = agent_loop_entry()
    assert name == "termgrade_agent" and registered(name)["_target_"].endswith(entry["_target_"].rpartition(".")[2])
    config = Config({"actor_rollout_ref": {"rollout": {"response_length": response_length, "prompt_length": 4096, "calculate_log_probs": calculate_log_probs, "multi_turn": {"max_assistant_turns": max_turns}}}, "data": {}})
    return instantiate(entry, trainer_config=DictConfigWrap(config), server_manager=manager, tokenizer=CharTokenizer(), processor=None, dataset_cls=None, dataset_config=DictConfigWrap(Config({})))


def rollout(loop):
    return loop.run({"temperature": 1.0}, extra_info={"task": "hello"}, reward_model={"ground_truth": "hello"})


class VerlLoopTests(unittest.TestCase):
    def run_loop(self, replies, **kw):
        manager = ScriptedServerManager(replies, logprobs=kw.pop("logprobs", True))
        kw.setdefault("calculate_log_probs", manager.logprobs)
        loop = make_loop(manager, **kw)
        out = asyncio.run(rollout(loop))
        return out, manager

    def test_a_rollout_that_solves_the_task(self):
        out, manager = self.run_loop([tool_call("echo hello > /app/out.txt") + "<|end|>", "Done.<|end|>"])
        self.assertEqual(out.reward_score, 1.0)
        self.assertEqual(out.extra_fields["reward_extra_info"]["acc"], 1)
        self.assertFalse(out.extra_fields["is_infra_failure"])
        postprocess(out, 4096)
        self.assertEqual(len(out.response_ids), len(out.response_logprobs))
        first = len(tool_call("echo hello > /app/out.txt") + "<|end|>")
        self.assertEqual(out.response_mask[:first], [1] * first)
        self.assertIn(0, out.response_mask)
        self.assertEqual(out.response_mask[-1], 1)
        observation = "".join(chr(t) for t, m in zip(out.response_ids, out.response_mask) if m == 0)
        self.assertIn("exit code 0", observation)
        self.assertEqual(manager.prompts[1][: len(manager.prompts[0])], manager.prompts[0])
        self.assertEqual(manager.prompts[1][len(manager.prompts[0]):], out.response_ids[: len(manager.prompts[1]) - len(manager.prompts[0])])
        self.assertGreater(out.metrics["tool_calls"], 0, "timings measured, not zeros")

    def test_a_rollout_that_does_nothing(self):
        out, _ = self.run_loop(["I give up.<|end|>"])
        self.assertEqual(out.reward_score, 0.0)
        self.assertEqual(out.extra_fields["reward_extra_info"]["acc"], 0)
        self.assertEqual(out.response_mask, [1] * len(out.response_ids))

    def test_the_response_budget_is_respected(self):
        # 80 tokens of budget: the first reply takes most of it, the observation is cut to fit,
        # and no generation is ever asked for 0 tokens or more than what is left.
        reply = tool_call("echo hello > /app/out.txt") + "x" * 10
        out, manager = self.run_loop([reply, "more " * 40], response_length=80)
        self.assertLessEqual(len(out.response_ids), 80)
        postprocess(out, 80)
        self.assertEqual(manager.max_tokens[0], 80)
        self.assertTrue(all(0 < m <= 80 for m in manager.max_tokens))

    def test_logprobs_absent_are_not_invented(self):
        out, _ = self.run_loop(["I give up.<|end|>"], logprobs=False)
        self.assertIsNone(out.response_logprobs)
        postprocess(out, 4096)
        # calculate_log_probs on but none came back: the row is not trained on, no logprobs made up
        out, _ = self.run_loop(["I give up.<|end|>"], logprobs=False, calculate_log_probs=True)
        self.assertEqual((out.extra_fields["termgrade_status"], set(out.response_mask)), ("no_logprobs", {0}))
        self.assertEqual(set(out.response_logprobs), {0.0})

    def test_a_batch_larger_than_the_server_is_queued_not_crashed(self):
        # Six rollouts at once against a server with room for four sessions: two are told 429 and wait.
        async def batch():
            loops = [make_loop(ScriptedServerManager([tool_call("sleep 1") + "<|end|>", "Done.<|end|>"], delay=0.2)) for _ in range(6)]
            return await asyncio.gather(*(rollout(loop) for loop in loops))

        outs = asyncio.run(batch())
        self.assertEqual([o.extra_fields["termgrade_status"] for o in outs], ["graded"] * 6)

    def test_http_does_not_block_the_event_loop(self):
        # While a rollout waits on the server (an exec of 1.5 s), other coroutines keep running.
        async def go():
            ticks = []

            async def heartbeat():
                while True:
                    ticks.append(1)
                    await asyncio.sleep(0.01)

            beat = asyncio.ensure_future(heartbeat())
            manager = ScriptedServerManager([tool_call("sleep 1.5") + "<|end|>", "Done.<|end|>"])
            seen = []
            generate = manager.generate

            async def counting(*args, **kwargs):
                seen.append(len(ticks))
                return await generate(*args, **kwargs)

            manager.generate = counting
            out = await rollout(make_loop(manager))
            beat.cancel()
            # Between the two generations the loop only ran the exec: count the beats in it.
            return out, seen[1] - seen[0]

        out, ticks = asyncio.run(go())
        self.assertEqual(out.extra_fields["termgrade_status"], "graded")
        self.assertGreater(ticks, 50, f"the heartbeat ran {ticks} times during a 1.5 s exec")

    def test_a_policy_that_kills_its_sandbox_is_graded_0_not_left_out(self):
        # The policy's own command ends its sandbox: serve's exec answers 503, the server grades it (0).
        out, manager = self.run_loop([tool_call("kill -9 -1") + "<|end|>", "never asked"])
        self.assertEqual((out.reward_score, out.extra_fields["termgrade_status"]), (0.0, "graded"))
        self.assertEqual(out.extra_fields["reward_extra_info"], {"acc": 0, "graded": 1})
        self.assertFalse(out.extra_fields["is_infra_failure"])
        self.assertEqual(out.extra_fields["termgrade_attempts"], 1, "not tried again: the policy's doing")
        self.assertEqual(len(manager.prompts), 1)
        self.assertEqual(set(out.response_mask), {1}, "its tokens are trained on, with reward 0")

    def test_output_the_chat_template_cannot_render_ends_the_turns_and_is_graded(self):
        class Strict(CharTokenizer):
            def apply_chat_template(self, messages, **kw):
                if any("FORBIDDEN" in str(m.get("content", "")) for m in messages):
                    raise ValueError("the template cannot render this tool output")
                return super().apply_chat_template(messages, **kw)

        manager = ScriptedServerManager([tool_call("echo hello > /app/out.txt; echo FORBIDDEN") + "<|end|>", "never asked"])
        loop = make_loop(manager)
        loop.tokenizer = Strict()
        out = asyncio.run(rollout(loop))
        # the command solved the task before its output broke the template: the server's grade stands
        self.assertEqual((out.reward_score, out.extra_fields["termgrade_attempts"]), (1.0, 1))
        self.assertEqual(len(manager.prompts), 1)

    def test_a_validation_copy_past_n_is_not_run(self):
        # verl pads a validation batch with copies of its first rows (same uid): with val_kwargs.n 1,
        # the first rollout of the prompt runs, the copy is answered from serve's group and never runs
        def row(manager):
            return make_loop(manager).run({"temperature": 1.0}, extra_info={"task": "hello", "split": "validation"}, uid="val-prompt-1")

        first, copy = ScriptedServerManager([tool_call("echo hello > /app/out.txt") + "<|end|>", "Done.<|end|>"]), ScriptedServerManager(["never asked"])
        a = asyncio.run(row(first))
        b = asyncio.run(row(copy))
        self.assertEqual((a.reward_score, a.extra_fields["termgrade_status"]), (1.0, "graded"))
        self.assertEqual((b.extra_fields["termgrade_status"], b.extra_fields["reward_extra_info"]["graded"]), ("validation_padding", 0))
        self.assertEqual(copy.prompts, [], "the copy generated nothing and opened no session")
        group = TermgradeClient(URL, TOKEN).group("val-val-prompt-1")
        self.assertEqual((group["task"], group["rewards"]), ("hello", [1]))

    def test_infrastructure_failure_is_masked_out_of_the_loss(self):
        saved = os.environ.get("TERMGRADE_URL")
        os.environ["TERMGRADE_URL"] = "http://127.0.0.1:9"  # nothing listens on the discard port
        try:
            out, _ = self.run_loop(["never asked"])
        finally:
            os.environ["TERMGRADE_URL"] = saved
        self.assertTrue(out.extra_fields["is_infra_failure"])
        self.assertEqual(set(out.response_mask), {0})
        # the same logprob type as a graded row (calculate_log_probs is on): zeros under mask 0, as verl pads
        self.assertEqual(out.response_logprobs, [0.0] * len(out.response_ids))
        self.assertEqual(out.extra_fields["termgrade_attempts"], 3)
        postprocess(out, 4096)


class ScriptedModelManager:
    """TEST DOUBLE for verl's server manager, backed by the test tree's scripted OpenAI-compatible
    server over real HTTP (SCRIPTED_MODEL_URL): the prompt's tokens decoded to text (one token per
    character), the model's reply encoded back, logprobs given when asked."""

    def __init__(self, model):
        self.model = model

    def _complete(self, text):
        body = json.dumps({"model": self.model, "messages": [{"role": "user", "content": text}]}).encode()
        req = urllib.request.Request(os.environ["SCRIPTED_MODEL_URL"] + "/chat/completions", data=body, headers={"content-type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as res:
            return json.loads(res.read())["choices"][0]["message"]["content"] or ""

    async def generate(self, request_id, *, prompt_ids, sampling_params, **_):
        reply = await asyncio.to_thread(self._complete, "".join(chr(t) for t in prompt_ids))
        ids = [ord(c) for c in reply][: sampling_params["max_tokens"]]
        return TokenOutput(ids, [-0.5] * len(ids) if sampling_params.get("logprobs") else None)


class CurriculumGroupTests(unittest.TestCase):
    """Two rollouts of one prompt (one verl uid) through the loop with TERMGRADE_TASK=auto: one serve
    group, one task, graded 1 (the solver) and 0 (the quitter), labelled with the checkpoint."""

    def test_a_group_from_the_live_curriculum(self):
        checkpoints = tempfile.mkdtemp()
        with open(os.path.join(checkpoints, "latest_checkpointed_iteration.txt"), "w") as f:
            f.write("5")
        os.environ["TERMGRADE_TASK"] = "auto"
        try:
            def rollout(model):
                config = Config({"actor_rollout_ref": {"rollout": {"response_length": 4096, "prompt_length": 4096, "calculate_log_probs": True, "n": 2, "multi_turn": {"max_assistant_turns": 5}}}, "data": {}, "trainer": {"experiment_name": "e2e", "default_local_dir": checkpoints}})
                _, entry = agent_loop_entry()
                loop = instantiate(entry, trainer_config=DictConfigWrap(config), server_manager=ScriptedModelManager(model), tokenizer=CharTokenizer(), processor=None, dataset_cls=None, dataset_config=DictConfigWrap(Config({})))
                return loop.run({"temperature": 1.0, "logprobs": True}, extra_info={"task": "ignored-with-auto", "split": "train"}, uid="uid-e2e-1")

            async def both():
                return await asyncio.gather(rollout("solver"), rollout("quitter"))

            solver, quitter = asyncio.run(both())
            # a third rollout of the prompt (n is 2): serve answers the member call 409, the loop runs it
            # in a fresh session of the group's task, outside the group
            third = asyncio.run(rollout("solver-again"))
        finally:
            del os.environ["TERMGRADE_TASK"]
        self.assertEqual((solver.reward_score, quitter.reward_score), (1.0, 0.0))
        for row in (solver, quitter):
            self.assertEqual(row.extra_fields["termgrade_task"], "hello")
            self.assertEqual(row.extra_fields["termgrade_policy"], "e2e/ckpt-5")
            self.assertEqual(row.extra_fields["termgrade_group"], "uid-e2e-1")
            self.assertEqual(len(row.response_logprobs), len(row.response_ids))
        client = TermgradeClient(URL, TOKEN)
        group = client.group("uid-e2e-1")
        self.assertEqual((group["task"], group["done"], sorted(group["rewards"])), ("hello", True, [0, 1]))
        # a third rollout of a prompt whose n is 2 (a verl retry of a member, say) gets no session of the group
        self.assertEqual((third.reward_score, third.extra_fields["termgrade_task"], third.extra_fields["termgrade_group"], third.extra_fields["termgrade_policy"]), (1.0, "hello", "", "e2e/ckpt-5"))
        with self.assertRaises(TermgradeAPIError) as extra:
            client.group_member("uid-e2e-1", "auto", 2, policy="e2e/ckpt-5", split="train")
        self.assertEqual((extra.exception.status, extra.exception.code), (409, "conflict"))


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=1).result
    failed = len(result.failures) + len(result.errors)
    print(f"python adapter tests: {result.testsRun - failed} ok of {result.testsRun}")
    sys.exit(1 if failed else 0)
