"""`notifications/tools/list_changed`: the server's new list reaches a `ToolService` between rounds,
whole, never during one; a new list whose names collide with other registered tools is refused
and the old list stays. The server is the SDK's low-level `Server` over memory streams, whose tool
list the test changes from inside a call, as a real server would. Each test runs at both
revisions: the stateless one (2026-07-28), where the notification comes on the
`subscriptions/listen` stream the client opens, and the handshake's (2025-11-25), where it comes
on the session. tests/mcp_fixture_server.py (the SDK's server helpers) shows the stream over stdio
and streamable HTTP."""

from __future__ import annotations

import logging
import re
import sys
import time
from collections.abc import Callable, Sequence
from importlib.metadata import version
from typing import Any, TextIO

import anyio
import pytest

pytest.importorskip("mcp")

from mcp.server.lowlevel import Server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.exceptions import MCPError
from mcp.types import INTERNAL_ERROR, CallToolResult, ListToolsResult, TextContent, Tool
from mcp_memory import in_memory
from test_mcp import CONTEXT, FIXTURE_SERVER, by_name, call
from test_mcp import errlog as errlog  # the fixtures
from test_mcp import http_url as http_url
from typing_extensions import Unpack

from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatRequestParameters,
    FunctionModel,
    MCPServer,
    ToolCall,
    ToolResultMessage,
    ToolService,
    tool,
)
from agentforge_typed.tools import MCPServerOptions
from agentforge_typed.tools.mcp import _connection
from agentforge_typed.tools.mcp._session import Revision

pytestmark = pytest.mark.skipif(
    version("mcp").startswith("1."), reason="SDK 2's low-level `Server`"
)


def named(name: str) -> Tool:
    return Tool(name=name, description=f"The {name} tool.", input_schema={"type": "object"})


CHANGE = Tool(
    name="change",
    description="Replace the server's tools.",
    input_schema={
        "type": "object",
        "properties": {"names": {"type": "array", "items": {"type": "string"}}},
    },
)


REVISIONS = {"newest": "2026-07-28", "handshake": "2025-11-25"}
"""What each `revision` option speaks with a current SDK server."""


@pytest.fixture(params=list(REVISIONS))
def revision(request: pytest.FixtureRequest) -> Revision:
    chosen: Revision = request.param
    return chosen


class Changing:
    """A server whose `change` tool replaces its tool list by the names it is given and says so
    with `notifications/tools/list_changed` (`notices` times): on the session, and as an event
    to the `subscriptions/listen` streams open (each revision's clients see only their own way);
    every other tool answers with its name."""

    def __init__(self, *names: str) -> None:
        self.tools = [CHANGE, *map(named, names)]
        self.listings = 0
        self.listed_at: list[float] = []
        """`time.monotonic()` at each listing."""
        self.notices = 1
        self.bus = InMemorySubscriptionBus()
        self.listen: Any = ListenHandler(self.bus)
        """Serves `subscriptions/listen` (replaced to refuse or drop streams)."""

    async def list_tools(self, context: Any, params: Any) -> ListToolsResult:
        self.listings += 1
        self.listed_at.append(time.monotonic())
        return ListToolsResult(tools=self.tools)

    async def call_tool(self, context: Any, params: Any) -> CallToolResult:
        arguments = params.arguments or {}
        if params.name == "change":
            self.tools = [CHANGE, *map(named, arguments["names"])]
            for _ in range(self.notices):
                await context.session.send_tool_list_changed()
                await self.bus.publish(ToolsListChanged())
        return CallToolResult(content=[TextContent(type="text", text=f"ran {params.name}")])

    def server(self, **options: Unpack[MCPServerOptions]) -> MCPServer:
        served = Server(
            "changing",
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
            on_subscriptions_listen=lambda context, params: self.listen(context, params),
        )

        return in_memory(served, label="changing", **options)


def change(names: Sequence[str], call_id: str = "c1") -> ToolCall:
    return ToolCall(
        id=call_id, name="change", arguments=f'{{"names": {list(names)!r}}}'.replace("'", '"')
    )


class Script:
    """A model that plays `turns` (lists of calls, then a text), recording what it was offered."""

    def __init__(self, *turns: list[ToolCall]) -> None:
        self.turns = list(turns)
        self.offered: list[list[str]] = []

    def __call__(
        self, messages: Sequence[ChatMessage], parameters: ChatRequestParameters
    ) -> AiMessage:
        self.offered.append([spec.name for spec in parameters.tools or ()])
        if self.turns:
            return AiMessage(tool_calls=self.turns.pop(0))
        return AiMessage(text="done")


def results(messages: Sequence[ChatMessage]) -> list[str]:
    return [m.text for m in messages if isinstance(m, ToolResultMessage)]


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_changed_list_is_offered_from_the_next_round(mode: str, revision: Revision) -> None:
    changing = Changing("old")
    # Round 1 changes the list and still calls `old`, which the round's table holds.
    script = Script(
        [change(["new"]), ToolCall(id="c2", name="old", arguments="{}")],
        [ToolCall(id="c3", name="new", arguments="{}")],
    )
    if mode == "sync":
        with changing.server(revision=revision) as server:
            assert server.protocol_version == REVISIONS[revision]
            # The blocking driver, inside this async test: an explicit choice.
            service = ToolService([server], blocking_in_event_loop=True)
            result = service.chat(FunctionModel(script), "go")
    else:
        async with changing.server(revision=revision) as server:
            assert server.protocol_version == REVISIONS[revision]
            service = ToolService([server])
            result = await service.achat(FunctionModel(script), "go")
    assert script.offered == [["change", "old"], ["change", "new"], ["change", "new"]]
    assert results(result.messages) == ["ran change", "ran old", "ran new"]
    assert [t.name for t in service.tools] == ["change", "new"]


