"""Secret: the API key never leaves a provider in an error, a log record or a span.

The canary: one fixture key, and servers that echo it — in error bodies, in the chunks of a
stream, in headers, cut in two by a truncation point. One table of hostile answers is fed to every
provider (one per wire core) on every client path, with every log record captured at DEBUG and
OpenTelemetry on (content included); the key is looked for, whole and as either half, in the
error's `str`, `repr`, `args`, `message`, `body`, `code`, notes and printed traceback (its chain
included), in every record, and in every span. Redaction happens at one boundary
(`HttpShell.redacting`): every provider registered in `conformance.PROVIDER` is checked (a new one
as soon as `get_model` builds it); a new wire core adds its shape of the answers that differ
between vendors.
"""

from __future__ import annotations

import asyncio
import json
import logging
import traceback
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import httpx
import pytest
from conformance import PROVIDER, Surface, assert_covers, assert_registered
from http_server import Reply, Request, ScriptedServer
from openai_support import call
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import TypeAdapter
from retry_waits import waiting

import agentforge_typed as af
from agentforge_typed import ChatModel, ChatRequest, ModelError, UserMessage
from agentforge_typed.providers.anthropic import AnthropicChatModel

KEY = "sk-canary-0123456789abcdefghijKLMNOPQR"
PROVIDERS = PROVIDER.each("secret")
"""Every provider that holds a key (`conformance.PROVIDER`); each is answered in the shape of its
wire (`provider["wire"]`)."""
REQUEST = ChatRequest(messages=[UserMessage(content="hi")])
SSE = {"content-type": "text/event-stream"}
BLOCKING = ("chat", "achat")
STREAMING = ("stream", "astream")
ALL = BLOCKING + STREAMING

ERROR_OBJECT = {"type": "error", "error": {"type": "invalid_request_error", "message": KEY}}
PAD = 2000 - len(KEY) + 4
OK_COMPLETION = {"choices": [{"index": 0, "message": {"content": "hi"}, "finish_reason": "stop"}]}
OK_CANDIDATES = {"candidates": [{"content": {"parts": [{"text": "hi"}]}, "finishReason": "STOP"}]}
LONG = "x" * PAD + KEY + "y" * 5000  # the key straddles the 2000-character cut: 4 characters over


def _anthropic_tool_stream(value: Any) -> bytes:
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"id": "m", "content": [], "usage": {}}},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "t", "name": "n", "input": value},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "message_stop"},
    ]
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def _sse(data: str, event: str | None = None) -> httpx.Response:
    head = f"event: {event}\n" if event else ""
    return httpx.Response(200, headers=SSE, content=f"{head}data: {data}\n\n".encode())


def _events(*events: dict[str, Any]) -> bytes:
    """A stream of named events, as Anthropic and Responses send them."""
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def _stream(content: bytes) -> httpx.Response:
    return httpx.Response(200, headers=SSE, content=content)


