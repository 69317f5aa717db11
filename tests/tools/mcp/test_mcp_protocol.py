"""What the MCP client says of itself and how it reads what the 2025-11-25 revision allows, each
against a real server built with the official SDK: its `clientInfo` and elicitation capability
(form and URL-mode questions), every form of question the revision defines posed (multi-select enums,
SEP-1330), schema defaults filled into an accepted answer (SEP-1034), task-only tools of a server
that takes no tasks left out with a warning, and a server's HTTP 401/403 read as an `MCPAuthorizationError` naming it."""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp.client.auth import OAuthClientProvider
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.lowlevel import Server
from mcp.shared.auth import OAuthClientMetadata
from mcp.types import CallToolResult, ListToolsResult, TextContent, Tool
from mcp_memory import MemoryTokens, in_memory
from pydantic import AnyHttpUrl
from test_mcp import CONTEXT, by_name, call
from test_mcp_elicitation import asks, round_trip

from agentforge_typed import (
    ElicitationAnswer,
    LocalRedirect,
    MCPAuthorizationError,
    MCPServer,
    ToolArgumentsError,
    ToolService,
)
from agentforge_typed.tools.mcp._session import Revision

REVISIONS = pytest.mark.parametrize("revision", ["newest", "handshake"])
ENUMS = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "enum": ["option1", "option2"]},
        "titledSingle": {
            "type": "string",
            "oneOf": [{"const": "value1", "title": "One"}, {"const": "value2", "title": "Two"}],
        },
        "legacyEnum": {"type": "string", "enum": ["opt1", "opt2"], "enumNames": ["A", "B"]},
        "untitledMulti": {
            "type": "array",
            "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
            "minItems": 1,
        },
        "titledMulti": {
            "type": "array",
            "items": {"anyOf": [{"const": "value1", "title": "V1"}, {"const": "value2"}]},
        },
    },
    "required": ["untitledMulti"],
}
"""SEP-1330's five forms of enum, as the conformance suite's server asks them."""
DEFAULTS = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "default": "John Doe"},
        "age": {"type": "integer", "default": 30},
        "score": {"type": "number", "default": 95.5},
        "status": {"type": "string", "enum": ["active", "inactive"], "default": "active"},
        "verified": {"type": "boolean", "default": True},
    },
}
"""SEP-1034's defaults, as the conformance suite's server asks them."""


def asking(schema: dict[str, Any]) -> Server[Any]:
    """A server whose tool `ask` asks `schema` mid-call and answers what it got back."""

    async def list_tools(context: Any, params: Any) -> ListToolsResult:
        return ListToolsResult(tools=[Tool(name="ask", input_schema={"type": "object"})])

    async def call_tool(context: Any, params: Any) -> CallToolResult:
        got = await context.session.elicit_form(
            "Choose", schema, related_request_id=context.request_id
        )
        text = json.dumps({"action": got.action, "content": got.content})
        return CallToolResult(content=[TextContent(type="text", text=text)])

    return Server("asking", on_list_tools=list_tools, on_call_tool=call_tool)


def said(text: str | None) -> Any:
    return json.loads((text or "").removeprefix("the tool said: "))


@REVISIONS
async def test_the_client_names_itself_and_offers_form_and_url_questions(
    revision: Revision,
) -> None:
    async def list_tools(context: Any, params: Any) -> ListToolsResult:
        return ListToolsResult(tools=[Tool(name="who", input_schema={"type": "object"})])

    async def call_tool(context: Any, params: Any) -> CallToolResult:
        client = context.session.client_params.client_info
        elicitation = context.session.client_capabilities.elicitation
        shown = {
            "client": [client.name, client.version],
            "elicitation": elicitation.model_dump(mode="json", exclude_none=True),
        }
        return CallToolResult(content=[TextContent(type="text", text=json.dumps(shown))])

    served = Server("who", on_list_tools=list_tools, on_call_tool=call_tool)
    async with in_memory(served, "who", revision=revision) as server:
        result = await by_name(server)["who"].aexecute(call("who", {}), CONTEXT)
    assert json.loads(result.text) == {
        "client": ["agentforge-typed", "0.1.0"],
        "elicitation": {"form": {}, "url": {}},
    }


async def test_every_form_of_enum_is_posed_and_a_multi_select_answer_sent() -> None:
    async with in_memory(asking(ENUMS), "asking", revision="handshake") as server:
        service = ToolService([server])
        paused = await service.achat(asks(), "choose")
        (pending,) = paused.pending
        assert pending.elicitation is not None and pending.elicitation.schema == ENUMS
        answer = {
            "untitledSingle": "option1",
            "titledSingle": "value1",
            "legacyEnum": "opt1",
            "untitledMulti": ["option1", "option2"],
            "titledMulti": ["value1", "value2"],
        }
        done = await service.achat(
            asks(), round_trip(paused.messages), approvals={"c1": ElicitationAnswer(answer)}
        )
    assert said(done.final_response.ai_message.text) == {"action": "accept", "content": answer}


