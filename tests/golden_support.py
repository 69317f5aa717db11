"""The golden-file cases of the vendor providers: where they live, and each vendor's model played
against a case's recorded bodies (shared by `test_golden.py` and `golden_update.py`).

A case is a folder `tests/fixtures/golden/<vendor>/<case>/`; DEVELOPERS.md ("Golden files") says
which files it holds and how to add one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from openai_support import ChunkedStream

from agentforge_typed import ChatRequest, ModelError, ResponseComplete, StreamEvent
from agentforge_typed.providers._base import HttpChatModel
from agentforge_typed.providers.anthropic import AnthropicChatModel
from agentforge_typed.providers.gemini import GeminiChatModel
from agentforge_typed.providers.openai import OpenAIChatModel
from agentforge_typed.providers.openai_responses import OpenAIResponsesModel

GOLDEN = Path(__file__).parent / "fixtures" / "golden"
API_KEY = "golden-test-key"

INPUT = "input.json"
"""The neutral `ChatRequest`, as JSON (`ChatRequest.model_validate`)."""
REQUEST = "request.json"
"""The exact body a blocking call sends."""
RESPONSE = "response.json"
"""A vendor's blocking answer."""
STREAM = "stream.sse"
"""A vendor's streamed answer, byte for byte."""
EXPECTED = "expected.json"
"""What we must parse: `{"response": ..., "stream": {"events": [...], then one of
`"equals_blocking": true`, `"response": ...` or `"error": {"message", "code", "body"}`}}`."""


@dataclass(frozen=True)
class Vendor:
    """One vendor API: its model, the model name cases are sent as, and how a streamed request
    differs from a blocking one."""

    model: Callable[..., HttpChatModel]
    name: str
    url: str
    stream_url: str
    headers: dict[str, str]
    """The headers every request carries, authentication included (beyond `content-type`)."""
    stream_fields: dict[str, Any] = field(default_factory=dict)
    """What a streamed request's body adds to the blocking one."""


VENDORS = {
    "openai": Vendor(
        OpenAIChatModel,
        "gpt-4o-mini",
        "https://api.openai.com/v1/chat/completions",
        "https://api.openai.com/v1/chat/completions",
        {"authorization": f"Bearer {API_KEY}"},
        {"stream": True, "stream_options": {"include_usage": True}},
    ),
    "openai_responses": Vendor(
        OpenAIResponsesModel,
        "gpt-5-mini",
        "https://api.openai.com/v1/responses",
        "https://api.openai.com/v1/responses",
        {"authorization": f"Bearer {API_KEY}"},
        {"stream": True},
    ),
    "anthropic": Vendor(
        AnthropicChatModel,
        "claude-sonnet-4-5",
        "https://api.anthropic.com/v1/messages",
        "https://api.anthropic.com/v1/messages",
        {"x-api-key": API_KEY, "anthropic-version": "2023-06-01"},
        {"stream": True},
    ),
    "gemini": Vendor(
        GeminiChatModel,
        "gemini-2.5-flash",
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent",
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash"
        ":streamGenerateContent?alt=sse",
        {"x-goog-api-key": API_KEY},
    ),
}

CHUNKINGS: dict[str, int | None] = {"whole": None, "bytes": 1, "sevens": 7}
"""How a stream's bytes are cut: in one piece, one byte at a time, every 7 bytes (so that lines,
JSON tokens and UTF-8 characters are cut everywhere)."""


@dataclass(frozen=True)
class Case:
    vendor: str
    name: str

    @property
    def folder(self) -> Path:
        return GOLDEN / self.vendor / self.name

    @property
    def id(self) -> str:
        return f"{self.vendor}/{self.name}"

    def has(self, name: str) -> bool:
        return (self.folder / name).is_file()

    def json(self, name: str) -> Any:
        return json.loads((self.folder / name).read_text(encoding="utf-8"))

    def bytes(self, name: str) -> bytes:
        return (self.folder / name).read_bytes()

    def request(self) -> ChatRequest:
        return ChatRequest.model_validate(self.json(INPUT))


