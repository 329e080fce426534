from .agent_loop import AgentLoopBase, AgentLoopOutput, register  # noqa: F401
