"""The MCP client: a Model Context Protocol server's tools as tools of this package.

- `_server`: `MCPServer` (what a program builds, enters and registers), `MCPTool` (one listed
  tool) and `MCPToolFilter`;
- `_connection`: the session held by a task of its own, reconnected from whichever call finds it
  gone, and the server's tool list kept current (`tools/list_changed`, `subscriptions/listen`);
- `_calls`: one call, from any thread or event loop, to its result: deadlines, reconnection when
  safe, `input_required` results, progress;
- `_questions`: a server's questions during a call (elicitation) as pauses of the run;
- `_results`: a call result's content blocks as parts, its `outputSchema` check;
- `_session`: what this package asks of the SDK's `ClientSession`, whatever its revision, and
  how an HTTP refusal (401, 403) reads (`MCPAuthorizationError`);
- `_auth`: the tokens of an `auth=` flow kept out of everything shown; `LocalRedirect`, where a
  person's authorization comes back;
- `_tokens`: where the flow keeps its tokens (`MemoryTokens`, `StoreTokens`).

Requires the `mcp` extra; the SDK is imported only when a server is entered. `MCPServer` is
exported from `agentforge_typed` itself, the other names from `agentforge_typed.tools`, their
public home.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ... import _lazy

if TYPE_CHECKING:
    from ._server import (
        LocalRedirect,
        MCPAuthorizationError,
        MCPServer,
        MCPServerOptions,
        MCPTool,
        MCPToolFilter,
        MemoryTokens,
        StoreTokens,
    )

__all__ = [
    "LocalRedirect",
    "MCPAuthorizationError",
    "MCPServer",
    "MCPServerOptions",
    "MCPTool",
    "MCPToolFilter",
    "MemoryTokens",
    "StoreTokens",
]


if not TYPE_CHECKING:  # hidden from type checkers, which see the imports above instead
    __getattr__, __dir__ = _lazy.lazy_exports(__name__, dict.fromkeys(__all__, "._server"))
