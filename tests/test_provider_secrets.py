"""The API key never leaves a provider inside a `ModelError`, whatever path raised it.

One table of hostile answers, fed to every provider on every client path: the key is looked for
(whole and as either half, for text cut at a truncation point) in the error's `str`, `repr`,
`message`, `body` and `code`.
"""

from __future__ import annotations

import json
import traceback
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from openai_support import call

from agentforge_typed import ChatRequest, ModelError, UserMessage
from agentforge_typed.providers._base import HttpChatModel
from agentforge_typed.providers.anthropic import AnthropicChatModel
from agentforge_typed.providers.gemini import GeminiChatModel
from agentforge_typed.providers.openai import OpenAIChatModel

KEY = "sk-proj-TESTKEY0123456789abcdefXYZ"
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


# (case, modes, answer for "openai" / "anthropic" / "gemini"; one answer serves all when it is not
# a dict)
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
            "anthropic": httpx.Response(200, headers=SSE, content=_anthropic_tool_stream(KEY)),
            "gemini": _sse(
                json.dumps(
                    {"candidates": [{"content": {"parts": [{"functionCall": {"name": [KEY]}}]}}]}
                )
            ),
        },
    ),
]


def _model(provider: str, answer: Callable[[], Answer]) -> HttpChatModel:
    def handler(request: httpx.Request) -> httpx.Response:
        response = answer()
        return response[provider] if isinstance(response, dict) else response

    transport = httpx.MockTransport(handler)
    classes: dict[str, Callable[..., HttpChatModel]] = {
        "openai": OpenAIChatModel,
        "anthropic": AnthropicChatModel,
        "gemini": GeminiChatModel,
    }
    cls = classes[provider]
    return cls(
        "m",
        api_key=KEY,
        max_retries=0,
        http_client=httpx.Client(transport=transport),
        async_http_client=httpx.AsyncClient(transport=transport),
    )


async def _error(model: HttpChatModel, mode: str) -> ModelError:
    with pytest.raises(ModelError) as info:
        await call(model, REQUEST, mode)
    return info.value


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
@pytest.mark.parametrize(("case", "modes", "answer"), CASES, ids=[c[0] for c in CASES])
async def test_the_key_never_leaves_in_a_model_error(
    provider: str, case: str, modes: tuple[str, ...], answer: Callable[[], Answer]
) -> None:
    for mode in modes:
        error = await _error(_model(provider, answer), mode)
        seen = [str(error), repr(error), error.message, repr(error.body), str(error.code)]
        seen.append(json.dumps(error.body, default=str))
        seen.append("".join(traceback.format_exception(error)))  # what a logged error prints
        for text in seen:
            for piece in (KEY, KEY[: len(KEY) // 2], KEY[len(KEY) // 2 :]):
                assert piece not in text, (case, mode, text[:300])
        assert len(error.message) < 2100 and len(str(error.body)) < 2100 + 100


async def test_redaction_keeps_the_error_usable() -> None:
    """Redaction replaces the key and nothing else: status, code and the rest stay."""
    body = {"error": {"message": f"Incorrect API key provided: {KEY}.", "code": "invalid_api_key"}}
    model = _model("openai", lambda: httpx.Response(401, json=body))
    error = await _error(model, "chat")
    assert error.message == "OpenAI API error 401: Incorrect API key provided: [redacted]."
    assert (error.status_code, error.code) == (401, "invalid_api_key")
    assert error.body == {
        "error": {"message": "Incorrect API key provided: [redacted].", "code": "invalid_api_key"}
    }
    long = await _error(_model("anthropic", lambda: httpx.Response(400, text=LONG)), "chat")
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
