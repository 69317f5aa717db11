"""Bounded: everything read from a server or a tool has a documented cap, and one byte (or one
item) over it is a clear error or a cut with a marker, never memory that grows with the input.

Each cap is sent exactly its size (accepted whole) and one over (refused or cut). Servers are
real (`http.server` on a thread, the MCP SDK's server) where the framing matters: a body with a
`Content-Length`, chunked, gzip-encoded (the cap counts decoded bytes), or endless.
"""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from conformance import assert_covers
from openai_support import call

from agentforge_typed import ChatRequest, ModelError, UserMessage
from agentforge_typed.providers._base import HttpChatModel
from agentforge_typed.providers.anthropic import AnthropicChatModel
from agentforge_typed.providers.gemini import GeminiChatModel
from agentforge_typed.providers.openai import OpenAIChatModel
from agentforge_typed.providers.openai_responses import OpenAIResponsesModel

REQUEST = ChatRequest(messages=[UserMessage(content="hi")])
GIVE_UP = 10.0
"""Seconds after which an endless body stops by itself, so that a missing cap cannot hang."""

# --- the wire: one real HTTP server, answering what the test sets ------------------------------

MODELS: dict[str, Callable[..., HttpChatModel]] = {
    "openai": OpenAIChatModel,
    "responses": OpenAIResponsesModel,
    "anthropic": AnthropicChatModel,
    "gemini": GeminiChatModel,
}
"""Each wire core (`conformance.wire_cores()`), by the public model that speaks it."""

ANSWERS: dict[str, bytes] = {
    "openai": b'{"id":"chatcmpl-1","object":"chat.completion","model":"m","choices":[{"index":0,'
    b'"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}',
    "responses": b'{"id":"resp_1","object":"response","status":"completed","model":"m",'
    b'"output":[{"type":"message","id":"msg_1","role":"assistant","status":"completed",'
    b'"content":[{"type":"output_text","text":"hi","annotations":[]}]}]}',
    "anthropic": b'{"id":"msg_1","type":"message","role":"assistant","model":"m","content":'
    b'[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":1,'
    b'"output_tokens":1}}',
    "gemini": b'{"candidates":[{"content":{"role":"model","parts":[{"text":"hi"}]},'
    b'"finishReason":"STOP"}]}',
}
"""A whole answer as each vendor sends it (the model's text: `"hi"`)."""

STREAM_PREFIXES: dict[str, bytes] = {
    "openai": b'data: {"choices":[{"index":0,"delta":{"content":"',
    "responses": b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta",'
    b'"output_index":0,"content_index":0,"delta":"',
    "anthropic": b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    b'"delta":{"type":"text_delta","text":"',
    "gemini": b'data: {"candidates":[{"content":{"parts":[{"text":"',
}
"""The start of a text delta's event in each vendor's stream: a line that goes on and on."""


class _Answering(BaseHTTPRequestHandler):
    """Answers every POST with the server's `body`, framed as its `framing` says."""

    server: _Server

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        server = self.server
        self.send_response(server.status)
        self.send_header("content-type", server.content_type)
        body = server.body
        if server.framing == "length":
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if server.framing == "gzip":
            self.send_header("content-encoding", "gzip")
            body = gzip.compress(body)
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        try:
            if server.framing == "endless":
                started = time.monotonic()
                self._chunk(body)
                while time.monotonic() - started < GIVE_UP:
                    self._chunk(server.filler)
            else:
                for start in range(0, len(body), 4096):
                    self._chunk(body[start : start + 4096])
            self.wfile.write(b"0\r\n\r\n")
        except OSError:  # the client stopped reading: what a cap does
            pass

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    status = 200
    content_type = "application/json"
    body = b""
    framing = "length"
    filler = b""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def answer(
        self,
        body: bytes,
        framing: str,
        *,
        status: int = 200,
        content_type: str = "application/json",
        filler: bytes = b" " * 65536,
    ) -> None:
        """Answer the next requests with `body`, framed as `framing` says (`"endless"`: then
        `filler` over and over)."""
        self.body, self.framing, self.status = body, framing, status
        self.content_type, self.filler = content_type, filler


@pytest.fixture(scope="module")
def server() -> Iterator[_Server]:
    served = _Server(("127.0.0.1", 0), _Answering)
    thread = threading.Thread(target=served.serve_forever, daemon=True)
    thread.start()
    yield served
    served.shutdown()
    served.server_close()


def _model(wire: str, server: _Server, **options: Any) -> HttpChatModel:
    return MODELS[wire]("m", api_key="sk-test", base_url=server.url, max_retries=0, **options)


