"""Content budget equals wire size: the bytes the result budget charges a part
(`BinaryContent.wire_size`, the one measure every path uses) are the bytes the request carries
for it, on every surface that sends one (issue 40, finding 7).

Surfaces: each wire core (`conformance.wire_cores()`, by the public model that speaks it), the
test models and every other public model class (`FakeModel`, `FunctionModel`, which are handed
the messages themselves: their "payload" is the messages' JSON, what a saved history or a durable
run carries; `FallbackModel`, whose payload is its model's). Each gets every kind of part (image,
document, audio, file) x inline bytes / URL / `data:` URL in a tool result, and the request with
the part is compared with the request without it.

The documented tolerance (`FRAMING`): the JSON around a part — its keys, type, media type and
name, and the stand-ins and introductions a wire adds where it moves a part (Chat Completions:
into a user message), 36 to 255 bytes here — and, where a wire sends a `data:` URL's base64
without its header (Anthropic, Gemini), that header: at most 512 bytes in all; the part itself
is 48,000 bytes (64,000 as base64). The charge is what the wire that sends the most for a part
sends: a wire sending a part in a smaller form (Anthropic's plain-text documents go as text, not
base64) sends less than the charge, never more. A part a wire cannot take is left out with a
note (the fit at the tool result): the request then carries none of its bytes.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Sequence
from typing import Any, cast

import httpx
import pydantic_core
import pytest
from conformance import wire_cores
from pydantic import TypeAdapter

import agentforge_typed as af
from agentforge_typed import (
    AiMessage,
    AudioContent,
    ChatMessage,
    ChatModel,
    ChatRequest,
    Content,
    DocumentContent,
    FakeModel,
    FallbackModel,
    FileContent,
    FunctionModel,
    ImageContent,
    ModelError,
    TextContent,
    ToolCall,
    ToolResultMessage,
    ToolService,
    UserMessage,
    tool,
)
from agentforge_typed._content import BinaryContent
from agentforge_typed.providers.anthropic import AnthropicChatModel
from agentforge_typed.providers.gemini import GeminiChatModel
from agentforge_typed.providers.openai import OpenAIChatModel
from agentforge_typed.providers.openai_responses import OpenAIResponsesModel
from agentforge_typed.tools import MAX_CONTENT_BYTES, MAX_CONTENT_PARTS

FRAMING = 512
"""The most bytes a part's framing may add to a request, beyond its charge (see the module)."""

SIZE = 48_000
"""The bytes each part holds (its base64: 64,000)."""

HISTORY: TypeAdapter[list[ChatMessage]] = TypeAdapter(list[ChatMessage])

# -- the surfaces ------------------------------------------------------------------------------

WIRES: dict[str, Callable[..., Any]] = {
    "openai": OpenAIChatModel,
    "responses": OpenAIResponsesModel,
    "anthropic": AnthropicChatModel,
    "gemini": GeminiChatModel,
}
"""Each wire core, by the public model that speaks it."""


