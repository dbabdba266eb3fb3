"""Server-sent events off a streaming model response, read line by line and within a budget.

The adapters read the raw ``data:`` lines themselves instead of the SDK's
typed stream objects: stream assembly takes the events exactly as the wire
carried them, so what it refuses is what the provider sent, not what an SDK
model made of it.  The SDK still builds, authenticates and sends the request
and turns an HTTP error status into its error.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from loopfsm.router.errors import ProviderError, StreamEventError

if TYPE_CHECKING:
    from loopfsm.machines.stream_values import StreamResult
    from . import FailureClass

#: One event's data larger than this is refused (a reply streams in many small events).
MAX_EVENT_CHARS = 8 * 1024 * 1024


def events(lines: Iterable[str], max_event_chars: int = MAX_EVENT_CHARS) -> Iterator[tuple[str | None, str]]:
    """``(event name, data)`` per dispatched event; an event the stream cut off before its blank line is dropped."""
    name: str | None = None
    data: list[str] = []
    size = 0
    for line in lines:
        if not line:
            if data:
                yield name, "\n".join(data)
            name, data, size = None, [], 0
            continue
        if line.startswith(":"):
            continue  # a comment (keep-alive)
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            name = value
        elif field == "data":
            size += len(value) + 1
            if size > max_event_chars:
                raise StreamEventError(f"a stream event larger than {max_event_chars} characters")
            data.append(value)


def decode(data: str, number: int) -> dict[str, Any]:
    """One event's JSON object; anything else is a malformed stream."""
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        raise StreamEventError(f"event {number}: its data is not JSON") from None
    if not isinstance(value, dict):
        raise StreamEventError(f"event {number}: its data is not a JSON object")
    return value


def http_error(sdk: Any) -> type[BaseException]:
    """The base error of the HTTP library the SDK sends with (httpx, or httpx2 in newer releases).

    Reading a streamed body happens after the SDK handed the response over, so
    a connection dropped mid-stream surfaces as that library's error, not the SDK's.
    """
    import importlib

    client_base = sdk.DefaultHttpxClient.__mro__[1]
    err: type[BaseException] = importlib.import_module(client_base.__module__.split(".")[0]).HTTPError
    return err


def assembled(provider: str, stream: Any, failure: Callable[[str], FailureClass]) -> StreamResult:
    """The whole reply a stream adapter assembled, or the ProviderError its stream ended with.

    An error event mid-stream is classified by ``failure`` (its error type);
    a stream that ended before its stop reason was cut off (``transient``); a
    tool call whose arguments are not one whole JSON object fails the call
    (``transient``: asking again usually helps), never cut to what parses.
    """
    machine = stream.machine
    if machine.state == "Failed":
        kind = str(machine.state_data.get("kind", "error"))[:64]
        raise ProviderError(provider, failure(kind), f"the stream ended with {kind}")
    if machine.state not in ("Stopped", "Done"):
        raise ProviderError(provider, "transient", "the stream ended before its stop reason")
    result: StreamResult = stream.result()
    if result.problems:
        raise ProviderError(provider, "transient", str(result.problems[0]))
    return result