# (case, modes, answer; a dict answers each provider with its own vendor's shape)
Answer = httpx.Response | dict[str, httpx.Response]
CASES: list[tuple[str, tuple[str, ...], Callable[[], Answer]]] = [
    ("error status echoing the key", ALL, lambda: httpx.Response(401, json=ERROR_OBJECT)),
    (
        "error status, key as error code",
        ALL,
        lambda: httpx.Response(400, json={"error": {"message": "bad", "type": KEY, "code": KEY}}),
    ),
    ("error status, text body", ALL, lambda: httpx.Response(400, text=f"no such key {KEY}")),
    ("error status, key as object key", ALL, lambda: httpx.Response(400, json={KEY: "bad"})),
    ("error status, key straddling the cut", ALL, lambda: httpx.Response(400, text=LONG)),
    ("200 with an error object", BLOCKING, lambda: httpx.Response(200, json=ERROR_OBJECT)),
    ("200 malformed JSON", BLOCKING, lambda: httpx.Response(200, text='{"id": "' + KEY)),
    ("200 malformed, key straddling the cut", BLOCKING, lambda: httpx.Response(200, text=LONG)),
    ("200 unexpected body", BLOCKING, lambda: httpx.Response(200, json=[KEY])),
    ("200 key as object key", BLOCKING, lambda: httpx.Response(200, json={KEY: 1})),
    ("200 no choices", BLOCKING, lambda: httpx.Response(200, json={"id": KEY, "choices": []})),
    (
        "200 key as a token count",
        BLOCKING,
        lambda: {
            "openai": httpx.Response(
                200, json={**OK_COMPLETION, "usage": {"prompt_tokens": KEY, "total_tokens": 5}}
            ),
            "responses": httpx.Response(
                200, json={"id": "r", "output": [], "usage": {"input_tokens": KEY}}
            ),
            "anthropic": httpx.Response(
                200, json={"content": [], "usage": {"input_tokens": KEY, "output_tokens": KEY}}
            ),
            "gemini": httpx.Response(
                200, json={**OK_CANDIDATES, "usageMetadata": {"promptTokenCount": KEY}}
            ),
        },
    ),
    (
        "stream key as a token count",
        STREAMING,
        lambda: {
            "openai": _sse(
                json.dumps({**OK_COMPLETION, "usage": {"prompt_tokens": KEY, "total_tokens": 5}})
            ),
            "responses": _stream(
                _events(
                    {
                        "type": "response.completed",
                        "response": {"id": "r", "output": [], "usage": {"output_tokens": KEY}},
                    }
                )
            ),
            "anthropic": httpx.Response(
                200,
                headers=SSE,
                content=b"".join(
                    f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode()
                    for e in (
                        {"type": "message_start", "message": {"content": [], "usage": {}}},
                        {
                            "type": "message_delta",
                            "delta": {},
                            "usage": {"input_tokens": KEY, "output_tokens": KEY},
                        },
                        {"type": "message_stop"},
                    )
                ),
            ),
            "gemini": _sse(
                json.dumps({**OK_CANDIDATES, "usageMetadata": {"promptTokenCount": KEY}})
            ),
        },
    ),
    (
        "200 malformed message",
        BLOCKING,
        lambda: {
            "openai": httpx.Response(200, json={"choices": [{"message": {"content": [KEY]}}]}),
            "responses": httpx.Response(
                200,
                json={
                    "output": [
                        {"type": "message", "content": [{"type": "output_text", "text": [KEY]}]}
                    ]
                },
            ),
            "anthropic": httpx.Response(
                200, json={"content": [{"type": "tool_use", "id": "t", "name": "n", "input": KEY}]}
            ),
            "gemini": httpx.Response(
                200, json={"candidates": [{"content": {"parts": [{"text": [KEY]}]}}]}
            ),
        },
    ),
    ("stream error event", STREAMING, lambda: _sse(json.dumps(ERROR_OBJECT), "error")),
    ("stream error chunk", STREAMING, lambda: _sse(json.dumps(ERROR_OBJECT))),
    ("stream malformed chunk", STREAMING, lambda: _sse('{"delta": "' + KEY)),
    ("stream malformed chunk straddling", STREAMING, lambda: _sse("{" + LONG)),
    ("stream unexpected chunk", STREAMING, lambda: _sse(json.dumps([KEY]))),
    ("stream key as object key", STREAMING, lambda: _sse(json.dumps({KEY: {KEY: KEY}}))),
    (
        "stream malformed message",
        STREAMING,
        lambda: {
            "openai": _sse(json.dumps({"choices": [{"delta": {"tool_calls": [KEY]}}]})),
            "responses": _stream(
                _events(
                    {
                        "type": "response.output_text.delta",
                        "item_id": "msg_1",
                        "output_index": 0,
                        "content_index": 0,
                        "delta": [KEY],
                    }
                )
            ),
            "anthropic": httpx.Response(200, headers=SSE, content=_anthropic_tool_stream(KEY)),
            "gemini": _sse(
                json.dumps(
                    {"candidates": [{"content": {"parts": [{"functionCall": {"name": [KEY]}}]}}]}
                )
            ),
        },
    ),
    (
        "stream error event straddling the cut",
        STREAMING,
        lambda: _sse(
            json.dumps({"type": "error", "error": {"type": "x", "message": LONG}}), "error"
        ),
    ),
    (
        "stream cut off inside the key",
        STREAMING,
        lambda: _stream(b'event: error\ndata: {"error": {"message": "' + KEY[:20].encode()),
    ),
    (
        "stream cut off after an event holding the key",
        STREAMING,
        lambda: {
            "openai": _sse(
                json.dumps(
                    {
                        "id": KEY,
                        "object": "chat.completion.chunk",
                        "choices": [{"index": 0, "delta": {"content": KEY}, "finish_reason": None}],
                    }
                )
            ),
            "responses": _stream(
                _events({"type": "response.created", "response": {"id": KEY, "output": []}})
            ),
            "anthropic": _stream(
                _events({"type": "message_start", "message": {"id": KEY, "content": []}})
            ),
            "gemini": _sse(
                json.dumps(
                    {"candidates": [{"content": {"parts": [{"text": KEY}]}}], "responseId": KEY}
                )
            ),
        },
    ),
    (
        "stream answered with JSON, key in its content type",
        STREAMING,
        lambda: httpx.Response(
            200, headers={"content-type": f"application/json; charset={KEY}"}, json=ERROR_OBJECT
        ),
    ),
    (
        "rate limited, key in Retry-After",
        ALL,
        lambda: httpx.Response(429, headers={"retry-after": KEY}, json=ERROR_OBJECT),
    ),
    (
        "server error, key as reason phrase",
        ALL,
        lambda: httpx.Response(503, text=KEY, extensions={"reason_phrase": KEY.encode()}),
    ),
]


