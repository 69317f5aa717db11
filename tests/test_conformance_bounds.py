"""Bounded: everything read from a server or a tool has a documented cap, and one byte (or one
item) over it is a clear error or a cut with a marker, never memory that grows with the input.

Each cap is sent exactly its size (accepted whole) and one over (refused or cut). Servers are
real (`http.server` on a thread, the MCP SDK's server) where the framing matters: a body with a
`Content-Length`, chunked, gzip-encoded (the cap counts decoded bytes), or endless.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
import socket
import threading
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from conformance import assert_covers
from mcp.server.lowlevel import Server
from mcp.types import CallToolResult, ListToolsResult, TextContent, Tool
from mcp.types import ImageContent as MCPImage
from mcp_memory import in_memory
from openai_support import call
from typing_extensions import Unpack

import agentforge_typed as af
from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatRequest,
    ChatRequestParameters,
    FunctionModel,
    HttpTool,
    ImageContent,
    MCPServer,
    ModelError,
    ReturnBehavior,
    SchemaTool,
    ToolCall,
    ToolContext,
    ToolExecutionResult,
    ToolResultMessage,
    ToolService,
    ToolSpecification,
    UserMessage,
    tool,
)
from agentforge_typed import TextContent as ContentText
from agentforge_typed.providers._base import HttpChatModel
from agentforge_typed.providers.anthropic import AnthropicChatModel
from agentforge_typed.providers.gemini import GeminiChatModel
from agentforge_typed.providers.openai import OpenAIChatModel
from agentforge_typed.providers.openai_responses import OpenAIResponsesModel
from agentforge_typed.tools import DEFAULT_MAX_RESULT_CHARS, MCPServerOptions
from agentforge_typed.tools._budget import MAX_CONTENT_BYTES, cut_text

MCP_SDK_1 = version("mcp").startswith("1.")

REQUEST = ChatRequest(messages=[UserMessage(content="hi")])
FIXTURES = Path(__file__).parent / "fixtures"
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
        if server.framing == "dripped headers":
            self._drip(b"HTTP/1.1 200 OK\r\n" + b"x-filler: 1\r\n" * 1000 + b"\r\n")
            return
        self.send_response(server.status)
        self.send_header("content-type", server.content_type)
        body = server.body
        if server.framing == "length":
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if server.framing in ("gzip", "gzipped"):
            self.send_header("content-encoding", "gzip")
            if server.framing == "gzip":
                body = gzip.compress(body)
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        try:
            if server.framing == "endless":
                started = time.monotonic()
                self._chunk(body)
                while time.monotonic() - started < GIVE_UP:
                    self._chunk(server.filler)
            elif server.framing == "gzipped":  # compressed already, sent whole
                self._chunk(body)
            else:
                for start in range(0, len(body), 4096):
                    self._chunk(body[start : start + 4096])
            self.wfile.write(b"0\r\n\r\n")
        except OSError:  # the client stopped reading: what a cap does
            pass

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _drip(self, data: bytes) -> None:
        """`data` a byte every 0.05 s (each well within any read timeout), until the client goes
        or `GIVE_UP`."""
        started = time.monotonic()
        try:
            for byte in data:
                if time.monotonic() - started > GIVE_UP:
                    return
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(0.05)
        except OSError:  # the client went: its deadline
            pass

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


STREAMS: dict[str, str] = {
    "openai": "openai/reasoning_text.sse",
    "responses": "openai_responses/reasoning_text.sse",
    "anthropic": "anthropic/text_two_tools.sse",
    "gemini": "gemini/text_signed.sse",
}
"""A whole recorded stream of each vendor (`tests/fixtures/`)."""


@pytest.mark.parametrize("mode", ["stream", "astream"])
@pytest.mark.parametrize("wire", sorted(MODELS))
async def test_a_stream_one_byte_over_max_stream_bytes_is_refused(
    server: _Server, wire: str, mode: str
) -> None:
    body = (FIXTURES / STREAMS[wire]).read_bytes()
    server.answer(body, "chunked", content_type="text/event-stream")
    size = len(body)
    whole = await call(_model(wire, server, max_stream_bytes=size), REQUEST, mode)
    assert whole.finish_reason is not None
    with pytest.raises(ModelError) as caught:
        await call(_model(wire, server, max_stream_bytes=size - 1), REQUEST, mode)
    assert str(caught.value) == (
        f"{MODELS[wire]('m', api_key='k')._http.provider} sent a stream of more than "
        f"{size - 1} bytes, over the limit of max_stream_bytes={size - 1}; pass a larger "
        "max_stream_bytes= to the model to accept it"
    )


@pytest.mark.parametrize("mode", ["stream", "astream"])
@pytest.mark.parametrize("wire", sorted(MODELS))
async def test_an_endless_stream_of_keep_alives_ends_at_the_cap(
    server: _Server, wire: str, mode: str
) -> None:
    """Short lines pass `max_line_length`, and a read timeout never trips: only the stream's
    total stops a server that sends keep-alives forever."""
    stream = "text/event-stream"
    server.answer(b": ping\n\n", "endless", content_type=stream, filler=b": ping\n\n" * 512)
    model = _model(wire, server, max_stream_bytes=1 << 20)
    await _refused(model, mode, r"over the limit of max_stream_bytes=1048576")


# --- the tools: one result budget, whatever backs the tool -----------------------------------

BUDGET = 1000
"""The budget the tests set; the text one character over it is cut to exactly this much."""
EXACT = "x" * (BUDGET - 1) + "y"
OVER = "x" * BUDGET + "y"
CUT = "x" * 488 + "… [26 characters cut] …" + "x" * 486 + "y"
"""What the model reads of `OVER`: 998 characters (room was kept for a 4-digit count)."""


def _check_cut(exact: ToolExecutionResult, over: ToolExecutionResult) -> None:
    """A text of the budget is read whole; one character more keeps its head and tail around
    the marker, at most the budget in all, and the whole text stays for the program."""
    assert (exact.text, exact.full_text, exact.is_error) == (EXACT, None, False)
    assert (over.text, over.full_text, over.is_error) == (CUT, OVER, False)
    assert len(over.text) <= BUDGET


def _call(arguments: dict[str, Any] | None = None, name: str = "t") -> ToolCall:
    return ToolCall(id="c1", name=name, arguments=json.dumps(arguments or {}))


CONTEXT: ToolContext[Any] = ToolContext(deps=None, tool_call_id="c1", tool_name="t")


@pytest.mark.parametrize("is_async", [False, True])
async def test_a_typed_tool_result_one_character_over_its_budget_is_cut(is_async: bool) -> None:
    @tool(max_result_chars=BUDGET)
    def t(text: str) -> str:
        return text

    async def run(text: str) -> ToolExecutionResult:
        call = _call({"text": text})
        return await t.aexecute(call) if is_async else t.execute(call)

    _check_cut(await run(EXACT), await run(OVER))
    assert (await run(OVER)).value == OVER


@pytest.mark.parametrize("is_async", [False, True])
@pytest.mark.parametrize("handler", ["function", "executor"])
async def test_a_schema_tool_result_one_character_over_its_budget_is_cut(
    is_async: bool, handler: str
) -> None:
    schema = {"type": "object", "properties": {"text": {"type": "string"}}}
    spec = ToolSpecification(name="t", description="", parameters=schema)
    if handler == "function":
        t = SchemaTool(spec, lambda arguments: arguments["text"], max_result_chars=BUDGET)
    else:
        echo = SchemaTool(spec, lambda arguments: arguments["text"], max_result_chars=10**6)
        t = SchemaTool(spec, echo, max_result_chars=BUDGET)

    async def run(text: str) -> ToolExecutionResult:
        call = _call({"text": text})
        return await t.aexecute(call, CONTEXT) if is_async else t.execute(call, CONTEXT)

    _check_cut(await run(EXACT), await run(OVER))


@pytest.mark.parametrize("is_async", [False, True])
async def test_an_http_tool_body_one_byte_over_its_caps(server: _Server, is_async: bool) -> None:
    """`max_response_bytes` bounds what is read from the network; the budget what the model
    reads of it."""

    async def run(t: HttpTool) -> ToolExecutionResult:
        call = _call()
        return await t.aexecute(call, CONTEXT) if is_async else t.execute(call, CONTEXT)

    budgeted = HttpTool("t", url=server.url, method="POST", max_result_chars=BUDGET)
    for framing in ("length", "gzip"):
        server.answer(EXACT.encode(), framing, content_type="text/plain")
        exact = await run(budgeted)
        server.answer(OVER.encode(), framing, content_type="text/plain")
        _check_cut(exact, await run(budgeted))
    unread = "… [the response exceeds max_response_bytes=1000 bytes; the rest was not read]"
    read = HttpTool("t", url=server.url, method="POST", max_response_bytes=BUDGET)
    for framing in ("length", "chunked", "gzip"):
        server.answer(EXACT.encode(), framing, content_type="text/plain")
        assert (await run(read)).text == EXACT
        server.answer(OVER.encode(), framing, content_type="text/plain")
        assert (await run(read)).text == "x" * BUDGET + unread
    server.answer(b"x" * 100, "endless", content_type="text/plain", filler=b"x" * 65536)
    started = time.monotonic()
    assert (await run(read)).text.endswith(unread)
    assert time.monotonic() - started < GIVE_UP / 2


BOMB = gzip.compress(b"\n" * (256 << 20), compresslevel=9)
"""256 MiB of newlines in about 250 KB of gzip: a zip bomb, for any reader of bodies or lines."""
CAP = 1 << 20


def _peak_bytes(run: Callable[[], Any]) -> tuple[Any, int]:
    """What `run()` gives, and the most memory Python held at once meanwhile (over the start)."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        outcome = run()
        return outcome, tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def _caught(run: Callable[[], Any]) -> Callable[[], BaseException | None]:
    def catching() -> BaseException | None:
        try:
            run()
        except ModelError as error:
            return error
        return None

    return catching


