"""The reference "everything" MCP server (`@modelcontextprotocol/server-everything`, from
`tests/js`, installed when missing as tests/js_support.py says), for end-to-end tests of the MCP
client over both of its transports.

`everything` is a module-scoped fixture, parametrised over `"stdio"` and `"http"`: an `Everything`
whose `server(**options)` builds an `MCPServer` for it. Over stdio each entered `MCPServer` starts
its own server process; over streamable HTTP one process serves the module (each entered
`MCPServer` is a session of its own). `everything_mcp` is one entered `MCPServer` the module's
tests share (for the tests that leave nothing behind on the session), with the warnings logged
while it was entered.

The server is unsafe to its host: over HTTP it listens on every interface, with no
authorization; its `get-env` tool returns its whole environment, and `gzip-file-as-resource`
fetches any URL it is given. It is therefore started with an environment of its own (`ENV`, and
over HTTP its port; stdio adds the MCP SDK's default, a handful of variables such as PATH and
HOME), which lets it fetch from no host (`data:` URIs only); over HTTP, `tests/js/loopback.cjs`
makes it listen on 127.0.0.1 alone; and it is stopped at teardown. A test module using these fixtures imports them and `node`:

```python
from everything_support import everything as everything  # the fixtures
from everything_support import everything_mcp as everything_mcp
from js_support import node as node
```
"""

from __future__ import annotations

import contextlib
import io
import logging
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest
from typing_extensions import Unpack

pytest.importorskip("mcp")

from js_support import JS, unavailable

from agentforge_typed import MCPServer
from agentforge_typed.tools import MCPServerOptions

Transport = Literal["stdio", "http"]
TRANSPORTS: tuple[Transport, ...] = ("stdio", "http")

EVERYTHING = JS / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist"
INDEX = EVERYTHING / "index.js"
LOOPBACK = JS / "loopback.cjs"
"""Preloaded into the HTTP server: its `listen(port)` listens on 127.0.0.1 only."""
ENV = {"GZIP_ALLOWED_DOMAINS": "invalid"}
"""The server's environment (but for the HTTP server's port): `gzip-file-as-resource` fetches
only from hosts under `invalid`, a name that never resolves (RFC 6761), so from none."""
STARTUP_SECONDS = 60.0
"""How long the HTTP server may take to listen (Node starts slowly on a loaded machine)."""
STARTS = 3
"""Attempts at starting the HTTP server, each on another free port (one may be taken between
choosing it and listening)."""


@dataclass(frozen=True)
class Everything:
    """One everything server to connect to: over stdio (`node`, a process per `MCPServer`) or
    over streamable HTTP (`url`, one process)."""

    transport: Transport
    node: Path
    url: str | None = None

    def server(self, *, wire: Path | None = None, **options: Unpack[MCPServerOptions]) -> MCPServer:
        """An `MCPServer` for this server (not entered). Over stdio, `wire` names a file that
        records every message the client sends, one JSON-RPC message a line."""
        if self.transport == "http":
            assert self.url is not None and wire is None, "only stdio records the wire"
            return MCPServer.http(self.url, **options)
        return stdio_server(self.node, wire=wire, **options)


def stdio_server(
    node: Path, *, wire: Path | None = None, **options: Unpack[MCPServerOptions]
) -> MCPServer:
    """The everything server over stdio, its stderr (a line at start) dropped; `wire`: see
    `Everything.server`."""
    errlog = _Dropped()
    if wire is None:
        return MCPServer.stdio(str(node), [str(INDEX), "stdio"], ENV, errlog=errlog, **options)
    # `tee` between the client and the server: what the client wrote, as the server read it.
    script = 'tee -a "$0" | exec "$1" "$2" stdio'
    args = ["-c", script, str(wire), str(node), str(INDEX)]
    return MCPServer.stdio("sh", args, ENV, errlog=errlog, **options)