def _model(provider: Surface[Any], answer: Callable[[], Answer]) -> ChatModel:
    """`provider`'s class with the canary key, served by `answer`, which also gets the key's
    header back on every response (a server echoing what it was sent); one retry allowed."""

    def handler(request: httpx.Request) -> httpx.Response:
        sent = [value for value in request.headers.values() if KEY in value]
        assert sent, "the key was not sent"
        response = answer()
        if isinstance(response, dict):
            response = response[provider["wire"]]
        response.headers["x-echo"] = sent[0]
        return response

    async def asleep(seconds: float) -> None:
        pass

    transport = httpx.MockTransport(handler)
    model: ChatModel = provider.build(
        "https://api.example.com/v1",
        KEY,
        max_retries=1,
        http_client=httpx.Client(transport=transport),
        async_http_client=httpx.AsyncClient(transport=transport),
    )
    return waiting(model, lambda seconds: None, asleep)


async def _close(model: object) -> None:
    each: Any
    for each in getattr(model, "models", (model,)):
        await each.aclose()


async def _error(model: ChatModel, mode: str) -> ModelError:
    with pytest.raises(ModelError) as info:
        await call(model, REQUEST, mode)
    return info.value


def _error_texts(error: ModelError) -> list[str]:
    """Everything an error shows: its fields, and the traceback a logged error prints."""
    texts = [str(error), repr(error), repr(error.args), error.message, str(error.code)]
    texts += [repr(error.body), json.dumps(error.body, default=str)]
    texts += getattr(error, "__notes__", [])
    texts.append("".join(traceback.format_exception(error)))  # the chain and the notes too
    for each in getattr(error, "errors", ()):  # a composite's: each of its models'
        texts += _error_texts(each)
    return texts


