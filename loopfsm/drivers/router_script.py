"""``loopfsm run router_run --script FILE``: serve scripted requests against a real store and print the trace.

Each step is one request as a router would receive it: admitted (or not)
against the saved row by the admission table, processed with a scripted
outcome, checkpointed in one transaction.  The store is SQLite in memory
unless the script names one, so a newcomer sees the real thing without setup:
admission rules, lock and fence, the phase moves, the trace events and the
response with its allowed_continuations.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from . import schemas
from .scriptfile import read_script, wrong_script_hint
from loopfsm.core.errors import LoopFsmError, ScriptError

SCRIPT_SCHEMA = schemas.ROUTER_RUN


class _Mediator:
    """Asks router_run's mediation table about one call's permission."""

    def __init__(self, machine: Any):
        self.machine = machine

    def mediate(self, permission: str | None) -> Any:
        return self.machine.decide("mediate", permission=permission)


def _pause(phase: str, step: dict[str, Any], rid: str, mediate: Any) -> tuple[dict[str, Any], list[str]]:
    """The pause payload (refs only) for ``phase``, and a note per tool call on how it was mediated."""
    notes: list[str] = []
    if phase == "AwaitingDecrypt":
        return {"to_decrypt": [f"message:{rid}-h0"], "input_ref": f"input:{rid}", "pending_seal": []}, notes
    if phase == "AwaitingApproval":
        kinds = step.get("approvals") or ["cost_ceiling"]
        return {
            "approvals": [
                {"approval_id": f"{rid}-a{i}", "kind": k, "args_hash": f"sha256:{rid}{i}", "expires_at": 2**40}
                for i, k in enumerate(kinds)
            ],
            "pending_seal": [],
        }, notes
    if phase == "AwaitingTool":
        calls = []
        for i, c in enumerate(step.get("calls") or [{"tool": "shell"}]):
            row = mediate(c.get("permission"))
            notes.append(f"{c['tool']}:{row['route']}")
            if not row["reaches_client"]:
                continue
            call = {
                "call_id": f"{rid}-c{i}",
                "ref": f"tool_call:{rid}-c{i}",
                "requires_approval": row["route"],
                "args_hash": f"sha256:{rid}c{i}",
            }
            if c.get("changes_files"):
                call["diff_ref"] = f"diff:{rid}-c{i}"
            calls.append(call)
        if not calls:
            raise ScriptError(
                f"step {rid}: every tool call was denied, so the router would call the model "
                "again in the same request; script the outcome of that turn instead"
            )
        return {"calls": calls, "assistant_ref": f"message:{rid}-a", "pending_seal": []}, notes
    if phase == "AwaitingEncrypt":
        return {"to_seal": [{"ref": f"message:{rid}-a", "meta": {"role": "assistant"}}]}, notes
    return {}, notes


def drive(script: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Serve every step; one row per step: (#, phase, request, admission, new phase, lock, response, events)."""
    from jsonschema import Draft202012Validator

    from loopfsm.machines.router_run import ROUTER_RUN
    from loopfsm.router.store import open_store
    from loopfsm.router.store.serve import Outcome, serve

    errors = sorted(Draft202012Validator(SCRIPT_SCHEMA).iter_errors(script), key=lambda e: list(e.absolute_path))
    if errors:
        e = errors[0]
        hint = wrong_script_hint(script)
        raise ScriptError(f"script {'.'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}{hint}")
    sid = script.get("session", "session-1")
    rows: list[tuple[Any, ...]] = []
    clock = {"now": 0}
    with open_store(
        script.get("store", "sqlite:///:memory:"),
        create=True,
        clock=lambda: clock["now"],
        lease_ms=script.get("lease_ms"),
    ) as store:
        store.ensure(sid)
        encrypted = False
        mediator = _Mediator(ROUTER_RUN.new())
        for n, step in enumerate(script["steps"], 1):
            clock["now"] = step.get("at", clock["now"] + 10)
            before = store.load(sid)
            assert before is not None
            lock_before = before.lock_state(clock["now"])
            if "recover" in step:
                freed = store.recover(step["recover"])
                rows.append(
                    (
                        str(n),
                        clock["now"],
                        before.phase,
                        f"restart {step['recover']}",
                        f"recovered {len(freed)} lock(s)",
                        before.phase,
                        "free",
                        "-",
                        "",
                    )
                )
                continue
            request = step.get("request")
            if request is None:
                raise ScriptError(f"step {n}: needs 'request' (or 'recover')")
            rid = step.get("request_id", f"q{n}")
            holder = step.get("holder", "router-1")
            if request in ("execute", "inject"):
                encrypted = step.get("encrypted", encrypted)
            target = {
                "needs_decrypt": "AwaitingDecrypt",
                "gate": "AwaitingApproval",
                "tools": "AwaitingTool",
                "completed": "AwaitingEncrypt" if encrypted else "Idle",
            }.get(step.get("outcome", "completed"))
            pause, notes = _pause(target or "Idle", step, rid, mediator.mediate)
            out = Outcome(
                step.get("outcome", "completed"),
                encrypted=encrypted,
                pause=pause,
                aborted=step.get("aborted", False),
                reason=step.get("reason", "user"),
            )
            if step.get("hold"):
                adm = store.admit(sid, request, rid, holder=holder)
                after = store.load(sid)
                assert after is not None
                lock = f"held f{after.fence}" if after.holder else "free"
                rows.append(
                    (
                        str(n),
                        clock["now"],
                        before.phase,
                        f"{request} {rid} by {holder}",
                        f"{adm.outcome} [{adm.rule}]",
                        after.phase,
                        lock,
                        "(still processing: no response yet)",
                        "",
                    )
                )
                continue
            served = serve(store, sid, request, rid, holder=holder, process=out)
            after = store.load(sid)
            assert after is not None
            adm = served.admission
            how = adm.outcome + (" (took over)" if adm.took_over else " (preempted)" if adm.preempted else "")
            if adm.outcome == "refused" and lock_before == "held":
                how += f" retry in {adm.retry_after_ms}ms" if adm.answer == "busy" else ""
            resp = served.response
            status = resp["status"] + (f" {resp['data']['code']}" if resp["status"] == "error" else "")
            lock = f"held f{after.fence}" if after.holder else f"free f{after.fence}"
            events = ", ".join(served.events) + (f"  mediated: {', '.join(notes)}" if notes and served.events else "")
            rows.append(
                (
                    str(n),
                    clock["now"],
                    before.phase,
                    f"{request} {rid} by {holder}",
                    f"{how} [{adm.rule}]",
                    after.phase,
                    lock,
                    f"{status} {resp['allowed_continuations']}",
                    events,
                )
            )
    return rows


def print_rows(rows: list[tuple[Any, ...]]) -> None:
    head = ("#", "at", "phase", "request", "admission [rule]", "new phase", "lock", "response")
    table = [tuple(str(c) for c in r[:8]) for r in rows]
    widths = [max(len(head[i]), *(len(r[i]) for r in table)) if table else len(head[i]) for i in range(8)]
    print("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)).rstrip())
    for r, full in zip(table, rows, strict=True):
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
        if full[8]:
            print(" " * (widths[0] + 2) + f"events: {full[8]}")
    print("[rule] names the admission rule that answered; fN is the lock's fencing token")


def run_router_script(path: Path) -> int:
    script, code = read_script(path)
    if code:
        return code
    try:
        rows = drive(script if isinstance(script, dict) else {"": script})
    except LoopFsmError as err:
        print(f"loopfsm run: {path}: {err}", file=sys.stderr)
        return 1
    print_rows(rows)
    return 0
