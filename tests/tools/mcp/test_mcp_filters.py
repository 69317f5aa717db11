"""Per-server MCP tool filters and name prefixes, against the real `mcp-server-time` over stdio:
a filtered-out tool is never offered nor executed; a prefixed tool reaches the server under its
own name."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

import pytest

pytest.importorskip("mcp")


from test_mcp import by_name, time_server

from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatRequestParameters,
    FunctionModel,
    MCPToolFilter,
    ToolCall,
    ToolService,
    UnknownToolError,
)


@pytest.fixture
def errlog() -> Iterator[TextIO]:
    with open(os.devnull, "w") as devnull:
        yield devnull


@pytest.fixture
def pid_file(tmp_path: Path) -> Path:
    return tmp_path / "server.pid"


def test_allow_and_deny_lists_pick_the_servers_tools(pid_file: Path, errlog: TextIO) -> None:
    allow = MCPToolFilter(allow=["get_current_time", "convert_time"], deny=["convert_time"])
    with time_server(pid_file, errlog, tool_filter=allow) as server:
        assert list(by_name(server)) == ["get_current_time"]
    with time_server(pid_file, errlog, tool_filter=MCPToolFilter(deny={"get_current_time"})) as s:
        assert list(by_name(s)) == ["convert_time"]


async def test_a_callable_filter_and_a_prefix_under_async_with(
    pid_file: Path, errlog: TextIO
) -> None:
    def converts(tool: Any) -> bool:
        return "convert" in tool.specification.description.lower()

    server = time_server(pid_file, errlog, tool_filter=converts, tool_prefix="clock_")
    async with server:
        (convert,) = server.tools()
        assert (convert.name, convert.remote_name) == ("clock_convert_time", "convert_time")
        arguments = {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}
        call = ToolCall(id="c1", name="clock_convert_time", arguments=json.dumps(arguments))
        result = await ToolService([server]).achat(
            FunctionModel(_turns(AiMessage(tool_calls=[call]), AiMessage(text="21:00"))), "t?"
        )
    executed = result.tool_executions[0].result
    assert not executed.is_error, executed.text
    assert json.loads(executed.text)["target"]["timezone"] == "Asia/Tokyo"


def test_a_filtered_out_tool_is_never_called(pid_file: Path, errlog: TextIO) -> None:
    with time_server(pid_file, errlog, tool_filter=MCPToolFilter(deny=["convert_time"])) as server:
        service = ToolService([server])
        call = ToolCall(id="c1", name="convert_time", arguments="{}")
        with pytest.raises(UnknownToolError, match="available: get_current_time"):
            service.chat(FunctionModel(_turns(AiMessage(tool_calls=[call]))), "convert")


def test_an_allowed_name_the_server_does_not_list_is_a_warning(
    pid_file: Path, errlog: TextIO, caplog: pytest.LogCaptureFixture
) -> None:
    typo = MCPToolFilter(allow=["get_curent_time"])
    with caplog.at_level(logging.WARNING, logger="agentforge_typed.mcp"):
        with time_server(pid_file, errlog, tool_filter=typo) as server:
            assert server.tools() == ()
    assert caplog.messages[-1].endswith(
        "tool_filter allows 'get_curent_time', which the server does not list"
    )


def test_a_lone_string_is_refused() -> None:
    with pytest.raises(TypeError, match="collection of names, not a str"):
        MCPToolFilter(deny="convert_time")


def _turns(*turns: AiMessage) -> Any:
    queue = list(turns)

    def reply(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        return queue.pop(0)

    return reply
