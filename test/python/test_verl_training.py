"""A verl training step's batch built from termgrade_agent rows, through the verl stand-in
(verl_standin/: per-worker merge, DataProto.concat, GRPO and the estimator registry, validation
scoring, written from verl b178a3cd's source). Standard library only, no server: the termgrade
client is replaced by a scripted one (TEST DOUBLE) whose sessions grade as each row's script says;
real HTTP against a real server is in test_adapter.py.
"""
import asyncio
import http.client
import json
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(HERE, "verl_standin"))
sys.path.insert(0, os.path.join(ROOT, "integrations"))
sys.path.insert(0, os.path.join(ROOT, "integrations", "verl"))

# As the README's command: importing verl imports these (termgrade_grpo registers, validation wraps)
os.environ["VERL_USE_EXTERNAL_MODULES"] = "termgrade_advantage,termgrade_validation"
import verl  # noqa: E402,F401
import termgrade_agent_loop  # noqa: E402
from termgrade_client import TermgradeAPIError  # noqa: E402
from verl._tensor import Tensor  # noqa: E402
from verl.experimental.agent_loop.agent_loop import Config, DictConfigWrap, manager_generate  # noqa: E402
from verl.protocol import DataProto  # noqa: E402
from verl.trainer.ppo import core_algos, metric_utils  # noqa: E402
from verl.trainer.ppo.ray_trainer import compute_advantage, validation_metrics  # noqa: E402

PROMPT_LEN, RESPONSE_LEN = 256, 64
F = "F"  # a rollout whose every attempt fails for infrastructure


class CharTokenizer:
    """TEST DOUBLE: one token per character, a plain-text chat template."""

    pad_token_id = 0

    def apply_chat_template(self, messages, tools=None, add_generation_prompt=False, tokenize=True, **kwargs):
        text = "".join(f"<|{m.get('role', 'system')}|>{m.get('content', '')}\n" for m in messages)
        return [ord(c) for c in text + ("<|assistant|>" if add_generation_prompt else "")]

    def decode(self, ids, skip_special_tokens=False):
        return "".join(chr(i) for i in ids)


class Out:
    def __init__(self, ids, logprobs):
        self.token_ids, self.log_probs = ids, logprobs


class OneReply:
    """TEST DOUBLE for verl's server manager: always the same short answer, with logprobs when asked."""

    async def generate(self, request_id, *, prompt_ids, sampling_params, **_):
        ids = [ord(c) for c in "Done."]
        return Out(ids, [-0.25] * len(ids) if sampling_params.get("logprobs") else None)


class ScriptedSession:
    def __init__(self, client, task, outcome):
        self.client, self.task, self.outcome = client, task, outcome
        self.id, self.instruction, self.tools, self.group_id, self.member = "s", "Say done. " * client.instruction_repeat, [], None, None

    def exec(self, command, timeout_sec=180):
        return {"output": "", "exit_code": 0, "timed_out": False}

    def verify(self):
        if isinstance(self.outcome, Exception):
            raise self.outcome
        if self.outcome is None:
            return {"reward": None, "status": "infra", "metrics": {"acc": 0}, "tests": []}
        return {"reward": float(self.outcome), "status": "graded", "metrics": {"acc": int(self.outcome == 1)}, "tests": []}

    def close(self):
        pass


class ScriptedTermgrade:
    """TEST DOUBLE for TermgradeClient: attempt i of the row grades as outcomes[i] (None: no grade;
    an exception: raised by verify; past the list: no grade)."""

    def __init__(self, outcomes, instruction_repeat=1):
        self.outcomes, self.opened, self.instruction_repeat = list(outcomes), [], instruction_repeat

    def session(self, task, policy=None, split=None):
        i = len(self.opened)
        self.opened.append((task, policy))
        return ScriptedSession(self, task, self.outcomes[i] if i < len(self.outcomes) else None)


def make_loop(logprobs, n=4):
    config = Config({"actor_rollout_ref": {"rollout": {"response_length": RESPONSE_LEN, "prompt_length": PROMPT_LEN, "calculate_log_probs": logprobs, "n": n, "multi_turn": {"max_assistant_turns": 3}}}, "data": {}, "trainer": {"experiment_name": "exp"}})
    return termgrade_agent_loop.TermgradeAgentLoop(trainer_config=DictConfigWrap(config), server_manager=OneReply(), tokenizer=CharTokenizer(), processor=None, dataset_cls=None, dataset_config=DictConfigWrap(Config({})))


def outcomes_of(script):
    """A row's script: F fails every attempt; (None, 1) fails once then grades 1; 0 or 1 grades at once."""
    if script == F:
        return [None, None, None]
    return list(script) if isinstance(script, tuple) else [script]


