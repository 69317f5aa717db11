"""`MCPServer` against real MCP servers: `mcp-server-time` over stdio (from PyPI, a dev
dependency), a small fixture server (tests/mcp_fixture_server.py) over stdio and streamable
HTTP, entered with both `with` and `async with`, and in-process servers listing given tools."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any, TextIO

import pytest
from typing_extensions import Unpack

pytest.importorskip("mcp")

from mcp.server.lowlevel import Server
from mcp.types import ListToolsResult, Tool
from mcp_memory import in_memory

from agentforge_typed import (
    MCPServer,
    ToolCall,
    ToolContext,
    ToolExecutionResult,
    ToolService,
    tool,
)
from agentforge_typed.tools import _schema_arguments
from agentforge_typed.tools._base import ToolLike, ToolSource
from agentforge_typed.tools.mcp._server import MCPServerOptions, MCPTool

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="kills processes by pid")

FIXTURE_SERVER = str(Path(__file__).parents[2] / "mcp_fixture_server.py")
CONTEXT: ToolContext[Any] = ToolContext(deps=None, tool_call_id="call_1", tool_name="t")


@pytest.fixture
def errlog() -> Iterator[TextIO]:
    with open(os.devnull, "w") as devnull:  # the servers' logs are not the tests' business
        yield devnull


@pytest.fixture
def pid_file(tmp_path: Path) -> Path:
    return tmp_path / "server.pid"


def time_server(pid_file: Path, errlog: TextIO, **options: Any) -> MCPServer:
    """`mcp-server-time` over stdio, started through `exec` so the recorded pid is the server's."""
    code = (
        "import os, sys; "
        f"open({str(pid_file)!r}, 'w').write(str(os.getpid())); "
        "os.execv(sys.executable, [sys.executable, '-m', 'mcp_server_time', "
        "'--local-timezone', 'UTC'])"
    )
    return MCPServer.stdio(sys.executable, ["-c", code], errlog=errlog, **options)


def call(name: str, arguments: Any) -> ToolCall:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return ToolCall(id="call_1", name=name, arguments=text)


def by_name(server: MCPServer) -> dict[str, MCPTool]:
    return {tool.name: tool for tool in server.tools()}


def kill(pid_file: Path) -> None:
    os.kill(int(pid_file.read_text()), signal.SIGKILL)
    time.sleep(0.2)  # let the transport notice


def check_listing(server: MCPServer) -> None:
    source: ToolSource = server
    tools = by_name(server)
    assert set(tools) == {"get_current_time", "convert_time"}
    current: ToolLike = tools["get_current_time"]
    assert source.tools()[0].name in tools
    assert current.specification.description == "Get current time in a specific timezone"
    parameters = current.specification.parameters
    assert parameters["required"] == ["timezone"]
    assert parameters["properties"]["timezone"]["type"] == "string"
    # The server's schema leaves `additionalProperties` out; other keys are refused, and said so.
    assert parameters["additionalProperties"] is False


def check_time_result(result: ToolExecutionResult, timezone: str) -> None:
    assert not result.is_error
    assert result.value["timezone"] == timezone  # structured content
    assert json.loads(result.text)["timezone"] == timezone  # the server's text content


INVALID_TEXT = (
    "Invalid arguments for tool `get_current_time`:\n"
    '- $.timezone: Input should be of type string (input: ["UTC"])\n'
    "Correct the arguments and call `get_current_time` again."
)


