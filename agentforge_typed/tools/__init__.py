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

`tool`, `Tool`, `ToolContext`, `ToolReturn` and `MCPServer` are exported from `agentforge_typed`
itself. This module is the public home (docs/reference/api.md) of the rest, each loaded on first
use:

- the other tool kinds: `SchemaTool`, `HttpTool`, and the MCP client's `MCPTool`,
  `MCPToolFilter`, `LocalRedirect`, `MCPAuthorizationError`, and the token storages of its
  authorization, `MemoryTokens` and `StoreTokens`;
- what a tool declares and returns: `ToolSpecification`, `ToolAnnotations`, `ReturnBehavior`,
  `ApprovalPolicy`, `ToolExecutionResult`, `ErrorKind`, `ArgumentProblem`,
  `HandlerTimeoutError`;
- result caches: `ResultCache`, `MemoryCache`, `StoreCache`;
- the plumbing a tool-kind author or a typed decorator wrapper needs: `DeclaredTool`,
  `ToolDecorator`, `ToolExecutor`, `ToolLike`, `ToolSource`, the option records `ToolOptions` and
  `MCPServerOptions`, `ContentURLs`, and the caps `DEFAULT_MAX_RESULT_CHARS`, `MAX_CONTENT_BYTES`
  and `MAX_CONTENT_PARTS`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import _lazy

if TYPE_CHECKING:
    from .._exceptions import ArgumentProblem
    from .._records import ErrorKind, ToolExecutionResult
    from .._request import ToolAnnotations, ToolSpecification
    from ._base import (
        ApprovalPolicy,
        ContentURLs,
        DeclaredTool,
        ReturnBehavior,
        ToolExecutor,
        ToolLike,
        ToolSource,
    )
    from ._budget import DEFAULT_MAX_RESULT_CHARS, MAX_CONTENT_BYTES, MAX_CONTENT_PARTS
    from ._cache import MemoryCache, ResultCache, StoreCache
    from ._function import ToolDecorator, ToolOptions
    from ._http import HttpTool
    from ._invoke import HandlerTimeoutError
    from ._schema_tool import SchemaTool
    from .mcp._server import (
        LocalRedirect,
        MCPAuthorizationError,
        MCPServerOptions,
        MCPTool,
        MCPToolFilter,
        MemoryTokens,
        StoreTokens,
    )

__all__ = [
    "DEFAULT_MAX_RESULT_CHARS",
    "MAX_CONTENT_BYTES",
    "MAX_CONTENT_PARTS",
    "ApprovalPolicy",
    "ArgumentProblem",
    "ContentURLs",
    "DeclaredTool",
    "ErrorKind",
    "HandlerTimeoutError",
    "HttpTool",
    "LocalRedirect",
    "MCPAuthorizationError",
    "MCPServerOptions",
    "MCPTool",
    "MCPToolFilter",
    "MemoryCache",
    "MemoryTokens",
    "ResultCache",
    "ReturnBehavior",
    "SchemaTool",
    "StoreCache",
    "StoreTokens",
    "ToolAnnotations",
    "ToolDecorator",
    "ToolExecutionResult",
    "ToolExecutor",
    "ToolLike",
    "ToolOptions",
    "ToolSource",
    "ToolSpecification",
]

# Loaded on first use: the core imports single modules of this package (e.g. the arguments-error
# wording), which must not pull in every tool kind (nor MCP, httpx or jsonschema).
_HOMES = {
    **dict.fromkeys(
        ("DEFAULT_MAX_RESULT_CHARS", "MAX_CONTENT_BYTES", "MAX_CONTENT_PARTS"), "._budget"
    ),
    "ArgumentProblem": ".._exceptions",
    **dict.fromkeys(("ErrorKind", "ToolExecutionResult"), ".._records"),
    **dict.fromkeys(("ToolAnnotations", "ToolSpecification"), ".._request"),
    **dict.fromkeys(
        (
            "ApprovalPolicy",
            "ContentURLs",
            "DeclaredTool",
            "ReturnBehavior",
            "ToolExecutor",
            "ToolLike",
            "ToolSource",
        ),
        "._base",
    ),
    **dict.fromkeys(("MemoryCache", "ResultCache", "StoreCache"), "._cache"),
    **dict.fromkeys(("ToolDecorator", "ToolOptions"), "._function"),
    "HttpTool": "._http",
    "HandlerTimeoutError": "._invoke",
    "SchemaTool": "._schema_tool",
    **dict.fromkeys(
        (
            "LocalRedirect",
            "MCPAuthorizationError",
            "MCPServerOptions",
            "MCPTool",
            "MCPToolFilter",
            "MemoryTokens",
            "StoreTokens",
        ),
        ".mcp._server",
    ),
}


if not TYPE_CHECKING:  # hidden from type checkers, which see the imports above instead
    __getattr__, __dir__ = _lazy.lazy_exports(__name__, _HOMES)
