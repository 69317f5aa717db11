"""`MCPServer` when servers fail: optional servers that do not connect, servers killed between
calls and during them (restarted on the next call, a lost call sent again only when that is
safe), the reconnection backoff, and the cancellation a timed-out call sends. Real server
processes: `mcp-server-time` and tests/mcp_fixture_server.py, over stdio and streamable HTTP."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import pytest

pytest.importorskip("mcp")

from test_mcp import (
    CONTEXT,
    FIXTURE_SERVER,
    SILENT,
    by_name,
    call,
    check_time_result,
    free_port,
    kill,
    start_http_server,
    time_server,
)
from test_mcp import errlog as errlog  # the fixtures
from test_mcp import http_url as http_url
from test_mcp import pid_file as pid_file

from agentforge_typed import AiMessage, FunctionModel, MCPServer, ToolService
from agentforge_typed.tools.mcp import _connection
from agentforge_typed.tools.mcp._session import Revision

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="kills processes by pid")

REVISIONS = pytest.mark.parametrize("revision", ["newest", "handshake"])
"""Both kinds of revision: the stateless one (2026-07-28) and the handshake's (2025-11-25)."""


def answer(messages: Any, parameters: Any) -> AiMessage:
    return AiMessage(text=f"offered: {[spec.name for spec in parameters.tools or ()]}")


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_an_optional_server_that_does_not_connect_is_left_out_with_a_warning(
    errlog: TextIO, caplog: pytest.LogCaptureFixture, mode: str
) -> None:
    missing = MCPServer.stdio("/nonexistent/mcp-server", errlog=errlog, required=False)
    silent = MCPServer.stdio(
        sys.executable, SILENT, errlog=errlog, required=False, connect_timeout=0.5
    )
    with caplog.at_level(logging.WARNING, logger="agentforge_typed.mcp"):
        if mode == "sync":
            with missing, silent:
                assert missing.tools() == silent.tools() == ()
                assert repr(missing) == "MCPServer('/nonexistent/mcp-server', not connected)"
                blocking = ToolService([missing, silent], blocking_in_event_loop=True)
                result = blocking.chat(FunctionModel(answer), "hi")
        else:
            async with missing, silent:
                assert missing.tools() == silent.tools() == ()
                result = await ToolService([missing, silent]).achat(FunctionModel(answer), "hi")
    assert result.final_response.ai_message.text == "offered: []"
    assert caplog.messages[0].startswith(
        "MCP server /nonexistent/mcp-server did not connect; continuing without its tools: "
        "ConnectionError: MCP server '/nonexistent/mcp-server' did not start (FileNotFoundError: "
    )
    assert caplog.messages[1].endswith(
        "continuing without its tools: TimeoutError: MCP server "
        f"{' '.join([sys.executable, *SILENT])!r} did not initialize and list its tools within "
        "0.5 seconds (connect_timeout)"
    )


def test_a_server_killed_between_calls_is_started_again_on_the_next_call(
    pid_file: Path, errlog: TextIO, caplog: pytest.LogCaptureFixture
) -> None:
    with time_server(pid_file, errlog) as server:
        tool = by_name(server)["get_current_time"]
        first = pid_file.read_text()
        kill(pid_file)
        with caplog.at_level(logging.WARNING, logger="agentforge_typed.mcp"):
            result = tool.execute(call("get_current_time", {"timezone": "UTC"}), CONTEXT)
        check_time_result(result, "UTC")  # nothing was sent to the dead one: no error at all
        assert pid_file.read_text() != first
        assert caplog.messages[-1].endswith(": reconnected")


async def test_a_server_killed_between_calls_is_started_again_under_async_with(
    pid_file: Path, errlog: TextIO
) -> None:
    async with time_server(pid_file, errlog) as server:
        tool = by_name(server)["get_current_time"]
        kill(pid_file)
        await asyncio.sleep(0.3)  # the transport notices on this loop
        for timezone in ("UTC", "Asia/Tokyo"):
            result = await tool.aexecute(call("get_current_time", {"timezone": timezone}), CONTEXT)
            check_time_result(result, timezone)


