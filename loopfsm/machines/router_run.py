"""Guards, actions and results of the router's run phase (``machines/router_run.yaml``).

The phases, edges, admission, responses and mediation tables are in the YAML;
this module holds the few functions it names, and the one rule YAML cannot
state: a pause carries references (``kind:id``) and non-secret metadata only,
never content, checked before anything changes.
"""

from __future__ import annotations

import copy
import re
from typing import TYPE_CHECKING, Any, Literal

from loopfsm.core.errors import FeedArgumentError
from loopfsm.core.registry import Registry
from loopfsm.core.declared import DeclaredMachine
from loopfsm.core.instance import PolicyArg

REGISTRY = Registry("router_run")

KINDS = ("message", "tool_call", "diff", "plan", "memory", "trace", "input")
REF = re.compile("(?:" + "|".join(KINDS) + r"):[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}")

# Item shapes of the pause lists: key -> (required, check).  Unknown keys are refused,
# so no content can ride along in a field the table does not know.
_IS_REF = ("a kind:id reference", lambda v: isinstance(v, str) and REF.fullmatch(v) is not None)
_IS_ID = ("a non-empty string", lambda v: isinstance(v, str) and 0 < len(v) <= 200)
_IS_INT = ("an integer", lambda v: isinstance(v, int) and not isinstance(v, bool))
_IS_META = (
    "an object of scalars",
    lambda v: (
        isinstance(v, dict)
        and all(isinstance(k, str) and (v[k] is None or isinstance(v[k], (str, int, float, bool))) for k in v)
    ),
)
_ITEMS: dict[str, dict[str, tuple[bool, tuple[str, Any]]]] = {
    "calls": {
        "call_id": (True, _IS_ID),
        "ref": (True, _IS_REF),
        "args_hash": (True, _IS_ID),
        "requires_approval": (True, ("allow or ask", lambda v: v in ("allow", "ask"))),
        "diff_ref": (False, _IS_REF),
    },
    "approvals": {
        "approval_id": (True, _IS_ID),
        "args_hash": (True, _IS_ID),
        "expires_at": (True, _IS_INT),
        "kind": (True, ("disclosure, cost_ceiling or plan", lambda v: v in ("disclosure", "cost_ceiling", "plan"))),
        "ref": (False, _IS_REF),
    },
    "to_seal": {"ref": (True, _IS_REF), "meta": (True, _IS_META)},
}
_REF_FIELDS = {"input_ref", "assistant_ref"}
_REF_LISTS = {"to_decrypt", "pending_seal"}


def _bad(ctx: Any, msg: str) -> FeedArgumentError:
    return FeedArgumentError(f"router_run: feed '{ctx.event.name}' argument 'pause': {msg}")


def check_pause(ctx: Any, dest: str, fields: dict[str, Any], pause: Any) -> None:
    """Refuse a pause payload that is not exactly the entered state's references and metadata."""
    if not isinstance(pause, dict):
        raise _bad(ctx, f"must be an object, got {type(pause).__name__}")
    want = set(fields) - {"resume_step", "since"}
    if set(pause) != want:
        missing, extra = sorted(want - set(pause)), sorted(set(pause) - want)
        raise _bad(
            ctx,
            f"{dest} carries {', '.join(sorted(want))}"
            + (f"; missing {', '.join(missing)}" if missing else "")
            + (f"; unknown {', '.join(extra)}" if extra else ""),
        )
    for key, value in pause.items():
        if key in _REF_FIELDS and not _IS_REF[1](value):
            raise _bad(ctx, f"'{key}' must be a kind:id reference (kind one of {', '.join(KINDS)})")
        if key in _REF_LISTS and not (isinstance(value, list) and all(_IS_REF[1](v) for v in value)):
            raise _bad(ctx, f"'{key}' must be a list of kind:id references")
        shape = _ITEMS.get(key)
        if shape is None:
            continue
        if not isinstance(value, list):
            raise _bad(ctx, f"'{key}' must be a list")
        for i, item in enumerate(value):
            if not isinstance(item, dict):
                raise _bad(ctx, f"'{key}[{i}]' must be an object")
            extra = sorted(set(item) - set(shape))
            if extra:
                raise _bad(
                    ctx,
                    f"'{key}[{i}]' has unknown key(s) {', '.join(extra)}: a pause holds "
                    "references and non-secret metadata only",
                )
            for name, (required, (what, ok)) in shape.items():
                if name not in item:
                    if required:
                        raise _bad(ctx, f"'{key}[{i}]' needs '{name}'")
                elif not ok(item[name]):
                    raise _bad(ctx, f"'{key}[{i}].{name}' must be {what}")


def _now(m: Any, ctx: Any) -> int:
    return max(int(ctx.args["now"]), int(m.data.last_now))


