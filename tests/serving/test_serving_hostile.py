"""Clients that lie, flood, nest, cancel without end or never read: the server answers what it
can, refuses the rest with an error, keeps its memory bounded and stays up for the next request.

Over stdio the CLI runs in a subprocess spoken to with raw lines; over HTTP the server runs on a
thread and is sent raw requests."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import httpx
import pytest
from serving_support import INITIALIZE, REFERENCE, ROOT, cli_env, http_thread, reference_tools

from agentforge_typed.serving import ToolServer
from agentforge_typed.serving._stdio import MAX_IN_FLIGHT, stdio_streams

MIB = 1024 * 1024


class RawStdio:
    """The CLI over stdio, spoken to line by line."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)

    def send(self, message: Any) -> None:
        data = message if isinstance(message, bytes) else json.dumps(message).encode()
        assert self.process.stdin is not None
        self.process.stdin.write(data + b"\n")
        self.process.stdin.flush()

    def receive(self, timeout: float = 20.0) -> dict[str, Any]:
        decoded: dict[str, Any] = json.loads(self.lines.get(timeout=timeout))
        return decoded

    def answer(self, request_id: Any, timeout: float = 20.0) -> dict[str, Any]:
        """The answer to `request_id`, skipping notifications."""
        deadline = time.monotonic() + timeout
        while True:
            message = self.receive(max(deadline - time.monotonic(), 0.01))
            if "id" in message and message["id"] == request_id and "method" not in message:
                return message

    def peak_memory(self) -> int:
        """The server process's peak resident memory, in bytes."""
        with open(f"/proc/{self.process.pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
        raise AssertionError("no VmHWM")


@contextmanager
def raw_stdio(*args: str) -> Iterator[RawStdio]:
    process = subprocess.Popen(
        [sys.executable, "-m", "agentforge_typed", "mcp", REFERENCE, *args],
        cwd=ROOT,
        env=cli_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    client = RawStdio(process)
    try:
        client.send(INITIALIZE)
        assert "result" in client.answer(0)
        client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        yield client
    finally:
        process.kill()
        process.wait()
        for stream in (process.stdin, process.stdout):
            assert stream is not None
            stream.close()


def alive(client: RawStdio, request_id: int = 999) -> None:
    """The server still answers a plain request."""
    client.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/list"})
    assert "tools" in client.answer(request_id)["result"]


pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")


def test_stdio_answers_malformed_messages_and_unknown_methods_and_stays_up() -> None:
    with raw_stdio() as client:
        client.send(b"{not json")
        assert client.receive()["error"]["code"] == -32700
        client.send({"id": 7, "hello": "there"})
        refused = client.receive()
        assert refused["id"] == 7 and refused["error"]["code"] == -32600
        client.send(b"[1, 2, 3]")
        assert client.receive()["error"]["code"] == -32600
        client.send({"jsonrpc": "2.0", "id": 8, "method": "tools/teleport", "params": {}})
        assert client.answer(8)["error"]["code"] == -32601
        client.send(
            {
                "jsonrpc": "2.0",
                "id": 9,
                "method": "tools/call",
                "params": {"name": "rm_rf", "arguments": {}},
            }
        )
        unknown = client.answer(9)["error"]
        assert unknown == {"code": -32602, "message": "Unknown tool: rm_rf"}
        alive(client)


@pytest.mark.slow
def test_stdio_refuses_a_100_mb_request_without_holding_it() -> None:
    with raw_stdio() as client:
        before = client.peak_memory()
        huge = {
            "jsonrpc": "2.0",
            "id": 10,
            "method": "tools/call",
            "params": {"name": "add", "arguments": {"a": 1, "b": 2, "pad": "x" * (100 * MIB)}},
        }
        started = time.monotonic()
        client.send(json.dumps(huge).encode())
        refused = client.receive(timeout=60)
        assert refused["error"]["code"] == -32600 and "too large" in refused["error"]["message"]
        alive(client)
        took = time.monotonic() - started
        grown = client.peak_memory() - before
    assert grown < 32 * MIB, f"the server grew by {grown / MIB:.0f} MiB"
    assert took < 30


def test_stdio_survives_deep_nesting() -> None:
    with raw_stdio() as client:
        for depth, request_id in ((100_000, 11), (150, 12)):
            nested = "[" * depth + "]" * depth
            line = (
                f'{{"jsonrpc":"2.0","id":{request_id},"method":"tools/call","params":'
                f'{{"name":"add","arguments":{{"a":{nested},"b":1}}}}}}'
            )
            client.send(line.encode())
            answer = client.receive()
            if "error" in answer:
                assert answer["error"]["code"] in (-32700, -32600, -32602)
            else:
                assert answer["id"] == request_id and answer["result"]["isError"] is True
        alive(client)


def test_stdio_cancellation_storms_cancel_the_call_and_nothing_else() -> None:
    with raw_stdio() as client:
        client.send(
            {
                "jsonrpc": "2.0",
                "id": 20,
                "method": "tools/call",
                "params": {"name": "slow", "arguments": {"seconds": 30}},
            }
        )
        time.sleep(0.3)
        for request_id in range(2000):
            client.send(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/cancelled",
                    "params": {"requestId": request_id + 1000, "reason": "storm"},
                }
            )
        client.send(
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 20}}
        )
        started = time.monotonic()
        alive(client, 21)
        # The cancelled call is never answered, and the server keeps serving at once.
        assert time.monotonic() - started < 10
        client.send(
            {
                "jsonrpc": "2.0",
                "id": 22,
                "method": "tools/call",
                "params": {"name": "add", "arguments": {"a": 1, "b": 1}},
            }
        )
        assert client.answer(22)["result"]["structuredContent"] == {"total": 2, "parts": [1, 1]}


