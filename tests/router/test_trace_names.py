"""The router's trace rows and the engine brain's transitions name the same facts the same way.

A run's model and tool calls are written twice: as the router's trace rows (a
model call's row, a tool call's row) and as the engine brain's transition
records.  Exported, both use the OpenTelemetry GenAI names, so a query for
``gen_ai.tool.call.id = c1`` finds the call on either side.
"""

from __future__ import annotations

from loopfsm.core import tracing
from loopfsm.core.otel import model_call_attributes, tool_call_attributes
from loopfsm.core.tracing import TransitionRecord, trace_attributes
from loopfsm.machines.agent_loop import AgentLoop
from loopfsm.machines.engine_brain import LoopMachine

from tests.support.router_support import make
from tests.support.store_support import store_url  # noqa: F401 - fixture

#: fact -> the key both sides use for it
SHARED = {
    "model": "gen_ai.request.model",
    "tool name": "gen_ai.tool.name",
    "tool call id": "gen_ai.tool.call.id",
    "error type": "error.type",
}
SCRIPT = [
    {"text": "looking", "tool_calls": [{"id": "c1", "name": "shell", "arguments": {"command": "ls"}}]},
    {"text": "done"},
]


def router_keys() -> dict[str, str]:
    """Which key the router's row mappings give each shared fact (found, not assumed)."""
    model = model_call_attributes({"model": "FACT-model", "outcome": "FACT-error"})
    tool = tool_call_attributes({"name": "FACT-tool", "call_id": "FACT-id"})
    by_value = {str(v): k for k, v in (model | tool).items()}
    return {
        "model": by_value["FACT-model"],
        "tool name": by_value["FACT-tool"],
        "tool call id": by_value["FACT-id"],
        "error type": by_value["FACT-error"],
    }


def test_the_router_and_both_agent_machines_use_one_key_per_fact():
    assert router_keys() == SHARED
    for machine in (LoopMachine, AgentLoop):
        declared = {a.name for a in trace_attributes(machine.compiled.spec)}
        assert set(SHARED.values()) <= declared, machine.compiled.name


def test_one_run_gives_the_same_values_under_the_same_keys_on_both_sides(store_url):  # noqa: F811
    url, prefix = store_url
    router, _ = make(url, prefix, SCRIPT)
    records: list[TransitionRecord] = []
    execute = {"type": "execute", "request_id": "e", "data": {"prompt": "go", "permissions": {"shell": "allow"}}}
    with tracing.global_sink(records.append):
        resp = router.handle("s", execute)
        assert resp["status"] == "awaiting_tool"
        (call,) = resp["data"]["tool_requests"]
        results = [{"call_id": call["call_id"], "content": "a.txt", "is_error": False}]
        resp = router.handle("s", {"type": "tool_results", "request_id": "r", "data": {"results": results}})
        assert resp["status"] == "completed"
    brain = [r for r in records if r.machine == "engine_brain" and r.kind == "feed"]
    rows = router.store().rows("s", "trace")
    model_rows = [model_call_attributes(r.meta) for r in rows if r.meta["event"] == "model.responded"]
    answered = [r for r in brain if r.feed == "model_response"]
    assert len(model_rows) == len(answered) == 2
    for row, rec in zip(model_rows, answered, strict=True):
        assert rec.attributes["gen_ai.request.model"] == row["gen_ai.request.model"]
    (tool_row,) = [tool_call_attributes(r.meta) for r in router.store().rows("s", "tool_call")]
    asked = next(r for r in brain if r.to_state == "AwaitingTools" and r.moved)
    answered_tools = next(r for r in brain if r.feed == "tool_results")
    for rec in (asked, answered_tools):  # kept on the move that consumes the call
        assert rec.attributes["gen_ai.tool.name"] == tool_row["gen_ai.tool.name"] == "shell"
        assert rec.attributes["gen_ai.tool.call.id"] == tool_row["gen_ai.tool.call.id"] == "c1"
    router.close()


def test_the_brains_error_type_is_the_class_the_run_ended_with():
    m = LoopMachine()
    m.accept_input("go")
    m.cancel()
    records: list[TransitionRecord] = []
    with tracing.attached(m, records.append):
        m.begin(m.next_step())
    assert records[-1].to_state == "Terminal" and records[-1].attributes["error.type"] == "RunCancelled"