def _assert_hidden(texts: list[str], where: str) -> None:
    for text in texts:
        for piece in (KEY, KEY[: len(KEY) // 2], KEY[len(KEY) // 2 :]):
            assert piece not in text, (where, text[:300])


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """OpenTelemetry on, with content, for the test: its finished spans."""
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    with af.instrument(tracer_provider, include_content=True):
        yield exporter


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(("case", "modes", "answer"), CASES, ids=[c[0] for c in CASES])
async def test_the_key_never_leaves(
    provider: Surface[Any],
    case: str,
    modes: tuple[str, ...],
    answer: Callable[[], Answer],
    caplog: pytest.LogCaptureFixture,
    spans: InMemorySpanExporter,
) -> None:
    caplog.set_level(logging.DEBUG)
    for mode in modes:
        error = await _error(_model(provider, answer), mode)
        _assert_hidden(_error_texts(error), f"{case}, {mode}: the error")
        assert len(error.message) < 2100 and len(str(error.body)) < 2100 + 100
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    assert caplog.records  # httpx logs each request: the logs are there to be searched
    _assert_hidden([formatter.format(record) for record in caplog.records], f"{case}: a log")
    finished = spans.get_finished_spans()
    # One failed `chat` span per call (a composite's per model it asked).
    assert len(finished) == len(modes) or (provider["models"] > 1 and len(finished) > len(modes))
    _assert_hidden([span.to_json() for span in finished], f"{case}: a span")


ECHOED = f"your key is {KEY}."
"""A successful answer's text that holds the key (a server echoing what it was sent)."""
PIECES = [ECHOED[i : i + 3] for i in range(0, len(ECHOED), 3)]
"""The same text streamed in pieces of three characters: shorter than any fragment redacted, so
only the whole answer can be cleaned."""
SENT_TO = json.dumps({"to": KEY})


def _echoing_answer() -> dict[str, httpx.Response]:
    """A successful answer echoing the key in its text and in a call's arguments, in each wire's
    shape: blocking, and streamed in small pieces with the call's arguments split too."""
    halves = (SENT_TO[:9], SENT_TO[9:])
    chunk = {"object": "chat.completion.chunk", "choices": []}
    openai_stream = (
        [
            {**chunk, "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
            for piece in PIECES
        ]
        + [
            {
                **chunk,
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "tool_calls": [
                                {
                                    "index": 0,
                                    **({"id": "c1", "type": "function"} if n == 0 else {}),
                                    "function": {
                                        **({"name": "send"} if n == 0 else {}),
                                        "arguments": half,
                                    },
                                }
                            ]
                        },
                        "finish_reason": None,
                    }
                ],
            }
            for n, half in enumerate(halves)
        ]
        + [{**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}]
    )
    message = {"type": "message", "id": "m", "role": "assistant", "status": "completed"}
    output = [
        {**message, "content": [{"type": "output_text", "text": ECHOED, "annotations": []}]},
        {
            "type": "function_call",
            "id": "fc",
            "call_id": "c1",
            "name": "send",
            "arguments": SENT_TO,
        },
    ]
    completed = {"id": "r", "status": "completed", "output": output}
    gemini_parts = [{"text": ECHOED}, {"functionCall": {"name": "send", "args": {"to": KEY}}}]
    anthropic_blocks = [
        {"type": "text", "text": ECHOED},
        {"type": "tool_use", "id": "t", "name": "send", "input": {"to": KEY}},
    ]
    anthropic_stream: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"id": "m", "content": [], "usage": {}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        *(
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}}
            for p in PIECES
        ),
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "tool_use", "id": "t", "name": "send", "input": {}},
        },
        *(
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": half},
            }
            for half in halves
        ),
        {"type": "content_block_stop", "index": 1},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {}},
        {"type": "message_stop"},
    ]
    return {
        "openai": httpx.Response(
            200,
            json={
                "choices": [
                    {
                        "index": 0,
                        "message": {
                            "role": "assistant",
                            "content": ECHOED,
                            "tool_calls": [
                                {
                                    "id": "c1",
                                    "type": "function",
                                    "function": {"name": "send", "arguments": SENT_TO},
                                }
                            ],
                        },
                        "finish_reason": "tool_calls",
                    }
                ]
            },
        ),
        "openai-stream": _stream(
            "".join(f"data: {json.dumps(c)}\n\n" for c in openai_stream).encode()
            + b"data: [DONE]\n\n"
        ),
        "responses": httpx.Response(200, json=completed),
        "responses-stream": _stream(
            _events(
                {"type": "response.created", "response": {"id": "r", "output": []}},
                *(
                    {
                        "type": "response.output_text.delta",
                        "item_id": "m",
                        "output_index": 0,
                        "content_index": 0,
                        "delta": piece,
                    }
                    for piece in PIECES
                ),
                {"type": "response.completed", "response": completed},
            )
        ),
        "anthropic": httpx.Response(
            200,
            json={
                "id": "m",
                "type": "message",
                "role": "assistant",
                "content": anthropic_blocks,
                "stop_reason": "tool_use",
                "usage": {"input_tokens": 1, "output_tokens": 1},
            },
        ),
        "anthropic-stream": _stream(_events(*anthropic_stream)),
        "gemini": httpx.Response(
            200,
            json={
                "candidates": [
                    {"content": {"role": "model", "parts": gemini_parts}, "finishReason": "STOP"}
                ]
            },
        ),
        "gemini-stream": _stream(
            "".join(
                "data: "
                + json.dumps({"candidates": [{"content": {"role": "model", "parts": [part]}}]})
                + "\n\n"
                for part in [*({"text": piece} for piece in PIECES), gemini_parts[1]]
            ).encode()
            + (
                "data: "
                + json.dumps({"candidates": [{"content": {"parts": []}, "finishReason": "STOP"}]})
                + "\n\n"
            ).encode()
        ),
    }


