"""Starting a `ToolServer` for the tests: over HTTP on a thread of its own, or as the CLI in a
subprocess (stdio or HTTP), with the reference tools of `fixtures/mcp_reference_tools.py`."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
from mcp import StdioServerParameters

from agentforge_typed.serving import ToolServer

ROOT = Path(__file__).parent.parent
REFERENCE = "tests/fixtures/mcp_reference_tools.py:tools"
"""The CLI target serving the conformance suite's reference tools (and a few more)."""
STARTUP_SECONDS = 30.0


def cli_env() -> dict[str, str]:
    """The environment a CLI subprocess runs in: this checkout first on the path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def stdio_parameters(*args: str, target: str = REFERENCE) -> StdioServerParameters:
    """What the SDK's stdio client starts: `agentforge-typed mcp TARGET ARGS`."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "agentforge_typed", "mcp", target, *args],
        env=cli_env(),
        cwd=str(ROOT),
    )


@contextlib.contextmanager
def http_subprocess(
    *args: str, target: str = REFERENCE, env: dict[str, str] | None = None
) -> Iterator[str]:
    """`agentforge-typed mcp TARGET --http --port 0 ARGS` in a subprocess; yields its URL."""
    with http_endpoint(target, *args, env=env) as endpoint:
        assert isinstance(endpoint, HttpEndpoint)
        yield endpoint.url


@contextlib.contextmanager
def http_thread(server: ToolServer[Any], **options: Any) -> Iterator[str]:
    """`server` served over HTTP on 127.0.0.1 (a free port) by a thread of its own; yields the
    URL of its endpoint."""
    ready: list[str] = []
    started = threading.Event()
    stop = threading.Event()
    failed: list[BaseException] = []

    async def main() -> None:
        async with anyio.create_task_group() as tasks:

            def on_ready(url: str) -> None:
                ready.append(url)
                started.set()

            tasks.start_soon(lambda: server.aserve_http(port=0, on_ready=on_ready, **options))
            await anyio.to_thread.run_sync(stop.wait)
            tasks.cancel_scope.cancel()

    def run() -> None:
        try:
            anyio.run(main)
        except BaseException as exc:  # reported by the test that started it
            failed.append(exc)
            started.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        assert started.wait(STARTUP_SECONDS), "the HTTP server did not start"
        if failed:
            raise failed[0]
        yield ready[0]
    finally:
        stop.set()
        thread.join(timeout=10)


def reference_tools() -> list[Any]:
    """The reference tools, imported as the CLI imports them."""
    sys.path.insert(0, str(ROOT / "tests" / "fixtures"))
    try:
        import mcp_reference_tools
    finally:
        sys.path.pop(0)
    return list(mcp_reference_tools.tools)


def reference_module() -> Any:
    reference_tools()
    return sys.modules["mcp_reference_tools"]


# -- endpoints: one served target, over one transport, as the conformance axis builds it ----------


class Endpoint:
    """A target served over one transport: sessions of the official SDK client, and raw
    requests, each on a session of its own."""

    def client(self, **options: Any) -> Any:
        """An SDK `Client` on a new session (an async context manager)."""
        raise NotImplementedError

    def exchange(self, body: bytes) -> tuple[int, dict[str, Any] | None]:
        """Send `body` as one request on a new initialized session: the HTTP status (200 for
        stdio) and the JSON-RPC answer, if any."""
        raise NotImplementedError

    def logs(self) -> str:
        """What the server wrote to stderr so far."""
        raise NotImplementedError


class StdioEndpoint(Endpoint):
    """Each session is a process of its own: the CLI over stdio."""

    def __init__(self, target: str, args: tuple[str, ...], env: dict[str, str]) -> None:
        self.target, self.args, self.env = target, args, env
        self._errors = tempfile.TemporaryFile("w+")

    def client(self, **options: Any) -> Any:
        from mcp import Client

        parameters = stdio_parameters(*self.args, target=self.target)
        parameters.env = {**(parameters.env or {}), **self.env}
        return Client(_logged(parameters, self._errors), **options)

    def exchange(self, body: bytes) -> tuple[int, dict[str, Any] | None]:
        process = subprocess.Popen(
            [sys.executable, "-m", "agentforge_typed", "mcp", self.target, *self.args],
            cwd=ROOT,
            env={**cli_env(), **self.env},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._errors,
        )
        assert process.stdin is not None and process.stdout is not None
        try:
            process.stdin.write(json.dumps(INITIALIZE).encode() + b"\n")
            process.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
            process.stdin.write(body + b"\n")
            process.stdin.flush()
            # Stdin stays open until the answer comes: at its end the server stops, and the
            # SDK cancels what is still running.
            while line := process.stdout.readline():
                answer: dict[str, Any] = json.loads(line)
                if "method" not in answer and answer.get("id") != INITIALIZE["id"]:
                    return 200, answer
            return 200, None
        finally:
            process.kill()
            process.wait()
            process.stdin.close()
            process.stdout.close()

    def logs(self) -> str:
        self._errors.seek(0)
        return self._errors.read()

    def close(self) -> None:
        self._errors.close()


