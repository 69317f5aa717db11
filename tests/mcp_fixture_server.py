"""A small MCP server for the MCP tests: a slow tool, a tool that kills its own process mid-call,
and a structured result. Run: `python tests/mcp_fixture_server.py [stdio | http PORT]`."""

from __future__ import annotations

import os
import sys
import time

try:  # SDK 2
    from mcp.server.mcpserver import MCPServer as Server
except ImportError:  # pragma: no cover - SDK 1
    from mcp.server.fastmcp import FastMCP as Server  # type: ignore[no-redef,attr-defined]

server = Server("fixture")


@server.tool()
def slow(seconds: float) -> str:
    """Sleep, then answer."""
    time.sleep(seconds)
    return f"slept {seconds}"


@server.tool()
def die() -> str:
    """Exit the server process in the middle of the call."""
    os._exit(1)


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
