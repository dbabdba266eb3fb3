"""Driving a brain into each state, shared by the engine brain tests."""

from __future__ import annotations

from loopfsm.machines.engine_brain import LoopMachine, MachinePolicy, Message, ToolCall

P = MachinePolicy()
TOOLS = ["shell", "read_file"]


def reply_with_tools(*names: str) -> Message:
    return Message.assistant("", [ToolCall(f"c{i}", n, {"i": i}) for i, n in enumerate(names, 1)])


def answers(m) -> list[Message]:
    """One result per pending call: the brain's own answer where it pre-answered, else a real one."""
    return [p.answer or Message.tool_result(p.call.id, f"ran {p.call.name}") for p in m.data.pending_tools]


def step(m, policy=P):
    s = m.next_step(policy=policy)
    m.begin(s)
    return s


def brain_in(state: str, cls=LoopMachine):
    m = cls()
    m.accept_input("fix the failing tests")
    if state == "Start":
        return m
    step(m)
    if state == "AwaitingModel":
        return m
    if state == "AwaitingTools":
        m.model_response(reply_with_tools("shell"), 1000, TOOLS)
        return m
    if state == "AwaitingCompaction":
        m.set_context_tokens(190_000)
        step(m)
        return m
    if state == "Terminal":
        m.model_response(Message.assistant("all green"), 1000, TOOLS)
        return m
    raise ValueError(state)
