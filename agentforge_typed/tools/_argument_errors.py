"""The arguments-error text the model reads, shared by every kind of tool.

```
Invalid arguments for tool `get_weather`:
- $.days: Input should be a valid integer (input: "5")
- $.cty: Unexpected argument (input: "Paris")
Correct the arguments and call `get_weather` again.
```

One line per problem, in validation order: the JSON path, the validator's message, and the
offending input as compact JSON truncated to `MAX_INPUT_CHARS`; past `MAX_REPORTED_ERRORS`
problems, one line counts the rest. Deterministic, no stack traces.
A line stays one line whatever the model sent: a key that is not an identifier is quoted as JSON in
the path (`$["a.b"]`), a path over `MAX_PATH_CHARS` keeps its end, a message with a line break or
over `MAX_MESSAGE_CHARS` (some repeat the input) is flattened and truncated, and line separators
JSON allows raw in strings are escaped in the input.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any

from pydantic_core import to_json

from .._exceptions import ArgumentProblem, path_step

__all__ = [
    "MAX_INPUT_CHARS",
    "MAX_MESSAGE_CHARS",
    "MAX_PATH_CHARS",
    "MAX_REPORTED_ERRORS",
    "format_arguments_error",
    "json_path",
    "problem_lines",
    "render_input",
]

MAX_INPUT_CHARS = 120
MAX_MESSAGE_CHARS = 240
MAX_PATH_CHARS = 200
MAX_REPORTED_ERRORS = 20
"""Problems listed in one report; the rest are counted (all are in `ToolArgumentsError.errors`)."""
_LINE_SEPARATORS = {ord(c): f"\\u{ord(c):04x}" for c in "\x85\u2028\u2029"}


def json_path(location: Sequence[str | int]) -> str:
    """`("order", "items", 0, "qty")` → `$.order.items[0].qty`."""
    return _json_path(location if isinstance(location, tuple) else tuple(location))


@functools.lru_cache(maxsize=1024)
def _json_path(location: tuple[str | int, ...]) -> str:
    # The same few locations come back on every invalid call of a tool.
    path = "$" + "".join(path_step(key) for key in location)
    if len(path) > MAX_PATH_CHARS:  # deep nesting in what the model sent
        return "…" + path[-(MAX_PATH_CHARS - 1) :]
    return path


def render_input(value: Any) -> str:
    """Compact JSON of `value`, truncated to `MAX_INPUT_CHARS` characters."""
    try:
        text = to_json(value, fallback=repr).decode()
    except ValueError:  # a lone surrogate, which UTF-8 cannot carry: JSON can, escaped
        text = json.dumps(value, default=repr)
    if not text.isprintable():
        # JSON strings may hold these line separators raw; escaped, they mean the same.
        text = text.translate(_LINE_SEPARATORS)
    return _shortened(text, MAX_INPUT_CHARS)


def format_arguments_error(tool_name: str, errors: Sequence[ArgumentProblem]) -> str:
    """The text an arguments-error result carries back to the model."""
    return (
        f"Invalid arguments for tool `{tool_name}`:\n{problem_lines(errors)}\n"
        f"Correct the arguments and call `{tool_name}` again."
    )


def problem_lines(errors: Sequence[ArgumentProblem]) -> str:
    """One line per problem (`- <path>: <message> (input: <JSON>)`), the same for arguments and
    for any other value checked against a schema (an MCP tool's structured result)."""
    lines = []
    more = len(errors) - MAX_REPORTED_ERRORS
    for path, message, value in errors if more <= 0 else errors[:MAX_REPORTED_ERRORS]:
        if len(message) > MAX_MESSAGE_CHARS or not message.isprintable():
            message = _one_line(message)
        lines.append(f"- {path}: {message} (input: {render_input(value)})")
    if more > 0:
        lines.append(f"- … and {more} more problems")
    return "\n".join(lines)


def _one_line(message: str) -> str:
    # Every kind of line break, tab or run of spaces → one space.
    return _shortened(" ".join(message.split()), MAX_MESSAGE_CHARS)


def _shortened(text: str, limit: int) -> str:
    """`text`, or its first `limit - 1` characters and `…` when it is longer than `limit`."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
