"""TEST STAND-IN for verl's agent-loop classes (verl cannot be installed here).

Only the surface termgrade's adapter uses, with verl's names and signatures: AgentLoopBase's
constructor, AgentLoopOutput's fields, and the register() decorator that maps an agent_name to a
loop class. Nothing here is verl's code or is shipped as part of termgrade.
"""

_REGISTRY = {}


def register(name):
    def wrap(cls):
        _REGISTRY[name] = cls
        return cls
    return wrap


def registered(name):
    return _REGISTRY[name]


class AgentLoopBase:
    def __init__(self, trainer_config, server_manager, tokenizer, **kwargs):
        self.config = trainer_config
        self.server_manager = server_manager
        self.tokenizer = tokenizer


class AgentLoopOutput:
    FIELDS = ("prompt_ids", "response_ids", "response_mask", "response_logprobs", "reward_score", "num_turns", "metrics", "extra_fields")

    def __init__(self, **kwargs):
        unknown = set(kwargs) - set(self.FIELDS)
        if unknown:
            raise TypeError(f"unknown AgentLoopOutput fields: {unknown}")
        for f in self.FIELDS:
            setattr(self, f, kwargs.get(f))
