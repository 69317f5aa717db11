"""An `MCPServer` talking to the MCP SDK's low-level `Server` in this process, over memory
streams: the real protocol, without a subprocess; and a token storage in memory for its OAuth
providers."""

from __future__ import annotations

import contextlib
from typing import Any

import anyio
from mcp.server.lowlevel import Server
from mcp.shared.memory import create_client_server_memory_streams
from typing_extensions import Unpack

from agentforge_typed import MCPServer
from agentforge_typed.tools import MCPServerOptions


def in_memory(served: Server[Any], label: str, **options: Unpack[MCPServerOptions]) -> MCPServer:
    """An `MCPServer` (not entered yet) whose every connection runs `served` afresh."""

    async def connect(stack: contextlib.AsyncExitStack[Any]) -> tuple[Any, Any]:
        client, streams = await stack.enter_async_context(create_client_server_memory_streams())
        tasks = await stack.enter_async_context(anyio.create_task_group())
        tasks.start_soon(served.run, *streams, served.create_initialization_options())
        stack.callback(tasks.cancel_scope.cancel)
        return client

    return MCPServer(connect, label=label, **options)


class MemoryTokens:
    """A `mcp.client.auth.TokenStorage` in memory, holding `token` already (one an earlier
    authorization obtained) when given."""

    def __init__(self, token: str | None = None, refresh: str | None = None) -> None:
        from mcp.shared.auth import OAuthToken

        self.tokens: Any = None
        if token is not None:
            self.tokens = OAuthToken(access_token=token, token_type="Bearer", refresh_token=refresh)
        self.client_info: Any = None

    async def get_tokens(self) -> Any:
        return self.tokens

    async def set_tokens(self, tokens: Any) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> Any:
        return self.client_info

    async def set_client_info(self, client_info: Any) -> None:
        self.client_info = client_info
