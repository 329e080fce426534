"""The README's verl command against verl's own config facts (verl_config_facts.json: defaults and
validation rules copied from verl b178a3cd, each with its file and line), for the README's
selection size and serve's capacity. Standard library only."""
import json
import os
import re
import shlex
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
with open(os.path.join(HERE, "verl_config_facts.json")) as f:
    FACTS = json.load(f)


def readme_section():
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    start = text.index("### Train with verl on a termgrade selection")
    return text[start:text.index("\n## ", start)]


def command(section, head):
    """The README's command starting with `head`, its continuation lines joined, as words."""
    lines = section.splitlines()
    i = next(n for n, line in enumerate(lines) if line.strip().startswith(head))
    words = []
    while True:
        line = lines[i].strip()
        words += shlex.split(line.rstrip("\\"))
        if not line.endswith("\\"):
            return words
        i += 1


def parse_value(text):
    if text in ("True", "true"):
        return True
    if text in ("False", "false"):
        return False
    if text.startswith("["):
        return [w.strip() for w in text.strip("[]").split(",") if w.strip()]
    try:
        return int(text)
    except ValueError:
        return text


def effective_config(section):
    config = {key: fact["value"] for key, fact in FACTS["defaults"].items()}
    words = command(section, "python3 -m verl.trainer.main_ppo")
    for word in words[3:]:
        key, _, value = word.partition("=")
        config[key] = parse_value(value)
    return config


def problems(config, train_rows, max_sessions, env):
    """verl's checks (see the facts' rules), each a message when the config breaks it."""
    out = []
    g = config["trainer.n_gpus_per_node"] * config["trainer.nnodes"]
    bs, n = config["data.train_batch_size"], config["actor_rollout_ref.rollout.n"]
    mini, micro = config["actor_rollout_ref.actor.ppo_mini_batch_size"], config["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"]
    if config["actor_rollout_ref.rollout.name"] == "???":
        out.append("rollout_name")
    if not config["actor_rollout_ref.actor.use_dynamic_bsz"]:
        if (config["actor_rollout_ref.actor.ppo_micro_batch_size"] is None) == (micro is None):
            out.append("actor_micro_batch")
        if (config["actor_rollout_ref.rollout.log_prob_micro_batch_size"] is None) == (config["actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu"] is None):
            out.append("rollout_log_prob_micro_batch")
        if config["algorithm.use_kl_in_reward"] or config["actor_rollout_ref.actor.use_kl_loss"]:
            out.append("ref_log_prob_micro_batch (the command sets no ref micro batch)")
        if bs < mini:
            out.append("mini_le_batch")
        if (bs * n) % g:
            out.append("real_batch_divisible")
        normalized = mini * n // g
        if normalized <= 0 or (micro and normalized % micro):
            out.append("normalized_mini")
    if train_rows // bs < 1:
        out.append("non_empty_dataloader")
    if (bs * n) % config["actor_rollout_ref.rollout.agent.num_workers"]:
        out.append("equal_worker_chunks")
    if g % config["actor_rollout_ref.rollout.tensor_model_parallel_size"]:
        out.append("rollout_tp_divides_gpus")
    external = env.get("VERL_USE_EXTERNAL_MODULES", "").split(",")
    if config["algorithm.adv_estimator"] not in ("gae", "grpo") and "termgrade_advantage" not in external:
        out.append("external_modules")
    if "termgrade_validation" not in external:
        out.append("validation_leaves_failures_out")
    if bs * n > max_sessions:
        out.append(f"serve capacity: {bs * n} rollouts a step, --max-sessions {max_sessions}")
    return out


class ReadmeCommandTests(unittest.TestCase):
    def setUp(self):
        self.section = readme_section()
        self.config = effective_config(self.section)
        select = command(self.section, "npx termgrade select")
        self.train_rows = int(select[select.index("--n") + 1])
        serve = command(self.section, "./node_modules/.bin/termgrade serve")
        self.max_sessions = int(serve[serve.index("--max-sessions") + 1])
        self.idle_ttl = int(serve[serve.index("--idle-ttl") + 1])
        self.env = dict(w.split("=", 1) for w in command(self.section, "export TERMGRADE_URL")[1:])

    def test_every_fact_names_its_verl_file_and_line(self):
        for fact in list(FACTS["defaults"].values()) + FACTS["rules"]:
            self.assertRegex(fact["at"], r"^[\w/.]+\.(py|yaml):\d+")

    def test_the_command_passes_verls_checks(self):
        self.assertEqual(problems(self.config, self.train_rows, self.max_sessions, self.env), [])

    def test_the_command_states_gpus_logger_and_micro_batches(self):
        words = command(self.section, "python3 -m verl.trainer.main_ppo")
        for key in ("trainer.n_gpus_per_node", "trainer.nnodes", "trainer.logger", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu", "data.train_batch_size"):
            self.assertTrue(any(w.startswith(key + "=") for w in words), key)
        self.assertNotIn("wandb", self.config["trainer.logger"])

    def test_the_checks_catch_the_old_command(self):
        # The control: verl's defaults for what the old command left out break it, as the issue found.
        config = dict(self.config)
        for key in ("data.train_batch_size", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu"):
            config[key] = FACTS["defaults"][key]["value"]
        found = problems(config, self.train_rows, self.max_sessions, self.env)
        for rule in ("actor_micro_batch", "rollout_log_prob_micro_batch", "non_empty_dataloader"):
            self.assertIn(rule, found)
        config["data.train_batch_size"] = 64  # lowered under the default mini batch of 256
        config["actor_rollout_ref.actor.ppo_mini_batch_size"] = FACTS["defaults"]["actor_rollout_ref.actor.ppo_mini_batch_size"]["value"]
        self.assertIn("mini_le_batch", problems(config, self.train_rows, self.max_sessions, self.env))

    def test_the_checks_need_both_termgrade_modules(self):
        env = dict(self.env, VERL_USE_EXTERNAL_MODULES="termgrade_advantage")
        self.assertEqual(problems(self.config, self.train_rows, self.max_sessions, env), ["validation_leaves_failures_out"])
        env["VERL_USE_EXTERNAL_MODULES"] = "termgrade_validation"
        self.assertEqual(problems(self.config, self.train_rows, self.max_sessions, env), ["external_modules"])

    def test_serve_outlives_a_generation(self):
        # The longest generation (the response budget) at 20 tokens/s must fit in serve's idle time.
        self.assertGreater(self.idle_ttl, self.config["data.max_response_length"] / 20)
        self.assertGreaterEqual(int(self.env["TERMGRADE_QUEUE_SEC"]), 600)


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=1).result
    failed = len(result.failures) + len(result.errors)
    print(f"verl config tests: {result.testsRun - failed} ok of {result.testsRun}")
    sys.exit(1 if failed else 0)
