"""What a security review of the MCP client found: the secrets a server's redactor knows never
reach a person through a URL-mode question (refused) or a form question (redacted); a provider
shared by several servers teaches its tokens to each of them; a task is never left running on
the server for no one (a late answer to the call that created it, a connection lost while it
was polled)."""

from __future__ import annotations

import gc
from typing import Any

import pytest

pytest.importorskip("mcp")

from test_mcp import CONTEXT, by_name, call
from test_mcp_oauth import Notes, never_shown, notes, provider

from agentforge_typed import MCPServer
from agentforge_typed.stores import MemoryStore
from agentforge_typed.tools import StoreTokens

__all__ = ["notes"]  # the fixture, imported

# -- a provider shared by several servers --------------------------------------------------------


async def test_a_provider_shared_by_two_servers_teaches_its_tokens_to_both(notes: Notes) -> None:
    shared = provider(notes, StoreTokens(MemoryStore(), "notes:alice"))
    first = MCPServer.http(notes.url, auth=shared)
    second = MCPServer.http(notes.url, auth=shared)  # built before any token was obtained
    async with first:  # authorizes: the tokens pass through the storage
        one = await by_name(first)["read"].aexecute(call("read", {}), CONTEXT)
    async with second:  # uses the tokens the flow holds, loading nothing
        two = await by_name(second)["read"].aexecute(call("read", {}), CONTEXT)
    assert (one.text, two.text) == ("read done with Bearer [redacted]",) * 2
    never_shown(notes.books, one.text, two.text, repr(first), repr(second))
    assert len(notes.books.authorizations) == 1

    # A server built once the flow holds tokens learns them at once, and the storage is
    # wrapped once, however many servers use it: no chain grows.
    third = MCPServer.http(notes.url, auth=shared)
    issued = notes.books.issued()
    assert all(third._redactor.replace(secret) == "[redacted]" for secret in notes.books.access)
    assert issued
    storage: Any = shared.context.storage
    assert type(storage._storage) is StoreTokens
    for _ in range(50):
        MCPServer.http(notes.url, auth=shared)
    del third
    gc.collect()
    storage.listen(first._more_secrets)  # given again: still once, and the servers gone dropped
    assert [ref() for ref in storage._listeners] == [second._more_secrets, first._more_secrets]
