"""The demo router's scripted model: what ``router serve`` answers with when no provider is configured."""

from __future__ import annotations

from typing import Any

#: The default script: a turn that looks around, one that writes a file, a closing line.  Offline, deterministic.
DEMO_SCRIPT: list[dict[str, Any]] = [
    {
        "text": "Let me look at the workspace first.",
        "tool_calls": [{"id": "c1", "name": "shell", "arguments": {"command": "ls"}}],
        "input_tokens": 120,
        "output_tokens": 20,
    },
    {
        "text": "I will leave a note.",
        "tool_calls": [
            {
                "id": "c2",
                "name": "write_file",
                "arguments": {"path": "NOTES.md", "content": "Visited by the loopfsm demo router.\n"},
            }
        ],
        "input_tokens": 180,
        "output_tokens": 30,
    },
    {"text": "Done: I listed the workspace and wrote NOTES.md.", "input_tokens": 220, "output_tokens": 15},
]