@pytest.mark.parametrize("mode", ALL)
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_successful_answer_echoing_the_key_reaches_no_history(
    provider: Surface[Any], mode: str, spans: InMemorySpanExporter
) -> None:
    """The answer a run keeps (its history, the stores, the spans, the next tool's arguments)
    has the key replaced, in the text and in a call's arguments, blocking or streamed in pieces
    too short to be recognised one by one."""

    def answer() -> dict[str, httpx.Response]:
        answers = _echoing_answer()
        if mode in STREAMING:
            return {
                wire: answers[f"{wire}-stream"]
                for wire in ("openai", "responses", "anthropic", "gemini")
            }
        return answers

    model = _model(provider, answer)
    response = await call(model, REQUEST, mode)
    await _close(model)
    message = response.ai_message
    assert message.text == "your key is [redacted]."
    assert [(c.name, json.loads(c.arguments)) for c in message.tool_calls] == [
        ("send", {"to": "[redacted]"})
    ]
    _assert_hidden([response.model_dump_json()], f"{mode}: the answer")
    _assert_hidden([span.to_json() for span in spans.get_finished_spans()], f"{mode}: a span")


@pytest.mark.parametrize("mode", ALL)
async def test_a_key_too_short_to_recognise_leaves_a_successful_answer_alone(mode: str) -> None:
    """Under `FRAGMENT` characters a key could stand in any text (`api_key="k"` in a test): a
    successful answer is searched only for the longer ones, errors for all."""
    text = "ok: sk-test is what the docs use"
    streamed = b"".join(
        f"data: {json.dumps({'choices': [{'index': 0, 'delta': {'content': p}}]})}\n\n".encode()
        for p in (text[:5], text[5:])
    )
    finish = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    streamed += f"data: {json.dumps(finish)}\n\ndata: [DONE]\n\n".encode()

    def handler(request: httpx.Request) -> httpx.Response:
        if json.loads(request.content).get("stream"):
            return _stream(streamed)
        message = {"role": "assistant", "content": text}
        return httpx.Response(200, json={"choices": [{"index": 0, "message": message}]})

    transport = httpx.MockTransport(handler)
    model = af.OpenAIChatModel(
        "m",
        api_key="sk-test",
        http_client=httpx.Client(transport=transport),
        async_http_client=httpx.AsyncClient(transport=transport),
    )
    response = await call(model, REQUEST, mode)
    await model.aclose()
    assert response.ai_message.text == text


def _echo(request: Request) -> Reply:
    """Answers 401, echoing the key it was sent in its status line, a header and its body."""
    sent = [value for value in request.headers.values() if KEY in value]
    error = {"error": {"message": f"bad key {sent}", "type": KEY}}
    echoed = {"x-echo": sent[0] if sent else "nothing sent"}
    return Reply.json(error, 401, reason=f"Unauthorized {KEY}", headers=echoed)


@pytest.fixture
def echo_server(http_server: ScriptedServer) -> str:
    """A real server on 127.0.0.1 (so that httpcore, which logs headers at DEBUG, runs)
    answering every request as `_echo` does."""
    http_server.route("*", _echo)
    return http_server.url


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_real_server_echoing_the_key_leaves_no_trace(
    provider: Surface[Any],
    echo_server: str,
    caplog: pytest.LogCaptureFixture,
    spans: InMemorySpanExporter,
) -> None:
    caplog.set_level(logging.DEBUG)
    model = provider.build(echo_server, KEY, max_retries=0, timeout=10)
    for mode in ALL:
        error = await _error(model, mode)
        assert error.status_code == 401
        _assert_hidden(_error_texts(error), f"{mode}: the error")
    await _close(model)
    records = caplog.records
    assert any(record.name.startswith("httpcore") for record in records)
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    _assert_hidden([formatter.format(record) for record in records], "a log")
    _assert_hidden([span.to_json() for span in spans.get_finished_spans()], "a span")


