"""A verl training step's batch built from termgrade_agent rows, through the verl stand-in
(verl_standin/: per-worker merge, DataProto.concat, GRPO and the estimator registry, validation
scoring and its padding, compute_data_metrics, the DAPO recipe's late uid, written from verl
b178a3cd's source). Standard library only, no server: the termgrade
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
from verl.trainer.ppo.ray_trainer import compute_advantage, dapo_generate, train_step_metrics, validate, validation_metrics  # noqa: E402

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

    reply = "Done."

    async def generate(self, request_id, *, prompt_ids, sampling_params, **_):
        ids = [ord(c) for c in self.reply]
        return Out(ids, [-0.25] * len(ids) if sampling_params.get("logprobs") else None)


class NoTokens(OneReply):
    """TEST DOUBLE: a generation server that answers with no tokens at all."""

    reply = ""


EMPTY, NO_ACC = "empty body", "graded without metrics.acc"  # malformed answers of verify


class ScriptedSession:
    def __init__(self, client, task, outcome):
        self.client, self.task, self.outcome = client, task, outcome
        self.id, self.instruction, self.tools, self.group_id, self.member = "s", "Say done. " * client.instruction_repeat, [], None, None

    def exec(self, command, timeout_sec=180):
        return {"output": "", "exit_code": 0, "timed_out": False}

    def verify(self):
        if isinstance(self.outcome, Exception):
            raise self.outcome
        if self.outcome == EMPTY:
            return None  # what TermgradeClient.request gives for a 200 with no body
        if self.outcome == NO_ACC:
            return {"reward": 1.0, "status": "graded", "metrics": {}, "tests": []}
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


class SharedTermgrade(ScriptedTermgrade):
    """TEST DOUBLE for one server shared by every row of a batch: a session of task T grades as
    grades[T]; member groups as serve keeps them (the first n claims of a group_id get a session,
    the next one 409)."""

    def __init__(self, grades):
        super().__init__([])
        self.grades, self.claims = grades, {}

    def session(self, task, policy=None, split=None):
        self.opened.append((task, policy))
        return ScriptedSession(self, task, self.grades[task])

    def group_member(self, group_id, task, n, policy=None, split=None):
        self.claims[group_id] = self.claims.get(group_id, 0) + 1
        if self.claims[group_id] > n:
            raise TermgradeAPIError(409, "conflict", f'every member of group "{group_id}" was handed out already')
        return self.session(task, policy, split)


def make_loop(logprobs, n=4, val_n=1, manager=None):
    config = Config({"actor_rollout_ref": {"rollout": {"response_length": RESPONSE_LEN, "prompt_length": PROMPT_LEN, "calculate_log_probs": logprobs, "n": n, "val_kwargs": {"n": val_n}, "multi_turn": {"max_assistant_turns": 3}}}, "data": {}, "trainer": {"experiment_name": "exp"}})
    return termgrade_agent_loop.TermgradeAgentLoop(trainer_config=DictConfigWrap(config), server_manager=manager or OneReply(), tokenizer=CharTokenizer(), processor=None, dataset_cls=None, dataset_config=DictConfigWrap(Config({})))


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


class HonestFailureTests(unittest.TestCase):
    """What issue 48's review of verl found lenient: each test fails on the loop and estimator before it."""

    def run_row(self, outcomes, manager=None, **kw):
        loop = make_loop(False, manager=manager)
        loop.client = ScriptedTermgrade(outcomes)
        return asyncio.run(loop.run({}, extra_info={"task": "t"}, uid="u", **kw)), loop.client

    def test_a_group_with_one_graded_row_gives_it_zero_advantage(self):
        # group u0 has one graded row (1) and three failures; group u1 is graded whole
        data, _ = step_batch([[1, F, F, F], [0, 1, 1, 0]], False)
        compute_advantage(data, "termgrade_grpo", config=Config({"norm_adv_by_std_in_grpo": True}))
        self.assertEqual(set(data.batch["advantages"].data[0]), {0.0}, "no baseline: nothing to learn from the lone row")
        alone, keep = graded_only(data)
        compute_advantage(alone, "grpo", norm_adv_by_std_in_grpo=True)
        for j, i in enumerate(keep):
            if i >= 4:  # the whole group: exactly verl's grpo
                self.assertAlmostEqual(row_advantage(data, i), row_advantage(alone, j), places=6)
        # the control: verl's grpo gives the lone row its raw reward (mean 0, std 1)
        self.assertAlmostEqual(row_advantage(alone, 0), 1.0, places=5)

    def test_a_step_whose_every_rollout_failed_stops_before_verls_metrics(self):
        data, _ = step_batch([[F, F], [F, F]], False)
        with self.assertRaisesRegex(RuntimeError, r"termgrade_grpo: none of this step's 4 rollouts was graded"):
            train_step_metrics(data, "termgrade_grpo", config=Config({"norm_adv_by_std_in_grpo": True}))
        # the control: past the estimator, verl's compute_data_metrics fails on the empty selection
        data, _ = step_batch([[F, F], [F, F]], False)
        with self.assertRaisesRegex(RuntimeError, r"max\(\): Expected reduction dim"):
            train_step_metrics(data, "grpo")
        # a step with a graded row computes its metrics
        data, _ = step_batch([[1, F], [0, 1]], False)
        self.assertIn("critic/advantages/max", train_step_metrics(data, "termgrade_grpo", config=Config({"norm_adv_by_std_in_grpo": True})))

    def test_a_malformed_grade_is_the_servers_failure_not_an_exception(self):
        for outcome in (EMPTY, NO_ACC):
            with self.subTest(outcome):
                out, client = self.run_row([outcome] * 3)
                self.assertEqual(out.extra_fields["reward_extra_info"], {"acc": 0.0, "graded": 0})
                self.assertEqual(len(client.opened), 3, "retried in a fresh session each time")
                self.assertIn("malformed grade", out.extra_fields["infra_reason"])
        out, _ = self.run_row([EMPTY, 1])
        self.assertEqual((out.reward_score, out.extra_fields["termgrade_attempts"]), (1.0, 2))

    def test_a_generation_with_no_tokens_is_not_a_graded_empty_row(self):
        out, client = self.run_row([1, 1, 1], manager=NoTokens())
        self.assertEqual(out.extra_fields["reward_extra_info"]["graded"], 0)
        self.assertIn("returned no tokens", out.extra_fields["infra_reason"])
        self.assertEqual(len(client.opened), 3)
        # the stand-in keeps an empty row's reward where torch puts it (index -1), so a step still sums it
        data, _ = step_batch([[1, 1]], False)
        self.assertEqual([sum(r) for r in data.batch["rm_scores"].data], [1.0, 1.0])

    def test_the_wait_on_a_full_server_is_bounded_over_every_attempt(self):
        class Full(ScriptedTermgrade):
            def session(self, task, policy=None, split=None):
                self.opened.append((task, policy))
                raise TermgradeAPIError(429, "over_capacity", "all 2 sandboxes are in use", "0.1")

        os.environ["TERMGRADE_QUEUE_SEC"] = "0.5"
        try:
            loop = make_loop(False)
        finally:
            del os.environ["TERMGRADE_QUEUE_SEC"]
        loop.client = Full([])
        out = asyncio.run(loop.run({}, extra_info={"task": "t"}, uid="u"))
        self.assertEqual(out.extra_fields["reward_extra_info"]["graded"], 0)
        self.assertIn("over_capacity", out.extra_fields["infra_reason"])
        # 0.5 s for the rollout at 0.1 s a wait: about 5 asks in all, not 5 per attempt (3 attempts: 15)
        self.assertLessEqual(len(loop.client.opened), 7, loop.client.opened)

    def test_dapo_rows_without_a_uid_are_refused_under_the_curriculum(self):
        batch = DataProto({}, {"extra_info": [{"task": "t", "split": "train"}] * 2, "raw_prompt": [[]] * 2, "data_source": ["termgrade"] * 2})
        os.environ["TERMGRADE_TASK"] = "auto"
        clients = []
        try:
            async def run_row(fields):
                loop = make_loop(False, n=2)
                loop.client = SharedTermgrade({"auto": 1, "t": 1})
                clients.append(loop.client)
                return await loop.run({}, **{k: v for k, v in fields.items() if k != "raw_prompt"})

            with self.assertRaisesRegex(termgrade_agent_loop.RowRefused, r"TERMGRADE_TASK=auto needs each row's verl uid.*DAPO recipe"):
                dapo_generate(batch, 2, lambda rows: manager_generate(rows, 2, run_row, PROMPT_LEN, RESPONSE_LEN))
        finally:
            del os.environ["TERMGRADE_TASK"]
        self.assertEqual([c.opened for c in clients], [[]] * len(clients), "no session was opened for such a row")
        # named tasks need no uid: the DAPO recipe's rows run, each on its own task
        data = dapo_generate(batch, 2, lambda rows: manager_generate(rows, 2, lambda f: self._named_row(f), PROMPT_LEN, RESPONSE_LEN))
        self.assertEqual(list(data.non_tensor_batch["graded"]), [1, 1, 1, 1])
        self.assertEqual(len(set(data.non_tensor_batch["uid"])), 2)

    async def _named_row(self, fields):
        loop = make_loop(False, n=2)
        loop.client = SharedTermgrade({"t": 1})
        return await loop.run({}, **{k: v for k, v in fields.items() if k != "raw_prompt"})

    def test_validation_padding_is_not_run_against_the_server(self):
        # 5 prompts, val n = 2: 10 rows on 4 workers, padded with 2 copies of the first prompt's rows
        tasks = ["a", "b", "c", "d", "e"]
        server = SharedTermgrade({"a": 1, "b": 0, "c": 1, "d": 1, "e": 0})
        batch = DataProto({}, {"extra_info": [{"task": t, "split": "validation"} for t in tasks], "raw_prompt": [[]] * 5, "data_source": ["termgrade"] * 5})

        async def run_row(fields):
            loop = make_loop(False, val_n=2)
            loop.client = server
            return await loop.run({}, **{k: v for k, v in fields.items() if k != "raw_prompt"})

        metrics = validate(batch, 2, 4, lambda padded: manager_generate(padded, 4, run_row, PROMPT_LEN, RESPONSE_LEN))
        self.assertEqual(sorted(t for t, _ in server.opened), sorted(tasks * 2), "each prompt's 2 rollouts, no padded copy")
        self.assertAlmostEqual(metrics["val-core/termgrade/acc/mean@2"], 3 / 5)
        self.assertAlmostEqual(metrics["val-aux/termgrade/graded/mean@2"], 1.0)


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=1).result
    failed = len(result.failures) + len(result.errors)
    print(f"verl training tests: {result.testsRun - failed} ok of {result.testsRun}")
    sys.exit(1 if failed else 0)
