"""An `MCPServer` talking to the MCP SDK's low-level `Server` in this process, over memory
streams: the real protocol, without a subprocess."""

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
