"""Bounded: everything read from a server or a tool has a documented cap, and one byte (or one
item) over it is a clear error or a cut with a marker, never memory that grows with the input.

Each cap is sent exactly its size (accepted whole) and one over (refused or cut). Servers are
real (`http.server` on a thread, the MCP SDK's server) where the framing matters: a body with a
`Content-Length`, chunked, gzip-encoded (the cap counts decoded bytes), or endless.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import gzip
import io
import json
import signal
import socket
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Iterator, Sequence
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from conformance import PROVIDER, TOOL, Surface, assert_registered
from http_server import Reply, ScriptedServer
from mcp.server.lowlevel import Server
from mcp.types import CallToolResult, ListToolsResult, TextContent, Tool
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
from agentforge_typed._messages import cut_text
from agentforge_typed._model import ChatModel
from agentforge_typed.providers import DIALECTS
from agentforge_typed.providers.gemini import GeminiChatModel
from agentforge_typed.tools import DEFAULT_MAX_RESULT_CHARS, MCPServerOptions
from agentforge_typed.tools._budget import MAX_CONTENT_BYTES

MCP_SDK_1 = version("mcp").startswith("1.")

REQUEST = ChatRequest(messages=[UserMessage(content="hi")])
FIXTURES = Path(__file__).parents[1] / "fixtures"
GIVE_UP = 10.0
"""Seconds after which an endless body stops by itself, so that a missing cap cannot hang."""

# --- the wire: one real HTTP server, answering what the test sets ------------------------------

PROVIDERS = PROVIDER.each("bounded")
"""Every provider that reads a server (`conformance.PROVIDER`); each is answered in the shape
of its wire (`provider["wire"]`)."""

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


def _endless(first: bytes, filler: bytes) -> Iterator[bytes]:
    """`first`, then `filler` over and over until the client stops reading or `GIVE_UP`."""
    started = time.monotonic()
    yield first
    while time.monotonic() - started < GIVE_UP:
        yield filler


class _Server:
    """The scripted server, answering every request with `body`."""

    def __init__(self, served: ScriptedServer) -> None:
        self.served = served
        self.url = served.url
        self.body = b""

    def answer(
        self,
        body: bytes,
        framing: str,
        *,
        status: int = 200,
        content_type: str = "application/json",
        filler: bytes = b" " * 65536,
    ) -> None:
        """Answer the next requests with `body`, framed as `framing` says: with its `length`,
        `chunked`, `gzip` (compressed, then chunked), `gzipped` (compressed already, sent whole),
        `endless` (chunked, then `filler` over and over) or `dripped headers` (a status line and
        headers a byte every 0.05 s, until the client goes or `GIVE_UP`)."""
        self.body = body
        headers = {"content-type": content_type}
        if framing == "dripped headers":
            head = b"HTTP/1.1 200 OK\r\n" + b"x-filler: 1\r\n" * 1000 + b"\r\n"
            dripped = [head[i : i + 1] for i in range(min(len(head), int(GIVE_UP / 0.05)))]
            self.served.route("*", Reply(body=dripped, delay=0.05, raw=True))
        elif framing == "length":
            self.served.route("*", Reply(status, body, headers))
        elif framing == "endless":
            self.served.route(
                "*", lambda request: Reply(status, _endless(body, filler), headers, chunked=True)
            )
        else:
            if framing in ("gzip", "gzipped"):
                headers["content-encoding"] = "gzip"
            sent = gzip.compress(body) if framing == "gzip" else body
            step = max(len(sent), 1) if framing == "gzipped" else 4096
            chunks = [sent[start : start + step] for start in range(0, len(sent), step)]
            self.served.route("*", Reply(status, chunks, headers, chunked=True))


@pytest.fixture(scope="module")
def server() -> Iterator[_Server]:
    with ScriptedServer() as served:
        yield _Server(served)


def _model(provider: Surface[Any], server: _Server, **options: Any) -> ChatModel:
    model: ChatModel = provider.build(server.url, "sk-test", max_retries=0, **options)
    return model


def _label(model: object) -> str:
    """The name its errors begin with: the server's the user chose (a compatible server's
    prefix), else the API's; a composite's errors are its first model's."""
    http = getattr(model, "_http", None)
    if http is None:
        return _label(model.models[0])  # type: ignore[attr-defined]
    return http.label or http.provider  # type: ignore[no-any-return]