def cases(*having: str) -> list[Case]:
    """Every case folder of every vendor, in order; only those holding the files `having`."""
    found = [
        Case(vendor.name, folder.name)
        for vendor in sorted(GOLDEN.iterdir())
        if vendor.is_dir()
        for folder in sorted(vendor.iterdir())
        if folder.is_dir()
    ]
    return [case for case in found if all(case.has(name) for name in having)]


def model(case: Case, handler: Callable[[httpx.Request], httpx.Response]) -> HttpChatModel:
    """The case's vendor model, every request answered by `handler`, never retried."""
    vendor = VENDORS[case.vendor]
    transport = httpx.MockTransport(handler)
    return vendor.model(
        vendor.name,
        api_key=API_KEY,
        max_retries=0,
        http_client=httpx.Client(transport=transport),
        async_http_client=httpx.AsyncClient(transport=transport),
    )


MODES = ("chat", "achat", "stream", "astream")


async def sent(case: Case, mode: str) -> httpx.Request:
    """The request the vendor model sends for the case's request through `mode` (answered with
    an error, which is not read)."""
    requests: list[httpx.Request] = []

    def refuse(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        return httpx.Response(418, json={"error": {"message": "not answered"}})

    chat = model(case, refuse)
    try:
        if mode == "chat":
            chat.chat(case.request())
        elif mode == "achat":
            await chat.achat(case.request())
        elif mode == "stream":
            list(chat.stream(case.request()))
        else:
            async for _ in chat.astream(case.request()):
                pass
    except ModelError:
        pass
    (request,) = requests
    return request


def answered(body: Any) -> Callable[[httpx.Request], httpx.Response]:
    return lambda request: httpx.Response(200, json=body)


def cut(data: bytes, size: int | None) -> list[bytes]:
    """`data` in pieces of `size` bytes (the last one shorter); whole for None."""
    if size is None:
        return [data]
    return [data[start : start + size] for start in range(0, len(data), size)]


def streamed(pieces: list[bytes]) -> Callable[[httpx.Request], httpx.Response]:
    return lambda request: httpx.Response(
        200, headers={"content-type": "text/event-stream"}, stream=ChunkedStream(pieces)
    )


def dumped(events: list[StreamEvent]) -> list[Any]:
    return [event.model_dump(mode="json") for event in events]


def error_of(exc: ModelError) -> dict[str, Any]:
    return {"message": str(exc), "code": exc.code, "body": exc.body}


def stream_outcome(
    events: list[StreamEvent], error: ModelError | None, blocking: Any
) -> dict[str, Any]:
    """A stream's events, then how it ended, as `expected.json` writes it: a final response is
    `"equals_blocking"` when it is the blocking parse (`blocking`, as JSON)."""
    if error is not None:
        return {"events": dumped(events), "error": error_of(error)}
    final = events[-1]
    assert isinstance(final, ResponseComplete), final
    response = final.response.model_dump(mode="json")
    if response == blocking:
        return {"events": dumped(events[:-1]), "equals_blocking": True}
    return {"events": dumped(events[:-1]), "response": response}


def stream_sync(case: Case, pieces: list[bytes], blocking: Any) -> dict[str, Any]:
    """`stream_outcome` of the case's request streamed (`stream`), its stream sent in `pieces`."""
    events: list[StreamEvent] = []
    chat = model(case, streamed(pieces))
    try:
        events.extend(chat.stream(case.request()))
    except ModelError as exc:
        return stream_outcome(events, exc, blocking)
    return stream_outcome(events, None, blocking)


async def stream_async(case: Case, pieces: list[bytes], blocking: Any) -> dict[str, Any]:
    """`stream_sync` through `astream`."""
    events: list[StreamEvent] = []
    chat = model(case, streamed(pieces))
    try:
        async for event in chat.astream(case.request()):
            events.append(event)
    except ModelError as exc:
        return stream_outcome(events, exc, blocking)
    return stream_outcome(events, None, blocking)


def blocking_json(case: Case) -> Any:
    """The blocking parse of the case's `response.json` as JSON; None without one."""
    if not case.has(RESPONSE):
        return None
    return model(case, answered(case.json(RESPONSE))).chat(case.request()).model_dump(mode="json")
