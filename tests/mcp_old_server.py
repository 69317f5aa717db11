"""An MCP server that speaks only the first revision, 2024-11-05, over stdio: newline-delimited
JSON-RPC written by hand (no SDK), as servers built before later revisions do. One tool, `echo`.
Run: `python tests/mcp_old_server.py [--ignore-discover]`: it answers requests it does not know
with method-not-found, or with `--ignore-discover` leaves `server/discover` unanswered, as some
servers leave requests they do not know."""

from __future__ import annotations

import json
import sys
from typing import Any

ECHO = {
    "name": "echo",
    "description": "Say the text back.",
    "inputSchema": {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    },
}


IGNORE_DISCOVER = "--ignore-discover" in sys.argv


def answer(request: dict[str, Any]) -> dict[str, Any] | None:
    method, params = request.get("method"), request.get("params") or {}
    if "id" not in request:
        return None  # a notification (`notifications/initialized`, ...)
    if method == "server/discover" and IGNORE_DISCOVER:
        return None
    result: dict[str, Any]
    if method == "initialize":
        # Whatever the client offers, this server speaks its one revision (the client decides).
        result = {
            "protocolVersion": "2024-11-05",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "old", "version": "0.1"},
        }
    elif method == "tools/list":
        result = {"tools": [ECHO]}
    elif method == "tools/call" and params.get("name") == "echo":
        text = (params.get("arguments") or {}).get("text", "")
        result = {"content": [{"type": "text", "text": f"echo: {text}"}], "isError": False}
    elif method == "ping":
        result = {}
    else:
        error = {"code": -32601, "message": f"Method not found: {method}"}
        return {"jsonrpc": "2.0", "id": request["id"], "error": error}
    return {"jsonrpc": "2.0", "id": request["id"], "result": result}


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        response = answer(json.loads(line))
        if response is not None:
            sys.stdout.write(json.dumps(response) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