async def _refused(model: ChatModel, mode: str, match: str) -> ModelError:
    """The `ModelError` a call raises, well before an endless server would give up."""
    started = time.monotonic()
    with pytest.raises(ModelError, match=match) as caught:
        await call(model, REQUEST, mode)
    assert time.monotonic() - started < GIVE_UP / 2
    return caught.value


FRAMINGS = ("length", "chunked", "gzip")


@pytest.mark.parametrize("framing", FRAMINGS)
@pytest.mark.parametrize("mode", ["chat", "achat"])
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_blocking_body_one_byte_over_max_response_bytes_is_refused(
    server: _Server, provider: Surface[Any], mode: str, framing: str
) -> None:
    server.answer(ANSWERS[provider["wire"]], framing)
    size = len(server.body)
    exact = _model(provider, server, max_response_bytes=size)
    assert (await call(exact, REQUEST, mode)).ai_message.text == "hi"
    over = _model(provider, server, max_response_bytes=size - 1)
    with pytest.raises(ModelError) as caught:
        await call(over, REQUEST, mode)
    seen = str(size) if framing == "length" else f"more than {size - 1}"
    assert str(caught.value) == (
        f"{_label(over)} answered with a body of {seen} bytes, over the limit of "
        f"max_response_bytes={size - 1}; pass a larger max_response_bytes= to the model to "
        "accept it"
    )
    assert caught.value.status_code == 200


@pytest.mark.parametrize("mode", ["chat", "achat", "stream", "astream"])
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_an_endless_body_ends_at_the_cap(
    server: _Server, provider: Surface[Any], mode: str
) -> None:
    """A body that never ends (a JSON document answering a stream request, too) stops being read
    at the cap: the call ends at once, not after the server gives up."""
    server.answer(b"{" + b" " * 100, "endless")
    model = _model(provider, server, max_response_bytes=1 << 20)
    await _refused(model, mode, r"over the limit of max_response_bytes=1048576")


@pytest.mark.parametrize("mode", ["chat", "achat"])
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_an_error_body_over_the_cap_is_read_up_to_it(
    server: _Server, provider: Surface[Any], mode: str
) -> None:
    """An error answer keeps its status and message; what lies past the cap is never read."""
    server.answer(
        b'{"error": {"message": "bad request", "type": "invalid"}}', "endless", status=400
    )
    model = _model(provider, server, max_response_bytes=1 << 16)
    error = await _refused(model, mode, "API error 400")
    assert (error.status_code, error.message.endswith(": bad request")) == (400, True)


@pytest.mark.parametrize("mode", ["stream", "astream"])
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_stream_line_one_byte_over_max_line_length_is_refused(
    server: _Server, provider: Surface[Any], mode: str
) -> None:
    limit = 10_000
    exact = b":" + b"x" * (limit - 1) + b"\n\n"  # a comment line of exactly `limit` characters
    server.answer(exact, "chunked", content_type="text/event-stream")
    with pytest.raises(ModelError) as caught:  # no events at all: cut off, but not too long
        await call(_model(provider, server, max_line_length=limit), REQUEST, mode)
    assert "longer than the limit" not in str(caught.value)
    server.answer(b":" + b"x" * limit + b"\n\n", "chunked", content_type="text/event-stream")
    with pytest.raises(ModelError, match=f"line longer than the limit of {limit} characters"):
        await call(_model(provider, server, max_line_length=limit), REQUEST, mode)


@pytest.mark.parametrize("mode", ["stream", "astream"])
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_an_endless_stream_line_ends_at_the_cap(
    server: _Server, provider: Surface[Any], mode: str
) -> None:
    stream = "text/event-stream"
    server.answer(
        STREAM_PREFIXES[provider["wire"]], "endless", content_type=stream, filler=b"x" * 4096
    )
    limit = 1 << 20
    model = _model(provider, server, max_line_length=limit)
    await _refused(model, mode, f"line longer than the limit of {limit} characters")


