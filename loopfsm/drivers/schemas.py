"""What each ``loopfsm run MACHINE --script`` file looks like: the drivers' JSON Schemas, as data.

They sit apart from the drivers so that naming the driver a misplaced file was written for
(``written_for``) needs no driver: every driver and the router's scripted model ask it.
"""

from __future__ import annotations

from typing import Any

from loopfsm.core.fieldtypes import INT_MAX, INT_MIN

ENGINE_BRAIN: dict[str, Any] = {
    "type": "object",
    "required": ["input", "model"],
    "additionalProperties": False,
    "properties": {
        "input": {"type": "string"},
        "tools": {"type": "array", "items": {"type": "string"}},
        "policy": {"type": "object"},
        "context_tokens": {"type": "integer", "minimum": 0, "maximum": INT_MAX},
        "model": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["context_tokens"],
                "properties": {
                    "text": {"type": "string"},
                    "context_tokens": {"type": "integer", "minimum": 0, "maximum": INT_MAX},
                    "tool_calls": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["id", "name"],
                            "additionalProperties": False,
                            "properties": {
                                "id": {"type": "string"},
                                "name": {"type": "string"},
                                "arguments": {"type": "object"},
                            },
                        },
                    },
                },
            },
        },
        "tool_outputs": {"type": "object", "additionalProperties": {"type": "string"}},
        "compactions": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["after"],
                "additionalProperties": False,
                "properties": {
                    "after": {"type": "integer", "minimum": 0, "maximum": INT_MAX},
                    "summary": {"type": "string"},
                },
            },
        },
        "cancel_after_turn": {"type": "integer", "minimum": 0, "maximum": INT_MAX},
    },
}

AGENT_LOOP: dict[str, Any] = {
    "type": "object",
    "required": ["run", "steps"],
    "additionalProperties": False,
    "properties": {
        "run": {
            "type": "object",
            "required": ["run_id", "owner"],
            "additionalProperties": False,
            "properties": {
                "run_id": {"type": "string"},
                "owner": {"type": "string"},
                "deadline_at": {"type": ["integer", "null"], "minimum": INT_MIN, "maximum": INT_MAX},
            },
        },
        "policy": {"type": "object"},
        "steps": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["at"],
                "properties": {
                    "at": {"type": "integer", "minimum": INT_MIN, "maximum": INT_MAX},
                    "feed": {"type": "string"},
                    "resume": {"const": True},
                    "arguments": {},
                },
                "oneOf": [{"required": ["feed"]}, {"required": ["resume"]}],
            },
        },
    },
}

ROUTER_RUN: dict[str, Any] = {
    "type": "object",
    "required": ["steps"],
    "additionalProperties": False,
    "properties": {
        "session": {"type": "string", "minLength": 1, "maxLength": 200},
        "store": {"type": "string", "description": "store URL (default: SQLite in memory)"},
        "lease_ms": {"type": "integer", "minimum": 1, "maximum": INT_MAX},
        "steps": {
            "type": "array",
            "minItems": 1,
            "maxItems": 1000,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "request": {
                        "enum": [
                            "execute",
                            "decrypted",
                            "approval_decisions",
                            "tool_results",
                            "sealed",
                            "inject",
                            "break",
                        ]
                    },
                    "request_id": {"type": "string", "minLength": 1, "maxLength": 200},
                    "holder": {"type": "string", "minLength": 1, "maxLength": 200},
                    "at": {"type": "integer", "minimum": 0, "maximum": INT_MAX},
                    "outcome": {"enum": ["needs_decrypt", "gate", "tools", "completed"]},
                    "encrypted": {"type": "boolean"},
                    "aborted": {"type": "boolean"},
                    "reason": {"enum": ["user", "failed", "expired"]},
                    "calls": {
                        "type": "array",
                        "maxItems": 100,
                        "items": {
                            "type": "object",
                            "required": ["tool"],
                            "additionalProperties": False,
                            "properties": {
                                "tool": {"type": "string", "minLength": 1, "maxLength": 200},
                                "permission": {"enum": ["allow", "ask", "deny", None]},
                                "changes_files": {"type": "boolean"},
                            },
                        },
                    },
                    "approvals": {
                        "type": "array",
                        "maxItems": 100,
                        "items": {"enum": ["disclosure", "cost_ceiling", "plan"]},
                    },
                    "hold": {"type": "boolean", "description": "admit and process, but never checkpoint"},
                    "recover": {"type": "string", "description": "this step is a router restart: recover(holder)"},
                },
            },
        },
    },
}

SCHEMAS: dict[str, dict[str, Any]] = {"agent_loop": AGENT_LOOP, "engine_brain": ENGINE_BRAIN, "router_run": ROUTER_RUN}


def written_for(doc: Any) -> list[str]:
    """The machines whose ``run --script`` driver would take ``doc`` as it is (to name in an error).

    A script handed to the wrong driver otherwise fails on that driver's first
    missing key, which says nothing about the real mistake.
    """
    from jsonschema import Draft202012Validator  # noqa: PLC0415 - only a wrong file pays for it

    return [name for name, schema in SCHEMAS.items() if Draft202012Validator(schema).is_valid(doc)]


def driver_hint(doc: Any) -> str:
    """`` (this is a script for X: loopfsm run X --script FILE)`` when a driver takes ``doc``, else ``""``."""
    others = written_for(doc)
    return f" (this is a script for {others[0]}: loopfsm run {others[0]} --script FILE)" if others else ""