@pytest.mark.parametrize("mode", ["chat", "stream"])
@pytest.mark.parametrize("wire", sorted(MODELS))
def test_a_zip_bomb_inflates_no_further_than_the_cap(server: _Server, wire: str, mode: str) -> None:
    """httpx inflates each chunk whole: a 64 KiB read of this bomb would be 64 MiB at once.
    Inflated in steps, the memory a call takes stays near its cap."""
    content_type = "application/json" if mode == "chat" else "text/event-stream"
    server.answer(BOMB, "gzipped", content_type=content_type)
    model = _model(wire, server, max_response_bytes=CAP, max_stream_bytes=CAP)
    if mode == "chat":
        error, peak = _peak_bytes(_caught(lambda: model.chat(REQUEST)))
        assert isinstance(error, ModelError) and "max_response_bytes=1048576" in str(error)
    else:
        error, peak = _peak_bytes(_caught(lambda: list(model.stream(REQUEST))))
        assert isinstance(error, ModelError) and "over the limit" in str(error)
    assert peak < 8 * CAP


@pytest.mark.parametrize("is_async", [False, True])
def test_a_zip_bomb_reaches_an_http_tool_no_further_than_its_cap(
    server: _Server, is_async: bool
) -> None:
    server.answer(BOMB, "gzipped", content_type="text/plain")
    read = HttpTool("t", url=server.url, method="POST", max_response_bytes=CAP)

    def run() -> ToolExecutionResult:
        if is_async:
            return asyncio.run(read.aexecute(_call(), CONTEXT))
        return read.execute(_call(), CONTEXT)

    result, peak = _peak_bytes(run)
    assert result.text.endswith(
        "[the response exceeds max_response_bytes=1048576 bytes; the rest was not read]"
    )
    assert peak < 16 * CAP  # with the HTTP client it builds for the call (its TLS context)