STREAMS: dict[str, str] = {
    "openai": "golden/openai/thinking/stream.sse",
    "responses": "golden/openai_responses/thinking/stream.sse",
    "anthropic": "golden/anthropic/parallel_tool_calls/stream.sse",
    "gemini": "golden/gemini/text/stream.sse",
}
"""A whole recorded stream of each vendor (`tests/fixtures/`)."""


@pytest.mark.parametrize("mode", ["stream", "astream"])
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_stream_one_byte_over_max_stream_bytes_is_refused(
    server: _Server, provider: Surface[Any], mode: str
) -> None:
    body = (FIXTURES / STREAMS[provider["wire"]]).read_bytes()
    server.answer(body, "chunked", content_type="text/event-stream")
    size = len(body)
    whole = await call(_model(provider, server, max_stream_bytes=size), REQUEST, mode)
    assert whole.finish_reason is not None
    over = _model(provider, server, max_stream_bytes=size - 1)
    with pytest.raises(ModelError) as caught:
        await call(over, REQUEST, mode)
    assert str(caught.value) == (
        f"{_label(over)} sent a stream of more than "
        f"{size - 1} bytes, over the limit of max_stream_bytes={size - 1}; pass a larger "
        "max_stream_bytes= to the model to accept it"
    )


@pytest.mark.parametrize("mode", ["stream", "astream"])
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_an_endless_stream_of_keep_alives_ends_at_the_cap(
    server: _Server, provider: Surface[Any], mode: str
) -> None:
    """Short lines pass `max_line_length`, and a read timeout never trips: only the stream's
    total stops a server that sends keep-alives forever."""
    stream = "text/event-stream"
    server.answer(b": ping\n\n", "endless", content_type=stream, filler=b": ping\n\n" * 512)
    model = _model(provider, server, max_stream_bytes=1 << 20)
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
@pytest.mark.parametrize("kind", TOOL.each("bounded"))
async def test_a_tool_result_one_character_over_its_budget_is_cut(
    kind: Surface[Any], is_async: bool
) -> None:
    """Whatever backs the tool (a function, a handler, an HTTP server, an MCP server), its text
    goes through the one result budget; the whole value stays for the program."""
    async with kind.build(lambda arguments: arguments["text"], max_result_chars=BUDGET) as t:

        async def run(text: str) -> ToolExecutionResult:
            call = _call({"text": text})
            if is_async:
                result: ToolExecutionResult = await t.aexecute(call, CONTEXT)
                return result
            return await asyncio.to_thread(t.execute, call, CONTEXT)

        over = await run(OVER)
        _check_cut(await run(EXACT), over)
    assert over.value == OVER


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
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_zip_bomb_inflates_no_further_than_the_cap(
    server: _Server, provider: Surface[Any], mode: str
) -> None:
    """httpx inflates each chunk whole: a 64 KiB read of this bomb would be 64 MiB at once.
    Inflated in steps, the memory a call takes stays near its cap."""
    content_type = "application/json" if mode == "chat" else "text/event-stream"
    server.answer(BOMB, "gzipped", content_type=content_type)
    model = _model(provider, server, max_response_bytes=CAP, max_stream_bytes=CAP)
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


# -- content: MAX_CONTENT_BYTES per result, as sent -------------------------------------------

