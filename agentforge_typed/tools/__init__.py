"""Tool kinds: everything that can answer a `ToolCall`.

- `_base`: what every kind shares and implements: `ToolContext`, the `ToolExecutor` and
  `ToolLike` protocols, `ToolSource`, the approval policy, and `DeclaredTool`, the read-only
  declaration a kind that is not `@tool` inherits (the result, `ToolExecutionResult`, is a record
  of `agentforge_typed._records`).
- `_outcomes`, `_invoke`, `_argument_errors`: the result builders, calling a user's handler sync or
  async under a timeout, and the arguments-error report the model reads; `_budget`: the result
  budget every kind's text is cut to (head and tail around a marker).
- `@tool` function tools: `_function` (`Tool`, `tool`), `_signature` and `_docstrings` (signature →
  arguments model and schema), `_arguments` (validation and envelope repairs), `_result_text`.
- Schema-declared tools: `_schema_arguments` (jsonschema validation and repairs), `_schema_tool`
  (`SchemaTool`), `_http` (`HttpTool`), `mcp/` (`MCPServer`, `MCPTool`: the MCP client).

A new kind implements `ToolLike` (usually by subclassing `DeclaredTool`) and builds its results
with `_outcomes`, so the model reads the same texts whatever backs a tool.

This module exports the plumbing a tool-kind author or a typed decorator wrapper needs
(`DeclaredTool`, `ToolDecorator`, `ToolExecutor`, `ToolLike`, `ToolSource`, the option records
`ToolOptions` and `MCPServerOptions`, `ContentURLs`, and the caps `DEFAULT_MAX_RESULT_CHARS`,
`MAX_CONTENT_BYTES` and `MAX_CONTENT_PARTS`); everyday names are exported from `agentforge_typed` itself.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._base import ContentURLs, DeclaredTool, ToolExecutor, ToolLike, ToolSource
    from ._budget import DEFAULT_MAX_RESULT_CHARS, MAX_CONTENT_BYTES, MAX_CONTENT_PARTS
    from ._function import ToolDecorator, ToolOptions
    from .mcp._server import MCPServerOptions

__all__ = [
    "DEFAULT_MAX_RESULT_CHARS",
    "MAX_CONTENT_BYTES",
    "MAX_CONTENT_PARTS",
    "ContentURLs",
    "DeclaredTool",
    "MCPServerOptions",
    "ToolDecorator",
    "ToolExecutor",
    "ToolLike",
    "ToolOptions",
    "ToolSource",
]

# Loaded on first use: the core imports single modules of this package (e.g. the arguments-error
# wording), which must not pull in every tool kind.
_HOMES = {
    "DEFAULT_MAX_RESULT_CHARS": "._budget",
    "MAX_CONTENT_BYTES": "._budget",
    "MAX_CONTENT_PARTS": "._budget",
    "ContentURLs": "._base",
    "DeclaredTool": "._base",
    "MCPServerOptions": ".mcp._server",
    "ToolDecorator": "._function",
    "ToolOptions": "._function",
    "ToolExecutor": "._base",
    "ToolLike": "._base",
    "ToolSource": "._base",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home, __name__), name)