def fixture_server(errlog: TextIO, **options: Any) -> MCPServer:
    return MCPServer.stdio(sys.executable, [FIXTURE_SERVER], errlog=errlog, **options)


@pytest.mark.parametrize(
    ("options", "revision"),
    [
        ({"trusted": True}, "newest"),
        ({"trusted": True}, "handshake"),
        ({"idempotent": ["flaky"]}, "newest"),
        ({"idempotent": True}, "newest"),
    ],
    ids=["trusted-annotation", "trusted-annotation-handshake", "named", "all"],
)
def test_a_call_lost_with_its_server_is_sent_again_when_it_is_idempotent(
    errlog: TextIO, tmp_path: Path, options: dict[str, Any], revision: Revision
) -> None:
    marker = str(tmp_path / "marker")
    with fixture_server(errlog, revision=revision, **options) as server:
        flaky = by_name(server)["flaky"]
        result = flaky.execute(call("flaky", {"marker": marker}), CONTEXT)
    assert not result.is_error, result.text
    assert result.text.startswith("answered by process ")
    assert int(result.text.split()[-1]) != os.getpid()


async def test_a_call_lost_with_its_server_is_sent_again_when_it_carries_an_idempotency_key(
    errlog: TextIO, tmp_path: Path
) -> None:
    marker = str(tmp_path / "marker")
    server = fixture_server(errlog, idempotency_key_meta="example.com/idempotency-key")
    async with server:
        flaky = by_name(server)["flaky"]
        result = await flaky.aexecute(call("flaky", {"marker": marker}), CONTEXT)
    assert result.text.startswith("answered by process ")


@REVISIONS
def test_a_call_lost_with_its_server_is_not_sent_again_otherwise(
    errlog: TextIO, tmp_path: Path, revision: Revision
) -> None:
    marker = str(tmp_path / "marker")
    # Untrusted: the idempotentHint changes nothing.
    with fixture_server(errlog, revision=revision) as server:
        flaky = by_name(server)["flaky"]
        lost = flaky.execute(call("flaky", {"marker": marker}), CONTEXT)
        assert lost.error_kind == "execution"
        assert lost.text == (
            "Tool `flaky` failed: the connection to the MCP server was lost during the call "
            "(MCPError: Connection closed); not sent again, as it may have taken effect"
        )
        # The model may call it again: the server is started again for that call.
        again = flaky.execute(call("flaky", {"marker": marker}), CONTEXT)
        assert again.text.startswith("answered by process ")


