"""Protocol revisions: the client offers the newest revision of the `initialize` handshake its
`mcp` SDK speaks and keeps working with a server that answers with an older one. Real servers:
tests/mcp_fixture_server.py (the SDK's server helpers, current) and tests/mcp_old_server.py (a
hand-written 2024-11-05 server), both over stdio."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

import pytest

pytest.importorskip("mcp")

from test_mcp import CONTEXT, FIXTURE_SERVER, by_name, call
from test_mcp import errlog as errlog  # the fixture

from agentforge_typed import MCPServer

OLD_SERVER = str(Path(__file__).with_name("mcp_old_server.py"))

LATEST_HANDSHAKE_VERSION = "2025-11-25"
"""The newest revision of the `initialize` handshake (`mcp_types.version` in SDK 2.3)."""


def test_a_current_server_speaks_the_newest_handshake_revision(errlog: TextIO) -> None:
    server = MCPServer.stdio(sys.executable, [FIXTURE_SERVER], errlog=errlog)
    assert server.protocol_version is None
    with server:
        assert server.protocol_version == LATEST_HANDSHAKE_VERSION
        assert by_name(server)["add"].execute(call("add", {"a": 1, "b": 2}), CONTEXT).text == "3"
    assert server.protocol_version is None


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_an_older_server_keeps_working(errlog: TextIO, mode: str) -> None:
    server = MCPServer.stdio(sys.executable, [OLD_SERVER], errlog=errlog)
    echo = call("echo", {"text": "hi"})
    if mode == "sync":
        with server:
            assert server.protocol_version == "2024-11-05"
            result = by_name(server)["echo"].execute(echo, CONTEXT)
    else:
        async with server:
            assert server.protocol_version == "2024-11-05"
            result = await by_name(server)["echo"].aexecute(echo, CONTEXT)
    assert (result.is_error, result.text) == (False, "echo: hi")