class _Dropped(io.StringIO):
    """A stdio server's stderr: not the tests' business (the MCPServer keeps its end, to say
    why a server did not start)."""

    def write(self, text: str) -> int:
        return len(text)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextlib.contextmanager
def http_everything(node: Path) -> Iterator[str]:
    """The everything server over streamable HTTP, on a free port of 127.0.0.1, with `ENV` and
    its port for environment; yields its endpoint (`http://127.0.0.1:PORT/mcp`) once it listens,
    and stops it on leaving."""
    failures: list[str] = []
    for _ in range(STARTS):
        port = _free_port()
        with tempfile.TemporaryFile() as errors:
            process = subprocess.Popen(
                [str(node), "--require", str(LOOPBACK), str(INDEX), "streamableHttp"],
                cwd=JS,
                env={**ENV, "PORT": str(port)},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,  # a line per request: never read, never blocks
                stderr=errors,
            )
            try:
                if _listening(process, errors, port):
                    yield f"http://127.0.0.1:{port}/mcp"
                    return
            finally:
                _stop(process)
            errors.seek(0)
            failures.append(errors.read().decode(errors="replace")[-1000:])
            if "already in use" not in failures[-1]:
                break
    pytest.fail(f"the everything server did not start over HTTP: {failures}")


def _listening(process: subprocess.Popen[bytes], errors: Any, port: int) -> bool:
    """Whether `process` says it listens on `port` and accepts a connection there, before it
    exits or `STARTUP_SECONDS` pass."""
    said = f"listening on port {port}".encode()
    deadline = time.monotonic() + STARTUP_SECONDS
    while process.poll() is None and time.monotonic() < deadline:
        errors.seek(0)
        if said in errors.read():
            # Its own words, not another program's answer on a port it failed to take.
            with socket.create_connection(("127.0.0.1", port), timeout=5):
                return True
        time.sleep(0.05)
    return False


@pytest.fixture(scope="module", params=TRANSPORTS)
def everything(request: pytest.FixtureRequest, node: Path) -> Iterator[Everything]:
    """The everything server over each transport (see the module's docstring)."""
    if sys.platform == "win32":
        pytest.skip("the everything server's fixtures start processes through POSIX tools")
    if not INDEX.exists():  # a `tests/js/node_modules` from before the server was pinned
        unavailable(f"{INDEX.relative_to(JS)} is missing")
    transport: Transport = request.param
    if transport == "stdio":
        yield Everything("stdio", node)
        return
    with http_everything(node) as url:
        yield Everything("http", node, url)


@dataclass
class Entered:
    """An entered `MCPServer` of the everything server, and what it logged while entering."""

    server: MCPServer
    transport: Transport
    warnings: list[str] = field(default_factory=list)
    """The `agentforge_typed.mcp` warnings logged while it was entered (e.g. a tool skipped)."""


class _Records(logging.Handler):
    def __init__(self, into: list[str]) -> None:
        super().__init__(logging.WARNING)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        self.into.append(record.getMessage())


@contextlib.contextmanager
def logged_warnings(into: list[str]) -> Iterator[None]:
    """`agentforge_typed.mcp`'s warnings, appended to `into` while the block runs."""
    logger = logging.getLogger("agentforge_typed.mcp")
    handler = _Records(into)
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)


@pytest.fixture(scope="module")
def everything_mcp(everything: Everything) -> Iterator[Entered]:
    """One entered `MCPServer` of `everything`, shared by the module's tests."""
    warnings: list[str] = []
    with logged_warnings(warnings):
        server = everything.server().__enter__()
    try:
        yield Entered(server, everything.transport, warnings)
    finally:
        server.__exit__(None, None, None)


def skipped_tools(warnings: list[str]) -> dict[str, str]:
    """The tools that entering skipped, by name, with why (from its warnings)."""
    found = (re.search(r": tool '([^']+)' skipped: (.*)$", w) for w in warnings)
    return {m.group(1): m.group(2) for m in found if m is not None}