async def test_a_client_that_never_reads_is_left_after_the_write_timeout() -> None:
    """Answers pile up in the pipe until it is full; reading stops once `MAX_IN_FLIGHT` wait
    (backpressure), and the session ends once one answer waited `write_timeout` seconds."""
    client_reads, server_writes = os.pipe()
    server_reads, client_writes = os.pipe()
    server = ToolServer(reference_tools())
    # Each request ~4 KB: the flood is far more than the pipes and the reader can hold.
    padding = {"_meta": {"pad": "x" * 4000}}
    requests = [
        json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/list", "params": padding}).encode()
        + b"\n"
        for n in range(1, 5 * MAX_IN_FLIGHT)
    ]
    sent: list[int] = []

    def flood() -> None:
        os.write(client_writes, json.dumps(INITIALIZE).encode() + b"\n")
        os.write(client_writes, b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        for request in requests:
            try:
                os.write(client_writes, request)
            except OSError:
                return
            sent.append(1)

    async def serve() -> None:
        async with stdio_streams(
            server.max_request_bytes, write_timeout=1.0, stdin=server_reads, stdout=server_writes
        ) as (read, write):
            await server.sdk_server.run(
                read, write, server.sdk_server.create_initialization_options()
            )

    os.set_blocking(client_writes, True)
    flooder = threading.Thread(target=flood, daemon=True)
    flooder.start()
    try:
        with anyio.fail_after(20):
            with pytest.raises(BaseException) as ended:
                await serve()
        found = ended.value
        while hasattr(found, "exceptions"):  # an exception group (3.11+, or its backport)
            found = found.exceptions[0]
        assert isinstance(found, ConnectionError) and "read nothing for 1 seconds" in str(found)
    finally:
        for fd in (client_reads, server_writes, server_reads, client_writes):
            os.close(fd)
        flooder.join(timeout=5)
    # It stopped reading long before the flood was over.
    assert len(sent) < len(requests)


# -- HTTP ----------------------------------------------------------------------------------------

HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def _json_rpc(response: httpx.Response) -> dict[str, Any]:
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
        decoded: dict[str, Any] = json.loads(data[-1])
        return decoded
    decoded = response.json()
    return decoded


@contextmanager
def session(url: str) -> Iterator[tuple[httpx.Client, dict[str, str]]]:
    with httpx.Client(timeout=30) as http:
        opened = http.post(url, json=INITIALIZE, headers=HEADERS)
        assert opened.status_code == 200
        headers = {
            **HEADERS,
            "mcp-session-id": opened.headers["mcp-session-id"],
            "mcp-protocol-version": "2025-11-25",
        }
        http.post(
            url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers
        )
        yield http, headers


def test_http_answers_malformed_messages_and_unknown_methods_and_stays_up() -> None:
    with http_thread(ToolServer(reference_tools())) as url, session(url) as (http, headers):
        garbage = http.post(url, content=b"{not json", headers=headers)
        assert garbage.status_code == 400 and garbage.json()["error"]["code"] == -32700
        unknown = http.post(
            url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/teleport"}, headers=headers
        )
        assert _json_rpc(unknown)["error"]["code"] == -32601
        unlisted = http.post(
            url,
            json={
                "jsonrpc": "2.0",
                "id": 3,
                "method": "tools/call",
                "params": {"name": "rm_rf", "arguments": {}},
            },
            headers=headers,
        )
        assert _json_rpc(unlisted)["error"]["message"] == "Unknown tool: rm_rf"
        listed = http.post(
            url, json={"jsonrpc": "2.0", "id": 4, "method": "tools/list"}, headers=headers
        )
        assert "tools" in _json_rpc(listed)["result"]


@pytest.mark.slow
def test_http_refuses_a_100_mb_body_as_it_streams_in() -> None:
    def body() -> Iterator[bytes]:
        yield b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"add","arguments":{"pad":"'
        chunk = b"x" * MIB
        for _ in range(100):
            yield chunk
        yield b'"}}}'

    with http_thread(ToolServer(reference_tools())) as url, session(url) as (http, headers):
        started = time.monotonic()
        try:
            refused = http.post(url, content=body(), headers=headers)
        except httpx.TransportError:  # the server may close before the client is done sending
            pass
        else:
            assert refused.status_code == 413
        assert time.monotonic() - started < 30
        listed = http.post(
            url, json={"jsonrpc": "2.0", "id": 6, "method": "tools/list"}, headers=headers
        )
        assert "tools" in _json_rpc(listed)["result"]