def _mcp_server(
    list_tools: Callable[[Any, Any], Awaitable[ListToolsResult]] | None = None,
    on_call_tool: Callable[[Any, Any], Awaitable[CallToolResult]] | None = None,
    **options: Unpack[MCPServerOptions],
) -> MCPServer:
    """An MCP server on the SDK's own `Server` (in this process, over memory streams): its tool
    `text` answers `arguments["text"]`."""
    pytest.importorskip("mcp")

    async def call_tool(context: Any, params: Any) -> CallToolResult:
        return CallToolResult(content=[TextContent(type="text", text=params.arguments["text"])])

    async def one_tool(context: Any, params: Any) -> ListToolsResult:
        schema = {"type": "object", "properties": {"text": {"type": "string"}}}
        return ListToolsResult(tools=[Tool(name="text", input_schema=schema)])

    served = Server(
        "bounds", on_list_tools=list_tools or one_tool, on_call_tool=on_call_tool or call_tool
    )

    return in_memory(served, label="in-memory", **options)


@pytest.mark.skipif(MCP_SDK_1, reason="SDK 2's low-level `Server`")
async def test_an_mcp_result_one_character_over_its_budget_is_cut() -> None:
    async with _mcp_server(max_result_chars=BUDGET) as server:
        (text,) = server.tools()
        exact = await text.aexecute(_call({"text": EXACT}, "text"), CONTEXT)
        over = await text.aexecute(_call({"text": OVER}, "text"), CONTEXT)
    _check_cut(exact, over)
    assert over.value == OVER


