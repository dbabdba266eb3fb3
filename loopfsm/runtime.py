"""Instances: plain values holding a state name, that state's data, and the machine's data fields.

An instance owns nothing but data.  The rules live in the compiled machine its
class points to, so creating or restoring one costs a few attribute writes,
and a snapshot is just those values as JSON.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar
from collections.abc import Mapping

from . import tracing as _tracing
from .errors import DecisionError, FeedArgumentError, SnapshotError

if TYPE_CHECKING:  # pragma: no cover
    from .compiler import CompiledMachine

SNAPSHOT_FORMAT = 1


class QueryData:
    """What a decision rule's guards and result see: the instance, the policy and the question's arguments."""

    __slots__ = ("model", "policy", "args")

    def __init__(self, model: Any, policy: Any, args: dict[str, Any] | None = None):
        self.model = model
        self.policy = policy
        self.args: dict[str, Any] = args if args is not None else {}


class MachineInstance:
    """Base of every compiled machine's instance class.

    ``state`` is the state's name, ``state_data`` the typed values it carries
    (``{"turn": 2}`` in ``AwaitingModel``), ``data`` the machine's fields.
    The name is stored as ``_state`` (the ``transitions`` model attribute) so a
    machine's typed API may offer a richer ``state()`` of its own.
    """

    __slots__ = ("_state", "state_data", "data", "_sinks")
    compiled: ClassVar[CompiledMachine]
    _sinks: tuple[Any, ...]  # trace sinks of this instance only (tracing.attach); never snapshotted

    def __init__(self) -> None:
        c = self.compiled
        self._state: str = c.initial
        self.state_data: dict[str, Any] = {}
        self.data = c.Data()

    @property
    def state(self) -> str:
        return self._state

    @property
    def state_name(self) -> str:
        return self._state

    # -- feeding ------------------------------------------------------------
    def feed(self, event: str, *args: Any, policy: Any = None, **kwargs: Any) -> Any:
        """Deliver feed ``event``; returns the reply an action set, if any.

        Arguments are checked against the table before any guard runs, so a bad
        call changes nothing.
        """
        c = self.compiled
        try:
            ev = c.events[event]
        except KeyError:
            raise FeedArgumentError(f"{c.name}: no feed named '{event}' (feeds: {', '.join(c.events)})") from None
        bound = c.binders[event](args, kwargs)
        done = ev.trigger(self, bound, c.policy(policy))
        if _tracing.ACTIVE:
            _tracing.feed_done(self, event, done)
        return done.reply

    def decide(self, decision: str, policy: Any = None, **args: Any) -> Any:
        """Answer a decision chain (``next_step``, ``admit(request=...)``) without changing anything.

        Arguments are bound and type-checked against the decision's ``args``
        exactly like a feed's, before any rule runs.
        """
        return self.explain(decision, policy, **args)[1]

    def explain(self, decision: str, policy: Any = None, **args: Any) -> tuple[str, Any]:
        """The name of the rule that answered, and its answer; for traces and debugging."""
        c = self.compiled
        try:
            rules = c.decisions[decision][self._state]
        except KeyError:
            raise DecisionError(f"{c.name}: no decision named '{decision}'") from None
        q = QueryData(self, c.policy(policy), c.decision_binders[decision]((), args))
        for name, guards, result in rules:
            for g in guards:
                if not g(q):
                    break
            else:
                answer = result(q)
                if _tracing.ACTIVE:
                    _tracing.decision_done(self, decision, name, q)
                return name, answer
        raise DecisionError(f"{c.name}: decision '{decision}' has no answer in state '{self._state}'")

    def is_terminal(self) -> bool:
        return self._state in self.compiled.terminal_states

    # -- snapshots --------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """A JSON-ready dict; :meth:`restore` turns it back into an identical instance."""
        c = self.compiled
        data = self.data
        return {
            "format": SNAPSHOT_FORMAT,
            "machine": c.name,
            "fingerprint": c.fingerprint,
            "state": self._state,
            "state_data": {k: c.state_encoders[self._state][k](v) for k, v in self.state_data.items()},
            "data": {name: enc(getattr(data, name)) for name, enc in c.data_encoders.items()},
        }

    @classmethod
    def restore(cls, snap: Mapping[str, Any]):
        """Rebuild an instance from :meth:`snapshot`, or raise :class:`SnapshotError` and build nothing."""
        c = cls.compiled
        c.check_snapshot(snap)
        try:
            data = c.Data.__new__(c.Data)
            for name, dec in c.data_decoders.items():
                setattr(data, name, dec(snap["data"][name]))
            decoders = c.state_decoders[snap["state"]]
            state_data = {k: decoders[k](v) for k, v in snap["state_data"].items()}
        except SnapshotError:
            raise
        except Exception as err:
            raise SnapshotError(f"{c.name}: snapshot field could not be decoded: {err}") from err
        inst = cls.__new__(cls)
        inst._state = snap["state"]
        inst.state_data = state_data
        inst.data = data
        return inst

    def diagram(self, format: str = "svg", *, detailed: bool = False) -> str:
        """This machine's state diagram with the current state highlighted (svg, dot or mermaid)."""
        from .render import render_instance
        return render_instance(self, format, detailed=detailed)

    def __repr__(self) -> str:
        sd = ", ".join(f"{k}={v!r}" for k, v in self.state_data.items())
        return f"<{self.compiled.name} {self._state}{'(' + sd + ')' if sd else ''}>"
