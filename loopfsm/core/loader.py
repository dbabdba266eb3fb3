"""Loading a machine file: safe YAML, then the JSON Schema, then the semantic checks.

The schema validator is built once per process: checking the meta-schema and
compiling the validator costs tens of milliseconds, which a build over many
machine files (or a test suite loading them hundreds of times) should pay once.
A file that loaded before, unchanged, is not even parsed: :mod:`.speccache`
hands back its checked document, and neither YAML nor ``jsonschema`` is imported.
"""

from __future__ import annotations

import json
from functools import lru_cache
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import speccache
from .errors import Problem, RegistryError, SpecError, did_you_mean
from .registries import registry_named
from .registry import Registry
from .resources import schema_path
from .spec import Spec, build_spec

if TYPE_CHECKING:  # pragma: no cover
    from .source import Source
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError


@lru_cache(maxsize=1)
def machine_schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(schema_path().read_text(encoding="utf-8"))
    return schema


@lru_cache(maxsize=1)
def _validator() -> Draft202012Validator:
    from jsonschema import Draft202012Validator  # noqa: PLC0415 - only a cache miss pays for the import

    schema = machine_schema()
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


@lru_cache(maxsize=1)
def _fast_check() -> Any:
    """The machine schema compiled to Python (fastjsonschema): a quick yes for the common, valid file.

    The schema keeps to keywords whose meaning draft 7 and 2020-12 share (no
    ``$ref`` with siblings, no ``prefixItems``), so its yes is jsonschema's yes;
    a no, or anything unexpected, is handed to jsonschema, whose errors we
    explain, so the messages a user reads never change.
    """
    import fastjsonschema  # noqa: PLC0415

    # detailed_exceptions=False: no copy of the schema in every raise of the generated code (it
    # compiles four times faster, and a failure is explained by jsonschema anyway).
    return fastjsonschema.compile(_fast_schema(machine_schema()), detailed_exceptions=False)


# Keywords that only describe (editor help and snippets): the validator needs none of them.
_ANNOTATIONS = frozenset({"title", "description", "defaultSnippets", "$comment", "examples"})
_NAMED_SCHEMAS = frozenset({"properties", "patternProperties", "$defs", "dependentSchemas"})


def _fast_schema(node: Any, named: bool = False) -> Any:
    """A copy of the schema for fastjsonschema: annotations dropped, ``const: x`` as ``enum: [x]``.

    The two mean the same to every validator; fastjsonschema without detailed
    exceptions cannot generate ``const`` (it fails formatting the message).
    The copy also leaves the cached schema as it was.
    """
    if isinstance(node, dict):
        if named:  # names of properties or definitions, each mapped to a schema: every name stays
            return {k: _fast_schema(v) for k, v in node.items()}
        out = {}
        for k, v in node.items():
            if k in _ANNOTATIONS and isinstance(v, (str, list)):
                continue
            if k == "const":
                out["enum"] = [v]
            else:
                out[k] = _fast_schema(v, k in _NAMED_SCHEMAS)
        return out
    if isinstance(node, list):
        return [_fast_schema(v) for v in node]
    return node


def _fast_valid(doc: Any) -> bool:
    try:
        _fast_check()(doc)
    except Exception:  # noqa: BLE001 - invalid, or a value it cannot judge: jsonschema decides
        return False
    return True


def _friendly(err: ValidationError) -> str | None:
    """Messages for the schema's few constraints whose generic wording helps nobody."""
    if err.validator == "oneOf" and err.schema is machine_schema()["$defs"]["branch"]:
        return "a branch needs exactly one of 'to: <State>' or 'stay: true'"
    if err.validator == "anyOf" and err.schema is machine_schema()["$defs"]["when"]["additionalProperties"]:
        return (
            "a 'when' condition is a value (string, number, boolean or null) or a list of values, "
            "one of which the argument must equal"
        )
    return None


def _lacks_its_move(err: ValidationError) -> bool:
    """A branch's "exactly one of to or stay" failing because it has neither (so a misspelt key beside is why)."""
    branch = machine_schema()["$defs"]["branch"]
    return (
        err.validator == "oneOf"
        and err.schema is branch
        and isinstance(err.instance, dict)
        and not {"to", "stay"} & set(err.instance)
    )