def test_reconnection_waits_longer_after_each_failed_attempt(
    errlog: TextIO, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "broken"
    pid_file = tmp_path / "pid"
    # The server starts normally unless the file `broken` exists, when it exits at once.
    code = (
        "import os, sys; "
        f"os.path.exists({str(broken)!r}) and sys.exit(3); "
        f"open({str(pid_file)!r}, 'w').write(str(os.getpid())); "
        f"os.execv(sys.executable, [sys.executable, {FIXTURE_SERVER!r}])"
    )
    monkeypatch.setattr(_connection, "RECONNECT_FIRST_DELAY", 0.5)
    monkeypatch.setattr(_connection, "RECONNECT_MAX_DELAY", 1.0)
    with MCPServer.stdio(sys.executable, ["-c", code], errlog=errlog) as server:
        add = by_name(server)["add"]
        broken.touch()
        kill(pid_file)
        failed = add.execute(call("add", {"a": 1, "b": 2}), CONTEXT)
        assert failed.text.startswith(
            "Tool `add` failed: the MCP server is gone and reconnecting failed ("
        )
        assert failed.text.endswith("); the next attempt is in 0.5 s")
        waiting = add.execute(call("add", {"a": 1, "b": 2}), CONTEXT)  # no attempt: at once
        assert waiting.text.startswith("Tool `add` failed: the MCP server is gone (reconnecting")
        assert "; the next reconnection attempt is in 0." in waiting.text
        time.sleep(0.6)
        twice = add.execute(call("add", {"a": 1, "b": 2}), CONTEXT)
        assert twice.text.endswith("; the next attempt is in 1 s")  # doubled
        time.sleep(1.1)
        thrice = add.execute(call("add", {"a": 1, "b": 2}), CONTEXT)
        assert thrice.text.endswith("; the next attempt is in 1 s")  # capped
        broken.unlink()
        time.sleep(1.1)
        assert add.execute(call("add", {"a": 1, "b": 2}), CONTEXT).text == "3"


def test_reconnect_false_fails_every_later_call(pid_file: Path, errlog: TextIO) -> None:
    with time_server(pid_file, errlog, reconnect=False) as server:
        tool = by_name(server)["get_current_time"]
        kill(pid_file)
        result = tool.execute(call("get_current_time", {"timezone": "UTC"}), CONTEXT)
    assert result.text == (
        "Tool `get_current_time` failed: the MCP server is gone (the connection is closed)"
    )


def wait_for(path: Path, text: str, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and path.read_text() == text:
            return
        time.sleep(0.05)
    pytest.fail(f"{path.name} says {path.read_text() if path.exists() else None!r}, not {text!r}")


@REVISIONS
def test_a_timed_out_call_is_cancelled_on_the_server(
    errlog: TextIO, tmp_path: Path, revision: Revision
) -> None:
    marker = tmp_path / "marker"
    with fixture_server(errlog, timeout=1, revision=revision) as server:
        tools = by_name(server)
        result = tools["hang"].execute(call("hang", {"marker": str(marker)}), CONTEXT)
        assert (result.error_kind, result.text) == (
            "timeout",
            "Tool `hang` timed out after 1 seconds.",
        )
        wait_for(marker, "cancelled")  # the server received `notifications/cancelled`
        assert tools["add"].execute(call("add", {"a": 1, "b": 1}), CONTEXT).text == "2"


@REVISIONS
async def test_a_timed_out_call_is_cancelled_on_an_http_server(
    http_url: str, tmp_path: Path, revision: Revision
) -> None:
    marker = tmp_path / "marker"
    async with MCPServer.http(http_url, timeout=1, revision=revision) as server:
        hang = by_name(server)["hang"]
        result = await hang.aexecute(call("hang", {"marker": str(marker)}), CONTEXT)
        assert result.error_kind == "timeout"
        # Off the loop: the transport posts the cancellation from a task of its own.
        await asyncio.to_thread(wait_for, marker, "cancelled")


class HttpServer:
    """The fixture server over streamable HTTP on one port, killed and started again there."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.process: subprocess.Popen[bytes] | None = start_http_server(self.port)

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def start(self) -> None:
        self.kill()
        self.process = start_http_server(self.port)


@pytest.fixture
def http_server() -> Iterator[HttpServer]:
    server = HttpServer()
    try:
        yield server
    finally:
        server.kill()


def wait_for_message(caplog: pytest.LogCaptureFixture, ending: str, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not any(message.endswith(ending) for message in caplog.messages):
        assert time.monotonic() < deadline, f"no log message ends with {ending!r}"
        time.sleep(0.02)


def test_an_http_server_killed_between_calls_is_noticed_before_the_next_call(
    http_server: HttpServer, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Over the stateless transport (2026-07-28) no connection lasts between two calls but the
    # `subscriptions/listen` stream; its loss says the server went away.
    monkeypatch.setattr(_connection, "RECONNECT_FIRST_DELAY", 0.5)
    with (
        caplog.at_level(logging.WARNING, logger="agentforge_typed.mcp"),
        MCPServer.http(http_server.url) as server,
    ):
        assert server.protocol_version == "2026-07-28"
        add = by_name(server)["add"]
        assert add.execute(call("add", {"a": 1, "b": 2}), CONTEXT).text == "3"
        http_server.kill()
        wait_for_message(
            caplog, "connection lost: MCPError(-32000, 'SSE stream ended without a response', None)"
        )
        down = add.execute(call("add", {"a": 1, "b": 2}), CONTEXT)
        assert down.text == (  # reconnected first, as nothing was sent: no "lost during the call"
            "Tool `add` failed: the MCP server is gone and reconnecting failed (ConnectError: "
            "All connection attempts failed); the next attempt is in 0.5 s"
        )
        http_server.start()  # on the same port
        time.sleep(0.5)  # the backoff
        assert add.execute(call("add", {"a": 2, "b": 2}), CONTEXT).text == "4"
        assert caplog.messages[-1] == f"MCP server {http_server.url}: reconnected"
        assert server.protocol_version == "2026-07-28"


async def test_an_http_server_restarted_between_calls_answers_the_next_one(
    http_server: HttpServer,
) -> None:
    async with MCPServer.http(http_server.url) as server:
        add = by_name(server)["add"]
        http_server.start()  # killed, then started again on the same port
        result = await add.aexecute(call("add", {"a": 1, "b": 2}), CONTEXT)
        assert (result.is_error, result.text) == (False, "3")


def test_a_call_in_flight_when_its_http_server_died_is_an_error_sent_again_only_when_safe(
    http_server: HttpServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_connection, "RECONNECT_FIRST_DELAY", 0.5)
    with MCPServer.http(http_server.url, idempotent=["flaky"]) as server:
        tools = by_name(server)
        died = tools["die"].execute(call("die", {}), CONTEXT)
        assert died.error_kind == "execution"
        assert died.text.startswith(
            "Tool `die` failed: the connection to the MCP server was lost during the call "
            "(MCPError: "
        )
        assert died.text.endswith("); not sent again, as it may have taken effect")
        http_server.start()
        time.sleep(0.5)  # the backoff, if the listen stream's loss was noticed first
        assert tools["add"].execute(call("add", {"a": 1, "b": 2}), CONTEXT).text == "3"
        marker = str(tmp_path / "marker")
        # Idempotent: sent again after reconnecting, which fails while the server is down.
        flaky = tools["flaky"].execute(call("flaky", {"marker": marker}), CONTEXT)
        assert flaky.text == (
            "Tool `flaky` failed: the MCP server is gone and reconnecting failed (ConnectError: "
            "All connection attempts failed); the next attempt is in 0.5 s"
        )
        http_server.start()
        time.sleep(0.5)
        again = tools["flaky"].execute(call("flaky", {"marker": marker}), CONTEXT)
        assert again.text.startswith("answered by process ")


EXITS = [
    "-c",
    "import sys; print('config missing:\\x1b[2J', sys.argv, file=sys.stderr); sys.exit(3)",
]
"""A server that writes a line (with a control character) to stderr and exits at start."""


async def entered(server: MCPServer, mode: str) -> None:
    if mode == "sync":
        with server:
            pass
    else:
        async with server:
            pass


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_server_that_cannot_start_is_one_error_naming_its_command(
    tmp_path: Path, mode: str
) -> None:
    missing = MCPServer.stdio("no-such-mcp-server", ["--flag"])
    with pytest.raises(ConnectionError) as raised:
        await entered(missing, mode)
    assert str(raised.value) == (
        "MCP server 'no-such-mcp-server --flag' did not start (FileNotFoundError: [Errno 2] No such "
        "file or directory: 'no-such-mcp-server')"
    )
    # Not a traceback through the SDK's exception groups: the error is all there is.
    assert len(traceback.format_exception(raised.value)) <= 6

    with (tmp_path / "stderr.txt").open("w") as errlog:
        exits = MCPServer.stdio(sys.executable, EXITS, errlog=errlog)
        with pytest.raises(ConnectionError) as raised:
            await entered(exits, mode)
    label = " ".join([sys.executable, *EXITS])
    assert str(raised.value).startswith(f"MCP server {label!r} did not start (")
    assert str(raised.value).endswith("); the end of its stderr:\n  config missing:\\x1b[2J ['-c']")
    assert len(traceback.format_exception(raised.value)) <= 6
    # What the server wrote still reached `errlog`, as it is.
    assert (tmp_path / "stderr.txt").read_text() == "config missing:\x1b[2J ['-c']\n"


async def test_a_server_that_exits_silently_says_so(errlog: TextIO) -> None:
    silent = MCPServer.stdio(sys.executable, ["-c", "pass"], errlog=errlog)
    with pytest.raises(ConnectionError, match=r"; it wrote nothing to stderr$"):
        await entered(silent, "async")