@contextlib.asynccontextmanager
async def _logged(parameters: Any, errors: Any) -> AsyncIterator[Any]:
    """The SDK's stdio transport, the server's stderr written to `errors` (a file)."""
    from mcp.client.stdio import stdio_client

    async with stdio_client(parameters, errlog=errors) as streams:
        yield streams


class HttpEndpoint(Endpoint):
    """One server process for every session: the CLI over streamable HTTP."""

    def __init__(self, url: str, errors: Any, headers: dict[str, str]) -> None:
        self.url, self._errors, self.headers = url, errors, headers

    @contextlib.asynccontextmanager
    async def client(self, **options: Any) -> Any:
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        async with httpx2.AsyncClient(headers=self.headers, timeout=60) as http:
            async with Client(
                streamable_http_client(self.url, http_client=http), **options
            ) as client:
                yield client

    def exchange(self, body: bytes) -> tuple[int, dict[str, Any] | None]:
        import httpx

        headers = {"accept": "application/json, text/event-stream", **self.headers}
        with httpx.Client(timeout=60, headers=headers) as http:
            opened = http.post(self.url, json=INITIALIZE)
            if opened.status_code != 200:
                return opened.status_code, None
            session = {
                "mcp-session-id": opened.headers["mcp-session-id"],
                "mcp-protocol-version": "2025-11-25",
                "content-type": "application/json",
            }
            http.post(
                self.url,
                json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                headers=session,
            )
            answered = http.post(self.url, content=body, headers=session)
        if answered.headers.get("content-type", "").startswith("text/event-stream"):
            data = [line[5:] for line in answered.text.splitlines() if line.startswith("data:")]
            return answered.status_code, json.loads(data[-1]) if data else None
        try:
            return answered.status_code, answered.json()
        except ValueError:
            return answered.status_code, None

    def logs(self) -> str:
        self._errors.seek(0)
        return str(self._errors.read())


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "conformance", "version": "1"},
    },
}


@contextlib.contextmanager
def stdio_endpoint(
    target: str, *args: str, env: dict[str, str] | None = None
) -> Iterator[Endpoint]:
    """`agentforge-typed mcp TARGET ARGS` over stdio, a process per session."""
    endpoint = StdioEndpoint(target, args, env or {})
    try:
        yield endpoint
    finally:
        endpoint.close()


@contextlib.contextmanager
def http_endpoint(target: str, *args: str, env: dict[str, str] | None = None) -> Iterator[Endpoint]:
    """`agentforge-typed mcp TARGET --http ARGS`, one process for the block; with `--token-env`
    in `args`, its clients send the token."""
    env = env or {}
    headers: dict[str, str] = {}
    if "--token-env" in args:
        headers["authorization"] = f"Bearer {env[args[args.index('--token-env') + 1]]}"
    with tempfile.TemporaryFile("w+") as errors:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "agentforge_typed",
                "mcp",
                target,
                "--http",
                "--port",
                "0",
                *args,
            ],
            cwd=ROOT,
            env={**cli_env(), **env},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=errors,
            text=True,
        )
        try:
            yield HttpEndpoint(_url_in(errors, process), errors, headers)
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _url_in(errors: Any, process: subprocess.Popen[str]) -> str:
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline and process.poll() is None:
        errors.seek(0)
        found = re.search(r"at (http://\S+/mcp)", errors.read())
        if found:
            return found.group(1)
        time.sleep(0.05)
    errors.seek(0)
    raise AssertionError(f"the server announced no URL: {errors.read()}")
