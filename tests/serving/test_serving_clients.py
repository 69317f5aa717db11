"""Served tools through real transports, to clients this project did not write, and to its own:
the official Python SDK's client over stdio (the CLI in a subprocess) and streamable HTTP, at
the stateless revision (2026-07-28) and at the handshake one (2025-11-25); and `MCPServer`, the
library's own client, which must see the very specifications and results the tools have."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import mcp_types
import pytest
from mcp import Client
from serving_support import (
    INITIALIZE,
    http_thread,
    reference_module,
    reference_tools,
    stdio_parameters,
)

from agentforge_typed import MCPServer, ToolCall, ToolContext, ToolService
from agentforge_typed.serving import ToolServer

MODES = [pytest.param("auto", id="2026-07-28"), pytest.param("legacy", id="2025-11-25")]
"""`auto` probes `server/discover` and speaks the stateless revision with our server."""


async def approve(context: Any, params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult:
    assert isinstance(params, mcp_types.ElicitRequestFormParams)
    if "approve" in params.requested_schema.get("properties", {}):
        return mcp_types.ElicitResult(action="accept", content={"approve": True})
    return mcp_types.ElicitResult(
        action="accept", content={"username": "ada", "email": "ada@example.com"}
    )


def first_text(result: mcp_types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, mcp_types.TextContent)
    return block.text


async def exercise(client: Client, mode: str) -> None:
    """What every transport must do: list, call, refuse invalid arguments, return an image, ask
    for approval, report progress, ask a question."""
    listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert "add" in listed and listed["add"].input_schema["additionalProperties"] is False
    added = await client.call_tool("add", {"a": 2, "b": 3})
    assert added.structured_content == {"total": 5, "parts": [2, 3]} and not added.is_error
    coerced = await client.call_tool("add", {"a": "2", "b": 3})
    assert coerced.is_error
    assert first_text(coerced).startswith("Invalid arguments for tool `add`:\n- $.a: ")
    image = await client.call_tool("test_image_content", {})
    assert [block.type for block in image.content] == ["image"]
    deleted = await client.call_tool("delete_note", {"note": f"n-{mode}"})
    assert first_text(deleted) == f"Deleted n-{mode}." and not deleted.is_error
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)

    reporter: Any = on_progress
    progressed = await client.call_tool("test_tool_with_progress", {}, progress_callback=reporter)
    assert first_text(progressed) == "Progress reported." and seen == [0, 50, 100]
    asked = await client.call_tool("test_elicitation", {"message": "Who are you?"})
    assert "'username': 'ada'" in first_text(asked)
    failed = await client.call_tool("test_error_handling", {})
    assert failed.is_error and "RuntimeError: This tool intentionally" in first_text(failed)


@pytest.mark.parametrize("mode", MODES)
async def test_the_sdk_client_over_stdio(mode: str) -> None:
    with anyio.fail_after(60):
        async with Client(stdio_parameters(), mode=mode, elicitation_callback=approve) as client:
            await exercise(client, mode)
            if mode == "auto":
                assert client.session.protocol_version == "2026-07-28"


@pytest.mark.parametrize("mode", MODES)
async def test_the_sdk_client_over_http(mode: str) -> None:
    with http_thread(ToolServer(reference_tools())) as url:
        with anyio.fail_after(60):
            async with Client(url, mode=mode, elicitation_callback=approve) as client:
                await exercise(client, mode)


async def test_http_asks_for_the_token_and_takes_it() -> None:
    with http_thread(ToolServer(reference_tools()), token="s3cret-token") as url:
        async with httpx.AsyncClient() as http:
            refused = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
            wrong = await http.post(
                url,
                json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                headers={"authorization": "Bearer s3cret-tokem"},
            )
        assert refused.status_code == wrong.status_code == 401
        assert refused.headers["www-authenticate"].startswith("Bearer")
        assert "s3cret" not in refused.text + wrong.text
        import httpx2

        client = httpx2.AsyncClient(headers={"authorization": "Bearer s3cret-token"})
        from mcp.client.streamable_http import streamable_http_client

        async with client, Client(streamable_http_client(url, http_client=client)) as session:
            assert (await session.call_tool("add", {"a": 1, "b": 1})).structured_content == {
                "total": 2,
                "parts": [1, 1],
            }


async def test_http_refuses_other_hosts_and_large_bodies() -> None:
    initialize = INITIALIZE
    headers = {"accept": "application/json, text/event-stream"}
    with http_thread(ToolServer(reference_tools(), max_request_bytes=10_000)) as url:
        async with httpx.AsyncClient() as http:
            rebound = await http.post(
                url, json=initialize, headers={**headers, "host": "evil.example.com"}
            )
            foreign = await http.post(
                url, json=initialize, headers={**headers, "origin": "http://evil.example.com"}
            )
            large = await http.post(
                url,
                content=json.dumps({**initialize, "pad": "x" * 20_000}),
                headers={**headers, "content-type": "application/json"},
            )
            fine = await http.post(url, json=initialize, headers=headers)
    assert rebound.status_code == 421
    assert foreign.status_code == 403
    assert large.status_code == 413
    assert fine.status_code == 200


# -- the library's own client ------------------------------------------------------------------


def _same_parameters(served: dict[str, Any]) -> dict[str, Any]:
    """What the client lists, without the dialect the server declares."""
    return {key: value for key, value in served.items() if key != "$schema"}


@pytest.mark.parametrize("revision", ["newest", "handshake"])
async def test_our_own_client_sees_the_same_specifications_and_results(revision: str) -> None:
    module = reference_module()
    local = {tool.name: tool for tool in ToolService(module.tools).tools}
    parameters = stdio_parameters()
    server = MCPServer.stdio(
        parameters.command,
        parameters.args,
        env=parameters.env,
        cwd=str(parameters.cwd),
        revision=revision,  # type: ignore[arg-type]
        trusted=True,
    )
    async with server:
        remote = {tool.name: tool for tool in server.tools()}
        assert list(remote) == list(local)
        for name, tool in remote.items():
            mine = local[name].specification
            theirs = tool.specification
            assert (theirs.name, theirs.description) == (mine.name, mine.description)
            assert _same_parameters(theirs.parameters) == mine.parameters, name
            assert theirs.annotations == (
                mine.annotations.model_copy(update={"read_only": False})
                if name == "delete_note" and mine.annotations is not None
                else mine.annotations
            )
        calls = {
            "add": '{"a": 2, "b": 40}',
            "unit_price": '{"kind": "tea", "quantity": 3}',
            "test_simple_text": "{}",
            "test_image_content": "{}",
            "test_multiple_content_types": "{}",
            "test_error_handling": "{}",
            "unit_price ": '{"kind": "milk", "quantity": 3}',
        }
        for name, arguments in calls.items():
            name = name.strip()
            call = ToolCall(id="c1", name=name, arguments=arguments)
            context: ToolContext[None] = ToolContext(None, "c1", name)
            here = local[name].execute(call, context)
            there = await remote[name].aexecute(call, context)
            assert there.is_error == here.is_error, name
            if here.is_error and here.error_kind == "arguments":
                # Refused by the client before it is sent: the schema's wording, not pydantic's.
                assert there.error_kind == "arguments"
                continue
            assert there.text == here.text, name
            assert [p.model_dump() for p in there.content] == [
                p.model_dump() for p in here.content
            ], name


async def test_http_sessions_are_capped() -> None:
    initialize = INITIALIZE
    headers = {"accept": "application/json, text/event-stream"}
    with http_thread(ToolServer(reference_tools()), max_sessions=1) as url:
        async with httpx.AsyncClient() as http:
            first = await http.post(url, json=initialize, headers=headers)
            second = await http.post(url, json=initialize, headers=headers)
    assert first.status_code == 200
    assert second.status_code == 503