def test_sync_with(pid_file: Path, errlog: TextIO) -> None:
    with time_server(pid_file, errlog) as server:
        check_listing(server)
        tools = by_name(server)
        check_time_result(
            tools["get_current_time"].execute(
                call("get_current_time", {"timezone": "Asia/Tokyo"}), CONTEXT
            ),
            "Asia/Tokyo",
        )
        # `aexecute` of a server entered with `with` goes through the portal.
        converted = asyncio.run(
            tools["convert_time"].aexecute(
                call(
                    "convert_time",
                    {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"},
                ),
                CONTEXT,
            )
        )
        assert converted.value["target"]["datetime"].endswith("T21:00:00+09:00")


async def test_async_with(pid_file: Path, errlog: TextIO) -> None:
    async with time_server(pid_file, errlog) as server:
        check_listing(server)
        tool = by_name(server)["get_current_time"]
        check_time_result(
            await tool.aexecute(call("get_current_time", {"timezone": "UTC"}), CONTEXT), "UTC"
        )
        # A blocking caller on another thread reaches the session on this loop.
        threaded = await asyncio.to_thread(
            tool.execute, call("get_current_time", {"timezone": "Europe/Paris"}), CONTEXT
        )
        check_time_result(threaded, "Europe/Paris")
        # On the loop's own thread, blocking would deadlock: an error result says what to do.
        blocked = tool.execute(call("get_current_time", {"timezone": "UTC"}), CONTEXT)
        assert blocked.error_kind == "execution"
        assert "call it with `aexecute`" in blocked.text


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_invalid_arguments_are_rejected_before_sending(
    pid_file: Path, errlog: TextIO, mode: str
) -> None:
    server = time_server(pid_file, errlog)
    sent: list[str] = []

    def spy(tool: MCPTool) -> None:
        session = server._connection.live.held.session  # type: ignore[union-attr]
        original = session.call_tool

        async def counting(name: str, arguments: Any = None, *args: Any, **kwargs: Any) -> Any:
            sent.append(name)
            return await original(name, arguments, *args, **kwargs)

        session.call_tool = counting  # type: ignore[method-assign]

    if mode == "sync":
        with server:
            tool = by_name(server)["get_current_time"]
            spy(tool)
            invalid = tool.execute(call("get_current_time", {"timezone": ["UTC"]}), CONTEXT)
            missing = tool.execute(call("get_current_time", {}), CONTEXT)
            valid = tool.execute(call("get_current_time", {"timezone": "UTC"}), CONTEXT)
    else:
        async with server:
            tool = by_name(server)["get_current_time"]
            spy(tool)
            invalid = await tool.aexecute(call("get_current_time", {"timezone": ["UTC"]}), CONTEXT)
            missing = await tool.aexecute(call("get_current_time", {}), CONTEXT)
            valid = await tool.aexecute(call("get_current_time", {"timezone": "UTC"}), CONTEXT)
    assert (invalid.error_kind, invalid.text) == ("arguments", INVALID_TEXT)
    assert "- $.timezone: Field required (input: {})" in missing.text
    assert not valid.is_error
    assert sent == ["get_current_time"]  # only the valid call reached the server


def test_server_side_error_is_an_error_result(pid_file: Path, errlog: TextIO) -> None:
    with time_server(pid_file, errlog) as server:
        result = by_name(server)["get_current_time"].execute(
            call("get_current_time", {"timezone": "Nowhere/Atlantis"}), CONTEXT
        )
    assert (result.is_error, result.error_kind) == (True, "execution")
    assert "Invalid timezone" in result.text


def test_repairs_are_recorded(pid_file: Path, errlog: TextIO) -> None:
    with time_server(pid_file, errlog) as server:
        result = by_name(server)["get_current_time"].execute(
            call("get_current_time", json.dumps(json.dumps({"timezone": "UTC"}))), CONTEXT
        )
    check_time_result(result, "UTC")
    assert result.repairs == ("arguments were double-encoded as a JSON string: decoded",)


def test_server_killed_mid_session_sync(pid_file: Path, errlog: TextIO) -> None:
    with time_server(pid_file, errlog, timeout=5, reconnect=False) as server:
        tool = by_name(server)["get_current_time"]
        assert not tool.execute(call("get_current_time", {"timezone": "UTC"}), CONTEXT).is_error
        kill(pid_file)
        started = time.monotonic()
        for _ in range(2):  # and it keeps answering (with errors), never hanging
            result = tool.execute(call("get_current_time", {"timezone": "UTC"}), CONTEXT)
            assert (result.is_error, result.error_kind) == (True, "execution")
            assert result.text.startswith("Tool `get_current_time` failed: the MCP server is gone")
        assert time.monotonic() - started < 4  # no call waited for the 5 s timeout


async def test_server_killed_mid_session_async(pid_file: Path, errlog: TextIO) -> None:
    async with time_server(pid_file, errlog, timeout=5, reconnect=False) as server:
        tool = by_name(server)["get_current_time"]
        kill(pid_file)
        await asyncio.sleep(0.3)  # the transport notices on this loop
        for _ in range(2):
            result = await tool.aexecute(call("get_current_time", {"timezone": "UTC"}), CONTEXT)
            assert result.error_kind == "execution"
            assert "the MCP server is gone" in result.text


def test_dies_mid_call_and_slow_calls_time_out(errlog: TextIO) -> None:
    # Room for a loaded machine: the call that dies must not time out first.
    with MCPServer.stdio(sys.executable, [FIXTURE_SERVER], errlog=errlog, timeout=3) as server:
        tools = by_name(server)
        assert (tools["add"].execute(call("add", {"a": 2, "b": 3}), CONTEXT)).text == "5"
        slow = tools["slow"].execute(call("slow", {"seconds": 10}), CONTEXT)
        assert (slow.error_kind, slow.text) == ("timeout", "Tool `slow` timed out after 3 seconds.")
        # A timeout does not break the session.
        assert tools["add"].execute(call("add", {"a": 1, "b": 1}), CONTEXT).text == "2"
        died = tools["die"].execute(call("die", {}), CONTEXT)
        assert died.error_kind == "execution"
        assert died.text.startswith(
            "Tool `die` failed: the connection to the MCP server was lost during the call ("
        )
        assert died.text.endswith("; not sent again, as it may have taken effect")
        # The next call starts the server again.
        assert tools["add"].execute(call("add", {"a": 1, "b": 1}), CONTEXT).text == "2"


async def test_dies_mid_call_async(errlog: TextIO) -> None:
    async with MCPServer.stdio(
        sys.executable, [FIXTURE_SERVER], errlog=errlog, timeout=3
    ) as server:
        tools = by_name(server)
        slow = await tools["slow"].aexecute(call("slow", {"seconds": 10}), CONTEXT)
        assert slow.error_kind == "timeout"
        died = await tools["die"].aexecute(call("die", {}), CONTEXT)
        assert "the connection to the MCP server was lost during the call" in died.text
        after = await tools["add"].aexecute(call("add", {"a": 2, "b": 2}), CONTEXT)
        assert after.text == "4"


def test_lifecycle_errors(pid_file: Path, errlog: TextIO) -> None:
    server = time_server(pid_file, errlog)
    with pytest.raises(RuntimeError, match="before listing its tools"):
        server.tools()
    with server:
        tool = by_name(server)["get_current_time"]
        with pytest.raises(RuntimeError, match="already entered"):
            server.__enter__()
    with pytest.raises(RuntimeError, match="before listing its tools"):
        server.tools()
    after = tool.execute(call("get_current_time", {"timezone": "UTC"}), CONTEXT)
    assert (after.error_kind, after.text) == (
        "execution",
        "Tool `get_current_time` failed: the MCP server is not connected",
    )
    # The process is gone once the block is left.
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_tool_prefix(pid_file: Path, errlog: TextIO) -> None:
    with time_server(pid_file, errlog, tool_prefix="time_") as server:
        tool = by_name(server)["time_get_current_time"]
        assert tool.remote_name == "get_current_time"
        check_time_result(
            tool.execute(call("time_get_current_time", {"timezone": "UTC"}), CONTEXT), "UTC"
        )


def test_unreachable_command_fails_on_enter(errlog: TextIO) -> None:
    with pytest.raises(OSError), MCPServer.stdio("/nonexistent/mcp-server", errlog=errlog):
        pass


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start_http_server(port: int) -> subprocess.Popen[bytes]:
    """The fixture server over streamable HTTP on `port`, once it accepts connections."""
    process = subprocess.Popen(
        [sys.executable, FIXTURE_SERVER, "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60  # a loaded machine starts Python slowly
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return process
        except OSError:
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                pytest.fail("the fixture MCP server did not start")
            time.sleep(0.1)


@pytest.fixture
def http_url() -> Iterator[str]:
    port = free_port()
    process = start_http_server(port)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.kill()
        process.wait()


def test_streamable_http_sync(http_url: str) -> None:
    with MCPServer.http(http_url) as server:
        tools = by_name(server)
        assert set(tools) == {
            *("slow", "die", "add", "header", "hang", "flaky", "count", "ask", "ask_mid_call"),
            *("account", "grow", "visit"),
        }
        assert tools["add"].execute(call("add", {"a": 20, "b": 22}), CONTEXT).text == "42"
        invalid = tools["add"].execute(call("add", {"a": "20", "b": 22}), CONTEXT)
        assert invalid.error_kind == "arguments"


def test_streamable_http_sends_the_given_headers(http_url: str) -> None:
    auth = {"Authorization": "Bearer s3cret", "X-Tenant": "acme"}
    with MCPServer.http(http_url, headers=auth) as server:
        header = by_name(server)["header"]
        # The server echoes what it received: a credential reaches the model redacted.
        echoed = {
            name: header.execute(call("header", {"name": name}), CONTEXT).text for name in auth
        }
        assert echoed == {"Authorization": "[redacted]", "X-Tenant": "acme"}
    with MCPServer.http(http_url) as server:
        absent = by_name(server)["header"].execute(call("header", {"name": "X-Tenant"}), CONTEXT)
        assert absent.text == "(absent)"


async def test_streamable_http_async(http_url: str) -> None:
    async with MCPServer.http(http_url) as server:
        result = await by_name(server)["add"].aexecute(call("add", {"a": 1, "b": 2}), CONTEXT)
        assert (result.text, result.value) == ("3", {"result": 3})


SILENT = ["-c", "import time; time.sleep(60)"]
"""A process that never speaks MCP."""


def test_server_that_never_initializes_times_out_on_enter(errlog: TextIO) -> None:
    server = MCPServer.stdio(sys.executable, SILENT, errlog=errlog, connect_timeout=0.5)
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=r"did not initialize and list its tools within 0\.5"):
        server.__enter__()
    assert time.monotonic() - started < 10
    with pytest.raises(RuntimeError, match="before listing its tools"):
        server.tools()


async def test_server_that_never_initializes_times_out_on_async_enter(errlog: TextIO) -> None:
    server = MCPServer.stdio(sys.executable, SILENT, errlog=errlog, connect_timeout=0.5)
    with pytest.raises(TimeoutError, match=r"within 0\.5 seconds"):
        await server.__aenter__()


def listing_server(*tools: Tool, **options: Unpack[MCPServerOptions]) -> MCPServer:
    """An in-process server (the SDK's low-level `Server`, over memory streams) listing `tools`."""

    async def list_tools(context: Any, params: Any) -> ListToolsResult:
        return ListToolsResult(tools=list(tools))

    listing = Server("listing", on_list_tools=list_tools)

    return in_memory(listing, label="in-memory", **options)


@pytest.mark.skipif(version("mcp").startswith("1."), reason="SDK 2's low-level `Server`")
def test_a_tool_whose_schema_is_refused_is_skipped_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    dangling = {"type": "object", "properties": {"a": {"$ref": "#/$defs/Missing"}}}
    server = listing_server(
        Tool(name="broken", input_schema=dangling),
        Tool(name="echo", input_schema={"type": "object"}),
    )
    with caplog.at_level(logging.WARNING, logger="agentforge_typed.mcp"), server:
        assert [tool.name for tool in server.tools()] == ["echo"]
    assert caplog.messages == [
        "MCP server in-memory: tool 'broken' skipped: invalid JSON schema for tool 'broken': "
        "`$ref` '#/$defs/Missing' points nowhere"
    ]


@pytest.mark.skipif(version("mcp").startswith("1."), reason="SDK 2's low-level `Server`")
async def test_a_schema_that_fails_at_validation_is_an_execution_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Should the check when tools are built miss a `$ref` that points nowhere.
    monkeypatch.setattr(_schema_arguments, "unresolvable_references", lambda schema: iter(()))
    dangling = {"type": "object", "properties": {"a": {"$ref": "#/$defs/Missing"}}}
    async with listing_server(Tool(name="broken", input_schema=dangling)) as server:
        (broken,) = server.tools()
        result = await broken.aexecute(call("broken", {"a": 1}), CONTEXT)
    assert (result.error_kind, result.text) == (
        "execution",
        "Tool `broken` failed: its JSON schema has a `$ref` that cannot be resolved "
        "(/$defs/Missing)",
    )


@pytest.mark.skipif(version("mcp").startswith("1."), reason="SDK 2's low-level `Server`")
def test_a_tool_whose_pattern_the_linear_engine_cannot_run_is_skipped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    lookahead = {"type": "object", "properties": {"q": {"type": "string", "pattern": "^(?!x)"}}}
    redos = {"type": "object", "properties": {"q": {"type": "string", "pattern": r"^(\w+\s?)*$"}}}
    server = listing_server(
        Tool(name="lookahead", input_schema=lookahead), Tool(name="search", input_schema=redos)
    )
    with caplog.at_level(logging.WARNING, logger="agentforge_typed.mcp"), server:
        (search,) = server.tools()
        started = time.monotonic()
        result = search.execute(call("search", {"q": "a" * 30 + "!"}), CONTEXT)
        assert time.monotonic() - started < 1.0  # a backtracking engine takes minutes
    assert result.error_kind == "arguments"
    assert caplog.messages == [
        "MCP server in-memory: tool 'lookahead' skipped: invalid JSON schema for tool "
        "'lookahead': pattern \"^(?!x)\" cannot run on the linear-time regex engine (no "
        "look-around, no back-references): look-around, including look-ahead and look-behind, "
        "is not supported"
    ]


@pytest.mark.skipif(version("mcp").startswith("1."), reason="SDK 2's low-level `Server`")
def test_tools_whose_names_a_provider_refuses_are_skipped_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    names = ["get weather", "", "x" * 65, "bell\x07", "new\nline", "café", "github.search", "ok"]
    server = listing_server(
        *(Tool(name=name, input_schema={"type": "object"}) for name in [*names, "ok", "x" * 64])
    )
    with caplog.at_level(logging.WARNING, logger="agentforge_typed.mcp"), server:
        assert [tool.name for tool in server.tools()] == ["ok", "x" * 64]
    rule = "a tool name must match ^[a-zA-Z0-9_-]{1,64}$"
    assert caplog.messages == [
        *(
            f"MCP server in-memory: tool {name!r} skipped: invalid tool name {name!r}: {rule}"
            for name in names[:-1]
        ),
        "MCP server in-memory: tool 'ok' skipped: the server lists a tool of that name already",
    ]


@pytest.mark.skipif(version("mcp").startswith("1."), reason="SDK 2's low-level `Server`")
def test_a_prefix_that_makes_a_name_too_long_skips_the_tool(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = listing_server(
        Tool(name="x" * 60, input_schema={"type": "object"}),
        Tool(name="ok", input_schema={"type": "object"}),
    )
    server.tool_prefix = "srv_a_"
    with caplog.at_level(logging.WARNING, logger="agentforge_typed.mcp"), server:
        assert [tool.name for tool in server.tools()] == ["srv_a_ok"]
    assert len(caplog.messages) == 1
    assert f"invalid tool name {'srv_a_' + 'x' * 60!r}" in caplog.messages[0]


@pytest.mark.skipif(version("mcp").startswith("1."), reason="SDK 2's low-level `Server`")
def test_registering_a_server_whose_tools_collide_registers_nothing() -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    service = ToolService([add])
    server = listing_server(
        Tool(name="echo", input_schema={"type": "object"}),
        Tool(name="add", input_schema={"type": "object"}),
    )
    with server:
        with pytest.raises(ValueError) as refused:
            service.register(server)
        assert str(refused.value) == (
            "a tool named 'add' is already registered; "
            "nothing from MCPServer('in-memory', connected) was registered"
        )
        assert [t.name for t in service.tools] == ["add"]
        assert [s.name for s in service.specifications] == ["add"]
        # With a prefix, the same server registers whole.
        server.close()
        server.tool_prefix = "mcp_"
        with server:
            service.register(server)
    assert [t.name for t in service.tools] == ["add", "mcp_echo", "mcp_add"]


def test_registering_a_source_holding_one_name_twice_registers_nothing() -> None:
    class Twice:
        @tool(name="same")
        def first(self) -> str:
            """First."""
            return "1"

        @tool(name="same")
        def second(self) -> str:
            """Second."""
            return "2"

    service = ToolService()
    with pytest.raises(ValueError, match="two of its tools are named 'same'; nothing from"):
        service.register(Twice())
    assert service.tools == ()


@pytest.mark.skipif(version("mcp").startswith("1."), reason="SDK 2's low-level `Server`")
async def test_arguments_a_server_schema_does_not_declare_never_reach_it() -> None:
    # Many servers omit `additionalProperties: false`, and the SDK drops unknown arguments
    # silently: the tool would run on its defaults.
    schema = {
        "type": "object",
        "properties": {"path": {"type": "string"}, "options": {"properties": {"n": {}}}},
    }
    async with listing_server(Tool(name="read", input_schema=schema)) as server:
        (read,) = server.tools()
        result = await read.aexecute(
            call("read", {"path": "a", "recursive": True, "options": {"n": 1, "all": 1}}), CONTEXT
        )
    assert result.error_kind == "arguments"
    assert sorted(result.text.splitlines()[1:-1]) == [
        "- $.options.all: Unexpected argument (input: 1)",
        "- $.recursive: Unexpected argument (input: true)",
    ]


@pytest.mark.skipif(version("mcp").startswith("1."), reason="SDK 2's low-level `Server`")
async def test_extra_arguments_ignore_drops_undeclared_arguments_and_records_it() -> None:
    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    server = listing_server(Tool(name="read", input_schema=schema), extra_arguments="ignore")
    async with server:
        (read,) = server.tools()
        assert read.validate_arguments('{"path": "a", "recursive": true}') == {"path": "a"}
    with pytest.raises(ValueError, match="extra_arguments must be 'forbid' or 'ignore'"):
        listing_server(extra_arguments="drop")  # type: ignore[arg-type]


@pytest.mark.skipif(version("mcp").startswith("1."), reason="SDK 2's low-level `Server`")
def test_a_tool_whose_schema_is_nested_too_deeply_is_skipped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(120):  # deeper than jsonschema can check, not than the SDK can send
        deep = {"type": "object", "properties": {"a": deep}}
    server = listing_server(
        Tool(name="deep", input_schema=deep), Tool(name="echo", input_schema={"type": "object"})
    )
    with caplog.at_level(logging.WARNING, logger="agentforge_typed.mcp"), server:
        assert [tool.name for tool in server.tools()] == ["echo"]
    assert caplog.messages == [
        "MCP server in-memory: tool 'deep' skipped: invalid JSON schema for tool 'deep': "
        "nested too deeply to check"
    ]