def _schema_problem(src: Source, err: ValidationError) -> Problem:
    from jsonschema.exceptions import best_match  # noqa: PLC0415

    from .source import format_path  # noqa: PLC0415

    top = err
    err = best_match([err]) if err.context else err
    path = tuple(err.absolute_path)
    key = False
    message = err.message
    keywords = [p for p in err.absolute_schema_path if isinstance(p, str)]
    if err.validator == "additionalProperties" and isinstance(err.instance, dict):
        schema = err.schema if isinstance(err.schema, dict) else {}
        allowed = set(schema.get("properties", {}))
        extras = sorted((k for k in err.instance if k not in allowed), key=str)
        if extras:
            path = path + (extras[0],)
            key = True
            message = (
                f"unknown key '{format_path([extras[0]])}'"
                + did_you_mean(extras[0], sorted(allowed))
                + (f" (allowed here: {', '.join(sorted(allowed))})" if allowed else "")
            )
            if isinstance(extras[0], bool):
                message = (
                    f"a key was read as the boolean {extras[0]}: YAML 1.1 turns unquoted "
                    "on/off/yes/no/true/false into booleans, so quote the key or choose another name"
                )
            elif " " in str(extras[0]):
                message += (
                    "; a comma inside a flow mapping {...} ends the value before it, so quote text that contains commas"
                )
    elif err.validator == "propertyNames" or "propertyNames" in keywords:
        name = err.instance
        if isinstance(name, bool):
            path = tuple(err.absolute_path) + (name,)
            key = True
            message = (
                f"a key was read as the boolean {name}: unquoted true/false are booleans in YAML, "
                "so quote the key or choose another name"
            )
        elif isinstance(name, str):
            path = tuple(err.absolute_path) + (name,)
            key = True
            message = f"'{name}' is not a valid name here: {err.message}"
        else:  # 1, 2.5, null: YAML read the key as a number or null
            from .fieldtypes import yaml_shown  # noqa: PLC0415

            path = tuple(err.absolute_path) + (name,)
            key = True
            message = f"a key was read as {yaml_shown(name)}: names are text, so quote the key or choose another name"
    elif err.validator == "type" and isinstance(err.validator_value, str):
        from .fieldtypes import yaml_shown  # noqa: PLC0415

        wanted: str = err.validator_value
        message = f"expected {_TYPE_WORDS.get(wanted, wanted)} here, got {yaml_shown(err.instance)}"
    elif err.validator == "enum" and isinstance(err.instance, str):
        message += did_you_mean(err.instance, err.validator_value if isinstance(err.validator_value, list) else [])
    elif err.validator == "minItems" and path and path[-1] == "any":
        message = "'any:' needs at least two alternatives (one guard needs no 'any:')"
    elif err.validator == "required":
        message = err.message.replace("is a required property", "is required here")
    friendly = _friendly(top)
    if friendly:
        path, message, key = tuple(top.absolute_path), friendly, False
    return src.problem(path, _without_long_values(message, err.instance), key=key)


# JSON Schema's type names as a YAML file's writer knows them.
_TYPE_WORDS = {
    "object": "a mapping ({key: value})",
    "array": "a list ([a, b])",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
}


def _without_long_values(message: str, instance: Any) -> str:
    """jsonschema quotes the offending value whole; a file that is really a key or a log must not be echoed."""
    text = repr(instance)
    if len(text) <= 40 or text not in message:
        return message if len(message) <= 400 else message[:400] + "..."
    size = (
        f"{len(instance):,} characters"
        if isinstance(instance, str)
        else f"{len(instance):,} items"
        if isinstance(instance, (list, dict))
        else f"{len(text):,} characters"
    )
    return message.replace(text, f"{text[:24]}... ({type(instance).__name__} of {size})")


def schema_problems(src: Source) -> list[Problem]:
    if _fast_valid(src.doc):
        return []
    errors = list(_validator().iter_errors(src.doc))
    # A misspelt key also makes the intended key "missing"; report the typo only.  A branch with neither
    # ``to`` nor ``stay`` beside a misspelt key (``sty: true``) is the same one mistake.
    typo_at = {tuple(e.absolute_path) for e in errors if e.validator == "additionalProperties"}
    errors = [
        e
        for e in errors
        if not (tuple(e.absolute_path) in typo_at and (e.validator == "required" or _lacks_its_move(e)))
    ]
    return [_schema_problem(src, e) for e in errors]


