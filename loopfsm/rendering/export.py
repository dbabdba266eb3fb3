"""The table as other tools' transition lists: what the XState and SCXML exports share.

Both formats pick the first enabled transition of a state in document order,
as a loopfsm feed tries its branches in table order, so each state's branches
of a feed are written in that order and nothing is merged or reordered:

- a ``"*"`` source is expanded to every live state that does not name the
  feed itself (a named state overrides the wildcard, as in the runtime);
- a branch's ``when:`` conditions come first among its guards (XState: a
  ``loopfsm.when`` guard object with the argument and its values; SCXML: the
  comparison (``outcome == 'gate'``) in ``cond`` and ``loopfsm:when`` as JSON);
- a ``stay`` is a transition without a target (no exit, no entry);
- a ``refuse:`` branch is a transition without a target that runs nothing
  but the refusal (the runtime raises ``FeedRefused`` and changes nothing);
- ``otherwise: raise`` after branches that are all guarded adds a last
  transition without a guard or target, naming ``NoBranchMatched``;
- terminal states take no transitions in either format (an XState ``final``
  node and an SCXML ``<final>`` end the machine), so the feeds a terminal
  state still takes in the table are listed on it instead.

Decisions (questions that change nothing) have no counterpart and are left
out, as are the types of feed arguments.
"""

from __future__ import annotations

from dataclasses import dataclass

from loopfsm.core.spec import Branch, Condition, Ref, Spec
from loopfsm.core.tracing import branch_name

#: The name an export gives the runtime's error when no guard of an ``otherwise: raise`` feed holds.
NO_BRANCH_MATCHED = "NoBranchMatched"


@dataclass(frozen=True)
class Move:
    """One exported transition: a branch of the table from one state, or the closing ``otherwise: raise``.

    ``branch`` is None only for that closing transition.  ``actions`` are
    everything the runtime runs when the branch is taken (the machine's and
    the feed's ``before``, then the branch's own); a refusal runs none.
    """

    event: str
    source: str
    branch: Branch | None
    name: str
    actions: tuple[Ref, ...]

    @property
    def target(self) -> str | None:
        return self.branch.dest if self.branch is not None else None

    @property
    def guards(self) -> tuple[Ref, ...]:
        return self.branch.guards if self.branch is not None else ()

    @property
    def when(self) -> tuple[Condition, ...]:
        return self.branch.when if self.branch is not None else ()

    @property
    def refusal(self) -> str | None:
        return self.branch.refusal if self.branch is not None else None

    @property
    def description(self) -> str:
        if self.branch is None:
            return f"no branch holds: raises {NO_BRANCH_MATCHED}"
        return self.branch.description.strip()


@dataclass(frozen=True)
class ExportedState:
    """A state with its transitions in table order (feeds in file order, branches in table order).

    ``terminal_feeds`` are the feeds a terminal state still takes in the table
    (each a stay): the exported final state cannot carry them as transitions.
    """

    name: str
    initial: bool
    terminal: bool
    description: str
    tags: tuple[str, ...]
    moves: tuple[Move, ...]
    terminal_feeds: tuple[str, ...]


def exported_states(spec: Spec) -> list[ExportedState]:
    """Every state of ``spec`` in file order, with the transitions the exports write for it."""
    moves: dict[str, list[Move]] = {s: [] for s in spec.states}
    for ev in spec.events.values():
        for state, branches in spec.expanded_sources(ev).items():
            for b in branches:
                name = branch_name(ev.name, b.source, b.index, b.name)
                actions = () if b.refusal is not None else spec.actions_of(ev.name, b)
                moves[state].append(Move(ev.name, state, b, name, actions))
            if ev.otherwise == "raise" and all(b.guarded for b in branches):
                moves[state].append(Move(ev.name, state, None, f"{ev.name}/{state}[otherwise]", ()))
    out = []
    for s in spec.states.values():
        mine = tuple(moves[s.name])
        out.append(
            ExportedState(
                s.name,
                s.initial,
                s.terminal,
                s.description.strip(),
                s.tags,
                () if s.terminal else mine,
                tuple(dict.fromkeys(m.event for m in mine)) if s.terminal else (),
            )
        )
    return out
