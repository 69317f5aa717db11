"""Chat model implementations — the vendor providers and the offline test doubles — and the schema
dialects they send.

Everyday names (`OpenAIChatModel`, `AnthropicChatModel`, `GeminiChatModel`, `FakeModel`,
`FunctionModel`, `get_model`, `SchemaDialectError`) are exported from `agentforge_typed` itself. This module exports
the dialect plumbing, for code that renders tool schemas itself: `render_schema(parameters,
dialect)`, `Dialect`, `DIALECTS`, `dialect_rules(dialect)` (a `DialectRules`: the rendering and
the names a dialect accepts) and `MAX_GEMINI_SCHEMA_CHARS` (the size past which the `gemini`
dialect refuses a schema, all of its references inlined). And the constructors' keyword options
as TypedDicts: `HttpModelOptions` (every HTTP provider), `ParameterDefaults` (its default request
parameters), `OpenAIOptions` (OpenAI's models), all on docs/reference/options.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._base import HttpModelOptions, ParameterDefaults
    from ._dialects import (
        DIALECTS,
        MAX_GEMINI_SCHEMA_CHARS,
        Dialect,
        DialectRules,
        SchemaDialectError,
        dialect_rules,
        render_schema,
    )
    from .openai import OpenAIOptions

__all__ = [
    "DIALECTS",
    "MAX_GEMINI_SCHEMA_CHARS",
    "Dialect",
    "DialectRules",
    "HttpModelOptions",
    "OpenAIOptions",
    "ParameterDefaults",
    "SchemaDialectError",
    "dialect_rules",
    "render_schema",
]


# Loaded on first use: a test model (`FakeModel`, `FunctionModel`) needs no dialect renderer.
_HOMES = {
    **dict.fromkeys(__all__, "._dialects"),
    "HttpModelOptions": "._base",
    "ParameterDefaults": "._base",
    "OpenAIOptions": ".openai",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home, __name__), name)