_AT_CAP = b"\0" * (MAX_CONTENT_BYTES // 4 * 3)  # its base64 is the cap, to the byte
_LEFT_OUT = (
    f"[image: image/png, {len(_AT_CAP) + 1:,} bytes: left out, {MAX_CONTENT_BYTES + 4:,} bytes "
    f"as sent, over the {MAX_CONTENT_BYTES:,}-byte limit of a tool result's content]"
)


def _check_content_cap(exact: ToolExecutionResult, over: ToolExecutionResult) -> None:
    """An image of exactly the cap (as sent: base64) is sent whole; one byte more is left out, a
    note in its place."""
    assert exact.content == (ImageContent(data=_AT_CAP, media_type="image/png"),)
    assert over.content == (ContentText(text=_LEFT_OUT),)
    assert over.text == _LEFT_OUT and not over.is_error


def _image(size: int) -> ImageContent:
    return ImageContent(data=b"\0" * size, media_type="image/png")


@pytest.mark.parametrize("kind", TOOL.each("bounded.content"))
async def test_a_tool_image_one_byte_over_the_content_cap_is_left_out(kind: Surface[Any]) -> None:
    async with kind.build(lambda arguments: _image(int(arguments["text"]))) as shot:
        results = [
            await shot.aexecute(_call({"text": str(n)}), CONTEXT)
            for n in (len(_AT_CAP), len(_AT_CAP) + 1)
        ]
    _check_content_cap(*results)


@pytest.mark.parametrize("mode", ["chat", "achat", "stream", "astream"])
@pytest.mark.parametrize("provider", PROVIDER.each("deadline"))
async def test_a_model_waits_no_longer_than_its_timeouts(provider: Surface[Any], mode: str) -> None:
    """Against a server that accepts connections and never answers, each model times out (a
    transient failure: a `FallbackModel` asks its next model) and the call ends within the sum
    of its models' timeouts: a model made of others adds no wait of its own."""
    timeout, models = 0.2, provider["models"]
    with socket.create_server(("127.0.0.1", 0)) as silent:  # listens; never accepts or answers
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        model = provider.build(url, "sk-test", max_retries=0, timeout=timeout)
        started = time.monotonic()
        with pytest.raises(ModelError) as caught:
            await call(model, REQUEST, mode)
        elapsed = time.monotonic() - started
    failed = getattr(caught.value, "errors", (caught.value,))
    assert [type(e.__cause__).__name__ for e in failed] == ["ReadTimeout"] * models
    assert isinstance(caught.value, af.AllModelsFailedError) is (models > 1)
    assert models * timeout <= elapsed < models * timeout + 1.5


def test_covers_every_surface() -> None:
    assert_registered(PROVIDER, TOOL)
    # Every provider that reads a server is answered in its vendor's shape.
    wires = {surface.values[0]["wire"] for surface in PROVIDERS}
    assert wires <= set(ANSWERS) & set(STREAM_PREFIXES) & set(STREAMS)


@pytest.mark.parametrize("mode", ["chat", "achat", "stream", "astream"])
@pytest.mark.parametrize("provider", PROVIDER.each("deadline", models=1))
async def test_total_timeout_holds_against_headers_dripped_a_byte_at_a_time(
    server: _Server, provider: Surface[Any], mode: str
) -> None:
    """`total_timeout` is one deadline from connecting to the last byte: a server sending its
    status line and headers a byte at a time (no read timeout trips) is cut off at it, not only
    once a body starts."""
    server.answer(ANSWERS[provider["wire"]], "dripped headers")
    model = _model(provider, server, total_timeout=0.5)
    started = time.monotonic()
    try:
        with pytest.raises(ModelError, match=r"took longer than total_timeout=0\.5s"):
            await call(model, REQUEST, mode)
    finally:
        await model.aclose()  # type: ignore[attr-defined]
    assert time.monotonic() - started < 0.5 + 1.5


# --- waiting for admission: the queue holds the live waiters only ------------------------------


async def test_cancelled_admission_waiters_leave_the_queue() -> None:
    """With every slot held, 100,000 waiters that come and are cancelled leave nothing behind:
    the queue holds the live waiters only (its length, and the memory it keeps), and the next
    real waiters are admitted in the order they came."""
    from agentforge_typed.providers._admission import AsyncGate

    gate = AsyncGate(1)
    await gate.acquire()

    async def come_and_go(waiters: int) -> None:
        tasks = [asyncio.ensure_future(gate.acquire()) for _ in range(waiters)]
        await asyncio.sleep(0)
        assert gate.waiting == waiters
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        assert gate.waiting == 0

    # The first thousands reach the event loop's and the queue's own sizes; after them, nothing
    # may grow (on the memory they keep: 20,000 of them, traced).
    for _ in range(80):
        await come_and_go(1000)
    tracemalloc.start()
    try:
        await come_and_go(1000)
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(19):
            await come_and_go(1000)
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 256 * 1024, f"{kept:,} bytes kept by 19,000 cancelled waiters"
    served: list[int] = []

    async def wait(n: int) -> None:
        await gate.acquire()
        served.append(n)

    waiting = [asyncio.ensure_future(wait(n)) for n in range(3)]
    await asyncio.sleep(0)
    assert gate.waiting == 3
    for _ in range(3):
        gate.release()
        await asyncio.sleep(0)
    await asyncio.wait_for(asyncio.gather(*waiting), 1)
    assert served == [0, 1, 2]


# --- names a model sends: quoted at most MAX_NAME_CHARS characters ------------------------------

LONG_NAME = "n" * 2_000_000
"""A tool name as a model may send it: any length."""
SHOWN = cut_text(LONG_NAME, 200)
"""What every text quotes of it: its head and tail around the marker, 200 characters."""


def _calls_long_name() -> FunctionModel:
    """A model that calls `LONG_NAME` once, then answers."""

    def answer(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        if isinstance(messages[-1], UserMessage):
            return AiMessage(tool_calls=[ToolCall(id="c1", name=LONG_NAME, arguments="{}")])
        return AiMessage(text="done")

    return FunctionModel(answer)


def _quoted(text: str) -> None:
    assert LONG_NAME not in text
    assert SHOWN in text


def test_an_unknown_tool_name_is_quoted_at_most_200_characters_in_errors() -> None:
    @tool
    def known() -> str:
        """A tool the model does not call."""
        return "x"

    service = ToolService([known])
    with pytest.raises(af.UnknownToolError) as caught:
        service.chat(_calls_long_name(), "go")
    error = caught.value
    assert error.tool_name == LONG_NAME  # the program reads it whole
    _quoted(str(error))
    assert len(str(error)) < 300
    (answered,) = [m for m in error.messages if isinstance(m, ToolResultMessage)]
    _quoted(answered.text)  # "did not complete": the history the run can be resumed from
    # A decision on a call of no tool names it as far as the cap.
    with pytest.raises(ValueError, match="is not an external tool's call") as refused:
        service.chat(
            FunctionModel(lambda m, p: AiMessage(text="x")),
            error.messages[:-1],
            external_results={"c1": "done"},
        )
    _quoted(str(refused.value))


def test_an_unknown_tool_name_is_quoted_at_most_200_characters_everywhere_it_is_shown(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The result the model reads, the log line, the span (names the model wrote are recorded
    with `include_content` only) and the CLI's display."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from agentforge_typed.cli._run import LiveDisplay

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    service = ToolService(
        unknown_tool_handler=af.available_tools_handler, after_tool_call=af.logging_hook()
    )
    shown = io.StringIO()
    with af.instrument(provider, include_content=True), caplog.at_level("INFO"):
        result = LiveDisplay(shown).show(service.stream(_calls_long_name(), "go"), 0.0)
    (execution,) = result.tool_executions
    assert execution.result.text == f"There is no tool named `{SHOWN}`. Available tools: none."
    (logged,) = [r.getMessage() for r in caplog.records if "call_id=c1" in r.getMessage()]
    _quoted(logged)
    (span,) = [s for s in exporter.get_finished_spans() if s.name.startswith("execute_tool")]
    assert span.name == f"execute_tool {SHOWN}"
    assert span.attributes is not None and span.attributes["gen_ai.tool.name"] == SHOWN
    _quoted(shown.getvalue())
    assert len(shown.getvalue()) < 2000


@pytest.mark.skipif(MCP_SDK_1, reason="SDK 2's low-level `Server`")
async def test_a_tool_name_an_mcp_server_lists_is_quoted_at_most_200_characters(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def listing(context: Any, params: Any) -> ListToolsResult:
        schema = {"type": "object", "properties": {}}
        return ListToolsResult(tools=[Tool(name=LONG_NAME, input_schema=schema)])

    with caplog.at_level("WARNING"):
        async with _mcp_server(list_tools=listing) as server:
            assert server.tools() == ()
    (warning,) = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    _quoted(warning)
    assert len(warning) < 1000


def test_a_malformed_call_in_the_history_names_its_tool_at_most_200_characters() -> None:
    from agentforge_typed.providers._gemini_wire import build_payload

    history: list[ChatMessage] = [
        UserMessage(content="go"),
        AiMessage(tool_calls=[ToolCall(id="c1", name=LONG_NAME, arguments="[]")]),
        ToolResultMessage(tool_call_id="c1", tool_name=LONG_NAME, text="x"),
    ]
    with pytest.raises(ModelError) as caught:
        build_payload(history, ChatRequestParameters())
    _quoted(str(caught.value))


# --- the Gemini subset inlines every `$ref`: its rendering is capped -----------------------------


@contextlib.contextmanager
def _cpu_deadline(seconds: float) -> Iterator[None]:
    """Raise `TimeoutError` in the code under test once the process has spent `seconds` of CPU
    (so that an unbounded expansion fails the test instead of exhausting the machine)."""

    def expire(signum: int, frame: object) -> None:
        raise TimeoutError(f"still working after {seconds} s of CPU")

    previous = signal.signal(signal.SIGPROF, expire)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)


DAG_TOOLS = Path(__file__).parents[1] / "fixtures" / "dag_tools.py"


def dag_schema(depth: int) -> dict[str, Any]:
    """`depth` levels of definitions, each referring to the next one twice (see the fixture)."""
    from agentforge_typed.cli._target import load_object

    schema: dict[str, Any] = load_object(f"{DAG_TOOLS}:dag_schema")[1](depth)
    return schema


def _size(schema: dict[str, Any]) -> int:
    return len(json.dumps(schema, separators=(",", ":"), ensure_ascii=False))


def _refused_quickly(render: Callable[[], object]) -> af.SchemaDialectError:
    started = time.process_time()
    with _cpu_deadline(5.0), pytest.raises(af.SchemaDialectError) as refused:
        render()
    assert time.process_time() - started < 1.0
    error = refused.value
    assert (error.dialect, error.path) == ("gemini", "$")
    assert error.reason.startswith(
        "a rendering of more than 100,000 characters (MAX_GEMINI_SCHEMA_CHARS)"
    )
    return error


def test_a_gemini_schema_whose_references_pass_the_cap_is_refused_quickly() -> None:
    """A 3 KB schema of 20 levels, each referring to the next twice (2**20 leaves inlined):
    refused as soon as the rendering passes the cap, however deep it goes on."""
    from agentforge_typed.providers import MAX_GEMINI_SCHEMA_CHARS, render_schema

    assert MAX_GEMINI_SCHEMA_CHARS == 100_000
    assert _size(dag_schema(20)) < 4000
    _refused_quickly(lambda: render_schema(dag_schema(20), "gemini"))
    _refused_quickly(lambda: render_schema(dag_schema(200), "gemini"))


def test_a_gemini_rendering_of_exactly_the_cap_is_sent_and_one_character_more_is_refused() -> None:
    from agentforge_typed.providers import render_schema

    def padded(extra: int) -> dict[str, Any]:
        schema = dag_schema(9)  # 512 leaves inlined: some 80,000 characters
        schema["description"] = "x" * extra
        return schema

    room = 100_000 - _size(render_schema(padded(0), "gemini"))
    assert room > 10_000
    assert _size(render_schema(padded(room), "gemini")) == 100_000
    _refused_quickly(lambda: render_schema(padded(room + 1), "gemini"))


def test_a_moderate_gemini_schema_is_inlined_as_before() -> None:
    from agentforge_typed.providers import render_schema

    def level(at: int, depth: int) -> dict[str, Any]:
        if at == depth:
            return {"type": "string", "description": "A leaf."}
        below = level(at + 1, depth)
        return {
            "type": "object",
            "description": f"Level {at} of the tree.",
            "properties": {"left": below, "right": below},
            "required": ["left", "right"],
        }

    expected = {"type": "object", "properties": {"tree": level(0, 4)}, "required": ["tree"]}
    assert render_schema(dag_schema(4), "gemini") == expected


async def test_every_registration_path_keeps_a_schema_shared_that_gemini_refuses() -> None:
    """`@tool` (a pydantic model of 20 levels), `SchemaTool` and an MCP server's `inputSchema`
    register at once (nothing is inlined: every other dialect, and the JSON Schema Gemini is sent
    by default, keep `$defs`); rendered for the Gemini subset, each is refused quickly."""
    from pydantic import BaseModel, create_model

    from agentforge_typed.providers import _gemini_wire

    leaf: type[BaseModel] = create_model("Level20", text=(str, ...))
    node = leaf
    for at in reversed(range(20)):
        node = create_model(f"Level{at}", left=(node, ...), right=(node, ...))

    def plant(tree: Any) -> str:
        """Plant a tree."""
        return "planted"

    plant.__annotations__ = {"tree": node, "return": str}
    typed = tool(plant)
    declared = SchemaTool(
        ToolSpecification(name="declared", parameters=dag_schema(20)), lambda a: "planted"
    )

    async def listing(context: Any, params: Any) -> ListToolsResult:
        return ListToolsResult(tools=[Tool(name="listed", input_schema=dag_schema(20))])

    started = time.process_time()
    async with _mcp_server(list_tools=listing) as server:
        (listed,) = server.tools()
    assert time.process_time() - started < 2.0
    for spec in (typed.specification, declared.specification, listed.specification):
        assert _size(_gemini_wire.map_tool(spec)) < 8000  # `parametersJsonSchema`, shared
        _refused_quickly(functools.partial(_gemini_wire.map_tool, spec, "gemini"))


def test_a_gemini_subset_request_with_such_a_schema_is_refused_before_it_is_sent() -> None:
    declared = SchemaTool(
        ToolSpecification(name="declared", parameters=dag_schema(20)), lambda a: "planted"
    )
    with socket.create_server(("127.0.0.1", 0)) as silent:  # a request sent would time out
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        model = GeminiChatModel(
            "m", api_key="k", base_url=url, function_schema="gemini", timeout=5, max_retries=0
        )
        service = ToolService([declared])
        _refused_quickly(lambda: service.chat(model, "plant it"))


def test_check_reports_a_gemini_rendering_over_the_cap_without_expanding_it() -> None:
    import subprocess
    import sys

    target = f"{DAG_TOOLS}:tools"
    done = subprocess.run(
        [sys.executable, "-m", "agentforge_typed", "check", target, "--dialect", "gemini"],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=60,
    )
    findings = [line for line in done.stdout.splitlines() if "unsupported-schema" in line]
    assert len(findings) == 1
    assert (
        ": deep: not expressible in gemini at $: a rendering of more than 100,000 " in findings[0]
    )


@pytest.mark.parametrize("dialect", ["gemini", "openai-strict", "anthropic-strict"])
def test_a_chain_of_references_too_deep_to_follow_is_refused(dialect: af.Dialect) -> None:
    """3,000 definitions each referring to the next: a small schema (no level doubles), but one
    that rendering cannot follow to its end; refused, never a `RecursionError`."""
    from agentforge_typed.providers import render_schema

    chain = {
        f"D{i}": {"type": "object", "properties": {"next": {"$ref": f"#/$defs/D{i + 1}"}}}
        for i in range(3000)
    }
    chain["D3000"] = {"type": "string"}
    schema = {"type": "object", "properties": {"x": {"$ref": "#/$defs/D0"}}, "$defs": chain}
    with pytest.raises(af.SchemaDialectError) as refused:
        render_schema(schema, dialect)
    assert (refused.value.path, refused.value.reason) == (
        "$",
        "a schema nested too deeply to render",
    )


INLINING_DIALECTS = {"gemini"}
"""The dialects that inline `$ref`s (their rendering is capped, and refused past the cap); every
other keeps `$defs`, so its rendering stays the size of the schema."""


@pytest.mark.parametrize("dialect", DIALECTS)
def test_no_dialect_renders_shared_definitions_without_bound(dialect: af.Dialect) -> None:
    """A dialect added to the table joins here: it keeps the definitions shared, or it is listed
    in `INLINING_DIALECTS` and refuses the inlined schema quickly."""
    from agentforge_typed.providers import render_schema

    schema = dag_schema(20)
    if dialect in INLINING_DIALECTS:
        _refused_quickly(lambda: render_schema(schema, dialect))
    else:
        with _cpu_deadline(5.0):
            assert _size(render_schema(schema, dialect)) < 2 * _size(schema)