async def _refused(model: HttpChatModel, mode: str, match: str) -> ModelError:
    """The `ModelError` a call raises, well before an endless server would give up."""
    started = time.monotonic()
    with pytest.raises(ModelError, match=match) as caught:
        await call(model, REQUEST, mode)
    assert time.monotonic() - started < GIVE_UP / 2
    return caught.value


FRAMINGS = ("length", "chunked", "gzip")


@pytest.mark.parametrize("framing", FRAMINGS)
@pytest.mark.parametrize("mode", ["chat", "achat"])
@pytest.mark.parametrize("wire", sorted(MODELS))
async def test_a_blocking_body_one_byte_over_max_response_bytes_is_refused(
    server: _Server, wire: str, mode: str, framing: str
) -> None:
    server.answer(ANSWERS[wire], framing)
    size = len(server.body)
    exact = _model(wire, server, max_response_bytes=size)
    assert (await call(exact, REQUEST, mode)).ai_message.text == "hi"
    over = _model(wire, server, max_response_bytes=size - 1)
    with pytest.raises(ModelError) as caught:
        await call(over, REQUEST, mode)
    seen = str(size) if framing == "length" else f"more than {size - 1}"
    assert str(caught.value) == (
        f"{over._http.provider} answered with a body of {seen} bytes, over the limit of "
        f"max_response_bytes={size - 1}; pass a larger max_response_bytes= to the model to "
        "accept it"
    )
    assert caught.value.status_code == 200


@pytest.mark.parametrize("mode", ["chat", "achat", "stream", "astream"])
@pytest.mark.parametrize("wire", sorted(MODELS))
async def test_an_endless_body_ends_at_the_cap(server: _Server, wire: str, mode: str) -> None:
    """A body that never ends (a JSON document answering a stream request, too) stops being read
    at the cap: the call ends at once, not after the server gives up."""
    server.answer(b"{" + b" " * 100, "endless")
    model = _model(wire, server, max_response_bytes=1 << 20)
    await _refused(model, mode, r"over the limit of max_response_bytes=1048576")


@pytest.mark.parametrize("mode", ["chat", "achat"])
@pytest.mark.parametrize("wire", sorted(MODELS))
async def test_an_error_body_over_the_cap_is_read_up_to_it(
    server: _Server, wire: str, mode: str
) -> None:
    """An error answer keeps its status and message; what lies past the cap is never read."""
    server.answer(
        b'{"error": {"message": "bad request", "type": "invalid"}}', "endless", status=400
    )
    model = _model(wire, server, max_response_bytes=1 << 16)
    error = await _refused(model, mode, "API error 400")
    assert (error.status_code, error.message.endswith(": bad request")) == (400, True)


@pytest.mark.parametrize("mode", ["stream", "astream"])
@pytest.mark.parametrize("wire", sorted(MODELS))
async def test_a_stream_line_one_byte_over_max_line_length_is_refused(
    server: _Server, wire: str, mode: str
) -> None:
    limit = 10_000
    exact = b":" + b"x" * (limit - 1) + b"\n\n"  # a comment line of exactly `limit` characters
    server.answer(exact, "chunked", content_type="text/event-stream")
    with pytest.raises(ModelError) as caught:  # no events at all: cut off, but not too long
        await call(_model(wire, server, max_line_length=limit), REQUEST, mode)
    assert "longer than the limit" not in str(caught.value)
    server.answer(b":" + b"x" * limit + b"\n\n", "chunked", content_type="text/event-stream")
    with pytest.raises(ModelError, match=f"line longer than the limit of {limit} characters"):
        await call(_model(wire, server, max_line_length=limit), REQUEST, mode)


@pytest.mark.parametrize("mode", ["stream", "astream"])
@pytest.mark.parametrize("wire", sorted(MODELS))
async def test_an_endless_stream_line_ends_at_the_cap(
    server: _Server, wire: str, mode: str
) -> None:
    stream = "text/event-stream"
    server.answer(STREAM_PREFIXES[wire], "endless", content_type=stream, filler=b"x" * 4096)
    limit = 1 << 20
    model = _model(wire, server, max_line_length=limit)
    await _refused(model, mode, f"line longer than the limit of {limit} characters")


WIRE_BOUNDS = {"openai", "responses", "anthropic", "gemini"}
"""The wire cores whose blocking bodies, endless bodies, error bodies and stream lines the tests
above send past their caps (`MODELS` names one model per core)."""


def test_covers_every_surface() -> None:
    assert set(MODELS) == WIRE_BOUNDS
    assert_covers("bounded", "wire", WIRE_BOUNDS)