async def test_a_fallback_model_over_every_provider_leaves_no_trace(
    echo_server: str, caplog: pytest.LogCaptureFixture, spans: InMemorySpanExporter
) -> None:
    """`FallbackModel` over every other provider that reads a server: each fails against the
    echoing server, and the error that lists them all, each of theirs, the logs and the spans
    hide the key."""
    caplog.set_level(logging.DEBUG)
    models = [
        param.values[0].build(echo_server, KEY, max_retries=0, timeout=10)
        for param in PROVIDER.each("secret", models=1)
    ]
    model = af.FallbackModel(*models, fallback_on=lambda error: True)
    for mode in ALL:
        error = await _error(model, mode)
        assert isinstance(error, af.AllModelsFailedError)
        assert [e.status_code for e in error.errors] == [401] * len(models)
        _assert_hidden(_error_texts(error), f"{mode}: the error")
    for each in models:
        await each.aclose()
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    _assert_hidden([formatter.format(record) for record in caplog.records], "a log")
    _assert_hidden([span.to_json() for span in spans.get_finished_spans()], "a span")


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_redirect_to_another_origin_never_carries_the_key(
    provider: Surface[Any], echo_server: str, http_server: ScriptedServer
) -> None:
    # The client follows redirects (the user's choice): httpx strips only `Authorization` on a
    # cross-origin hop, so `x-api-key` and `x-goog-api-key` would reach the other host.
    with ScriptedServer() as redirecting:
        # Every request answered with a 307 to the other origin.
        redirecting.route(
            "*", lambda request: Reply(307, headers={"location": echo_server + request.path})
        )
        model = provider.build(
            redirecting.url,
            KEY,
            max_retries=0,
            http_client=httpx.Client(follow_redirects=True),
            async_http_client=httpx.AsyncClient(follow_redirects=True),
        )
        for mode in ALL:
            error = await _error(model, mode)
            assert error.status_code == 307
        assert len(redirecting.requests) == len(ALL)
    assert http_server.requests == []  # the other origin never heard from us


def test_covers_every_surface() -> None:
    assert_registered(PROVIDER)


async def test_redaction_keeps_the_error_usable() -> None:
    """Redaction replaces the key and nothing else: status, code and the rest stay."""
    body = {"error": {"message": f"Incorrect API key provided: {KEY}.", "code": "invalid_api_key"}}
    model = _model(PROVIDER["openai"], lambda: httpx.Response(401, json=body))
    error = await _error(model, "chat")
    assert error.message == "OpenAI API error 401: Incorrect API key provided: [redacted]."
    assert (error.status_code, error.code) == (401, "invalid_api_key")
    assert error.body == {
        "error": {"message": "Incorrect API key provided: [redacted].", "code": "invalid_api_key"}
    }
    anthropic = _model(PROVIDER["anthropic"], lambda: httpx.Response(400, text=LONG))
    long = await _error(anthropic, "chat")
    assert isinstance(long.body, str)
    assert long.body.startswith("x" * PAD + "[redacted]yyy")
    assert long.body.endswith(f"… [{PAD + len('[redacted]') + 5000 - 2000} more characters]")


