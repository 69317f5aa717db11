"""Content beyond text: the parts, their JSON round trip, what tools may return, the result
budget on content, the loop's history, durable runs, and each wire's mapping of every kind of
part (with the degradations `fit_content` records, or refuses under an `"error"` policy)."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

import httpx
import pytest
from pydantic import TypeAdapter, ValidationError

from agentforge_typed import (
    AiMessage,
    AudioContent,
    ChatMessage,
    ChatRequest,
    Content,
    DocumentContent,
    FileContent,
    FunctionModel,
    ImageContent,
    ModelError,
    ModelProfile,
    TextContent,
    ToolCall,
    ToolResultMessage,
    ToolReturn,
    ToolService,
    UnsupportedFeatureError,
    UserMessage,
    tool,
)
from agentforge_typed._messages import cut_text
from agentforge_typed.providers.anthropic import AnthropicChatModel
from agentforge_typed.providers.gemini import GeminiChatModel
from agentforge_typed.providers.openai import OpenAIChatModel
from agentforge_typed.providers.openai_responses import OpenAIResponsesModel
from agentforge_typed.tools._budget import MAX_CONTENT_BYTES, apply_budget

PNG = b"\x89PNG\r\n\x1a\n-bytes"
PNG64 = base64.b64encode(PNG).decode()
PDF = b"%PDF-1.7 tiny"
PDF64 = base64.b64encode(PDF).decode()
WAV = b"RIFF....WAVE"
WAV64 = base64.b64encode(WAV).decode()
HISTORY: TypeAdapter[list[ChatMessage]] = TypeAdapter(list[ChatMessage])


def call(name: str = "t", arguments: str = "{}") -> ToolCall:
    return ToolCall(id="c1", name=name, arguments=arguments)


# -- the parts ----------------------------------------------------------------------------------


def test_a_part_takes_exactly_one_source() -> None:
    with pytest.raises(ValidationError, match="ImageContent takes exactly one of url= and data="):
        ImageContent(url="https://x.test/a.png", data=PNG, media_type="image/png")
    with pytest.raises(ValidationError, match="DocumentContent takes exactly one of url= and"):
        DocumentContent()
    with pytest.raises(ValidationError, match=r"AudioContent\(data=...\) needs its media_type="):
        AudioContent(data=WAV)


def test_data_given_as_text_must_be_base64() -> None:
    assert ImageContent(data=PNG64, media_type="image/png").data == PNG  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="data given as text must be base64"):
        ImageContent(data="not base64!", media_type="image/png")  # type: ignore[arg-type]


def test_a_part_describes_itself_without_its_url() -> None:
    assert ImageContent(data=PNG, media_type="image/png").describe() == (
        f"[image: image/png, {len(PNG)} bytes]"
    )
    assert DocumentContent(url="https://x.test/signed?token=s3cret").describe() == (
        "[document by URL]"
    )
    assert "bytes" not in repr(ImageContent(data=PNG, media_type="image/png"))


def test_a_history_with_binary_content_round_trips_exactly() -> None:
    history: list[ChatMessage] = [
        UserMessage(
            content=[
                TextContent(text="Read these."),
                DocumentContent(data=PDF, media_type="application/pdf", title="a.pdf"),
                AudioContent(data=WAV, media_type="audio/wav"),
                FileContent(url="gs://bucket/data.csv", media_type="text/csv"),
            ]
        ),
        AiMessage(tool_calls=[call("shot")]),
        ToolResultMessage(
            tool_call_id="c1",
            tool_name="shot",
            content=[TextContent(text="The page:"), ImageContent(data=PNG, media_type="image/png")],
        ),
    ]
    dumped = HISTORY.dump_json(history)
    assert PNG64.encode() in dumped and PDF64.encode() in dumped and WAV64.encode() in dumped
    assert HISTORY.validate_json(dumped) == history
    assert HISTORY.validate_python(HISTORY.dump_python(history, mode="json")) == history


def test_a_tool_result_takes_text_or_content() -> None:
    plain = ToolResultMessage(tool_call_id="c1", tool_name="t", text="42")
    assert (plain.text, plain.content) == ("42", ())
    rich = ToolResultMessage(
        tool_call_id="c1",
        tool_name="t",
        content=[TextContent(text="Chart:"), ImageContent(data=PNG, media_type="image/png")],
    )
    assert rich.text == f"Chart:\n[image: image/png, {len(PNG)} bytes]"


# -- what tools return --------------------------------------------------------------------------


@tool
def screenshot() -> ImageContent:
    """A screenshot."""
    return ImageContent(data=PNG, media_type="image/png")


@tool
def pages() -> list[str | ImageContent | DocumentContent]:
    """Two pages."""
    return [
        "Page 1:",
        ImageContent(data=PNG, media_type="image/png"),
        DocumentContent(data=PDF, media_type="application/pdf"),
    ]


@tool(content_urls="any")  # the link is not resolved: `x.test` is no host anywhere
def total() -> ToolReturn[int]:
    """A total and its chart."""
    return ToolReturn(42, ["The chart:", ImageContent(url="https://x.test/chart.png")])


@tool
def plain_list() -> list[str]:
    """Strings only."""
    return ["a", "b"]


def test_a_tool_returning_a_part() -> None:
    result = screenshot.execute(call("screenshot"))
    image = ImageContent(data=PNG, media_type="image/png")
    assert (result.content, result.value, result.is_error) == ((image,), image, False)
    assert result.text == f"[image: image/png, {len(PNG)} bytes]"


def test_a_tool_returning_text_and_parts_in_order() -> None:
    result = pages.execute(call("pages"))
    assert [part.type for part in result.content] == ["text", "image", "document"]
    assert result.text == (
        f"Page 1:\n[image: image/png, {len(PNG)} bytes]\n"
        f"[document: application/pdf, {len(PDF)} bytes]"
    )


async def test_a_typed_value_with_attachments() -> None:
    result = await total.aexecute(call("total"))
    assert result.value == 42  # the program reads the typed value
    assert result.text == "42\nThe chart:\n[image by URL]"
    assert result.content[-1] == ImageContent(url="https://x.test/chart.png")


def test_strings_alone_stay_a_value() -> None:
    result = plain_list.execute(call("plain_list"))
    assert (result.text, result.content) == ('["a","b"]', ())


def test_a_tool_return_without_parts_is_text() -> None:
    @tool
    def just_text() -> ToolReturn[dict[str, int]]:
        """Text only."""
        return ToolReturn({"n": 1}, ["and a note"])

    result = just_text.execute(call("just_text"))
    assert (result.text, result.value, result.content) == ('{"n":1}\nand a note', {"n": 1}, ())


def test_a_tool_return_with_something_else_is_an_unreadable_result() -> None:
    @tool
    def wrong() -> ToolReturn[int]:
        """Wrong content."""
        return ToolReturn(1, [object()])  # type: ignore[list-item]

    result = wrong.execute(call("wrong"))
    # The body ran: the model is told so, not that the tool failed.
    assert result.is_error and result.error_kind == "unreadable_result"
    assert result.text == (
        "Tool `wrong` ran, but its result could not be read (TypeError: ToolReturn.content holds "
        "only str and content parts (ImageContent, …)). Its effects, if any, took place: do not "
        "call it again to get the result."
    )


# -- the budget ---------------------------------------------------------------------------------


def test_a_20_mb_image_is_left_out_with_a_note_and_kept_on_the_value() -> None:
    huge = ImageContent(data=b"\0" * (20 * 1024 * 1024), media_type="image/png")
    small = ImageContent(data=PNG, media_type="image/png")

    @tool
    def big() -> list[str | ImageContent]:
        """Too big."""
        return ["Here:", huge, small]

    result = big.execute(call("big"))
    assert result.content == (
        TextContent(text="Here:"),
        TextContent(
            text="[image: image/png, 20,971,520 bytes: left out, 27,962,028 bytes as sent, over "
            "the 5,242,880-byte limit of a tool result's content]"
        ),
        small,
    )
    assert result.value[1] is huge
    assert result.full_text is not None and "20,971,520 bytes]" in result.full_text


def test_inline_bytes_exactly_at_the_limit_are_kept() -> None:
    # The cap counts bytes as sent: inline data as base64, 4 bytes for every 3.
    exact = ImageContent(data=b"\0" * (MAX_CONTENT_BYTES // 4 * 3), media_type="image/png")
    over = ImageContent(data=b"\0" * (MAX_CONTENT_BYTES // 4 * 3 + 1), media_type="image/png")
    assert exact.wire_size == MAX_CONTENT_BYTES
    assert screenshot_of(exact).content == (exact,)
    assert screenshot_of(over).content[0].type == "text"


def screenshot_of(image: ImageContent) -> Any:
    @tool
    def shot() -> ImageContent:
        """A shot."""
        return image

    return shot.execute(call("shot"))


def test_text_parts_share_the_character_budget() -> None:
    @tool(max_result_chars=100)
    def long() -> list[str | ImageContent]:
        """Long text around an image."""
        return ["a" * 150, ImageContent(data=PNG, media_type="image/png"), "b" * 150]

    result = long.execute(call("long"))
    first, image, rest = result.content
    assert first == TextContent(text=cut_text("a" * 150, 100))
    assert image == ImageContent(data=PNG, media_type="image/png")
    assert rest == TextContent(text="… [150 characters cut] …")


def test_a_service_budget_recuts_content_from_the_whole() -> None:
    @tool
    def long() -> list[str | ImageContent]:
        """Long text and an image."""
        return ["a" * 150, ImageContent(data=PNG, media_type="image/png")]

    def reply(messages: Sequence[ChatMessage], _: object) -> AiMessage:
        if isinstance(messages[-1], UserMessage):
            return AiMessage(tool_calls=[ToolCall(id="c1", name="long")])
        return AiMessage(text="Done.")

    whole = long.execute(call("long"))
    assert whole.content[0] == TextContent(text="a" * 150)
    result = ToolService([long], max_result_chars=100).chat(FunctionModel(reply), "Go.")
    answer = result.messages[2]
    assert isinstance(answer, ToolResultMessage)
    assert answer.content == (
        TextContent(text=cut_text("a" * 150, 100)),
        ImageContent(data=PNG, media_type="image/png"),
    )
    assert result.tool_executions[0].result.value == whole.value
    assert apply_budget(whole, 100_000) is whole


# -- the loop -----------------------------------------------------------------------------------


def test_the_history_carries_the_content() -> None:
    def reply(messages: Sequence[ChatMessage], _: object) -> AiMessage:
        if isinstance(messages[-1], UserMessage):
            return AiMessage(tool_calls=[ToolCall(id="c1", name="screenshot")])
        return AiMessage(text="A red square.")

    result = ToolService([screenshot]).chat(FunctionModel(reply), "Look.")
    answer = result.messages[2]
    assert isinstance(answer, ToolResultMessage)
    assert answer.content == (ImageContent(data=PNG, media_type="image/png"),)
    resumed = HISTORY.validate_json(HISTORY.dump_json(list(result.messages)))
    assert resumed == list(result.messages)


def test_a_durable_result_carries_the_bytes_once() -> None:
    temporal = pytest.importorskip("agentforge_typed.temporal")
    result = pages.execute(call("pages"))
    travelling = temporal.ToolActivityResult.of(result)
    assert (travelling.value, travelling.value_from) == (None, "parts")
    encoded = travelling.model_dump_json()
    assert encoded.count(PNG64) == 1
    back = temporal.ToolActivityResult.model_validate_json(encoded).result()
    assert (back.text, back.content, back.value) == (result.text, result.content, result.value)
    single = temporal.ToolActivityResult.of(screenshot.execute(call("screenshot")))
    assert single.value_from == "part"
    assert single.result().value == ImageContent(data=PNG, media_type="image/png")
    bounded = single.bounded("screenshot", 100)
    assert bounded.is_error and bounded.content == ()
    assert "over the 100-byte limit of a durable run's tool results" in bounded.text


# -- the wires ----------------------------------------------------------------------------------

ANSWERS = {
    "openai": {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1739000000,
        "model": "gpt-4.1",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Read."},
                "finish_reason": "stop",
            }
        ],
    },
    "anthropic": {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "Read."}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 2},
    },
    "responses": {
        "id": "resp_1",
        "object": "response",
        "created_at": 1756472304,
        "status": "completed",
        "model": "gpt-5-mini",
        "output": [
            {
                "id": "msg_1",
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Read.", "annotations": []}],
            }
        ],
        "usage": {"input_tokens": 10, "output_tokens": 2, "total_tokens": 12},
    },
    "gemini": {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": "Read."}]}, "finishReason": "STOP"}
        ],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 2, "totalTokenCount": 12},
        "modelVersion": "gemini-2.5-flash",
    },
}


def wire(provider: str, **options: Any) -> tuple[Any, list[dict[str, Any]]]:
    bodies: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return httpx.Response(200, json=ANSWERS[provider])

    client = httpx.Client(transport=httpx.MockTransport(handler))
    kinds = {
        "openai": OpenAIChatModel,
        "anthropic": AnthropicChatModel,
        "responses": OpenAIResponsesModel,
        "gemini": GeminiChatModel,
    }
    return kinds[provider]("m", api_key="k", http_client=client, max_retries=0, **options), bodies


EVERY_PART = UserMessage(
    content=[
        TextContent(text="Read these."),
        ImageContent(data=PNG, media_type="image/png"),
        DocumentContent(data=PDF, media_type="application/pdf", title="report.pdf"),
        DocumentContent(data=b"plain words", media_type="text/plain"),
        AudioContent(data=WAV, media_type="audio/wav"),
        FileContent(data=b"a,b", media_type="text/csv", filename="data.csv"),
    ]
)


def test_chat_completions_user_parts() -> None:
    # https://platform.openai.com/docs/api-reference/chat/create: text, image_url, input_audio,
    # file (inline file_data).
    model, bodies = wire("openai")
    model.chat(ChatRequest(messages=[EVERY_PART]))
    assert bodies[0]["messages"][0]["content"] == [
        {"type": "text", "text": "Read these."},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG64}"}},
        {
            "type": "file",
            "file": {"filename": "report.pdf", "file_data": f"data:application/pdf;base64,{PDF64}"},
        },
        {
            "type": "file",
            "file": {
                "filename": "document",
                "file_data": "data:text/plain;base64," + base64.b64encode(b"plain words").decode(),
            },
        },
        {"type": "input_audio", "input_audio": {"data": WAV64, "format": "wav"}},
        {
            "type": "file",
            "file": {"filename": "data.csv", "file_data": "data:text/csv;base64,YSxi"},
        },
    ]


def test_chat_completions_leaves_out_audio_it_cannot_name_and_files_by_url() -> None:
    model, bodies = wire("openai")
    parts = UserMessage(
        content=[
            AudioContent(data=b"OggS", media_type="audio/ogg"),
            DocumentContent(url="https://x.test/a.pdf"),
        ]
    )
    answer = model.chat(ChatRequest(messages=[parts]))
    assert bodies[0]["messages"][0]["content"] == [
        {
            "type": "text",
            "text": "[audio: audio/ogg, 4 bytes] (left out: the model's endpoint takes audio "
            "only as wav or mp3)",
        },
        {
            "type": "text",
            "text": "[document by URL] (left out: the model's endpoint takes a document only as "
            "inline data, not by URL)",
        },
    ]
    assert answer.metadata["adaptations"] == [
        {
            "feature": "user_content",
            "rule": "audio in user messages left out: the endpoint takes audio only as wav or "
            "mp3; documents in user messages left out: the endpoint takes a document only as "
            "inline data, not by URL",
        }
    ]


def test_anthropic_user_parts_and_what_it_leaves_out() -> None:
    # https://docs.anthropic.com/en/docs/build-with-claude/pdf-support: document sources
    # base64 and text; no audio or other files: left out, recorded.
    model, bodies = wire("anthropic")
    answer = model.chat(ChatRequest(messages=[EVERY_PART]))
    assert bodies[0]["messages"][0]["content"] == [
        {"type": "text", "text": "Read these."},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG64}},
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": PDF64},
            "title": "report.pdf",
        },
        {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": "plain words"},
        },
        {
            "type": "text",
            "text": f"[audio: audio/wav, {len(WAV)} bytes] (left out: the model's endpoint does "
            "not take audio)",
        },
        {
            "type": "text",
            "text": "[file: text/csv, 3 bytes] (left out: the model's endpoint does not take files)",
        },
    ]
    assert answer.metadata["adaptations"] == [
        {
            "feature": "user_content",
            "rule": "audio in user messages left out: the endpoint takes none; files in user "
            "messages left out: the endpoint takes none",
        }
    ]


def test_anthropic_document_by_url() -> None:
    model, bodies = wire("anthropic")
    doc = UserMessage(content=[DocumentContent(url="https://x.test/a.pdf")])
    model.chat(ChatRequest(messages=[doc]))
    assert bodies[0]["messages"][0]["content"] == [
        {"type": "document", "source": {"type": "url", "url": "https://x.test/a.pdf"}}
    ]


def test_responses_user_parts() -> None:
    # https://platform.openai.com/docs/guides/pdf-files: input_file with file_data or file_url.
    model, bodies = wire("responses")
    by_url = DocumentContent(url="https://x.test/a.pdf")
    model.chat(ChatRequest(messages=[UserMessage(content=[*EVERY_PART.content, by_url])]))
    assert bodies[0]["input"][0]["content"] == [
        {"type": "input_text", "text": "Read these."},
        {
            "type": "input_image",
            "image_url": f"data:image/png;base64,{PNG64}",
            "detail": "auto",
        },
        {
            "type": "input_file",
            "filename": "report.pdf",
            "file_data": f"data:application/pdf;base64,{PDF64}",
        },
        {
            "type": "input_file",
            "filename": "document",
            "file_data": "data:text/plain;base64," + base64.b64encode(b"plain words").decode(),
        },
        {
            "type": "input_text",
            "text": f"[audio: audio/wav, {len(WAV)} bytes] (left out: the model's endpoint does "
            "not take audio)",
        },
        {"type": "input_file", "filename": "data.csv", "file_data": "data:text/csv;base64,YSxi"},
        {"type": "input_file", "file_url": "https://x.test/a.pdf"},
    ]


def test_gemini_user_parts() -> None:
    # https://ai.google.dev/api/caching#Part: inlineData and fileData.
    model, bodies = wire("gemini")
    by_uri = FileContent(url="gs://bucket/data.csv", media_type="text/csv")
    model.chat(ChatRequest(messages=[UserMessage(content=[*EVERY_PART.content[:2], by_uri])]))
    assert bodies[0]["contents"][0]["parts"] == [
        {"text": "Read these."},
        {"inlineData": {"mimeType": "image/png", "data": PNG64}},
        {"fileData": {"mimeType": "text/csv", "fileUri": "gs://bucket/data.csv"}},
    ]


def test_gemini_result_parts_by_url_follow_the_function_response() -> None:
    model, bodies = wire("gemini")
    result = ToolResultMessage(
        tool_call_id="c1",
        tool_name="shot",
        content=[TextContent(text="See:"), ImageContent(url="gs://bucket/shot.png")],
    )
    model.chat(ChatRequest(messages=[UserMessage(content="Go."), tool_turn(), result]))
    assert bodies[0]["contents"][-1]["parts"] == [
        {"functionResponse": {"name": "shot", "response": {"output": "See:\n[image by URL]"}}},
        {"fileData": {"mimeType": "image/png", "fileUri": "gs://bucket/shot.png"}},
    ]


def tool_turn() -> AiMessage:
    return AiMessage(tool_calls=[ToolCall(id="c1", name="shot")])


def image_result() -> ToolResultMessage:
    return ToolResultMessage(
        tool_call_id="c1",
        tool_name="shot",
        content=[TextContent(text="Shot:"), ImageContent(data=PNG, media_type="image/png")],
    )


def test_a_profile_moves_what_users_may_send_and_leaves_out_the_rest() -> None:
    profile = ModelProfile(name="local", user_content={"image"})
    model, bodies = wire("openai", profile=profile)
    result = ToolResultMessage(
        tool_call_id="c1",
        tool_name="shot",
        content=[
            TextContent(text="Shot:"),
            ImageContent(data=PNG, media_type="image/png"),
            AudioContent(data=WAV, media_type="audio/wav"),
        ],
    )
    answer = model.chat(ChatRequest(messages=[UserMessage(content="Go."), tool_turn(), result]))
    assert bodies[0]["messages"][-2:] == [
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": f"Shot:\n[image: image/png, {len(PNG)} bytes] (in the next user message)\n"
            f"[audio: audio/wav, {len(WAV)} bytes] (left out: the model's endpoint does not "
            "take audio)",
        },
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Content returned by the tool call c1 (shot):"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG64}"}},
            ],
        },
    ]
    assert answer.metadata["adaptations"] == [
        {
            "feature": "tool_result_content",
            "rule": "audio returned by tools left out: the endpoint takes none; images "
            "returned by tools sent in a user message after the tool results",
        }
    ]


def test_a_profile_without_images_leaves_them_out_of_both() -> None:
    profile = ModelProfile(name="local", tool_result_content=set(), user_content=set())
    model, bodies = wire("openai", profile=profile)
    answer = model.chat(
        ChatRequest(messages=[UserMessage(content="Go."), tool_turn(), image_result()])
    )
    assert bodies[0]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": f"Shot:\n[image: image/png, {len(PNG)} bytes] (left out: the model's "
        "endpoint does not take images)",
    }
    assert answer.metadata["adaptations"] == [
        {
            "feature": "tool_result_content",
            "rule": "images returned by tools left out: the endpoint takes none",
        }
    ]


def test_an_error_policy_refuses_content_before_sending() -> None:
    profile = ModelProfile(name="local", user_content=set(), policy={"user_content": "error"})
    model, bodies = wire("openai", profile=profile)
    message = UserMessage(content=[ImageContent(data=PNG, media_type="image/png")])
    with pytest.raises(UnsupportedFeatureError) as info:
        model.chat(ChatRequest(messages=[message]))
    assert info.value.feature == "user_content"
    assert str(info.value) == (
        "profile 'local' does not support user_content: images in user messages left out: "
        "the endpoint takes none"
    )
    assert bodies == []


SIGNED = "https://files.example.com/a.wav?X-Signature=sk-canary-0123456789"


@pytest.mark.parametrize("provider", ["openai", "anthropic", "responses", "gemini"])
def test_a_signed_url_never_reaches_a_stand_in_an_adaptation_or_an_error(provider: str) -> None:
    """A part's URL may carry a credential: notes, recorded adaptations and the wires' refusals
    name the part's kind and type, never its URL."""
    model, bodies = wire(provider)
    parts: list[Content] = [
        AudioContent(url=SIGNED),
        FileContent(url=SIGNED, media_type="text/csv"),
    ]
    try:
        answer = model.chat(ChatRequest(messages=[UserMessage(content=parts)]))
    except ModelError as error:
        assert "sk-canary" not in f"{error} {error!r}"
        return
    assert "sk-canary" not in json.dumps(answer.metadata.get("adaptations", []))
    sent = json.dumps(bodies[0])
    if provider in ("anthropic", "responses"):
        # Audio is left out, its note naming no URL; Responses sends the file by its URL
        # (`file_url`), as asked, and Anthropic leaves it out too.
        assert sent.count("sk-canary") == (1 if provider == "responses" else 0)