async def test_a_multi_select_answer_outside_its_enum_is_refused() -> None:
    async with in_memory(asking(ENUMS), "asking", revision="handshake") as server:
        service = ToolService([server])
        paused = await service.achat(asks(), "choose")
        wrong = ElicitationAnswer({"untitledMulti": ["option9"]})
        with pytest.raises(ToolArgumentsError, match=r"\$\.untitledMulti\[0\]"):
            await service.achat(asks(), paused.messages, approvals={"c1": wrong})


async def test_defaults_fill_what_an_accepted_answer_leaves_out() -> None:
    async with in_memory(asking(DEFAULTS), "asking", revision="handshake") as server:
        service = ToolService([server])
        paused = await service.achat(asks(), "who")
        answer = ElicitationAnswer({"name": "Jane Smith", "verified": False})
        done = await service.achat(asks(), round_trip(paused.messages), approvals={"c1": answer})
    content = {"name": "Jane Smith", "age": 30, "score": 95.5, "status": "active"}
    assert said(done.final_response.ai_message.text) == {
        "action": "accept",
        "content": {**content, "verified": False},
    }


async def test_a_default_the_schema_refuses_makes_the_answer_an_error() -> None:
    bad = {"type": "object", "properties": {"age": {"type": "integer", "default": "old"}}}
    async with in_memory(asking(bad), "asking", revision="handshake") as server:
        service = ToolService([server])
        paused = await service.achat(asks(), "how old")
        with pytest.raises(ToolArgumentsError, match=r"\$\.age"):
            await service.achat(asks(), paused.messages, approvals={"c1": ElicitationAnswer({})})


async def test_a_task_only_tool_of_a_server_taking_no_tasks_is_left_out_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def list_tools(context: Any, params: Any) -> ListToolsResult:
        listed = {"name": "research", "inputSchema": {"type": "object"}}
        tasks = [
            {**listed, "name": name, "execution": {"taskSupport": support}}
            for name, support in [("optional", "optional"), ("research", "required")]
        ]
        return ListToolsResult.model_validate({"tools": tasks})

    async def call_tool(context: Any, params: Any) -> CallToolResult:
        return CallToolResult(content=[TextContent(type="text", text="ran")])

    served = Server("tasks", on_list_tools=list_tools, on_call_tool=call_tool)
    with caplog.at_level(logging.WARNING, logger="agentforge_typed.mcp"):
        async with in_memory(served, "tasks", revision="handshake") as server:
            assert list(by_name(server)) == ["optional"]
    assert (
        "MCP server tasks: tool 'research' skipped: it can only be called as a task "
        "(execution.taskSupport is 'required'), and the server does not say it takes tools/call "
        "as one"
    ) in caplog.messages


# -- HTTP refusals --------------------------------------------------------------------------------

TOKENS = {"read-token": ["notes:read"], "write-token": ["notes:read", "notes:write"]}


class _Tokens:
    async def verify_token(self, token: str) -> AccessToken | None:
        scopes = TOKENS.get(token)
        return None if scopes is None else AccessToken(token=token, client_id="c", scopes=scopes)


@pytest.fixture(scope="module")
def guarded() -> Iterator[str]:
    """A streamable HTTP server that the SDK guards with bearer tokens (`TOKENS`), needing the
    `notes:write` scope: its URL."""
    import anyio
    import uvicorn

    async def list_tools(context: Any, params: Any) -> ListToolsResult:
        return ListToolsResult(tools=[Tool(name="note", input_schema={"type": "object"})])

    async def call_tool(context: Any, params: Any) -> CallToolResult:
        # A server that shows the client its own token (echoing a header, an error...).
        shown = "noted with write-token"
        return CallToolResult(content=[TextContent(type="text", text=shown)])

    served = Server("guarded", on_list_tools=list_tools, on_call_tool=call_tool)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/mcp"
    auth = AuthSettings(
        issuer_url=AnyHttpUrl("http://127.0.0.1:9/"),
        resource_server_url=AnyHttpUrl(url),
        required_scopes=["notes:write"],
        validate_token_resource=False,
    )
    app = served.streamable_http_app(auth=auth, token_verifier=_Tokens())
    runner = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=anyio.run, args=(runner.serve,), daemon=True)
    thread.start()
    while not runner.started:
        threading.Event().wait(0.02)
    yield url
    runner.should_exit = True
    thread.join(10)


@pytest.mark.parametrize(
    ("headers", "status", "said"),
    [
        (
            None,
            401,
            "(error='invalid_token'): it requires authorization: pass auth= (e.g. the MCP SDK's "
            "OAuthClientProvider) or credentials in headers=",
        ),
        (
            {"Authorization": "Bearer read-token"},
            403,
            "(error='insufficient_scope'): the credentials do not allow this request",
        ),
    ],
)
async def test_an_http_refusal_names_the_server_and_its_status(
    guarded: str, headers: dict[str, str] | None, status: int, said: str
) -> None:
    server = MCPServer.http(guarded, headers=headers, revision="handshake", connect_timeout=10)
    with pytest.raises(MCPAuthorizationError) as refused:
        async with server:
            pass
    reason = "Unauthorized" if status == 401 else "Forbidden"
    assert str(refused.value) == f"MCP server {guarded!r} answered HTTP {status} {reason} {said}"
    assert (refused.value.server, refused.value.status) == (guarded, status)
    assert "read-token" not in repr(refused.value)