# -- guards -------------------------------------------------------------------------------


@REGISTRY.guard
def run_encrypted(m: Any, ctx: Any) -> bool:
    """The live run belongs to an encrypted session."""
    return bool(m.data.encrypted)


@REGISTRY.guard
def arg_at_least(m: Any, ctx: Any, *, name: str, value: int) -> bool:
    return bool(ctx.args[name] >= value)


@REGISTRY.guard
def value_in(m: Any, ctx: Any, *, value: Any, values: list[Any]) -> bool:
    """A value the YAML names (a policy number, usually) is one of ``values``."""
    return value in values


@REGISTRY.guard
def arg_reached(m: Any, ctx: Any, *, name: str, limit: str) -> bool:
    """The argument ``name`` is at or past the argument ``limit`` (a time at or after an expiry)."""
    return bool(ctx.args[name] >= ctx.args[limit])


def _ceiling(ctx: Any, ceiling: int | None, arg: str | None) -> int:
    return int(ctx.args[arg] if arg is not None else ceiling or 0)


@REGISTRY.guard
def over_ceiling(m: Any, ctx: Any, *, ceiling: int | None = None, arg: str | None = None) -> bool:
    """A ceiling is set (the policy number ``ceiling`` or the argument ``arg``; 0 is none) and the run's
    spent plus next tokens would pass it, raised by the tokens already granted."""
    limit = _ceiling(ctx, ceiling, arg)
    a = ctx.args
    return limit > 0 and a["spent_tokens"] + a["next_tokens"] > limit + a["granted_tokens"]


# -- actions ------------------------------------------------------------------------------


@REGISTRY.action
def pause(m: Any, ctx: Any, *, resume_step: str) -> None:
    """Enter a pause with the fed references; checked first, so a refused payload changes nothing."""
    dest = ctx.transition.dest
    fields = m.compiled.spec.states[dest].data
    payload = ctx.args["pause"]
    check_pause(ctx, dest, fields, payload)
    ctx.enter(resume_step=resume_step, since=_now(m, ctx), **copy.deepcopy(payload))


@REGISTRY.action
def start_run(m: Any, ctx: Any) -> None:
    d = m.data
    d.run_id = ctx.args["run_id"]
    d.encrypted = ctx.args["encrypted"]
    d.turns = 0
    d.ended = None
    d.last_now = _now(m, ctx)


@REGISTRY.action
def next_turn(m: Any, ctx: Any) -> None:
    m.data.turns += 1
    m.data.last_now = _now(m, ctx)


def _end(m: Any, ctx: Any, how: str) -> None:
    d = m.data
    d.last_run_id = d.run_id
    d.run_id = None
    d.ended = how
    d.last_now = _now(m, ctx)


@REGISTRY.action
def end_run(m: Any, ctx: Any, *, how: str) -> None:
    _end(m, ctx, how)


@REGISTRY.action
def end_broken(m: Any, ctx: Any) -> None:
    """break_run ends the run for the reason it carries (user, failed, expired)."""
    _end(m, ctx, ctx.args["reason"])


@REGISTRY.action
def emit(m: Any, ctx: Any, *, events: list[str]) -> None:
    """Record trace events: the feed returns their stable names."""
    ctx.reply = list(ctx.reply or []) + list(events)


# -- what verify feeds (named by the YAML's `verify:` blocks; never called by a run) ----------------


@REGISTRY.generator
def pause_payloads(m: Any, ctx: Any) -> list[dict[str, Any]]:
    """One smallest valid payload per pause state (empty lists, one reference each); the feed's
    outcome picks the state, so the payloads of the other states are refused."""
    out = []
    for state in m.compiled.spec.states.values():
        if "resume_step" in state.data:
            fields = [f for f in state.data.values() if f.name not in ("resume_step", "since")]
            out.append({f.name: [] if f.list else "message:a" for f in fields})
    return out


@REGISTRY.guard
def run_live(m: Any, ctx: Any) -> bool:
    """For invariants: a run is live (its id is held)."""
    return m.data.run_id is not None


# -- results ------------------------------------------------------------------------------


@REGISTRY.result
def answer(m: Any, q: Any, *, value: Any) -> Any:
    """The table's answer itself (a copy: callers may keep and change it)."""
    return copy.deepcopy(value)


@REGISTRY.result
def envelope(m: Any, q: Any, *, status: str, allowed: list[str]) -> dict[str, Any]:
    """A response envelope's status and allowed_continuations (its data is the driver's)."""
    return {"status": status, "allowed_continuations": list(allowed)}


