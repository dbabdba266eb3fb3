"""The tools a router advertises to the model: the client runs the first four, the router answers the last two.

``write_file`` and ``edit_file`` change files, so the router records their
proposed change as a diff when the call is requested.  ``submit_plan`` never
reaches the client as a tool: it raises a standalone plan approval.
``remember`` never reaches it either: the router writes a session ``memory``
row (sealed, in an encrypted session) and answers the call itself.
"""

from __future__ import annotations

from typing import Any

from .providers import ToolSpec

CLIENT_TOOLS: dict[str, ToolSpec] = {
    "read_file": ToolSpec(
        "read_file",
        "Read a text file of the workspace.",
        {"type": "object", "required": ["path"], "properties": {"path": {"type": "string"}}},
    ),
    "write_file": ToolSpec(
        "write_file",
        "Create or replace a text file of the workspace.",
        {
            "type": "object",
            "required": ["path", "content"],
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        },
    ),
    "edit_file": ToolSpec(
        "edit_file",
        "Replace one exact occurrence of old_text with new_text in a file.",
        {
            "type": "object",
            "required": ["path", "old_text", "new_text"],
            "properties": {"path": {"type": "string"}, "old_text": {"type": "string"}, "new_text": {"type": "string"}},
        },
    ),
    "shell": ToolSpec(
        "shell",
        "Run a shell command in the workspace.",
        {"type": "object", "required": ["command"], "properties": {"command": {"type": "string"}}},
    ),
}
PLAN_TOOL = ToolSpec(
    "submit_plan",
    "Submit a plan for the user's approval before acting on it.",
    {"type": "object", "required": ["plan"], "properties": {"plan": {"type": "string"}}},
)
MEMORY_TOOL = ToolSpec(
    "remember",
    "Remember a fact for later runs of this session under a key (a later value for the same key replaces it).",
    {
        "type": "object",
        "required": ["key", "value"],
        "properties": {"key": {"type": "string", "minLength": 1, "maxLength": 128}, "value": {"type": "string"}},
    },
)
FILE_CHANGING = ("write_file", "edit_file")
ALL_TOOLS = (*CLIENT_TOOLS.values(), PLAN_TOOL, MEMORY_TOOL)
#: A remembered value larger than this is refused (the model is told so).
MAX_MEMORY_CHARS = 65_536
#: Permissions of a session that names none: reading is harmless, everything else asks.
DEFAULT_PERMISSIONS = {"read_file": "allow"}


def proposed_change(name: str, arguments: dict[str, Any]) -> dict[str, Any] | None:
    """The diff a file-changing call proposes, known from its arguments alone; None for a malformed call."""
    path = arguments.get("path")
    if not isinstance(path, str):
        return None
    if name == "write_file" and isinstance(arguments.get("content"), str):
        return {"path": path, "op": "write", "new": arguments["content"]}
    old, new = arguments.get("old_text"), arguments.get("new_text")
    if name == "edit_file" and isinstance(old, str) and isinstance(new, str):
        return {"path": path, "op": "edit", "old": arguments["old_text"], "new": arguments["new_text"]}
    return None
