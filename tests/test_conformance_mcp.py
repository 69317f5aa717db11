"""Bounds, for what an MCP server sends of its own accord during a session: notifications it may
flood (`tools/list_changed`), listings that grow past `max_tools`. Each is capped or coalesced,
never a cost that grows with what the server sends. Real servers: the SDK's low-level `Server`
over memory streams (`test_mcp_list_changed.Changing`)."""

from __future__ import annotations

import logging
from importlib.metadata import version

import pytest

pytest.importorskip("mcp")

from test_mcp_list_changed import Changing, _context, change

pytestmark = pytest.mark.skipif(
    version("mcp").startswith("1."), reason="SDK 2's low-level `Server`"
)


def test_a_flood_of_notifications_costs_a_listing_or_two(caplog: pytest.LogCaptureFixture) -> None:
    changing = Changing("old")
    changing.notices = 5000
    with changing.server() as server:
        (change_tool, _) = server.tools()
        listed = changing.listings
        result = change_tool.execute(change(["new"]), _context())
        assert result.text == "ran change"
        assert [t.name for t in server.tools()] == ["change", "new"]
    assert 1 <= changing.listings - listed <= 3


def test_a_changed_list_over_max_tools_keeps_the_old_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    changing = Changing("old")
    with caplog.at_level(logging.WARNING, logger="agentforge_typed.mcp"):
        with changing.server(max_tools=3) as server:
            (change_tool, _) = server.tools()
            change_tool.execute(change(["a", "b", "c"]), _context())
            assert [t.name for t in server.tools()] == ["change", "old"]
            assert server.tools_version == 1
    assert caplog.messages == [
        "MCP server changing: listing its changed tools failed; keeping the old list: "
        "ValueError: MCP server 'changing' lists more than max_tools=3 tools; pass a larger "
        "max_tools= to MCPServer to accept them"
    ]