def test_a_changed_list_that_collides_is_refused_and_the_old_list_stays(
    caplog: pytest.LogCaptureFixture, revision: Revision
) -> None:
    @tool
    def local() -> str:
        """A local tool."""
        return "local"

    changing = Changing("old")
    script = Script([change(["local"])], [ToolCall(id="c2", name="old", arguments="{}")])
    with (
        caplog.at_level(logging.WARNING, logger="agentforge_typed"),
        changing.server(revision=revision) as server,
    ):
        service = ToolService([local, server])
        result = service.chat(FunctionModel(script), "go")
        assert [t.name for t in server.tools()] == ["change", "local"]  # what the server says
    assert script.offered == [["local", "change", "old"]] * 3
    assert results(result.messages) == ["ran change", "ran old"]
    assert [r.getMessage() for r in caplog.records if r.name == "agentforge_typed"] == [
        "the changed tools of MCPServer('changing', connected) were refused, its former tools "
        "stay: a tool named 'local' is already registered; nothing from "
        "MCPServer('changing', connected) was registered"
    ]


def test_groups_follow_a_changed_list(revision: Revision) -> None:
    changing = Changing("old", "kept")
    script = Script([change(["kept", "new"])], [])
    with changing.server(revision=revision) as server:
        service = ToolService()
        service.register(server, group="remote")
        service.chat(FunctionModel(script), "go", tools=["group:remote"])
    assert dict(service.groups) == {"remote": ("change", "kept", "new")}
    assert script.offered == [["change", "old", "kept"], ["change", "kept", "new"]]


def test_a_refused_subscription_leaves_the_tools_as_listed_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    changing = Changing("old")

    async def refuse(context: Any, params: Any) -> Any:
        raise MCPError(INTERNAL_ERROR, "Subscription limit reached")

    changing.listen = refuse
    with caplog.at_level(logging.WARNING, logger="agentforge_typed.mcp"):
        with changing.server() as server:
            (change_tool, old) = server.tools()
            assert change_tool.execute(change(["new"]), _context()).text == "ran change"
            assert [t.name for t in server.tools()] == ["change", "old"]  # never told
            assert old.execute(ToolCall(id="c2", name="old", arguments="{}"), _context()).text == (
                "ran old"
            )  # the session works
    assert caplog.messages == [
        "MCP server changing: subscriptions/listen refused; changes to its tools will not be "
        "seen: MCPError: Subscription limit reached"
    ]


def test_a_lost_subscription_is_opened_again_and_the_tools_listed_again(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_connection, "RECONNECT_FIRST_DELAY", 0.2)
    changing = Changing("old")
    served = changing.listen
    streams = 0

    async def drop_the_first(context: Any, params: Any) -> Any:
        nonlocal streams
        streams += 1
        if streams > 1:
            return await served(context, params)
        with anyio.move_on_after(0.1):  # acknowledged, then ended without the graceful close
            await served(context, params)
        changing.tools = [CHANGE, named("missed")]  # a change while no stream is open
        raise MCPError(INTERNAL_ERROR, "stream dropped")

    changing.listen = drop_the_first
    with caplog.at_level(logging.WARNING, logger="agentforge_typed.mcp"):
        with changing.server() as server:
            wait_until(lambda: [t.name for t in server.tools()] == ["change", "missed"])
            assert (streams, changing.listings) == (2, 2)
            (change_tool, _) = server.tools()
            assert change_tool.execute(change(["new"]), _context()).text == "ran change"
            assert [t.name for t in server.tools()] == ["change", "new"]  # the new stream's
    (message,) = caplog.messages
    assert re.fullmatch(
        r"MCP server changing: the subscription to its tool changes ended \(SubscriptionLost: "
        r"subscription 'listen-\d+' ended without the server's graceful close; re-listen and "
        r"refetch\); listening again in 0\.2 s",
        message,
    ), message


def wait_until(condition: Callable[[], bool], seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "not within 10 s"
        time.sleep(0.02)


def _context() -> Any:
    from agentforge_typed import ToolContext

    return ToolContext(deps=None, tool_call_id="c1", tool_name="change")


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_real_server_s_change_comes_on_its_listen_stream(
    transport: str, errlog: TextIO, request: pytest.FixtureRequest
) -> None:
    if transport == "http":
        server = MCPServer.http(request.getfixturevalue("http_url"))
    else:
        server = MCPServer.stdio(sys.executable, [FIXTURE_SERVER], errlog=errlog)
    with server:
        assert server.protocol_version == "2026-07-28"
        version = server.tools_version
        assert "grown" not in by_name(server)
        assert by_name(server)["grow"].execute(call("grow", {}), CONTEXT).text == "grew"
        wait_until(lambda: "grown" in by_name(server))
        assert server.tools_version == version + 1
        assert by_name(server)["grown"].execute(call("grown", {}), CONTEXT).text == "grown"