@REGISTRY.result
def ceiling_passed(m: Any, q: Any, *, ceiling: int | None = None, arg: str | None = None) -> dict[str, Any]:
    """cost_gate's ask: the ceiling that was passed and the figures the approval is about."""
    a = q.args
    return {
        "gate": "ask",
        "ceiling_tokens": _ceiling(q, ceiling, arg),
        "spent_tokens": a["spent_tokens"],
        "next_tokens": a["next_tokens"],
    }


@REGISTRY.result
def within_ceiling(m: Any, q: Any) -> dict[str, Any]:
    """cost_gate's pass."""
    return {"gate": "pass"}


@REGISTRY.result
def mediation(m: Any, q: Any, *, permission: str) -> dict[str, Any]:
    """The mediation row of a permission; ``arg`` takes the call's own permission."""
    p = q.args["permission"] if permission == "arg" else permission
    if p == "unknown":
        return {
            "route": "pre_answered",
            "reaches_client": False,
            "record": "tool_call row with the brain's unknown-tool error",
            "trace": "tool.mediated",
        }
    if p == "deny":
        return {
            "route": "deny",
            "reaches_client": False,
            "record": "tool_call row with a denial result (is_error true, naming the rule)",
            "trace": "tool.denied",
        }
    return {
        "route": p,
        "reaches_client": True,
        "requires_approval": p,
        "record": "listed in AwaitingTool",
        "trace": "tool.mediated",
    }


#: What processing ended with, as the feeds' ``outcome`` argument declares it in router_run.yaml.
Outcome = Literal["needs_decrypt", "gate", "tools", "completed"]


def _pause(pause: Any) -> Any:
    """A feed's ``pause`` argument: the entered pause's refs and metadata, none given meaning none."""
    return {} if pause is None else pause


class RouterRun(DeclaredMachine, machine="router_run", registry=REGISTRY, policy="RouterRunPolicy"):
    """Compiled from ``machines/router_run.yaml`` on first use, never on import; a typed method per feed."""

    __slots__ = ()

    def execute(
        self,
        run_id: str,
        outcome: Outcome,
        encrypted: bool,
        now: int,
        pause: Any = None,
        *,
        policy: PolicyArg = None,
    ) -> Any:
        """A new prompt, fed at release with the outcome of its first turn."""
        return self.feed("execute", run_id, outcome, encrypted, now, _pause(pause), policy=policy)

    def decrypted(
        self,
        outcome: Outcome,
        now: int,
        pause: Any = None,
        *,
        policy: PolicyArg = None,
    ) -> Any:
        """The client returned the opened plaintext (and any folded ciphertext); fed at release with the outcome of the
        turn it enabled."""
        return self.feed("decrypted", outcome, now, _pause(pause), policy=policy)

    def approval_decisions(
        self,
        outcome: Outcome,
        now: int,
        aborted: bool = False,
        pause: Any = None,
        *,
        policy: PolicyArg = None,
    ) -> Any:
        """The client's standalone decisions; fed at release with the outcome (aborted when a decision
        rejected the gated step)."""
        return self.feed("approval_decisions", outcome, now, aborted, _pause(pause), policy=policy)

    def tool_results(
        self,
        outcome: Outcome,
        now: int,
        pause: Any = None,
        *,
        policy: PolicyArg = None,
    ) -> Any:
        """Results of the pending allow/ask calls with ask decisions folded in; fed at release with the outcome of the
        next model turn."""
        return self.feed("tool_results", outcome, now, _pause(pause), policy=policy)

    def sealed(self, now: int, *, policy: PolicyArg = None) -> Any:
        """The ciphertext for every row in to_encrypt; metadata and sealed content are written together and the
        run ends."""
        return self.feed("sealed", now, policy=policy)

    def break_run(
        self, now: int, reason: Literal["user", "failed", "expired"] = "user", *, policy: PolicyArg = None
    ) -> Any:
        """The user's stop (protocol type `break`), a fatal failure, or an expired pause: the run ends and the phase
        returns to Idle."""
        return self.feed("break_run", now, reason, policy=policy)

    def inject(
        self,
        run_id: str,
        outcome: Outcome,
        encrypted: bool,
        now: int,
        pause: Any = None,
        *,
        policy: PolicyArg = None,
    ) -> Any:
        """The user redirects the run with a new message; behaves as break followed by a fresh turn, fed at release with
        that turn's outcome."""
        return self.feed("inject", run_id, outcome, encrypted, now, _pause(pause), policy=policy)


if TYPE_CHECKING:  # what type checkers see: the stub written from the YAML's policy block
    from .policies import RouterRunPolicy as RouterRunPolicy


def __getattr__(name: str) -> Any:
    # The compiled machine and its policy class are built from the YAML on first use.
    if name == "ROUTER_RUN":
        return RouterRun.compiled
    if name == "RouterRunPolicy":
        return RouterRun.compiled.Policy
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
