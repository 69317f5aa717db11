"""The UI's streams over real sockets (uvicorn on a thread): a client that leaves mid-run ends
the run and leaves nothing held (the model's admission slot, an MCP server's request), one that
stops reading is given up after `send_timeout`, and a thousand slow readers all get their
answers without the server's memory growing with what they have not read."""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
import ui_support
from http_server import Reply, ScriptedServer

from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatRequest,
    ChatRequestParameters,
    ChatResponse,
    FinishReason,
    FunctionModel,
    MCPServer,
    OpenAIChatModel,
    ResponseComplete,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolResultMessage,
    ToolService,
    UserMessage,
)
from agentforge_typed.ui import create_app

FIXTURE_SERVER = str(Path(__file__).parents[1] / "mcp_fixture_server.py")


def body(thread: str, text: str = "go") -> dict[str, Any]:
    return {
        "threadId": thread,
        "runId": "r",
        "messages": [{"id": "u", "role": "user", "content": text}],
    }


def running(app: Any) -> int:
    owner = next(r.endpoint.__self__ for r in app.routes if r.path == "/ag-ui")
    return int(owner.running)


def eventually(check: Any, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


async def read_until(response: httpx.Response, kind: str) -> None:
    async for line in response.aiter_lines():
        if line.startswith("data:") and json.loads(line[5:])["type"] == kind:
            return
    raise AssertionError(f"no {kind}")


def test_a_client_that_leaves_mid_call_cancels_the_mcp_request(tmp_path: Path) -> None:
    marker = tmp_path / "marker"

    def hang(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        if isinstance(messages[-1], ToolResultMessage):
            return AiMessage(text="finished")
        arguments = json.dumps({"marker": str(marker)})
        return AiMessage(tool_calls=[ToolCall(id="h", name="hang", arguments=arguments)])

    with tempfile.TemporaryFile("w+") as errlog:
        with MCPServer.stdio(sys.executable, [FIXTURE_SERVER], errlog=errlog) as mcp:
            app = create_app(ToolService([mcp]), FunctionModel(hang))
            with ui_support.served(app) as url:

                async def leave() -> None:
                    async with httpx.AsyncClient(base_url=url, timeout=30) as client:
                        async with client.stream("POST", "/ag-ui", json=body("t1")) as response:
                            await read_until(response, "TOOL_CALL_END")
                            await asyncio.to_thread(
                                eventually, lambda: marker.exists() and marker.read_text() != ""
                            )
                    # Closed here, mid-call.

                asyncio.run(leave())
                eventually(lambda: marker.read_text() == "cancelled")
                eventually(lambda: running(app) == 0)


def _words(count: int, delay: float = 0.0) -> Reply:
    """An OpenAI-compatible stream of `count` words, `delay` seconds apart."""
    word = {"choices": [{"index": 0, "delta": {"content": "word "}}]}
    done = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    return Reply.sse([*[word] * count, done], done=True, delay=delay)


@pytest.fixture()
def dripping(http_server: ScriptedServer) -> str:
    """An OpenAI-compatible server: its first answer drips a word a second for a minute, the
    others come at once."""
    http_server.route("/v1/chat/completions", _words(60, delay=1.0), _words(1))
    return f"{http_server.url}/v1"


def test_a_client_that_leaves_mid_stream_gives_the_model_s_slot_back(dripping: str) -> None:
    model = OpenAIChatModel("m", base_url=dripping, api_key="k", max_concurrent_requests=1)
    app = create_app(ToolService(), model)
    with ui_support.served(app) as url:

        async def main() -> None:
            async with httpx.AsyncClient(base_url=url, timeout=30) as client:
                async with client.stream("POST", "/ag-ui", json=body("t1")) as response:
                    await read_until(response, "TEXT_MESSAGE_CONTENT")
                # The only slot is the first run's until it ends: the second run answers only
                # if leaving ended it.
                started = time.monotonic()
                second = await client.post("/ag-ui", json=body("t2"))
                assert time.monotonic() - started < 15
                assert ui_support.sse(second.text)[-1]["type"] == "RUN_FINISHED"

        asyncio.run(main())
        eventually(lambda: running(app) == 0)


class _Flood(ui_support.StreamOnly):
    """A model answering with `size` bytes of text in 64 KiB deltas, noting when its stream is
    closed."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.closed = threading.Event()

    async def astream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        piece = "x" * 65536
        try:
            for _ in range(self.size // len(piece)):
                yield TextDelta(text=piece)
            message = AiMessage(text=piece * (self.size // len(piece)))
            yield ResponseComplete(
                response=ChatResponse(ai_message=message, finish_reason=FinishReason.STOP)
            )
        finally:
            self.closed.set()


def test_a_client_that_reads_nothing_is_given_up_after_send_timeout() -> None:
    model = _Flood(64 * 1024 * 1024)
    app = create_app(ToolService(), model, send_timeout=1.0)
    with ui_support.served(app) as url:
        port = int(url.rsplit(":", 1)[1])
        payload = json.dumps(body("t1")).encode()
        with socket.create_connection(("127.0.0.1", port)) as stalled:
            stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            stalled.sendall(
                b"POST /ag-ui HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n"
                + f"content-length: {len(payload)}\r\n\r\n".encode()
                + payload
            )
            started = time.monotonic()
            assert model.closed.wait(30), "the run went on for a reader that reads nothing"
            assert time.monotonic() - started < 30
            eventually(lambda: running(app) == 0)


class _Lazy(ui_support.StreamOnly):
    """A model streaming `size` bytes of text in 4 KiB deltas, each made when the loop asks for
    it, counting the bytes asked for and the streams closed."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.pulled: dict[str, int] = {}
        self.closed = 0

    async def astream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        said = request.messages[-1]
        assert isinstance(said, UserMessage)
        key = said.text
        piece = "z" * 4096
        self.pulled[key] = 0
        try:
            for _ in range(self.size // len(piece)):
                self.pulled[key] += len(piece)
                yield TextDelta(text=piece)
            message = AiMessage(text=piece * (self.size // len(piece)))
            yield ResponseComplete(
                response=ChatResponse(ai_message=message, finish_reason=FinishReason.STOP)
            )
        finally:
            self.closed += 1


@pytest.mark.slow
def test_a_thousand_slow_readers_hold_the_runs_back_and_leaving_ends_them() -> None:
    # Each answer is 4 MiB; a reader that reads nothing holds its run back once the buffers
    # between them (the socket's, uvicorn's, the stream's four chunks) are full: what the model
    # made for it is bounded by those (about 0.5 to 0.6 MiB here, with the kernel's), not by the
    # answer.
    readers, size = 1000, 4 * 1024 * 1024
    model = _Lazy(size)
    app = create_app(ToolService(), model, send_timeout=600)
    with ui_support.served(app) as url:
        port = int(url.rsplit(":", 1)[1])
        sockets = []
        try:
            for index in range(readers):
                stalled = socket.socket()
                stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                stalled.connect(("127.0.0.1", port))
                payload = json.dumps(body(f"t{index}", f"reader {index}")).encode()
                stalled.sendall(
                    b"POST /ag-ui HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    b"content-type: application/json\r\n"
                    + f"content-length: {len(payload)}\r\n\r\n".encode()
                    + payload
                )
                sockets.append(stalled)
            eventually(lambda: len(model.pulled) == readers, 120)
            eventually(lambda: running(app) == readers, 120)
            time.sleep(2)  # time enough to fill every buffer
            most = max(model.pulled.values())
            assert most < size / 2, (
                f"a run made {most:,} of {size:,} bytes for a reader that reads nothing"
            )
            # One reader reads its answer whole while the others stall.
            sockets[0].settimeout(60)
            received = b""
            while (
                not received.endswith(b'"RUN_FINISHED"'.join([b"", b""]))
                and b"RUN_FINISHED" not in received[-4096:]
            ):
                chunk = sockets[0].recv(65536)
                assert chunk, "the connection ended before the run"
                received += chunk
            assert received.count(b"z") >= 2 * size  # its deltas, and the message's seal
        finally:
            for stalled in sockets:
                stalled.close()
        eventually(lambda: running(app) == 0, 120)
    assert model.closed == readers


async def test_a_client_gone_before_its_run_started_leaves_no_run_counted() -> None:
    # The request read, then at once the disconnect: the run may be ended before it began.
    app = create_app(ui_support.service(), ui_support.model())
    payload = json.dumps(body("t1")).encode()
    messages: list[dict[str, Any]] = [
        {"type": "http.request", "body": payload, "more_body": False},
        {"type": "http.disconnect"},
    ]

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: Any) -> None:
        pass

    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/ag-ui",
        "raw_path": b"/ag-ui",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json")],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 2),
    }
    for _ in range(20):
        messages[:] = [
            {"type": "http.request", "body": payload, "more_body": False},
            {"type": "http.disconnect"},
        ]
        await app(scope, receive, send)
    assert running(app) == 0
