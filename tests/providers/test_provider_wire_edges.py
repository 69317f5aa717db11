"""Every provider keeps its word on odd answers: one table of malformed bodies and streams,
answers that are not what was asked for, streams that end oddly, and base URLs."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from openai_support import call

from agentforge_typed import (
    ChatRequest,
    FinalResultEvent,
    ModelError,
    ToolCallDelta,
    ToolResultMessage,
    ToolService,
    UserMessage,
    tool,
)
from agentforge_typed.providers._base import HttpChatModel
from agentforge_typed.providers.anthropic import AnthropicChatModel
from agentforge_typed.providers.gemini import GeminiChatModel
from agentforge_typed.providers.openai import OpenAIChatModel

REQUEST = ChatRequest(messages=[UserMessage(content="Weather in Paris?")])
MODES = ["chat", "achat", "stream", "astream"]
SSE = {"content-type": "text/event-stream"}
ARGUMENTS = '{"city": "Paris"}'


@dataclass(frozen=True)
class Answer:
    """One tool-calling answer; each field may be made odd."""

    finish: Any = None  # None: the provider's own "tool calls" reason
    call_id: Any = "call_w1"
    call_name: Any = "get_weather"
    input_tokens: Any = 12


def _openai_blocking(a: Answer) -> dict[str, Any]:
    return {
        "id": "chatcmpl-w1",
        "object": "chat.completion",
        "created": 1726200300,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": a.call_id,
                            "type": "function",
                            "function": {"name": a.call_name, "arguments": ARGUMENTS},
                        }
                    ],
                    "refusal": None,
                },
                "logprobs": None,
                "finish_reason": "tool_calls" if a.finish is None else a.finish,
            }
        ],
        "usage": {"prompt_tokens": a.input_tokens, "completion_tokens": 5, "total_tokens": 17},
    }


def _openai_stream(a: Answer) -> bytes:
    head = {"id": "chatcmpl-w1", "object": "chat.completion.chunk", "created": 1726200300}
    piece = {
        "index": 0,
        "id": a.call_id,
        "type": "function",
        "function": {"name": a.call_name, "arguments": ARGUMENTS},
    }
    chunks = [
        {
            **head,
            "choices": [{"index": 0, "delta": {"tool_calls": [piece]}, "finish_reason": None}],
        },
        {
            **head,
            "choices": [
                {"index": 0, "delta": {}, "finish_reason": a.finish or "tool_calls"},
            ],
        },
        {
            **head,
            "choices": [],
            "usage": {"prompt_tokens": a.input_tokens, "completion_tokens": 5, "total_tokens": 17},
        },
    ]
    return "".join(f"data: {json.dumps(c)}\n\n" for c in chunks).encode() + b"data: [DONE]\n\n"


def _anthropic_blocking(a: Answer) -> dict[str, Any]:
    return {
        "id": "msg_w1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [
            {"type": "tool_use", "id": a.call_id, "name": a.call_name, "input": {"city": "Paris"}}
        ],
        "stop_reason": "tool_use" if a.finish is None else a.finish,
        "stop_sequence": None,
        "usage": {"input_tokens": a.input_tokens, "output_tokens": 5},
    }


def _anthropic_events(a: Answer, *pieces: str) -> list[dict[str, Any]]:
    message: dict[str, Any] = {
        "id": "msg_w1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": a.input_tokens, "output_tokens": 1},
    }
    block = {"type": "tool_use", "id": a.call_id, "name": a.call_name, "input": {}}
    return [
        {"type": "message_start", "message": message},
        {"type": "content_block_start", "index": 0, "content_block": block},
        *[
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": piece},
            }
            for piece in pieces or (ARGUMENTS,)
        ],
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": a.finish or "tool_use", "stop_sequence": None},
            "usage": {"output_tokens": 5},
        },
        {"type": "message_stop"},
    ]


def _anthropic_stream(a: Answer, *pieces: str) -> bytes:
    events = _anthropic_events(a, *pieces)
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def _gemini_blocking(a: Answer) -> dict[str, Any]:
    call = {"id": a.call_id, "name": a.call_name, "args": {"city": "Paris"}}
    return {
        "candidates": [
            {
                "content": {"parts": [{"functionCall": call}], "role": "model"},
                "finishReason": "STOP" if a.finish is None else a.finish,
                "index": 0,
            }
        ],
        "usageMetadata": {
            "promptTokenCount": a.input_tokens,
            "candidatesTokenCount": 5,
            "totalTokenCount": 17,
        },
        "modelVersion": "gemini-2.5-flash",
        "responseId": "w1",
    }


def _gemini_stream(a: Answer) -> bytes:
    # Gemini streams each function call whole; the last chunk carries the reason and the usage.
    whole = _gemini_blocking(a)
    first = {**whole, "candidates": [{"content": whole["candidates"][0]["content"], "index": 0}]}
    last = {**whole, "candidates": [{**whole["candidates"][0], "content": {"parts": []}}]}
    return "".join(f"data: {json.dumps(c)}\r\n\r\n" for c in (first, last)).encode()


def _stream_bytes(provider: str, answer: Answer) -> bytes:
    streams = {"openai": _openai_stream, "anthropic": _anthropic_stream, "gemini": _gemini_stream}
    return streams[provider](answer)


def _answer(provider: str, answer: Answer, *, stream: bool) -> httpx.Response:
    if provider == "gemini":
        if stream:
            return httpx.Response(200, headers=SSE, content=_gemini_stream(answer))
        return httpx.Response(200, json=_gemini_blocking(answer))
    if provider == "openai":
        if stream:
            return httpx.Response(200, headers=SSE, content=_openai_stream(answer))
        return httpx.Response(200, json=_openai_blocking(answer))
    if stream:
        return httpx.Response(200, headers=SSE, content=_anthropic_stream(answer))
    return httpx.Response(200, json=_anthropic_blocking(answer))


def _model(provider: str, handler: Any, **options: Any) -> HttpChatModel:
    transport = httpx.MockTransport(handler)
    classes: dict[str, Callable[..., HttpChatModel]] = {
        "openai": OpenAIChatModel,
        "anthropic": AnthropicChatModel,
        "gemini": GeminiChatModel,
    }
    cls = classes[provider]
    options.setdefault("api_key", "sk-test")
    return cls(
        "m",
        max_retries=0,
        http_client=httpx.Client(transport=transport),
        async_http_client=httpx.AsyncClient(transport=transport),
        **options,
    )


def _serving(provider: str, answer: Answer) -> HttpChatModel:
    def handler(request: httpx.Request) -> httpx.Response:
        stream = b'"stream":true' in request.content or request.url.params.get("alt") == "sse"
        return _answer(provider, answer, stream=stream)

    return _model(provider, handler)


ODD = {
    "finish reason as a list": Answer(finish=["stop"]),
    "integer tool-call id": Answer(call_id=7),
    "integer tool-call name": Answer(call_name=7),
    "token count as a string": Answer(input_tokens="12"),
    "token count as a float": Answer(input_tokens=12.0),
    "token count as a bool": Answer(input_tokens=True),
}


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
@pytest.mark.parametrize("mode", MODES)
async def test_the_well_formed_answer_parses(provider: str, mode: str) -> None:
    response = await call(_serving(provider, Answer()), REQUEST, mode)
    (tool_call,) = response.ai_message.tool_calls
    assert (tool_call.id, tool_call.name) == ("call_w1", "get_weather")
    assert response.token_usage is not None and response.token_usage.input_tokens == 12


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("odd", list(ODD), ids=list(ODD))
async def test_every_odd_body_is_a_model_error(provider: str, mode: str, odd: str) -> None:
    with pytest.raises(ModelError, match="malformed"):
        await call(_serving(provider, ODD[odd]), REQUEST, mode)


# -- answers that are not what was asked for ---------------------------------------------------


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
@pytest.mark.parametrize("mode", ["chat", "achat"])
async def test_a_200_with_an_error_object_says_so(provider: str, mode: str) -> None:
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    model = _model(provider, lambda request: httpx.Response(200, json=body))
    with pytest.raises(ModelError) as info:
        await call(model, REQUEST, mode)
    name = {"openai": "OpenAI", "anthropic": "Anthropic", "gemini": "Gemini"}[provider]
    assert info.value.message == f"{name} returned an error: Overloaded"
    assert info.value.code == "overloaded_error"


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
@pytest.mark.parametrize("mode", ["stream", "astream"])
async def test_a_json_answer_to_a_stream_request_says_what_arrived(
    provider: str, mode: str
) -> None:
    body = {"error": {"message": "streaming is not enabled for this key", "code": "no_stream"}}
    model = _model(provider, lambda request: httpx.Response(200, json=body))
    with pytest.raises(ModelError) as info:
        await call(model, REQUEST, mode)
    assert info.value.message.endswith(
        "answered a stream request with application/json instead of server-sent events: "
        "streaming is not enabled for this key"
    )
    assert (info.value.status_code, info.value.code, info.value.body) == (200, "no_stream", body)


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
@pytest.mark.parametrize("mode", ["stream", "astream"])
async def test_an_html_answer_to_a_stream_request_says_what_arrived(
    provider: str, mode: str
) -> None:
    page = "<html><body>Please sign in to the corporate proxy</body></html>"
    headers = {"content-type": "text/html; charset=utf-8"}
    model = _model(provider, lambda request: httpx.Response(200, headers=headers, text=page))
    with pytest.raises(ModelError, match="with text/html; charset=utf-8 instead of server-sent"):
        await call(model, REQUEST, mode)


# -- how streams end ---------------------------------------------------------------------------


def _stream_of(provider: str, data: bytes) -> HttpChatModel:
    return _model(provider, lambda request: httpx.Response(200, headers=SSE, content=data))


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
@pytest.mark.parametrize("mode", ["stream", "astream"])
async def test_the_last_event_needs_no_final_blank_line(provider: str, mode: str) -> None:
    whole = _stream_bytes(provider, Answer())
    blank = b"\r\n" if provider == "gemini" else b"\n"  # Gemini frames its events with CRLF
    assert whole.endswith(blank * 2)
    response = await call(_stream_of(provider, whole.removesuffix(blank)), REQUEST, mode)
    assert json.loads(response.ai_message.tool_calls[0].arguments) == json.loads(ARGUMENTS)


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
@pytest.mark.parametrize("mode", ["stream", "astream"])
async def test_the_last_data_line_needs_no_line_break(provider: str, mode: str) -> None:
    # OpenAI's ends on `data: [DONE]`, the others on a JSON object: both are whole as they are.
    whole = _stream_bytes(provider, Answer())
    blank = b"\r\n" if provider == "gemini" else b"\n"
    response = await call(_stream_of(provider, whole.removesuffix(blank * 2)), REQUEST, mode)
    assert json.loads(response.ai_message.tool_calls[0].arguments) == json.loads(ARGUMENTS)


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
@pytest.mark.parametrize("mode", ["stream", "astream"])
async def test_a_stream_cut_inside_a_data_line_is_a_model_error(provider: str, mode: str) -> None:
    whole = _stream_bytes(provider, Answer())
    with pytest.raises(ModelError, match="stream ended inside a line"):
        await call(_stream_of(provider, whole.rstrip(b"\r\n")[:-2]), REQUEST, mode)


# -- Anthropic tool-call arguments -------------------------------------------------------------


@pytest.mark.parametrize("mode", ["stream", "astream"])
async def test_anthropic_arguments_are_exactly_what_was_streamed(mode: str) -> None:
    pieces = ('{"city":', ' "Par', 'is",\n  "unit" : "celsius"}')
    model = _stream_of("anthropic", _anthropic_stream(Answer(), *pieces))
    response = await call(model, REQUEST, mode)
    assert response.ai_message.tool_calls[0].arguments == "".join(pieces)


@pytest.mark.parametrize("mode", ["chat", "achat"])
async def test_anthropic_blocking_arguments_are_the_input_serialised_once(mode: str) -> None:
    response = await call(_serving("anthropic", Answer()), REQUEST, mode)
    assert response.ai_message.tool_calls[0].arguments == '{"city":"Paris"}'


@tool
def get_weather(city: str) -> str:
    """Current weather of a city."""
    return f"{city}: 18°C"


def test_anthropic_malformed_streamed_arguments_are_an_arguments_error_not_a_model_error() -> None:
    """The model gets the arguments error to correct; the run goes on."""
    broken = _anthropic_stream(Answer(), '{"city": "Par')
    fixed = _anthropic_stream(Answer(call_id="call_w2"), '{"city": "Paris"}')
    final = (
        b'event: message_start\ndata: {"type": "message_start", "message": {"id": "msg_3", '
        b'"type": "message", "role": "assistant", "model": "claude", "content": [], '
        b'"usage": {"input_tokens": 30, "output_tokens": 1}}}\n\n'
        b'event: content_block_start\ndata: {"type": "content_block_start", "index": 0, '
        b'"content_block": {"type": "text", "text": "18\\u00b0C in Paris."}}\n\n'
        b'event: content_block_stop\ndata: {"type": "content_block_stop", "index": 0}\n\n'
        b'event: message_delta\ndata: {"type": "message_delta", "delta": '
        b'{"stop_reason": "end_turn"}, "usage": {"output_tokens": 6}}\n\n'
        b'event: message_stop\ndata: {"type": "message_stop"}\n\n'
    )
    bodies = [broken, fixed, final]
    sent: list[Any] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(200, headers=SSE, content=bodies[len(sent) - 1])

    model = _model("anthropic", handler)
    events = list(ToolService([get_weather]).stream(model, [UserMessage(content="Paris?")]))
    assert any(isinstance(e, ToolCallDelta) for e in events)
    last = events[-1]
    assert isinstance(last, FinalResultEvent)
    result = last.result
    assert result.final_response.ai_message.text == "18°C in Paris."
    first_result = result.messages[2]
    assert isinstance(first_result, ToolResultMessage) and first_result.is_error
    # The refused call went back as the model sent it, so the model can see its slip.
    assert sent[1]["messages"][1]["content"][0]["input"] == {"INVALID_JSON": '{"city": "Par'}
    assert sent[1]["messages"][2]["content"][0]["is_error"] is True


# -- base URLs ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("provider", "base_url", "url"),
    [
        ("anthropic", "https://gateway.test/v1", "https://gateway.test/v1/messages"),
        ("anthropic", "https://gateway.test/v1/", "https://gateway.test/v1/messages"),
        ("anthropic", "https://gateway.test", "https://gateway.test/v1/messages"),
        ("openai", "http://localhost:8000/v1", "http://localhost:8000/v1/chat/completions"),
        ("openai", "http://localhost:8000/v1/", "http://localhost:8000/v1/chat/completions"),
    ],
)
def test_a_base_url_ending_in_v1_is_not_doubled(provider: str, base_url: str, url: str) -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return _answer(provider, Answer(), stream=False)

    _model(provider, handler, base_url=base_url).chat(REQUEST)
    assert seen == [url]
