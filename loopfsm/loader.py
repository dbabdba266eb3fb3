"""Loading a machine file: safe YAML, then the JSON Schema, then the semantic checks.

The schema validator is built once per process: checking the meta-schema and
compiling the validator costs tens of milliseconds, which a build over many
machine files (or a test suite loading them hundreds of times) should pay once.
"""

from __future__ import annotations

import json
from functools import lru_cache
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match

from .checks import check_spec, check_structure
from .errors import Problem, SpecError
from .registry import Registry, registry_named
from .resources import schema_path
from .source import Source, SourceProblems, read_file, read_source
from .spec import Spec, build_spec


@lru_cache(maxsize=1)
def machine_schema() -> dict[str, Any]:
    return json.loads(schema_path().read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def _validator() -> Draft202012Validator:
    schema = machine_schema()
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def _friendly(err: ValidationError) -> str | None:
    """Messages for the schema's few constraints whose generic wording helps nobody."""
    if err.validator == "oneOf" and err.schema is machine_schema()["$defs"]["branch"]:
        return "a branch needs exactly one of 'to: <State>' or 'stay: true'"
    return None


def _schema_problem(src: Source, err: ValidationError) -> Problem:
    top = err
    err = best_match([err]) if err.context else err
    path = tuple(err.absolute_path)
    key = False
    message = err.message
    keywords = [p for p in err.absolute_schema_path if isinstance(p, str)]
    if err.validator == "additionalProperties" and isinstance(err.instance, dict):
        allowed = set(err.schema.get("properties", {}))
        extras = sorted(k for k in err.instance if k not in allowed)
        if extras:
            path = path + (extras[0],)
            key = True
            message = (f"unknown key '{extras[0]}'"
                       + (f" (allowed here: {', '.join(sorted(allowed))})" if allowed else ""))
            if " " in str(extras[0]):
                message += ("; a comma inside a flow mapping {...} ends the value before it, "
                            "so quote text that contains commas")
    elif err.validator == "propertyNames" or "propertyNames" in keywords:
        name = err.instance
        if isinstance(name, bool):
            message = (f"a key was read as the boolean {name}: YAML 1.1 turns unquoted on/off/yes/no/true/false "
                       "into booleans, so quote the key or choose another name")
        elif isinstance(name, str):
            path = tuple(err.absolute_path) + (name,)
            key = True
            message = f"'{name}' is not a valid name here: {err.message}"
    elif err.validator == "required":
        message = err.message.replace("is a required property", "is required here")
    friendly = _friendly(top)
    if friendly:
        path, message, key = tuple(top.absolute_path), friendly, False
    return src.problem(path, message, key=key)


def schema_problems(src: Source) -> list[Problem]:
    errors = list(_validator().iter_errors(src.doc))
    # A misspelt key also makes the intended key "missing"; report the typo only.
    typo_at = {tuple(e.absolute_path) for e in errors if e.validator == "additionalProperties"}
    errors = [e for e in errors if not (e.validator == "required" and tuple(e.absolute_path) in typo_at)]
    return [_schema_problem(src, e) for e in errors]


def parse(text: str, file: str = "<string>", registry: Registry | None = None) -> Spec:
    """Parse and fully check machine text; raise :class:`SpecError` listing every problem."""
    try:
        src = read_source(text, file)
    except SourceProblems as err:
        raise SpecError(err.problems) from None
    return _from_source(src, registry)


Lookup = Callable[[str | None], Registry | None]


def load(path: str | Path, registry: Registry | None = None, *, lookup: Lookup | None = None) -> Spec:
    """Load and fully check a machine file; raise :class:`SpecError` listing every problem.

    Without an explicit ``registry`` the one the file names under ``registry:``
    is used, looked up among registries loopfsm ships or installed packages declare.
    A ``lookup`` replaces that search (the command line adds the registries a
    project declares); when it answers ``None`` the file gets every check that
    needs no registry, and ``spec.unchecked`` lists the names nobody vouched for.
    """
    try:
        src = read_file(path)
    except SourceProblems as err:
        raise SpecError(err.problems) from None
    return _from_source(src, registry, lookup)


def _from_source(src: Source, registry: Registry | None, lookup: Lookup | None = None) -> Spec:
    problems = schema_problems(src)
    if problems:
        raise SpecError(problems)
    spec = build_spec(src)
    if registry is None:
        try:
            registry = (lookup or registry_named)(spec.registry)
        except Exception as err:  # an unknown or broken registry is a problem of this file
            raise SpecError([src.problem(("registry",), str(err))]) from None
    if registry is None:
        found, spec.unchecked = check_structure(spec)
    else:
        found = check_spec(spec, registry)
    errors = [p for p in found if p.severity == "error"]
    if errors:
        raise SpecError(found)
    spec.warnings = [p for p in found if p.severity != "error"]
    return spec
