"""Chat model implementations — the vendor providers and the offline test doubles — and the schema
dialects they send.

The model classes (`OpenAIChatModel`, `OpenAIResponsesModel`, `AnthropicChatModel`,
`GeminiChatModel`, `FakeModel`, `FunctionModel`, `FallbackModel`) and `get_model` are exported
from `agentforge_typed` itself. This module is the public home (docs/reference/api.md) of the
rest, each loaded on first use:

- what a model streams and answers, for code that calls or implements a `ChatModel`:
  `StreamEvent`, `ThinkingDelta`, `ToolCallDelta`, `ResponseComplete`, `TokenUsage`,
  `FinishReason`, and the request's `ToolChoice` and `ResponseFormat`;
- `ModelFunction` (what a `FunctionModel` calls), `ModelProfile` (a compatible server's
  profile), `AllModelsFailedError` (a `FallbackModel` whose models all failed),
  `UnsupportedFeatureError` (a request a model cannot serve);
- the dialect plumbing, for code that renders tool schemas itself: `render_schema(parameters,
  dialect)`, `Dialect`, `DIALECTS`, `dialect_rules(dialect)` (a `DialectRules`: the rendering and
  the names a dialect accepts), `SchemaDialectError` and `MAX_GEMINI_SCHEMA_CHARS` (the size past
  which the `gemini` dialect refuses a schema, all of its references inlined);
- the constructors' keyword options as TypedDicts: `HttpModelOptions` (every HTTP provider),
  `ParameterDefaults` (its default request parameters), `OpenAIOptions` (OpenAI's models), all on
  docs/reference/options.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import _lazy

if TYPE_CHECKING:
    from .._exceptions import UnsupportedFeatureError
    from .._model import ResponseComplete, StreamEvent, ThinkingDelta, ToolCallDelta
    from .._request import ResponseFormat, ToolChoice
    from .._response import FinishReason, TokenUsage
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
    from ._fallback import AllModelsFailedError
    from ._function import ModelFunction
    from ._profiles import ModelProfile
    from .openai import OpenAIOptions

__all__ = [
    "DIALECTS",
    "MAX_GEMINI_SCHEMA_CHARS",
    "AllModelsFailedError",
    "Dialect",
    "DialectRules",
    "FinishReason",
    "HttpModelOptions",
    "ModelFunction",
    "ModelProfile",
    "OpenAIOptions",
    "ParameterDefaults",
    "ResponseComplete",
    "ResponseFormat",
    "SchemaDialectError",
    "StreamEvent",
    "ThinkingDelta",
    "TokenUsage",
    "ToolCallDelta",
    "ToolChoice",
    "UnsupportedFeatureError",
    "dialect_rules",
    "render_schema",
]


# Loaded on first use: a test model (`FakeModel`, `FunctionModel`) needs no dialect renderer.
_HOMES = {
    **dict.fromkeys(
        (
            "DIALECTS",
            "MAX_GEMINI_SCHEMA_CHARS",
            "Dialect",
            "DialectRules",
            "SchemaDialectError",
            "dialect_rules",
            "render_schema",
        ),
        "._dialects",
    ),
    "UnsupportedFeatureError": ".._exceptions",
    **dict.fromkeys(
        ("ResponseComplete", "StreamEvent", "ThinkingDelta", "ToolCallDelta"), ".._model"
    ),
    **dict.fromkeys(("ResponseFormat", "ToolChoice"), ".._request"),
    **dict.fromkeys(("FinishReason", "TokenUsage"), ".._response"),
    **dict.fromkeys(("HttpModelOptions", "ParameterDefaults"), "._base"),
    "AllModelsFailedError": "._fallback",
    "ModelFunction": "._function",
    "ModelProfile": "._profiles",
    "OpenAIOptions": ".openai",
}


if not TYPE_CHECKING:  # hidden from type checkers, which see the imports above instead
    __getattr__, __dir__ = _lazy.lazy_exports(__name__, _HOMES)