async def test_the_right_token_enters(guarded: str) -> None:
    headers = {"Authorization": "Bearer write-token"}
    async with MCPServer.http(guarded, headers=headers, connect_timeout=10) as server:
        assert list(by_name(server)) == ["note"]


async def test_a_call_refused_after_entering_reads_the_refusal(guarded: str) -> None:
    TOKENS["revoked-token"] = ["notes:read", "notes:write"]
    headers = {"Authorization": "Bearer revoked-token"}
    try:
        async with MCPServer.http(guarded, headers=headers, revision="handshake") as server:
            del TOKENS["revoked-token"]
            result = await by_name(server)["note"].aexecute(call("note", {}), CONTEXT)
    finally:
        TOKENS.pop("revoked-token", None)
    assert result.is_error and result.text == (
        "Tool `note` failed: MCPAuthorizationError: MCP server "
        f"{guarded!r} answered HTTP 401 Unauthorized (error='invalid_token'): it requires "
        "authorization: pass auth= (e.g. the MCP SDK's OAuthClientProvider) or credentials in "
        "headers="
    )


def oauth(url: str, token: str) -> OAuthClientProvider:
    metadata = OAuthClientMetadata(redirect_uris=[AnyHttpUrl("http://127.0.0.1:3000/callback")])
    return OAuthClientProvider(url, metadata, MemoryTokens(token))


async def test_the_tokens_of_an_auth_flow_never_show(
    guarded: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG):
        async with MCPServer.http(guarded, auth=oauth(guarded, "write-token")) as server:
            result = await by_name(server)["note"].aexecute(call("note", {}), CONTEXT)
    assert result.text == "noted with [redacted]"
    assert caplog.records and "write-token" not in caplog.text


async def test_an_auth_flow_that_fails_names_the_server(guarded: str) -> None:
    elsewhere = guarded.replace("/mcp", "/other")  # its metadata names another resource
    server = MCPServer.http(guarded, auth=oauth(elsewhere, "stale-token"), connect_timeout=10)
    with pytest.raises(MCPAuthorizationError) as failed:
        async with server:
            pass
    assert str(failed.value) == (
        f"MCP server {guarded!r}: authorization failed: OAuthFlowError: Protected resource "
        f"{guarded} does not match expected {elsewhere}"
    )
    assert failed.value.status == 401


# -- the person's side of the authorization-code grant --------------------------------------------


async def test_a_local_redirect_brings_the_code_back() -> None:
    import httpx

    seen: list[int] = []

    async def browser(url: str) -> None:
        assert url == "https://as.example.com/authorize?x=1"
        async with httpx.AsyncClient() as client:
            seen.append(
                (await client.get(redirect.redirect_uri.replace("callback", "x"))).status_code
            )
            answer = await client.get(f"{redirect.redirect_uri}?code=c0de&state=st&iss=https://as")
            seen.append(answer.status_code)

    redirect = LocalRedirect(show=browser, timeout=30)
    assert redirect.redirect_uri == f"http://127.0.0.1:{redirect.port}/callback"
    await redirect.open("https://as.example.com/authorize?x=1")
    result = await redirect.callback()
    assert (result.code, result.state, result.iss) == ("c0de", "st", "https://as")
    assert seen == [404, 200]


async def test_a_refused_authorization_is_an_oauth_error() -> None:
    import httpx
    from mcp.client.auth import OAuthFlowError

    async def browser(url: str) -> None:
        async with httpx.AsyncClient() as client:
            await client.get(f"{redirect.redirect_uri}?error=access_denied&state=st")

    redirect = LocalRedirect(show=browser)
    await redirect.open("https://as.example.com/authorize")
    with pytest.raises(OAuthFlowError, match=r"^the authorization was refused: access_denied$"):
        await redirect.callback()


async def test_a_local_redirect_waits_no_longer_than_its_timeout_nor_for_a_hostile_request() -> (
    None
):
    import anyio

    redirect = LocalRedirect(show=lambda url: None, timeout=1)
    await redirect.open("https://as.example.com/authorize")
    stream = await anyio.connect_tcp("127.0.0.1", redirect.port)
    await stream.send(b"GET /callback?code=" + b"x" * 10_000 + b" HTTP/1.1\r\n\r\n")
    with pytest.raises(anyio.EndOfStream):  # dropped, unanswered
        await stream.receive()
    await stream.aclose()
    with pytest.raises(TimeoutError, match=r"within 1 seconds$"):
        await redirect.callback()
    # The port is free again: a second authorization (a step-up) listens anew.
    await redirect.open("https://as.example.com/authorize")
    with pytest.raises(TimeoutError):
        await redirect.callback()