def parse(text: str, file: str = "<string>", registry: Registry | None = None) -> Spec:
    """Parse and fully check machine text; raise :class:`SpecError` listing every problem."""
    from .source import SourceProblems, read_source  # noqa: PLC0415

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
    An unchanged file checked before against the same registry comes from the
    spec cache (see :mod:`loopfsm.core.speccache`).
    """
    data = speccache.read_small_file(path)
    key = speccache.entry_key(str(path), data) if data is not None else None
    if key is not None:
        spec = _from_cache(key, str(path), data, registry, lookup)  # type: ignore[arg-type]
        if spec is not None:
            return spec
    from .source import SourceProblems, read_file  # noqa: PLC0415

    try:
        src = read_file(path)
    except SourceProblems as err:
        raise SpecError(err.problems) from None
    spec, used = _checked(src, registry, lookup)
    if key is not None and used is not None:  # a file checked without its registry is not cached
        speccache.store(key, src.doc, speccache.registry_signature(used), spec.warnings, spec.fingerprint)
    return spec


class _CachedSource:
    """A cached document standing in for a parsed :class:`~loopfsm.core.source.Source`.

    Positions are needed only to report a problem, so the file's text is parsed
    again (YAML imported and all) only if something asks for one.
    """

    def __init__(self, file: str, doc: Any, text: bytes):
        self.file, self.doc, self._text = file, doc, text

    def __getattr__(self, name: str) -> Any:
        """Called only for what this object lacks (``locate``, ``problem``...): the parsed source has it,
        parsed on the first such question and kept (it was parsed anew on every one: a report of 89 rows
        parsed the router run's file 89 times)."""
        parsed = self.__dict__.get("_parsed")
        if parsed is None:
            from .source import read_source  # noqa: PLC0415

            parsed = read_source(self._text.decode("utf-8"), self.file)
            parsed.doc = self.doc
            self.__dict__["_parsed"] = parsed
        return getattr(parsed, name)


def _from_cache(key: str, file: str, data: bytes, registry: Registry | None, lookup: Lookup | None) -> Spec | None:
    """The spec of a cache entry, or None to take the uncached path.

    An entry is untrusted: anything wrong with it (a shape the schema would
    refuse, a registry that changed or vanished) is a miss, and the uncached
    path then reports on the file itself.
    """
    hit = speccache.lookup(key)
    if hit is None:
        return None
    try:
        spec = build_spec(_CachedSource(file, hit.doc, data))  # type: ignore[arg-type]
        if registry is None:
            registry = (lookup or registry_named)(spec.registry)
    except Exception:  # noqa: BLE001 - a bad entry or a registry gone missing is just a miss
        return None
    if registry is None or speccache.registry_signature(registry) != hit.registry:
        return None
    spec.warnings = hit.warnings
    spec.__dict__["fingerprint"] = hit.fingerprint  # computed from the same document when it was filed
    return spec


def _from_source(src: Source, registry: Registry | None, lookup: Lookup | None = None) -> Spec:
    return _checked(src, registry, lookup)[0]


def _checked(src: Source, registry: Registry | None, lookup: Lookup | None = None) -> tuple[Spec, Registry | None]:
    problems = schema_problems(src)
    if problems:
        raise SpecError(problems)
    spec = build_spec(src)
    if registry is None:
        try:
            registry = (lookup or registry_named)(spec.registry)
        except RegistryError as err:  # an unknown or broken registry is a problem of this file
            raise SpecError([src.problem(("registry",), str(err))]) from None
    from .checks import check_spec, check_structure  # noqa: PLC0415 - a file from the spec cache is not checked again

    if registry is None:
        found, spec.unchecked = check_structure(spec)
    else:
        found = check_spec(spec, registry)
    errors = [p for p in found if p.severity == "error"]
    if errors:
        raise SpecError(found)
    spec.warnings = [p for p in found if p.severity != "error"]
    return spec, registry
