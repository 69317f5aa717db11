"""Protocol revisions: the client probes `server/discover` and speaks the stateless revision
(2026-07-28) with a server that answers it, else the newest revision of the `initialize` handshake
both sides speak; `revision="handshake"` skips the probe. Real servers: tests/mcp_fixture_server.py
(the SDK's server helpers, current) and tests/mcp_old_server.py (a hand-written 2024-11-05 server,
which refuses `server/discover` or leaves it unanswered), both over stdio."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, TextIO

import pytest

pytest.importorskip("mcp")

import mcp.client.session
from test_mcp import CONTEXT, FIXTURE_SERVER, by_name, call
from test_mcp import errlog as errlog  # the fixture

from agentforge_typed import MCPServer

OLD_SERVER = str(Path(__file__).parents[2] / "mcp_old_server.py")

LATEST_VERSION = "2026-07-28"
"""The stateless revision, reached through `server/discover` (`mcp_types.version` in SDK 2.3)."""
LATEST_HANDSHAKE_VERSION = "2025-11-25"
"""The newest revision of the `initialize` handshake."""


@pytest.mark.parametrize(
    ("revision", "spoken"), [("newest", LATEST_VERSION), ("handshake", LATEST_HANDSHAKE_VERSION)]
)
def test_a_current_server_speaks_the_newest_revision_offered(
    errlog: TextIO, revision: Any, spoken: str
) -> None:
    server = MCPServer.stdio(sys.executable, [FIXTURE_SERVER], errlog=errlog, revision=revision)
    assert server.protocol_version is None
    with server:
        assert server.protocol_version == spoken
        assert by_name(server)["add"].execute(call("add", {"a": 1, "b": 2}), CONTEXT).text == "3"
    assert server.protocol_version is None


def test_an_unknown_revision_option_is_refused() -> None:
    with pytest.raises(ValueError) as raised:
        MCPServer.stdio(sys.executable, [OLD_SERVER], revision="bogus")  # type: ignore[arg-type]
    assert str(raised.value) == "revision must be 'newest' or 'handshake', got 'bogus'"


def test_a_server_that_never_answers_discover_costs_the_probe_then_gets_the_handshake(
    errlog: TextIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The SDK waits 10 s for `server/discover`; shortened here, as it is what is tested.
    monkeypatch.setattr(mcp.client.session, "DISCOVER_TIMEOUT_SECONDS", 0.5)
    started = time.monotonic()
    with MCPServer.stdio(
        sys.executable, [OLD_SERVER, "--ignore-discover"], errlog=errlog
    ) as server:
        assert time.monotonic() - started >= 0.5
        assert server.protocol_version == "2024-11-05"
        echo = by_name(server)["echo"].execute(call("echo", {"text": "hi"}), CONTEXT)
        assert echo.text == "echo: hi"


def test_a_server_slow_to_start_answers_the_probe_late_and_is_probed_again(
    errlog: TextIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its late answer to `server/discover` makes the connection stateless, so the handshake that
    # follows the probe's timeout is refused: the client probes again instead of failing.
    monkeypatch.setattr(mcp.client.session, "DISCOVER_TIMEOUT_SECONDS", 0.5)
    slow = f"import runpy, sys, time; time.sleep(2); sys.argv = [{FIXTURE_SERVER!r}]; "
    slow += f"runpy.run_path({FIXTURE_SERVER!r}, run_name='__main__')"
    with MCPServer.stdio(sys.executable, ["-c", slow], errlog=errlog) as server:
        assert server.protocol_version == LATEST_VERSION
        assert by_name(server)["add"].execute(call("add", {"a": 1, "b": 2}), CONTEXT).text == "3"


def test_connect_timeout_bounds_a_server_that_never_answers_discover(errlog: TextIO) -> None:
    ignoring = [OLD_SERVER, "--ignore-discover"]
    started = time.monotonic()
    with (
        pytest.raises(TimeoutError) as raised,
        MCPServer.stdio(sys.executable, ignoring, errlog=errlog, connect_timeout=1),
    ):
        pass
    assert time.monotonic() - started < 5  # not the probe's 10 s
    assert str(raised.value) == (
        f"MCP server {' '.join([sys.executable, *ignoring])!r} did not initialize and list its "
        "tools within 1 seconds (connect_timeout)"
    )
    # `revision="handshake"` does not probe: the server answers at once.
    with MCPServer.stdio(
        sys.executable, ignoring, errlog=errlog, connect_timeout=1, revision="handshake"
    ) as server:
        assert server.protocol_version == "2024-11-05"


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