class Sent:
    """The bytes of the one request a model sent, or was handed."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    def client(self) -> httpx.Client:
        def handler(request: httpx.Request) -> httpx.Response:
            self.bodies.append(request.content)
            return httpx.Response(400, json={"error": {"message": "measured"}})

        return httpx.Client(transport=httpx.MockTransport(handler))

    def handed(self, messages: Sequence[ChatMessage]) -> None:
        self.bodies.append(HISTORY.dump_json(list(messages)))


def _wire(core: str) -> Callable[[Sent], ChatModel]:
    return lambda sent: WIRES[core]("m", api_key="k", http_client=sent.client(), max_retries=0)


def _function(sent: Sent) -> ChatModel:
    def reply(messages: Sequence[ChatMessage], _: object) -> AiMessage:
        sent.handed(messages)
        return AiMessage(text="Read.")

    return FunctionModel(reply)


class _Fake(FakeModel):
    """`FakeModel`, recording the messages it is handed."""

    def __init__(self, sent: Sent) -> None:
        super().__init__()
        self.sent = sent

    def chat(self, request: ChatRequest) -> Any:
        self.sent.handed(request.messages)
        return super().chat(request)


MODELS: dict[str, Callable[[Sent], ChatModel]] = {
    "OpenAIChatModel": _wire("openai"),
    "OpenAIResponsesModel": _wire("responses"),
    "AnthropicChatModel": _wire("anthropic"),
    "GeminiChatModel": _wire("gemini"),
    "FakeModel": _Fake,
    "FunctionModel": _function,
    "FallbackModel": lambda sent: FallbackModel(_wire("anthropic")(sent), _function(sent)),
}
"""Every public model class, by name: a factory of one that records what it sends."""


def public_models() -> frozenset[str]:
    """The public classes of `agentforge_typed` that are chat models (`chat`, `achat`, `stream`,
    `astream`, defined among the providers)."""
    return frozenset(
        name
        for name in af.__all__
        if isinstance(value := getattr(af, name), type)
        and value.__module__.startswith("agentforge_typed.providers")
        and all(callable(getattr(value, m, None)) for m in ("chat", "achat", "stream", "astream"))
    )


# -- the parts ---------------------------------------------------------------------------------

DATA = bytes(range(256)) * (SIZE // 256)
MEDIA = {
    "image": "image/png",
    "document": "application/pdf",
    "audio": "audio/wav",
    "file": "text/csv",
}
KINDS: dict[str, type[BinaryContent]] = {
    "image": ImageContent,
    "document": DocumentContent,
    "audio": AudioContent,
    "file": FileContent,
}


def part(kind: str, source: str) -> BinaryContent:
    media = MEDIA[kind]
    if source == "inline":
        return KINDS[kind](data=DATA, media_type=media)
    if source == "url":
        return KINDS[kind](url=f"https://cdn.example.com/{'a' * SIZE}", media_type=media)
    return KINDS[kind](url=f"data:{media};base64,{base64.b64encode(DATA).decode()}")


CASES = [(kind, source) for kind in KINDS for source in ("inline", "url", "data")]
TEXT_DOCUMENTS = {
    "text": DocumentContent(data=b"plain words " * (SIZE // 12), media_type="text/plain"),
    "controls": DocumentContent(data=b"\x01\x02\x03" * (SIZE // 3), media_type="text/plain"),
}
"""Plain-text documents: Anthropic sends them as text, JSON-escaped (6 bytes for a control
character), the others as base64: the charge is the larger."""


def sent_for(model: str, content: Sequence[Content]) -> int:
    """The bytes of the request `model` sends for a history ending with a tool result of
    `content`, fitted at the tool result as a run does (the model's `fit_tool_content`)."""
    sent = Sent()
    built = MODELS[model](sent)
    fit = getattr(built, "fit_tool_content", None)
    parts = tuple(content) if fit is None else fit(content)[0]
    history: list[ChatMessage] = [
        UserMessage(content="Go."),
        AiMessage(tool_calls=[ToolCall(id="c1", name="t")]),
        ToolResultMessage(tool_call_id="c1", tool_name="t", content=parts),
    ]
    try:
        built.chat(ChatRequest(messages=history))
    except ModelError:
        pass  # the transport answers 400 once it has the request
    (body,) = sent.bodies[:1]
    return len(body)


def added(model: str, item: BinaryContent) -> int:
    """The bytes `item` adds to `model`'s request."""
    base: list[Content] = [TextContent(text="Result:")]
    return sent_for(model, [*base, cast(Content, item)]) - sent_for(model, base)


@pytest.mark.parametrize(("kind", "source"), CASES)
@pytest.mark.parametrize("model", sorted(MODELS))
def test_the_budget_charges_what_the_request_carries(model: str, kind: str, source: str) -> None:
    item = part(kind, source)
    charge, carried = item.wire_size, added(model, item)
    assert charge >= SIZE  # every source costs its bytes: a data: URL and a URL too
    if carried < SIZE:
        # Left out with a note (the wire cannot take it): none of its bytes went.
        assert carried <= FRAMING, (model, kind, source, carried)
        return
    assert -FRAMING <= carried - charge <= FRAMING, (model, kind, source, charge, carried)


@pytest.mark.parametrize("text", sorted(TEXT_DOCUMENTS))
def test_a_plain_text_document_is_charged_what_the_wire_sending_the_most_sends(text: str) -> None:
    item = TEXT_DOCUMENTS[text]
    carried = {model: added(model, item) for model in MODELS}
    taken = {model: size for model, size in carried.items() if size > FRAMING}
    assert all(size - item.wire_size <= FRAMING for size in taken.values()), carried
    assert abs(max(taken.values()) - item.wire_size) <= FRAMING, carried


def test_covers_every_surface() -> None:
    assert set(WIRES) == wire_cores(), "a wire core without a model in WIRES"
    missing = public_models() - set(MODELS)
    assert not missing, f"content budget: no test covers the model(s) {sorted(missing)}"


# -- the cap, to the byte ----------------------------------------------------------------------

PREFIX = {kind: f"data:{MEDIA[kind]};base64," for kind in KINDS}


def at_cap(kind: str, source: str, over: int) -> BinaryContent:
    """A part whose charge is the cap plus `over` bytes (inline: base64 comes in fours, so one
    raw byte more is 4 bytes more as sent)."""
    media = MEDIA[kind]
    if source == "inline":
        return KINDS[kind](data=b"\0" * (MAX_CONTENT_BYTES // 4 * 3 + over), media_type=media)
    head = "https://cdn.example.com/" if source == "url" else PREFIX[kind]
    return KINDS[kind](url=head + "A" * (MAX_CONTENT_BYTES - len(head) + over), media_type=media)


@pytest.mark.parametrize(("kind", "source"), CASES)
def test_a_part_at_the_cap_is_whole_and_one_byte_over_is_left_out(kind: str, source: str) -> None:
    exact, over = at_cap(kind, source, 0), at_cap(kind, source, 1)
    assert exact.wire_size == MAX_CONTENT_BYTES
    assert over.wire_size == MAX_CONTENT_BYTES + (4 if source == "inline" else 1)

    @tool(content_urls="any")
    def fetch(over: bool) -> list[str | BinaryContent]:
        """The part."""
        return ["Here:", at_cap(kind, source, int(over))]

    whole = fetch.execute(ToolCall(id="c", name="fetch", arguments='{"over": false}'))
    assert whole.content == (TextContent(text="Here:"), exact)
    assert whole.content_notes == ()
    cut = fetch.execute(ToolCall(id="c", name="fetch", arguments='{"over": true}'))
    (note,) = cut.content_notes
    assert cut.content == (TextContent(text="Here:"), TextContent(text=note))
    assert note.endswith(
        f": left out, {over.wire_size:,} bytes as sent, over the {MAX_CONTENT_BYTES:,}-byte "
        "limit of a tool result's content]"
    )


def test_a_data_url_is_bytes_to_the_budget() -> None:
    """A 20 MB image as a `data:` URL cost nothing and went inline; now it costs its bytes."""
    huge = ImageContent(url="data:image/png;base64," + "A" * (20 * 1024 * 1024))

    @tool
    def photo() -> ImageContent:
        """A photo."""
        return huge

    result = photo.execute(ToolCall(id="c", name="photo"))
    assert result.content == (
        TextContent(
            text=f"[image by URL: left out, {huge.wire_size:,} bytes as sent, over the "
            f"{MAX_CONTENT_BYTES:,}-byte limit of a tool result's content]"
        ),
    )
    assert result.value is huge


# -- the parts of one result -------------------------------------------------------------------

TINY = ImageContent(data=b"\x89PNG", media_type="image/png")


@tool(max_result_chars=1000)
def gallery(count: int) -> list[str | ImageContent]:
    """`count` tiny images."""
    return [TINY] * count


def test_a_result_keeps_at_most_max_content_parts_parts() -> None:
    assert MAX_CONTENT_PARTS <= 1000
    whole = gallery.execute(
        ToolCall(id="c", name="gallery", arguments=f'{{"count": {MAX_CONTENT_PARTS}}}')
    )
    assert whole.content == (TINY,) * MAX_CONTENT_PARTS and whole.content_notes == ()
    over = gallery.execute(
        ToolCall(id="c", name="gallery", arguments=f'{{"count": {MAX_CONTENT_PARTS + 1}}}')
    )
    note = f"[1 more parts left out: a tool result keeps at most {MAX_CONTENT_PARTS:,}]"
    assert over.content == (*(TINY,) * MAX_CONTENT_PARTS, TextContent(text=note))
    assert over.content_notes == (note,)


def test_twenty_thousand_tiny_images_make_a_bounded_message() -> None:
    """The issue's case: 20,000 tiny images with `max_result_chars=1000` made a 1.1 M-character
    message. Now the message holds `MAX_CONTENT_PARTS` of them and a marker."""

    def reply(messages: Sequence[ChatMessage], _: object) -> AiMessage:
        if isinstance(messages[-1], ToolResultMessage):
            return AiMessage(text="Seen.")
        return AiMessage(
            tool_calls=[ToolCall(id="c1", name="gallery", arguments='{"count": 20000}')]
        )

    result = ToolService([gallery]).chat(FunctionModel(reply), "Show me.")
    answer = result.messages[2]
    assert isinstance(answer, ToolResultMessage)
    assert len(answer.content) == MAX_CONTENT_PARTS + 1
    assert answer.content[-1] == TextContent(
        text=f"[19,900 more parts left out: a tool result keeps at most {MAX_CONTENT_PARTS:,}]"
    )
    assert len(answer.model_dump_json()) < 20_000
    assert len(pydantic_core.to_json(json.loads(answer.model_dump_json()))) < 20_000
