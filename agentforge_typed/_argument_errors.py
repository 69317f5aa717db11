"""The arguments-error text the model reads, shared by every kind of tool.

```
Invalid arguments for tool `get_weather`:
- $.days: Input should be a valid integer (input: "5")
- $.cty: Unexpected argument (input: "Paris")
Correct the arguments and call `get_weather` again.
```

One line per problem, in validation order: the JSON path, the validator's message, and the
offending input as compact JSON truncated to `MAX_INPUT_CHARS`. Deterministic, no stack traces.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from pydantic_core import to_json

from ._exceptions import ArgumentError

__all__ = ["MAX_INPUT_CHARS", "format_arguments_error", "json_path", "render_input"]

MAX_INPUT_CHARS = 120


def json_path(location: Sequence[str | int]) -> str:
    """`("order", "items", 0, "qty")` → `$.order.items[0].qty`."""
    return _json_path(location if isinstance(location, tuple) else tuple(location))


@functools.lru_cache(maxsize=1024)
def _json_path(location: tuple[str | int, ...]) -> str:
    # The same few locations come back on every invalid call of a tool.
    return "$" + "".join(f"[{key}]" if isinstance(key, int) else f".{key}" for key in location)


def render_input(value: Any) -> str:
    """Compact JSON of `value`, truncated to `MAX_INPUT_CHARS` characters."""
    text = to_json(value, fallback=repr).decode()
    if len(text) > MAX_INPUT_CHARS:
        return text[: MAX_INPUT_CHARS - 1] + "…"
    return text


def format_arguments_error(tool_name: str, errors: Sequence[ArgumentError]) -> str:
    """The text an arguments-error result carries back to the model."""
    text = f"Invalid arguments for tool `{tool_name}`:\n"
    for path, message, value in errors:
        text += f"- {path}: {message} (input: {render_input(value)})\n"
    return text + f"Correct the arguments and call `{tool_name}` again."