def step_batch(layout, logprobs):
    """A step: layout[w] is worker w's rows (their scripts); group g = rows with uid u<g>, n per group."""
    scripts = [s for worker in layout for s in worker]
    n = len(layout[0])
    uids = [f"u{i // n}" for i in range(len(scripts))]
    extra = [{"task": "t", "split": "train", "script": s} for s in scripts]
    batch = DataProto({}, {"uid": uids, "extra_info": extra, "raw_prompt": [[]] * len(scripts), "data_source": ["termgrade"] * len(scripts)})

    async def run_row(fields):
        loop = make_loop(logprobs, n)
        loop.client = ScriptedTermgrade(outcomes_of(fields["extra_info"]["script"]))
        params = {"temperature": 1.0, "logprobs": logprobs}
        return await loop.run(params, **{k: v for k, v in fields.items() if k != "raw_prompt"})

    out = manager_generate(batch, len(layout), run_row, PROMPT_LEN, RESPONSE_LEN)
    return DataProto({}, dict(batch.non_tensor_batch)).union(out), scripts


def graded_only(data):
    """The same batch without the rows whose every attempt failed."""
    keep = [i for i, g in enumerate(data.non_tensor_batch["graded"]) if g == 1]
    return DataProto({k: Tensor([v.data[i] for i in keep]) for k, v in data.batch.items()}, {k: [v[i] for i in keep] for k, v in data.non_tensor_batch.items()}, data.meta_info), keep


def row_advantage(data, i):
    mask = data.batch["response_mask"].data[i]
    values = [a for a, m in zip(data.batch["advantages"].data[i], mask) if m]
    return values[0] if values else 0.0


LAYOUTS = {
    "failures first and last in one worker only": [[F, 1, 0, F], [1, 1, 0, 1]],
    "a failure first in the second worker only": [[1, 0, 1, 1], [F, 0, 1, 1]],
    "a failure last in the first worker only": [[1, 1, 1, F], [0, 0, 1, 0]],
    "a failure retried into a grade": [[(None, 1), 0, 1, 1], [F, F, 1, 0]],
    "every row of one worker failed": [[1, 0, 0, 1], [F, F, F, F]],
}


class StepTests(unittest.TestCase):
    def test_the_batch_merges_and_advantages_ignore_failures(self):
        for name, layout in LAYOUTS.items():
            for logprobs in (True, False):
                with self.subTest(name, calculate_log_probs=logprobs):
                    data, scripts = step_batch(layout, logprobs)
                    self.assertEqual(len(data), len(scripts))
                    self.assertEqual("rollout_log_probs" in data.batch, logprobs)
                    self.assertEqual(data.meta_info["reward_extra_keys"], ["acc", "graded"])
                    failed = [i for i, s in enumerate(scripts) if s == F]
                    self.assertEqual([i for i, g in enumerate(data.non_tensor_batch["graded"]) if g == 0], failed)
                    for i in failed:
                        self.assertEqual(sum(data.batch["response_mask"].data[i]), 0)
                        self.assertEqual(data.non_tensor_batch["termgrade_attempts"][i], 3)
                    compute_advantage(data, "termgrade_grpo", config=Config({"norm_adv_by_std_in_grpo": True}))
                    alone, keep = graded_only(data)
                    compute_advantage(alone, "grpo", norm_adv_by_std_in_grpo=True)
                    for j, i in enumerate(keep):
                        self.assertAlmostEqual(row_advantage(data, i), row_advantage(alone, j), places=6)
                    for i in failed:
                        self.assertEqual(set(data.batch["advantages"].data[i]), {0.0})

    def test_dr_grpo_without_the_std_too(self):
        data, _ = step_batch(LAYOUTS["failures first and last in one worker only"], False)
        compute_advantage(data, "termgrade_grpo", config=Config({"norm_adv_by_std_in_grpo": False}))
        # group u0 graded [1, 0]: mean 0.5
        self.assertAlmostEqual(row_advantage(data, 1), 0.5)
        self.assertAlmostEqual(row_advantage(data, 2), -0.5)

    def test_verls_own_grpo_counts_a_failure_as_0(self):
        # The control: with verl's grpo the graded rows' advantages move, so the test above can fail.
        data, _ = step_batch(LAYOUTS["failures first and last in one worker only"], False)
        compute_advantage(data, "grpo", norm_adv_by_std_in_grpo=False)
        self.assertAlmostEqual(row_advantage(data, 1), 0.75)  # mean of [0, 1, 0, 0] is 0.25

    def test_rows_of_two_shapes_break_the_merge(self):
        # The control for the merge: a key only some workers' rows carry, or logprobs on only some rows.
        data_a, _ = step_batch([[1, 1]], False)
        data_b, _ = step_batch([[1, 1]], False)
        data_b.non_tensor_batch["infra_reason_only_here"] = ["x", "y"]
        with self.assertRaises(AssertionError):
            DataProto.concat([data_a, data_b])
        with self.assertRaises(AssertionError):
            DataProto.concat([data_b, data_a])
        data_c, _ = step_batch([[1, 1]], True)
        with self.assertRaises(KeyError):
            DataProto.concat([data_a, data_c])

    def test_validation_leaves_failures_out(self):
        data, scripts = step_batch([[F, 1, 0, F], [1, 1, 0, 1], [F, F, F, F], [0, 0, 1, 1]], False)
        metrics = validation_metrics(data)
        prompts = [scripts[i : i + 4] for i in range(0, len(scripts), 4)]
        graded = [[s for s in p if s != F] for p in prompts]
        scored = [g for g in graded if g]  # a prompt with no graded row is in no score
        # every prompt with a graded row counts, its mean over its graded rows only, named @4 as verl names it
        self.assertAlmostEqual(metrics["val-core/termgrade/acc/mean@4"], sum(sum(g) / len(g) for g in scored) / len(scored))
        self.assertAlmostEqual(metrics["val-aux/termgrade/reward/mean@4"], sum(sum(g) / len(g) for g in scored) / len(scored))
        self.assertAlmostEqual(metrics["val-aux/termgrade/graded/mean@4"], sum(len(g) for g in graded) / len(scripts))
        # best of 4 needs 4 graded rows: only the prompts with no failure (2 and 4) are in it; no size but 2 and 4 appears
        clean, _ = step_batch([[1, 1, 0, 1], [0, 0, 1, 1]], False)
        self.assertAlmostEqual(metrics["val-core/termgrade/acc/best@4/mean"], validation_metrics(clean)["val-core/termgrade/acc/best@4/mean"])
        self.assertFalse([k for k in metrics if "/acc/" in k and "@2/" not in k and "@4" not in k], metrics)
        # exactly the scores of a validation batch that never had the failed rows, when no prompt lost one
        same, _ = step_batch([[1, 1, 0, 1], [F, F, F, F], [0, 0, 1, 1]], False)
        mine = {k: v for k, v in validation_metrics(same).items() if "/graded/" not in k}
        self.assertEqual(mine, {k: v for k, v in validation_metrics(clean).items() if "/graded/" not in k})

    def test_verls_own_validation_counts_a_failure_as_0(self):
        data, scripts = step_batch([[F, 1, 0, F], [1, 1, 0, 1]], False)
        infos = {"reward": data.batch["rm_scores"].sum(dim=-1).tolist(), "acc": list(data.non_tensor_batch["acc"])}
        original = metric_utils.process_validation_metrics.original
        unwrapped = original(list(data.non_tensor_batch["data_source"]), list(data.non_tensor_batch["uid"]), infos)
        self.assertAlmostEqual(unwrapped["termgrade"]["acc"]["mean@4"], (1 / 4 + 3 / 4) / 2)
        self.assertAlmostEqual(validation_metrics(data)["val-core/termgrade/acc/mean@4"], (1 / 2 + 3 / 4) / 2)


