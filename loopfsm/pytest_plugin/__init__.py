"""pytest plugin (entry point ``pytest11``): transition coverage and fixtures for machine tests.

``pytest --loopfsm-coverage`` listens to every machine the session drives
(through the tracing hook) and, at the end, reports per machine file which
branches and decision rules were taken and lists the ones never taken.
``--loopfsm-coverage-fail-under=N`` fails the session below N percent.
The machine files measured are the project's (``[tool.loopfsm] machines``,
default ``machines/``), or those given with ``--loopfsm-machines``.

Fixtures:

- ``loopfsm_registry``: a fresh, empty :class:`~loopfsm.Registry` for a test's guards and actions;
- ``loopfsm_machine``: ``loopfsm_machine(yaml_text, registry)`` checks and compiles a machine
  from a YAML string (dedented) and returns the compiled machine (``.new()`` makes instances);
- ``loopfsm_coverage_paused``: the coverage listener is detached for the test (for tests that
  assert nobody is listening).
"""

from __future__ import annotations

import argparse

import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from loopfsm.core import tracing
from loopfsm.verification.coverage import Collector, MachineCoverage, format_report, measure, rows_of, total_percent

_KEY = pytest.StashKey["_State"]()


class _State:
    def __init__(self, collector: Collector, paths: list[str], fail_under: float | None):
        self.collector = collector
        self.paths = paths
        self.fail_under = fail_under
        self.report: list[MachineCoverage] | None = None
        self.problems: list[str] = []


def _percent(text: str) -> float:
    """A threshold from 0 to 100: nan, -5 or 150 would pass or fail whatever the tests did."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a percentage: {text!r}") from None
    if not 0 <= value <= 100:  # false for nan too
        raise argparse.ArgumentTypeError(f"a percentage from 0 to 100, got {text!r}")
    return value


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("loopfsm", "loopfsm transition coverage")
    group.addoption(
        "--loopfsm-coverage",
        action="store_true",
        default=False,
        help="report which YAML branches and decision rules the tests took",
    )
    group.addoption(
        "--loopfsm-coverage-fail-under",
        type=_percent,
        default=None,
        metavar="N",
        help="fail when fewer than N percent of the branches and rules were taken (implies --loopfsm-coverage)",
    )
    group.addoption(
        "--loopfsm-machines",
        action="append",
        default=[],
        metavar="PATH",
        help="machine files or folders to measure (default: the project's machines)",
    )


def pytest_configure(config: pytest.Config) -> None:
    fail_under = config.getoption("--loopfsm-coverage-fail-under")
    if not (config.getoption("--loopfsm-coverage") or fail_under is not None):
        return
    for given in config.getoption("--loopfsm-machines"):
        if not Path(given).exists():
            raise pytest.UsageError(f"--loopfsm-machines {given}: no such file or folder")
    state = _State(Collector(), config.getoption("--loopfsm-machines"), fail_under)
    config.stash[_KEY] = state
    tracing.add_global_sink(state.collector)


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(_KEY, None)
    if state is not None and tracing.is_global_sink(state.collector):
        tracing.remove_global_sink(state.collector)


def _machine_files(state: _State, rootdir: Path) -> list[Path]:
    if state.paths:
        out: list[Path] = []
        for p in map(Path, state.paths):
            out += sorted(p.glob("*.yaml")) + sorted(p.glob("*.yml")) if p.is_dir() else [p]
        return out
    from loopfsm.cli.project import find_project

    folder = find_project(rootdir).machines
    return sorted(folder.glob("*.yaml")) + sorted(folder.glob("*.yml"))


def _measure(state: _State, rootdir: Path) -> list[MachineCoverage]:
    from loopfsm.rendering.diff import load_for_diff
    from loopfsm.core.errors import SpecError

    machines = []
    for path in _machine_files(state, rootdir):
        try:
            spec = load_for_diff(str(path))
        except SpecError as err:
            state.problems.append(f"{path}: not measured ({err.problems[0] if err.problems else err})")
            continue
        src = spec.source
        try:
            shown = str(path.resolve().relative_to(rootdir.resolve()))
        except ValueError:
            shown = str(path)
        machines.append((spec.name, shown, rows_of(src.doc, lambda p, s=src: s.locate(p)[0])))
    return measure(machines, state.collector)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    state = session.config.stash.get(_KEY, None)
    if state is None:
        return
    try:
        state.report = _measure(state, Path(str(session.config.rootpath)))
    except Exception as err:  # a broken project file must not hide the test results
        state.problems.append(f"coverage not measured: {type(err).__name__}: {err}")
        state.report = []
    measured_nothing = not state.report  # a gate that measured no machine must not pass
    if measured_nothing and state.fail_under is not None:
        state.problems.append("no machine was measured: the coverage gate fails")
    below = state.fail_under is not None and (measured_nothing or total_percent(state.report) < state.fail_under)
    if below and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    state = config.stash.get(_KEY, None)
    if state is None or state.report is None:
        return
    tr = terminalreporter
    tr.write_sep("-", "loopfsm transition coverage")
    for line in state.problems:
        tr.write_line(line)
    for line in format_report(state.report):
        tr.write_line(line)
    if state.fail_under is not None:
        pct = total_percent(state.report)
        if pct < state.fail_under:
            tr.write_line(
                f"FAIL: {pct:.1f}% of branches and rules taken, required {state.fail_under:g}%", red=True, bold=True
            )
        else:
            tr.write_line(f"required {state.fail_under:g}% reached", green=True)


# -- fixtures ------------------------------------------------------------------
@pytest.fixture
def loopfsm_registry() -> Any:
    """A fresh registry named ``test`` for the guards, actions and results a test declares."""
    from loopfsm.core.registry import Registry

    return Registry("test")


@pytest.fixture
def loopfsm_machine() -> Callable[..., Any]:
    """``loopfsm_machine(yaml_text, registry)``: check and compile a machine from a YAML string.

    The text is dedented first, so it can sit indented in a test; a bad
    table raises :class:`~loopfsm.core.errors.SpecError` listing every problem.
    """
    from loopfsm.core.compiler import compile_spec
    from loopfsm.core.loader import parse

    def compile_text(text: str, registry: Any = None, *, file: str = "<test>") -> Any:
        spec = parse(textwrap.dedent(text), file, registry=registry)
        return compile_spec(spec, registry)

    return compile_text


@pytest.fixture
def loopfsm_coverage_paused(request: pytest.FixtureRequest) -> Iterator[None]:
    """Detach the coverage listener for one test (what that test drives is not counted)."""
    state = request.config.stash.get(_KEY, None)
    sink = state.collector if state is not None and tracing.is_global_sink(state.collector) else None
    if sink is not None:
        tracing.remove_global_sink(sink)
    try:
        yield
    finally:
        if sink is not None:
            tracing.add_global_sink(sink)
