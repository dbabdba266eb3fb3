"""docs/errors.md, held to the code: every class it names, every relation it states."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

import loopfsm
from tests.support.docs_pages import page
from loopfsm.core import errors
from loopfsm.core.compiler import _ENVELOPE
from loopfsm.machines import errors as machine_errors
from loopfsm.rendering import errors as rendering_errors
from loopfsm.verification import errors as verification_errors
from loopfsm.router import errors as router_errors
from loopfsm.review_site import errors as review_site_errors
from loopfsm.machines.engine_values import LoopError

SECTION = page("docs/errors.md").split("# Errors\n\n", 1)[1]
FIRST = SECTION.split("\n\n", 1)[0]


#: Each layer's own errors module: the only places an error class is defined.
ERROR_MODULES = (errors, machine_errors, router_errors, verification_errors, rendering_errors, review_site_errors)


def error_classes() -> dict[str, type]:
    return {
        n: c
        for m in ERROR_MODULES
        for n, c in vars(m).items()
        if inspect.isclass(c) and issubclass(c, BaseException) and c.__module__ == m.__name__
    }


def test_the_section_names_exactly_the_error_classes():
    named = set(re.findall(r"`([A-Z][A-Za-z]+)`", FIRST)) - {"LoopFsmError", "Message", "ToolCall"}
    assert named == set(error_classes()) - {"LoopFsmError"}


def test_every_error_class_is_exported_and_rooted():
    for name, cls in error_classes().items():
        assert getattr(loopfsm, name) is cls, name
        assert issubclass(cls, errors.LoopFsmError), name


def test_stated_relations_hold():
    for sub, parent in re.findall(r"`(\w+)` \(an? `(\w+)`", FIRST):
        classes = error_classes()
        assert issubclass(classes[sub], classes[parent]), (sub, parent)
    assert issubclass(errors.NoBranchMatched, errors.IllegalFeed)
    assert issubclass(errors.UnknownFeed, errors.FeedArgumentError)


def test_no_module_defines_an_error_class_of_its_own():
    """Outside the layers' errors modules only private helpers and the LoopError values (how a run ended) exist."""
    stray = []
    for info in pkgutil.walk_packages(loopfsm.__path__, "loopfsm."):
        if info.name.endswith("__main__"):
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an optional extra that is not installed
            continue
        for name, obj in vars(module).items():
            if (
                inspect.isclass(obj)
                and issubclass(obj, BaseException)
                and obj.__module__ == info.name
                and info.name not in {m.__name__ for m in ERROR_MODULES}
                and not name.startswith("_")
                and not issubclass(obj, (LoopError, Warning))
            ):
                stray.append(f"{info.name}.{name}")
    assert stray == []


def test_the_snapshot_keys_are_the_ones_the_section_lists():
    listed = re.search(r"exactly the keys (.*?)\)", SECTION, flags=re.S).group(1)
    assert tuple(re.findall(r"`(\w+)`", listed)) == _ENVELOPE
