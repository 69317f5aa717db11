"""Chat model implementations — the vendor providers and the offline test doubles — and the schema
dialects they send.

Everyday names (`OpenAIChatModel`, `AnthropicChatModel`, `GeminiChatModel`, `FakeModel`,
`FunctionModel`, `get_model`, `SchemaDialectError`) are exported from `agentforge_typed` itself. This module exports
the dialect plumbing, for code that renders tool schemas itself: `render_schema(parameters,
dialect)`, `Dialect`, `DIALECTS` and `dialect_rules(dialect)` (a `DialectRules`: the rendering and
the names a dialect accepts).
"""

from .._dialects import (
    DIALECTS,
    Dialect,
    DialectRules,
    SchemaDialectError,
    dialect_rules,
    render_schema,
)

__all__ = [
    "DIALECTS",
    "Dialect",
    "DialectRules",
    "SchemaDialectError",
    "dialect_rules",
    "render_schema",
]