@pytest.mark.skipif(MCP_SDK_1, reason="SDK 2's low-level `Server`")
def test_an_mcp_result_is_cut_to_the_default_budget() -> None:
    """8 MB from a server is not sent to the model with every later request."""
    huge = "x" * (8 << 20)
    with _mcp_server() as server:
        (text,) = server.tools()
        result = text.execute(_call({"text": huge}, "text"), CONTEXT)
    assert len(result.text) <= DEFAULT_MAX_RESULT_CHARS
    assert "characters cut] …" in result.text and result.full_text == huge


def _listing(count: int, *, pages: int = 1) -> Callable[[Any, Any], Awaitable[ListToolsResult]]:
    """`count` tools per page, `pages` pages (0: pages without end)."""
    listed = [Tool(name=f"t{i}", input_schema={"type": "object"}) for i in range(count)]

    async def list_tools(context: Any, params: Any) -> ListToolsResult:
        page = int(params.cursor) if params is not None and params.cursor else 0
        more = pages == 0 or page + 1 < pages
        renamed = [tool.model_copy(update={"name": f"{tool.name}_{page}"}) for tool in listed]
        return ListToolsResult(tools=renamed, next_cursor=str(page + 1) if more else None)

    return list_tools


@pytest.mark.skipif(MCP_SDK_1, reason="SDK 2's low-level `Server`")
@pytest.mark.parametrize("pages", [1, 5])
async def test_an_mcp_listing_one_tool_over_max_tools_is_refused(pages: int) -> None:
    async with _mcp_server(_listing(10 // pages, pages=pages), max_tools=10) as server:
        assert len(server.tools()) == 10
    refused = _mcp_server(_listing(11 // pages + (pages > 1), pages=pages), max_tools=10)
    message = (
        "MCP server 'in-memory' lists more than max_tools=10 tools; pass a larger max_tools= to "
        "MCPServer to accept them"
    )
    with pytest.raises(ValueError) as caught:
        await refused.__aenter__()
    assert str(caught.value) == message


@pytest.mark.skipif(MCP_SDK_1, reason="SDK 2's low-level `Server`")
def test_an_mcp_listing_without_end_stops_at_max_tools() -> None:
    server = _mcp_server(_listing(7, pages=0), max_tools=1000, connect_timeout=GIVE_UP)
    started = time.monotonic()
    with pytest.raises(ValueError, match="lists more than max_tools=1000 tools"):
        server.__enter__()
    assert time.monotonic() - started < GIVE_UP / 2


def test_the_service_budget_reaches_every_tool_kind_without_its_own() -> None:
    """`ToolService(max_result_chars=...)` for each tool without a budget; a tool's own wins."""
    schema = {"type": "object", "properties": {"text": {"type": "string"}}}

    @tool
    def typed(text: str) -> str:
        return text

    @tool(max_result_chars=2 * BUDGET)
    def own(text: str) -> str:
        return text

    declared = SchemaTool(
        ToolSpecification(name="declared", description="", parameters=schema),
        lambda arguments: arguments["text"],
    )

    class Custom:
        """A `ToolLike` of the program's own, which knows of no budget."""

        name = "custom"
        specification = ToolSpecification(name="custom", description="", parameters=schema)
        return_behavior = ReturnBehavior.TO_LLM
        max_retries = 2
        sequential = False

        def execute(self, call: ToolCall, context: ToolContext[Any]) -> ToolExecutionResult:
            return ToolExecutionResult(json.loads(call.arguments)["text"])

        async def aexecute(self, call: ToolCall, context: ToolContext[Any]) -> ToolExecutionResult:
            return self.execute(call, context)

    huge = "x" * (DEFAULT_MAX_RESULT_CHARS + 1)
    calls = [
        _call({"text": text}, name)
        for name, text in [("typed", OVER), ("declared", OVER), ("own", OVER), ("custom", huge)]
    ]

    def calling(*calls: ToolCall) -> FunctionModel:
        def model(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
            if isinstance(messages[-1], ToolResultMessage):
                return AiMessage(text="done")
            return AiMessage(tool_calls=[c.model_copy(update={"id": c.name}) for c in calls])

        return FunctionModel(model)

    service = ToolService([typed, own, declared, Custom()], max_result_chars=BUDGET)
    result = service.chat(calling(*calls), "go")
    texts = {m.tool_name: m.text for m in result.messages if isinstance(m, ToolResultMessage)}
    assert texts["typed"] == texts["declared"] == CUT
    assert texts["own"] == OVER
    assert texts["custom"] == cut_text(huge, BUDGET)
    results = {e.call.name: e.result for e in result.tool_executions}
    assert results["typed"].full_text == results["declared"].full_text == OVER
    assert results["typed"].value == OVER
    default = ToolService([Custom()]).chat(calling(calls[-1]), "go")
    (custom,) = [m for m in default.messages if isinstance(m, ToolResultMessage)]
    assert custom.text == cut_text(huge, DEFAULT_MAX_RESULT_CHARS)
    # A service budget above the default: the tool cut at the default, the service reads more.
    larger = ToolService([typed, declared], max_result_chars=2 * DEFAULT_MAX_RESULT_CHARS)
    both = [_call({"text": huge}, "typed"), _call({"text": huge}, "declared")]
    roomy = larger.chat(calling(*both), "go")
    answers = [m for m in roomy.messages if isinstance(m, ToolResultMessage)]
    assert [m.text for m in answers] == [huge, huge]
    assert [e.result.full_text for e in roomy.tool_executions] == [None, None]
    with pytest.raises(ValueError, match="max_result_chars must be an integer of at least 100"):
        ToolService(max_result_chars=99)


# -- inline content: MAX_CONTENT_BYTES per result -----------------------------------------------

_AT_CAP = b"\0" * MAX_CONTENT_BYTES
_LEFT_OUT = (
    f"[image: image/png, {MAX_CONTENT_BYTES + 1:,} bytes: left out, over the "
    f"{MAX_CONTENT_BYTES:,}-byte limit of a tool result's inline content]"
)


def _check_content_cap(exact: ToolExecutionResult, over: ToolExecutionResult) -> None:
    """An image of exactly the cap is sent whole; one byte more is left out, a note in its place."""
    assert exact.content == (ImageContent(data=_AT_CAP, media_type="image/png"),)
    assert over.content == (ContentText(text=_LEFT_OUT),)
    assert over.text == _LEFT_OUT and not over.is_error


def _image(size: int) -> ImageContent:
    return ImageContent(data=b"\0" * size, media_type="image/png")


def test_a_typed_tool_image_one_byte_over_the_content_cap_is_left_out() -> None:
    @tool
    def shot(size: int) -> ImageContent:
        """An image of `size` bytes."""
        return _image(size)

    results = [shot.execute(_call({"size": n}, "shot")) for n in (len(_AT_CAP), len(_AT_CAP) + 1)]
    _check_content_cap(*results)


def test_a_schema_tool_image_one_byte_over_the_content_cap_is_left_out() -> None:
    spec = ToolSpecification(
        name="shot", description="", parameters={"type": "object", "properties": {"size": {}}}
    )
    shot = SchemaTool(spec, lambda arguments: _image(arguments["size"]))
    sizes = (len(_AT_CAP), len(_AT_CAP) + 1)
    results = [shot.execute(_call({"size": n}, "shot"), CONTEXT) for n in sizes]
    _check_content_cap(*results)


@pytest.mark.skipif(MCP_SDK_1, reason="SDK 2's low-level `Server`")
async def test_an_mcp_image_one_byte_over_the_content_cap_is_left_out() -> None:
    async def call_tool(context: Any, params: Any) -> CallToolResult:
        data = base64.b64encode(b"\0" * int(params.arguments["text"])).decode()
        return CallToolResult(content=[MCPImage(type="image", data=data, mime_type="image/png")])

    async with _mcp_server(on_call_tool=call_tool) as server:
        (shot,) = server.tools()
        results = [
            await shot.aexecute(_call({"text": str(n)}, "text"), CONTEXT)
            for n in (len(_AT_CAP), len(_AT_CAP) + 1)
        ]
    _check_content_cap(*results)


CONTENT_BOUNDS = {
    "Tool": "test_a_typed_tool_image_one_byte_over_the_content_cap_is_left_out",
    "SchemaTool": "test_a_schema_tool_image_one_byte_over_the_content_cap_is_left_out",
    "MCPTool": "test_an_mcp_image_one_byte_over_the_content_cap_is_left_out",
    "HttpTool": "an HTTP tool's result is its response body, read as text: it has no content parts",
}
"""Per tool kind, the test that sends an image one byte over `MAX_CONTENT_BYTES`, or why none
applies."""


@pytest.mark.parametrize("mode", ["chat", "achat", "stream", "astream"])
async def test_a_fallback_model_waits_no_longer_than_its_models_timeouts(mode: str) -> None:
    """`FallbackModel` (the `composite` axis) adds no wait of its own: against a server that
    accepts connections and never answers, each model times out in turn (a transient failure,
    so the next is asked) and the call ends within the sum of their timeouts."""
    with socket.create_server(("127.0.0.1", 0)) as silent:  # listens; never accepts or answers
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        models = [
            MODELS[wire]("m", api_key="sk-test", base_url=url, max_retries=0, timeout=0.3)
            for wire in ("openai", "anthropic")
        ]
        started = time.monotonic()
        with pytest.raises(af.AllModelsFailedError) as caught:
            await call(af.FallbackModel(*models), REQUEST, mode)
        elapsed = time.monotonic() - started
    assert [type(e.__cause__).__name__ for e in caught.value.errors] == ["ReadTimeout"] * 2
    assert 0.6 <= elapsed < 0.6 + 1.5


@pytest.mark.parametrize("wire", MODELS)
@pytest.mark.parametrize("mode", ["chat", "achat", "stream", "astream"])
async def test_total_timeout_holds_against_headers_dripped_a_byte_at_a_time(
    server: _Server, wire: str, mode: str
) -> None:
    """`total_timeout` is one deadline from connecting to the last byte: a server sending its
    status line and headers a byte at a time (no read timeout trips) is cut off at it, not only
    once a body starts."""
    server.answer(ANSWERS[wire], "dripped headers")
    model = _model(wire, server, total_timeout=0.5)
    started = time.monotonic()
    try:
        with pytest.raises(ModelError, match=r"took longer than total_timeout=0\.5s"):
            await call(model, REQUEST, mode)
    finally:
        await model.aclose()
    assert time.monotonic() - started < 0.5 + 1.5


WIRE_DEADLINES = {"openai", "responses", "anthropic", "gemini"}
"""The wire cores whose `total_timeout` the test above holds against dripped headers (the
dripped bodies and streams: `test_provider_bounds.py`)."""

COMPOSITE_BOUNDS = {"FallbackModel"}
"""The models made of other models whose waits the test above bounds."""

TOOL_BOUNDS = {"Tool", "SchemaTool", "HttpTool", "MCPTool"}
"""The tool kinds whose results the tests above send past their budget (and, for `HttpTool`
bodies and MCP listings, past their network and count caps)."""

WIRE_BOUNDS = {"openai", "responses", "anthropic", "gemini"}
"""The wire cores whose blocking bodies, endless bodies, error bodies, stream lines and whole
streams the tests above send past their caps (`MODELS` names one model per core)."""


def test_covers_every_surface() -> None:
    assert set(MODELS) == WIRE_BOUNDS
    assert_covers("bounded", "wire", WIRE_BOUNDS)
    assert_covers("deadline", "wire", WIRE_DEADLINES)
    assert_covers("bounded", "tool", TOOL_BOUNDS)
    assert_covers("bounded", "tool", CONTENT_BOUNDS)

    assert_covers("bounded", "composite", COMPOSITE_BOUNDS)
