"""One `ToolService` conversation mixing a local `@tool`, an `HttpTool` and an MCP tool."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

import pytest
from http_server import Reply, Request, ScriptedServer

pytest.importorskip("mcp")

from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatRequestParameters,
    FunctionModel,
    HttpTool,
    MCPServer,
    ToolCall,
    ToolResultMessage,
    ToolService,
    UserMessage,
    tool,
)

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="kills processes by pid")


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _price(request: Request) -> Reply:
    return Reply.json({"sku": request.path.rsplit("/", 1)[-1], "price": 12.5})


@pytest.fixture
def price_url(http_server: ScriptedServer) -> str:
    http_server.route("/prices/*", _price)
    return f"{http_server.url}/prices/{{sku}}"


@pytest.fixture
def errlog() -> Iterator[TextIO]:
    with open(os.devnull, "w") as devnull:
        yield devnull


def time_server(pid_file: Path, errlog: TextIO) -> MCPServer:
    code = (
        f"import os, sys; open({str(pid_file)!r}, 'w').write(str(os.getpid())); "
        "os.execv(sys.executable, [sys.executable, '-m', 'mcp_server_time', "
        "'--local-timezone', 'UTC'])"
    )
    return MCPServer.stdio(sys.executable, ["-c", code], errlog=errlog, timeout=5)


FIRST_ROUND = [
    ToolCall(id="c1", name="add", arguments='{"a": 2, "b": 3}'),
    ToolCall(id="c2", name="get_price", arguments='{"sku": "pen/blue"}'),
    ToolCall(id="c3", name="get_current_time", arguments='{"timezone": "Asia/Tokyo"}'),
]


def scripted(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
    offered = sorted(spec.name for spec in parameters.tools or ())
    assert offered == ["add", "convert_time", "get_current_time", "get_price"]
    results = [m for m in messages if isinstance(m, ToolResultMessage)]
    if not results:
        return AiMessage(tool_calls=FIRST_ROUND)
    return AiMessage(
        text=" | ".join(f"{r.tool_name}={'error' if r.is_error else r.text}" for r in results)
    )


def services(price_url: str, server: MCPServer) -> ToolService:
    service = ToolService([add])
    service.register(HttpTool("get_price", "Price of a product.", url=price_url))
    service.register(server)
    return service


def check(result: Any) -> None:
    tool_messages = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert [(m.tool_call_id, m.tool_name) for m in tool_messages] == [
        ("c1", "add"),
        ("c2", "get_price"),
        ("c3", "get_current_time"),
    ]
    assert tool_messages[0].text == "5"
    assert tool_messages[1].text == '{"sku":"pen%2Fblue","price":12.5}'
    assert json.loads(tool_messages[2].text)["timezone"] == "Asia/Tokyo"
    assert not any(m.is_error for m in tool_messages)
    assert result.final_response.ai_message.text.startswith("add=5 | get_price=")


def test_sync_conversation(price_url: str, tmp_path: Path, errlog: TextIO) -> None:
    with time_server(tmp_path / "pid", errlog) as server:
        result = services(price_url, server).chat(
            FunctionModel(scripted), [UserMessage(content="go")]
        )
    check(result)


async def test_async_conversation(price_url: str, tmp_path: Path, errlog: TextIO) -> None:
    async with time_server(tmp_path / "pid", errlog) as server:
        result = await services(price_url, server).achat(
            FunctionModel(scripted), [UserMessage(content="go")]
        )
    check(result)


async def test_dead_server_gives_error_results_and_the_loop_goes_on(
    price_url: str, tmp_path: Path, errlog: TextIO
) -> None:
    pid_file = tmp_path / "pid"
    async with time_server(pid_file, errlog) as server:
        service = services(price_url, server)
        os.kill(int(pid_file.read_text()), signal.SIGKILL)
        result = await service.achat(FunctionModel(scripted), [UserMessage(content="go")])
    answer = result.final_response.ai_message.text
    assert answer == 'add=5 | get_price={"sku":"pen%2Fblue","price":12.5} | get_current_time=error'
    failed = [e for e in result.tool_executions if e.failed]
    assert [e.call.name for e in failed] == ["get_current_time"]
    # Killed before the transport noticed: the call went out, and may have reached it.
    assert "the connection to the MCP server was lost during the call" in failed[0].result.text