@pytest.mark.parametrize("key", ["k9", "sk-7chars", "sk-ant-" + "x" * 100 + "-tail"])
async def test_short_and_long_keys_are_redacted_alike(key: str) -> None:
    """A key shorter than a fragment, and a long one that pydantic's error text shortens."""
    body = {key: key, "usage": {"input_tokens": key, "output_tokens": key}, "content": []}

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=body)

    transport = httpx.MockTransport(handler)
    model = AnthropicChatModel("m", api_key=key, http_client=httpx.Client(transport=transport))
    error = await _error(model, "chat")
    text = f"{error}{error!r}{error.body}" + "".join(traceback.format_exception(error))
    assert key not in text
    if len(key) > 24:
        assert key[: len(key) // 2] not in text and key[-12:] not in text


# -- tools: what a tool is configured with never reaches the model, an error or a log ----------


def _echoing_api(request: Request) -> Reply:
    """An API that puts the fixture key wherever it can, by path: `/401` in an error body (as
    `invalid token: Bearer ...`) and its status line, `/200` in a successful JSON body,
    `/redirect` in a `Location` to another origin (as userinfo and in the query), `/hop` in a
    `Location` within the origin (which the client follows: httpx logs the URL), `/header` in a
    response header (httpcore logs headers at DEBUG). What an MCP client sends (a POST) is
    refused, the key echoed in the status line, a header and the body."""
    json_type = {"content-type": "application/json"}
    if request.method == "POST":
        body = json.dumps({"error": f"invalid token: Bearer {KEY}"}).encode()
        return Reply(401, body, {**json_type, "x-echo": KEY}, reason=f"Unauthorized {KEY}")
    path = "/" + request.path.split("?")[0].rsplit("/", 1)[-1]
    if path == "/401":
        body = f"invalid token: Bearer {KEY}".encode()
        return Reply(401, body, json_type, reason=f"Unauthorized {KEY}")
    if path == "/200":
        return Reply(200, json.dumps({"token": KEY, KEY: [f"Bearer {KEY}"]}).encode(), json_type)
    ok = b'{"ok": true}'
    if path == "/redirect":
        other = request.headers["host"].replace("127.0.0.1", "localhost")
        location = f"http://u:{KEY}@{other}/?token={KEY}"
        return Reply(302, ok, {**json_type, "location": location})
    if path == "/hop":
        return Reply(302, ok, {**json_type, "location": f"/200?token={KEY}"})
    return Reply(200, ok, {**json_type, "x-echo": KEY})


@pytest.fixture(scope="module")
def echoing_api() -> Iterator[str]:
    with ScriptedServer() as server:
        server.route("*", _echoing_api)
        yield server.url


HTTP_TOOL_SECRETS: dict[str, Callable[[str, str], af.HttpTool]] = {
    "Authorization header": lambda base, path: af.HttpTool(
        "t", url=base + path, default_headers={"Authorization": f"Bearer {KEY}"}
    ),
    "headers from the context": lambda base, path: af.HttpTool(
        "t", url=base + path, default_headers=lambda ctx: {"X-Api-Key": ctx.deps}
    ),
    "basic auth": lambda base, path: af.HttpTool(
        "t", url=base + path, auth=httpx.BasicAuth("user", KEY)
    ),
    "key in the URL's query": lambda base, path: af.HttpTool(
        "t", url=f"{base}{path}?api_key={KEY}&page=1"
    ),
    "key as a path segment": lambda base, path: af.HttpTool("t", url=f"{base}/hooks/{KEY}{path}"),
    "a value named secret": lambda base, path: af.HttpTool(
        "t", url=f"{base}{path}?q={KEY}", secrets=[KEY]
    ),
}
"""An `HttpTool` holding the fixture key in each place one can be configured."""


@pytest.mark.parametrize("path", ["/401", "/200", "/redirect", "/hop", "/header"])
@pytest.mark.parametrize("configured", HTTP_TOOL_SECRETS)
@pytest.mark.parametrize("is_async", [False, True], ids=["execute", "aexecute"])
async def test_an_http_tool_never_shows_its_secrets(
    echoing_api: str,
    path: str,
    configured: str,
    is_async: bool,
    caplog: pytest.LogCaptureFixture,
    spans: InMemorySpanExporter,
) -> None:
    """Whatever the API echoes, the model reads the key redacted — in the result's text, whole
    text and value, an error and its exception — and so do the logs (at DEBUG) and the spans
    (content included), through a run of the loop."""
    caplog.set_level(logging.DEBUG)
    tool = HTTP_TOOL_SECRETS[configured](echoing_api, path)
    if is_async:
        tool.async_http_client = httpx.AsyncClient(follow_redirects=True)
    else:
        tool.http_client = httpx.Client(follow_redirects=True)
    call = af.ToolCall(id="c1", name="t", arguments="{}")
    context: af.ToolContext[Any] = af.ToolContext(deps=KEY, tool_call_id="c1", tool_name="t")
    result = await tool.aexecute(call, context) if is_async else tool.execute(call, context)
    if path in ("/401", "/200", "/hop"):  # what was echoed is there, redacted
        assert "[redacted]" in result.text, result.text
    texts = [result.text, str(result.full_text), repr(result.value), repr(tool)]
    if result.exception is not None:
        texts += traceback.format_exception(result.exception)
    _assert_hidden(texts, f"{configured}, {path}: the result")
    model = af.FunctionModel(lambda messages, parameters: _call_once(messages))
    service: af.ToolService[str] = af.ToolService([tool])
    if is_async:
        ran = await service.achat(model, "go", deps=KEY)
    else:
        ran = await asyncio.to_thread(service.chat, model, "go", deps=KEY)
    history = TypeAdapter(list[af.ChatMessage]).dump_json(list(ran.messages)).decode()
    _assert_hidden([history], f"{configured}, {path}: the history")
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    assert any(record.name == "httpx" for record in caplog.records)
    _assert_hidden([formatter.format(record) for record in caplog.records], f"{configured}: a log")
    _assert_hidden([span.to_json() for span in spans.get_finished_spans()], "a span")


def _call_once(messages: Sequence[af.ChatMessage]) -> af.AiMessage:
    if any(isinstance(message, af.ToolResultMessage) for message in messages):
        return af.AiMessage(text="done")
    return af.AiMessage(tool_calls=[af.ToolCall(id="c1", name="t", arguments="{}")])


MCP_SECRETS: dict[str, Callable[[str], af.MCPServer]] = {
    "key in the URL's query": lambda base: af.MCPServer.http(f"{base}/mcp?api_key={KEY}"),
    "key as a path segment": lambda base: af.MCPServer.http(f"{base}/mcp/{KEY}"),
    "Authorization header": lambda base: af.MCPServer.http(
        f"{base}/mcp", headers={"Authorization": f"Bearer {KEY}"}
    ),
    "a value named secret": lambda base: af.MCPServer.http(f"{base}/mcp/x{KEY}x", secrets=[KEY]),
    "a token of its auth= flow": lambda base: af.MCPServer.http(
        f"{base}/mcp", auth=_oauth(f"{base}/mcp")
    ),
}
"""An MCP server over HTTP holding the fixture key in each place one can be given."""


def _oauth(url: str) -> Any:
    """The MCP SDK's OAuth provider, its storage holding the key as a token an earlier
    authorization obtained (which the server refuses: the flow starts over and fails)."""
    from mcp.client.auth import OAuthClientProvider
    from mcp.shared.auth import OAuthClientMetadata
    from mcp_memory import MemoryTokens

    metadata = OAuthClientMetadata.model_validate({"redirect_uris": ["http://127.0.0.1:1/cb"]})
    return OAuthClientProvider(url, metadata, MemoryTokens(KEY, refresh=KEY[::-1]))


@pytest.mark.parametrize("configured", MCP_SECRETS)
async def test_an_mcp_server_never_shows_its_secrets(
    echoing_api: str, configured: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Its `repr`, the warning of an optional server that did not connect, the error of a
    required one, and the logs (the MCP SDK's HTTP client logs each URL) hide the key."""
    caplog.set_level(logging.DEBUG)
    server = MCP_SECRETS[configured](echoing_api)
    server.required, server.connect_timeout = False, 5
    async with server:
        assert list(server.tools()) == []
    texts = [repr(server), server.label]
    server.required = True
    with pytest.raises(Exception) as caught:  # whatever the SDK raises: its text is checked
        async with server:
            pass
    texts += traceback.format_exception(caught.value)
    _assert_hidden(texts, f"{configured}: the server")
    assert any("did not connect" in record.getMessage() for record in caplog.records)
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    _assert_hidden([formatter.format(record) for record in caplog.records], f"{configured}: a log")


TOOL_SECRETS = {
    "HttpTool": "test_an_http_tool_never_shows_its_secrets",
    "MCPTool": "test_an_mcp_server_never_shows_its_secrets (and, for a result echoing a "
    "header, tests/tools/mcp/test_mcp.py::test_streamable_http_sends_the_given_headers)",
    "MCPTool (task)": "an MCPTool called as a task: its server holds the secrets (tested above "
    "for every way to configure one), and its result takes the same way out as any call's "
    "(ServerCalls._follow, then the server's redactor)",
    "Tool": "holds no secret of the package's: a function's own values are its to show",
    "SchemaTool": "holds no secret of the package's: a handler's own values are its to show",
}
"""Per tool kind, the test that feeds it an API echoing its configured secrets, or why none
applies."""


def test_every_tool_kind_keeps_its_secrets() -> None:
    assert_covers("secret", "tool", TOOL_SECRETS)
    for reason in TOOL_SECRETS.values():
        test = reason.split(" ")[0]
        assert not test.startswith("test_") or callable(globals().get(test)), reason
