"""The engines that run a feed: a stock ``transitions.Machine`` (the default) or loopfsm's interpreter.

Every instance holds the engine it runs on.  Both take the same compiled
table and answer the same way; a differential test drives every shipped
machine and generated ones through both and compares everything after each
step.

``transitions`` (the default): per compiled machine and instance class, one
stock ``transitions.Machine`` built from the table, with no model registered.
Its own ``Event`` and ``Transition`` classes run each feed: an instance is
passed to ``Event.trigger`` as the model (``model_attribute="_state"``), each
YAML branch is a transition in the YAML's order (``stay: true`` an internal
one), its conditions are the branch's ``when:`` entries and guards in order,
its ``before`` callbacks the branch's actions, then one that checks the state
data the actions set; entering a state first stores that data.  Nothing of
an instance stays in the machine, so dropped instances are freed as any
object is, and one machine serves every instance as ``transitions`` serves
many models.  A policy is an argument of each call, not of the machine: the
feed's context (``event_data.args[0]``, a :class:`~loopfsm.core.interpreter.FeedData`)
carries the call's policy and its guards and actions bound for it, and each
condition and callback calls its own.

An instance made with ``machine_class=`` (``LockedMachine``, ``GraphMachine``)
or further machine options gets a machine of its own with the instance
registered as its model (``add_model``), so the extension's per-model parts
(a lock, a graph) work.

``interpreter``: :meth:`loopfsm.core.interpreter.Feed.run`, loopfsm's own loop over
the same branches, bound per policy and narrowed by enum arguments: about ten
times faster, for hot loops and model checking.

The default engine of a process: ``LOOPFSM_ENGINE`` in the environment, else
``engine`` in the ``[tool.loopfsm]`` table of the nearest ``pyproject.toml``
above the current folder, else ``transitions``; read once, on first use.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from . import tracing as _tracing
from .interpreter import Branch, Feed, FeedData, action_error, feed_data, state_data_error
from .binding import AnyOf, Bound, Call, Guard, PerPolicy, bind, bind_guard
from .errors import CallbackError, ConfigError, IllegalFeed, LoopFsmError, NoBranchMatched
from .pyproject import CONFIG, loopfsm_table, shown
from .spec import Spec

if TYPE_CHECKING:  # pragma: no cover
    from transitions import Machine


class Tables(Protocol):
    """What an engine reads of a compiled machine (the runtime's ``Tables`` imports this module)."""

    @property
    def name(self) -> str: ...
    @property
    def spec(self) -> Spec: ...
    @property
    def initial(self) -> str: ...
    @property
    def events(self) -> Mapping[str, Feed]: ...


EngineName = Literal["transitions", "interpreter"]
ENGINES: tuple[EngineName, ...] = ("transitions", "interpreter")
ENV = "LOOPFSM_ENGINE"

#: Machine options that would change what the table means; an instance refuses them by name.
TABLE_OPTIONS = frozenset(
    {
        "model",
        "states",
        "initial",
        "transitions",
        "send_event",
        "auto_transitions",
        "ordered_transitions",
        "ignore_invalid_triggers",
        "model_attribute",
        "model_override",
        "queued",
        "on_exception",
        "markup",  # MarkupMachine builds states and options from it: every name above would pass through it
    }
)


def engine_name(value: object, where: str) -> EngineName:
    """``value`` as an engine name, or :class:`ConfigError` naming ``where`` it came from."""
    for name in ENGINES:
        if value == name:
            return name
    raise ConfigError(f"{where}: engine must be one of {', '.join(ENGINES)}, got {str(value)[:100]!r}")


@functools.cache
def default_engine() -> EngineName:
    """The engine instances get when none is named: ``LOOPFSM_ENGINE``, ``[tool.loopfsm] engine``, ``transitions``."""
    env = os.environ.get(ENV)
    if env:
        return engine_name(env, f"environment variable {ENV}")
    configured = project_engine(Path.cwd())
    return configured if configured is not None else "transitions"


def project_engine(start: Path) -> EngineName | None:
    """``engine`` of the nearest ``pyproject.toml`` above ``start`` with a ``[tool.loopfsm]`` table, if set.

    Found as the command line finds its project: a file it cannot read is a
    :class:`ConfigError` here too, not a file to skip.
    """
    here = start.resolve()
    for folder in (here, *here.parents):
        path = folder / CONFIG
        if not path.is_file():
            continue
        table = loopfsm_table(path)
        if table is not None:
            return engine_name(table["engine"], f"{shown(path)} [tool.loopfsm]") if "engine" in table else None
    return None


class InterpreterEngine:
    """loopfsm's own loop over the table (:meth:`Feed.run`); no ``transitions`` machine behind it."""

    name: EngineName = "interpreter"
    #: ``run(feed, model, args, policy)``: :meth:`Feed.run` itself, with no call in between.
    run = staticmethod(Feed.run)

    @staticmethod
    def traced(feed: Feed, model: Any, args: Mapping[str, Any], policy: Any) -> FeedData:
        """:meth:`run` with its trace record (the runtime calls this while tracing is active)."""
        return traced_run(Feed.run, feed, model, args, policy)

    @property
    def machine(self) -> Machine:
        raise ConfigError(
            "this instance runs on the interpreter, which has no transitions.Machine; "
            "make it with engine='transitions' (the default) to reach one"
        )


INTERPRETER = InterpreterEngine()


class _FeedCalls:
    """One feed's guards and actions in one flat tuple, bound per policy; each callback knows its index."""

    __slots__ = ("calls", "per_policy")

    def __init__(self) -> None:
        self.calls: list[tuple[Guard | Call, bool]] = []  # (what, is a guard)
        self.per_policy: PerPolicy[tuple[Bound, ...]] = PerPolicy(self._bind)

    def add(self, call: Guard | Call, guard: bool) -> int:
        self.calls.append((call, guard))
        return len(self.calls) - 1

    def _bind(self, policy: Any) -> tuple[Bound, ...]:
        out: list[Bound] = []
        for call, guard in self.calls:
            if guard:
                got = bind_guard(call, policy)
                assert not isinstance(got, bool)  # without a probe a guard is always a callable
                out.append(got)
            else:
                assert isinstance(call, Call)
                out.append(bind(call, policy))
        return tuple(out)


def _guard_name(guard: Guard) -> str:
    """A guard as ``transitions``' diagrams print a condition: ``name``, ``!name``, ``any(a | b & c)``."""
    if isinstance(guard, AnyOf):
        return "any(" + " | ".join(" & ".join(_guard_name(g) for g in option) for option in guard.options) + ")"
    return f"!{guard.name}" if guard.negate else str(guard.name)


def _condition(machine: str, feed: str, branch: Branch, index: int, name: str) -> Callable[[Any], bool]:
    def condition(event_data: Any) -> bool:
        ctx: FeedData = event_data.args[0]
        ctx.transition = branch
        try:
            return bool(ctx.bound[index](event_data.model, ctx))
        except LoopFsmError:
            raise
        except Exception as err:  # a registered guard raised: typed, named, its cause kept
            raise action_error(machine, feed, ctx.source, branch.name, err) from err

    condition.__name__ = condition.__qualname__ = name
    return condition


def _action(machine: str, feed: str, branch: Branch, index: int, name: str) -> Callable[[Any], None]:
    def action(event_data: Any) -> None:
        ctx: FeedData = event_data.args[0]
        ctx.transition = branch
        try:
            ctx.bound[index](event_data.model, ctx)
        except LoopFsmError:
            if _tracing.ACTIVE:
                _tracing.action_refused(event_data.model, feed, branch)
            raise
        except Exception as err:  # a registered action raised
            raise action_error(machine, feed, ctx.source, branch.name, err) from err

    action.__name__ = action.__qualname__ = name
    return action


def _taken(machine: str, feed: str, branch: Branch) -> Callable[[Any], None]:
    """The last ``before`` callback: the branch is taken; a move's state data must be its state's fields."""
    dest, data_keys = branch.dest, branch.data_keys

    def taken(event_data: Any) -> None:
        ctx: FeedData = event_data.args[0]
        ctx.transition = branch
        if dest is not None:
            data = ctx.enter_data
            if (data or data_keys) and data.keys() != data_keys:
                raise state_data_error(machine, feed, dest, data_keys, data)
        ctx.result = True  # the branch is taken: a callback that raises after this cannot undo it

    taken.__name__ = taken.__qualname__ = "enter" if dest is not None else "stay"
    return taken


def _store_state_data(event_data: Any) -> None:
    """The first ``on_enter`` callback of every state: the data the branch's actions set moves in with it."""
    ctx: FeedData = event_data.args[0]
    event_data.model.state_data = ctx.enter_data


class Engines:
    """The engines of one compiled machine's instances: the interpreter, a shared machine per instance
    class (built on its first instance), and machines of their own."""

    def __init__(self, compiled: Tables):
        self.compiled = compiled
        # Held weakly: classes made at run time (a subclass per test, per tenant) are freed with their machine.
        self._shared: weakref.WeakKeyDictionary[type, TransitionsEngine] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()  # two threads making a class's first instance build one machine

    def for_instance(
        self,
        instance: Any,
        engine: EngineName | None = None,
        machine_class: type[Machine] | None = None,
        machine_options: Mapping[str, Any] | None = None,
    ) -> InterpreterEngine | TransitionsEngine:
        """The engine ``instance`` runs on: the process's default unless ``engine`` names one.

        On ``transitions`` without a machine class or options, the machine
        shared by ``type(instance)``; with them, a new machine with
        ``instance`` registered as its model.
        """
        own = machine_class is not None or bool(machine_options)
        if engine is None and own:
            engine = "transitions"  # a machine class or options say which engine is meant, whatever the default
        name = default_engine() if engine is None else engine_name(engine, f"{self.compiled.name}: engine=")
        if name == "interpreter":
            if own:
                raise ConfigError(
                    f"{self.compiled.name}: machine_class= and machine_options= are for engine='transitions', "
                    "not the interpreter"
                )
            return INTERPRETER
        if not own:
            return self.shared(type(instance))
        machine, feeds = build_machine(self.compiled, type(instance), machine_class, machine_options)
        register_model(machine, instance)
        locked = hasattr(machine, "model_context_map")  # a LockedMachine, or a class built on one
        return (LockedTransitionsEngine if locked else TransitionsEngine)(self.compiled, machine, feeds)

    def for_class(self, cls: type) -> InterpreterEngine | TransitionsEngine:
        """The engine of the instances of ``cls`` that name none: the process's default for it."""
        return INTERPRETER if default_engine() == "interpreter" else self.shared(cls)

    def shared(self, cls: type) -> TransitionsEngine:
        """The ``transitions`` engine of every instance of ``cls`` without a machine of its own."""
        found = self._shared.get(cls)
        if found is None:
            with self._lock:
                found = self._shared.get(cls)
                if found is None:
                    found = self._shared[cls] = TransitionsEngine(self.compiled, *build_machine(self.compiled, cls))
        return found


class TransitionsEngine:
    """A compiled table on a ``transitions.Machine``: shared (no model registered) or an instance's own."""

    name: EngineName = "transitions"

    def __init__(self, compiled: Tables, machine: Machine, feeds: dict[str, tuple[Any, _FeedCalls]]):
        self.compiled = compiled
        self.machine = machine
        self._feeds = feeds  # feed name -> (its transitions Event, its calls bound per policy)

    def run(self, feed: Feed, model: Any, args: Mapping[str, Any], policy: Any) -> FeedData:
        state = model._state
        ctx = feed_data(feed, model, args, policy, state)
        if state not in feed.branches:
            if state in feed.ignored_in:
                return ctx
            raise IllegalFeed(feed.machine, state, feed.name, feed.legal_states)
        event, calls = self._feeds[feed.name]
        ctx.bound = calls.per_policy.get(policy)
        try:
            ctx.result = event.trigger(model, ctx)
        except LoopFsmError:
            if ctx.result:  # a callback's nested feed raised after the branch was taken: the move completes
                self._complete(model, ctx)
            raise  # the table's own errors (its guards and actions are wrapped): nothing changed
        except Exception as err:
            failed = self._failed(feed, model, ctx, err)
            if failed is None:
                return ctx
            raise failed from err
        if not ctx.result and state in feed.otherwise_raise:
            raise NoBranchMatched(feed.machine, state, feed.name, feed.legal_states)
        return ctx

    def traced(self, feed: Feed, model: Any, args: Mapping[str, Any], policy: Any) -> FeedData:
        """:meth:`run` with its trace record (the runtime calls this while tracing is active)."""
        return traced_run(self.run, feed, model, args, policy)

    def _complete(self, model: Any, ctx: FeedData) -> None:
        """Finish the move of a taken branch that a callback interrupted before its state was entered."""
        branch = ctx.transition
        if branch is not None and branch.dest is not None and model.state_data is not ctx.enter_data:
            self.machine.set_state(branch.dest, model)
            model.state_data = ctx.enter_data

    def _failed(self, feed: Feed, model: Any, ctx: FeedData, err: Exception) -> LoopFsmError | None:
        """What a trigger that raised something other than a loopfsm error means (None: the feed is ignored).

        ``transitions`` raises ``MachineError`` when the state has no
        transition for the event: another thread moved an instance it shares
        without a lock between the legality check and the trigger; the feed
        is then judged in the state it found.  Anything else came from a
        callback of the user's own: the table's move it interrupted (an
        ``on_exit`` runs between the actions and the move) is completed, so
        the instance is never left half-changed, and the error is typed.
        """
        from transitions.core import MachineError  # noqa: PLC0415 - only a failed trigger pays for it

        if isinstance(err, MachineError) and not ctx.result:
            state = model._state
            if state in feed.ignored_in:
                return None
            return IllegalFeed(feed.machine, state, feed.name, feed.legal_states)
        if ctx.result:
            self._complete(model, ctx)
        if isinstance(err, RecursionError):  # feeds nested too deep: it lands wherever the stack ran out
            branch = ctx.transition.name if ctx.transition is not None else "?"
            return action_error(feed.machine, feed.name, ctx.source, branch, err)
        return CallbackError(
            f"{feed.machine}: feed '{feed.name}' in state '{ctx.source}': a transitions callback raised "
            f"{type(err).__name__}: {str(err)[:200]}"
            + ("; the table's move is complete" if ctx.result else "; nothing changed"),
            ctx.result,
            ctx,
        )

    def __repr__(self) -> str:
        return f"<TransitionsEngine {self.compiled.name} on {type(self.machine).__name__}>"


class LockedTransitionsEngine(TransitionsEngine):
    """An instance's own ``LockedMachine``: the whole feed runs under the model's lock.

    ``LockedMachine`` locks its trigger only; the legality check, the
    feed's source state and its trace record would sit outside the lock, and
    racing threads would see a raw ``MachineError`` and trace records of moves
    that did not happen as recorded.  The trigger inside sees this thread
    holding the lock and does not take it again (``LockedMachine``'s own rule).
    """

    def run(self, feed: Feed, model: Any, args: Mapping[str, Any], policy: Any) -> FeedData:
        with self._held(model):
            return TransitionsEngine.run(self, feed, model, args, policy)

    def traced(self, feed: Feed, model: Any, args: Mapping[str, Any], policy: Any) -> FeedData:
        with self._held(model):  # the run inside finds the lock held by this thread and does not take it again
            return traced_run(self.run, feed, model, args, policy)

    def _held(self, model: Any) -> contextlib.AbstractContextManager[Any]:
        """The model's lock contexts, entered; nothing for a feed from a callback inside a feed (held already)."""
        machine: Any = self.machine
        if machine._ident.current == threading.get_ident():
            return contextlib.nullcontext()
        stack = contextlib.ExitStack()
        for context in machine.model_context_map[id(model)]:
            stack.enter_context(context)
        return stack


def traced_run(
    run: Callable[[Feed, Any, Mapping[str, Any], Any], FeedData],
    feed: Feed,
    model: Any,
    args: Mapping[str, Any],
    policy: Any,
) -> FeedData:
    """Run a feed with ``run`` and send its trace record: of the move it made, even when a callback raised."""
    before = _tracing.feed_starting(model, args, policy)
    try:
        done = run(feed, model, args, policy)
    except CallbackError as err:
        if err.moved and isinstance(err.feed_data, FeedData):
            _tracing.feed_done(model, feed.name, err.feed_data, before)
        raise
    _tracing.feed_done(model, feed.name, done, before)
    return done


def build_machine(
    compiled: Tables,
    instance_class: type,
    machine_class: type[Machine] | None = None,
    options: Mapping[str, Any] | None = None,
) -> tuple[Machine, dict[str, tuple[Any, _FeedCalls]]]:
    """A ``transitions.Machine`` (or ``machine_class``) holding the table, and per feed its event and calls.

    ``on_enter_<state>`` / ``on_exit_<state>`` methods ``instance_class``
    defines are added to the states by name, as ``transitions`` adds a
    model's own methods.
    """
    from transitions import Machine  # noqa: PLC0415 - the interpreter's users never load it

    cls = Machine if machine_class is None else machine_class
    if not (isinstance(cls, type) and issubclass(cls, Machine)):
        raise ConfigError(f"{compiled.name}: machine_class must be transitions.Machine or a subclass, got {cls!r}")
    if cls is not Machine:
        from transitions.extensions.asyncio import AsyncMachine  # noqa: PLC0415
        from transitions.extensions.nesting import HierarchicalMachine  # noqa: PLC0415

        if issubclass(cls, (AsyncMachine, HierarchicalMachine)):
            raise ConfigError(
                f"{compiled.name}: machine_class {cls.__name__} cannot run the table: a feed runs to its end "
                "before it returns (an AsyncMachine's triggers are coroutines) and the states are flat "
                "(a HierarchicalMachine's events are not triggered per model)"
            )
    if options is not None and not isinstance(options, Mapping):
        raise ConfigError(f"{compiled.name}: machine_options must be a mapping, got {type(options).__name__}")
    opts = dict(options or {})
    wrong = sorted(TABLE_OPTIONS & opts.keys())
    if wrong:
        raise ConfigError(
            f"{compiled.name}: the machine option{'s' if len(wrong) > 1 else ''} {', '.join(wrong)} would change "
            "what the table means; the YAML sets states, transitions and how events are sent"
        )
    name = compiled.name
    _check_callbacks(name, instance_class, opts)
    try:
        machine = cls(
            model=None,
            states=list(compiled.spec.states),
            initial=compiled.initial,
            auto_transitions=False,
            send_event=True,
            model_attribute="_state",
            **{"name": name, **opts},
        )
    except (TypeError, ValueError) as err:
        raise ConfigError(f"{name}: {cls.__name__} refused the machine options: {str(err)[:300]}") from None
    for held in machine.states.values():
        held.on_enter.insert(0, _store_state_data)
        for kind in ("enter", "exit"):
            method = f"on_{kind}_{held.name}"
            if method not in compiled.events and callable(getattr(instance_class, method, None)):
                held.add_callback(kind, method)
    feeds: dict[str, tuple[Any, _FeedCalls]] = {}
    for event, feed in compiled.events.items():
        calls = _FeedCalls()
        made: dict[int, tuple[list[Any], list[Any]]] = {}  # a '*' branch's callbacks serve every state it covers
        for state, branches in feed.branches.items():
            for branch in branches:
                if id(branch) not in made:
                    made[id(branch)] = (
                        [_condition(name, event, branch, calls.add(g, True), _guard_name(g)) for g in branch.guards],
                        [
                            *(_action(name, event, branch, calls.add(a, False), a.name) for a in branch.actions),
                            _taken(name, event, branch),
                        ],
                    )
                conditions, before = made[id(branch)]
                machine.add_transition(event, state, branch.dest, conditions=conditions, before=list(before))
        if event in machine.events:  # a feed with no branch at all is illegal everywhere: never triggered
            feeds[event] = (machine.events[event], calls)
    return machine, feeds


#: Machine options whose values are callbacks: a callable, a method name of the model, a dotted import path.
CALLBACK_OPTIONS = ("before_state_change", "after_state_change", "prepare_event", "finalize_event", "on_final")


def _check_callbacks(name: str, instance_class: type, options: Mapping[str, Any]) -> None:
    """Refuse a callback option ``transitions`` could not call, now rather than in the middle of a feed.

    ``transitions`` resolves a callback only when it runs it: ``after_state_change=5`` would raise after
    the move, at every feed.
    """
    import importlib  # noqa: PLC0415 - only a named callback pays for it

    for option in CALLBACK_OPTIONS:
        value = options.get(option)
        for callback in value if isinstance(value, (list, tuple)) else () if value is None else (value,):
            if callable(callback):
                continue
            if isinstance(callback, str):
                if callable(getattr(instance_class, callback, None)):
                    continue
                module, _, attr = callback.rpartition(".")
                try:
                    if module and callable(getattr(importlib.import_module(module), attr, None)):
                        continue
                except ImportError:
                    pass
                problem = (
                    f"{callback[:100]!r} names neither a method of {instance_class.__name__} nor an importable callable"
                )
            else:
                problem = f"a {type(callback).__name__} is not a callback"
            raise ConfigError(f"{name}: machine option {option}: {problem}")


def register_model(machine: Machine, instance: Any) -> None:
    """Register ``instance`` as the model of its own ``machine``, as ``Machine.add_model`` does.

    ``add_model`` binds ``trigger``, ``may_trigger`` and each feed's name on the
    model unless the model has them, and logs a warning for each it skips.
    An instance has them all (its feeds are methods): they are skipped without
    the warning, everything else (``is__state_<state>``, an extension's
    ``get_graph``, a lock per model) is bound as ``add_model`` binds it.
    """

    def assign(model: Any, name: str, func: Any) -> None:
        # may_<feed> would ask the conditions without loopfsm's feed context: the instance's can() answers it.
        if getattr(model, name, None) is None and not name.startswith("may_"):
            setattr(model, name, func)

    machine._checked_assignment = assign  # type: ignore[method-assign]
    machine.add_model(instance, initial=instance._state)