class RowTests(unittest.TestCase):
    def run_row(self, outcomes, logprobs=False, repeat=1):
        loop = make_loop(logprobs)
        loop.client = ScriptedTermgrade(outcomes, instruction_repeat=repeat)
        return asyncio.run(loop.run({"logprobs": logprobs}, extra_info={"task": "t"}, uid="u")), loop.client

    def test_errors_of_any_kind_end_in_a_failed_row_not_an_exception(self):
        for error in (http.client.IncompleteRead(b"x"), json.JSONDecodeError("bad", "doc", 0), ValueError("x"), TermgradeAPIError(410, "gone", "expired"), ConnectionResetError()):
            with self.subTest(type(error).__name__):
                out, client = self.run_row([error, error, error])
                self.assertEqual(out.extra_fields["reward_extra_info"], {"acc": 0.0, "graded": 0})
                self.assertEqual(len(client.opened), 3, "retried in a fresh session each time")
                self.assertIn(type(error).__name__ if not isinstance(error, TermgradeAPIError) else "gone", out.extra_fields["infra_reason"])

    def test_a_retry_that_grades_is_a_graded_row(self):
        out, client = self.run_row([None, 1])
        self.assertEqual((out.reward_score, out.extra_fields["termgrade_attempts"], len(client.opened)), (1.0, 2, 2))
        self.assertEqual(out.extra_fields["termgrade_policy"], "exp/ckpt-0")

    def test_a_prompt_too_long_is_cut_to_fit(self):
        out, _ = self.run_row([1], repeat=200)  # 2,000 characters of instruction, 256 tokens of prompt
        self.assertLessEqual(len(out.prompt_ids), PROMPT_LEN)
        self.assertIn("cut to fit", "".join(chr(t) for t in out.prompt_ids))

    def test_every_row_has_the_same_keys(self):
        rows = [self.run_row(o, logprobs=True)[0] for o in ([1], [None] * 3, [ValueError("x")] * 3)]
        self.assertEqual({tuple(r.extra_fields) for r in rows}, {termgrade_agent_loop.ROW_EXTRA_KEYS})
        self.assertEqual({tuple(r.extra_fields["reward_extra_info"]) for r in rows}, {termgrade_agent_loop.REWARD_EXTRA_KEYS})
        self.assertTrue(all(len(r.response_logprobs) == len(r.response_ids) for r in rows))


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=1).result
    failed = len(result.failures) + len(result.errors)
    print(f"verl training tests: {result.testsRun - failed} ok of {result.testsRun}")
    sys.exit(1 if failed else 0)
