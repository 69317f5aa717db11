"""Content a model cannot take is decided at the tool result (issue 40, finding 6).

A `resource_link` to an `https` PDF became a URL part that Chat Completions (and every
OpenAI-compatible server) cannot take: `ModelError` before the next request, and the saved
history failed the same way on every resume. Now the loop asks the answering model, once per run,
how it takes a result's parts (`fit_tool_content`, by its wire and profile): a part it takes
nowhere becomes a note at the tool result, recorded (`content_notes`); under an `"error"` policy
the run is refused there, before the next request. A saved history with such a part is fitted
when it is sent (a note, never a `ModelError`). `FakeModel` and `FunctionModel` take parts as they
are; a `FallbackModel` keeps what every one of its models takes.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from compatible_server import compatible_server
from dns_support import PUBLIC, resolving
from loop_drivers import DRIVERS, drive

from agentforge_typed import (
    AiMessage,
    AnthropicChatModel,
    AudioContent,
    ChatMessage,
    DocumentContent,
    FakeModel,
    FallbackModel,
    FunctionModel,
    ImageContent,
    MCPServer,
    ModelProfile,
    OpenAIChatModel,
    TextContent,
    ToolCall,
    ToolResultMessage,
    ToolService,
    UnsupportedFeatureError,
    UserMessage,
    tool,
)

pytest.importorskip("mcp")

SERVER = str(Path(__file__).parents[1] / "mcp_content_server.py")
PDF_LINK = "https://cdn.example.com/q3.pdf"
PDF_NOTE = (
    "[document by URL] (left out: the model's endpoint takes a document only as inline data, "
    "not by URL)"
)


@pytest.fixture(autouse=True)
def _names(monkeypatch: pytest.MonkeyPatch) -> None:
    resolving(monkeypatch, {"cdn.example.com": PUBLIC})


@pytest.fixture(scope="module")
def content_server() -> Iterator[MCPServer]:
    with MCPServer.stdio(sys.executable, [SERVER]) as server:
        yield server


def service_of(server: MCPServer) -> ToolService[Any]:
    service = ToolService()
    service.register(server)
    return service


def tool_results(messages: Sequence[ChatMessage]) -> list[ToolResultMessage]:
    return [m for m in messages if isinstance(m, ToolResultMessage)]


@pytest.mark.parametrize("driver", DRIVERS)
def test_an_mcp_pdf_link_is_a_note_at_the_tool_result_for_chat_completions(
    content_server: MCPServer, driver: str
) -> None:
    with compatible_server() as server:
        model = OpenAIChatModel("local", base_url=server.url, profile="vllm", max_retries=0)
        result = drive(driver, service_of(content_server), model, "Report?", tools=["pdf_link"])
    assert result.text == "Done."
    (answer,) = tool_results(result.messages)
    assert answer.content == (TextContent(text="The report:"), TextContent(text=PDF_NOTE))
    assert answer.text == f"The report:\n{PDF_NOTE}"
    execution = result.tool_executions[0]
    assert execution.result.content_notes == (PDF_NOTE,)
    assert execution.result.value == "The report:\n[document by URL]"  # the server's own text
    sent = server.requests[-1]["messages"]
    assert sent[-1] == {"role": "tool", "tool_call_id": "call_0", "content": answer.text}


def test_a_saved_history_with_a_pdf_link_resumes_with_a_note() -> None:
    """A history saved before (or by another model) holds the link; sent to an OpenAI-compatible
    server, the part is left out with a note and the change recorded: no `ModelError`."""
    history: list[ChatMessage] = [
        UserMessage(content="Report?"),
        AiMessage(tool_calls=[ToolCall(id="call_0", name="pdf_link")]),
        ToolResultMessage(
            tool_call_id="call_0",
            tool_name="pdf_link",
            content=[TextContent(text="The report:"), DocumentContent(url=PDF_LINK)],
        ),
        UserMessage(content="And the total?"),
    ]
    with compatible_server() as server:
        model = OpenAIChatModel("local", base_url=server.url, profile="vllm", max_retries=0)
        result = ToolService().chat(model, history)
    assert result.text == "Done."
    assert server.requests[0]["messages"][2] == {
        "role": "tool",
        "tool_call_id": "call_0",
        "content": f"The report:\n{PDF_NOTE}",
    }
    assert result.final_response.metadata["adaptations"] == [
        {
            "feature": "tool_result_content",
            "rule": "documents returned by tools left out: the endpoint takes a document only as "
            "inline data, not by URL",
        }
    ]


def test_an_error_policy_refuses_at_the_tool_result(content_server: MCPServer) -> None:
    profile = ModelProfile(name="strict-local", policy={"tool_result_content": "error"})
    with compatible_server() as server:
        model = OpenAIChatModel("local", base_url=server.url, profile=profile, max_retries=0)
        with pytest.raises(UnsupportedFeatureError) as caught:
            service_of(content_server).chat(model, "Report?", tools=["pdf_link"])
    assert len(server.requests) == 1  # refused at the result, before the next request
    assert str(caught.value) == (
        "profile 'strict-local' does not support tool_result_content: documents returned by "
        "tools left out: the endpoint takes a document only as inline data, not by URL"
    )
    # The call ran: its result is in the history the error carries, as the tool returned it.
    (answer,) = tool_results(caught.value.messages)
    assert answer.content[-1] == DocumentContent(
        url=PDF_LINK, media_type="application/pdf", title="q3.pdf"
    )


# -- the test models and a model made of models --------------------------------------------------

WAV = b"RIFF....WAVE"


@tool(content_urls="any")
def recording() -> list[str | AudioContent | DocumentContent | ImageContent]:
    """A call's recording, its transcript by link, and a chart as an SVG data: URL."""
    return [
        "The call:",
        AudioContent(data=WAV, media_type="audio/wav"),
        DocumentContent(url=PDF_LINK),
        ImageContent(url="data:image/svg+xml,%3Csvg%2F%3E"),
    ]


def calling(name: str) -> FunctionModel:
    def reply(messages: Sequence[ChatMessage], _: object) -> AiMessage:
        if isinstance(messages[-1], ToolResultMessage):
            return AiMessage(text="Heard.")
        return AiMessage(tool_calls=[ToolCall(id="c1", name=name)])

    return FunctionModel(reply)


def test_the_test_models_take_every_part_as_it_is() -> None:
    for model in (calling("recording"), FakeModel()):
        result = ToolService([recording]).chat(model, "Play it.")
        (answer,) = tool_results(result.messages)
        assert answer.content == recording.execute(ToolCall(id="c", name="recording")).content
        assert result.tool_executions[0].result.content_notes == ()


def anthropic_model(bodies: list[dict[str, Any]]) -> AnthropicChatModel:
    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return httpx.Response(500, json={"type": "error", "error": {"type": "api_error"}})

    client = httpx.Client(transport=httpx.MockTransport(handler))
    return AnthropicChatModel("claude", api_key="k", http_client=client, max_retries=0)


def test_a_fallback_model_keeps_what_every_one_of_its_models_takes() -> None:
    """Anthropic takes a document by URL but no audio; Chat Completions takes audio (in a user
    message) but no document by URL: the history keeps neither, and the SVG `data:` URL, which
    neither sends as it is, as base64."""
    bodies: list[dict[str, Any]] = []
    with compatible_server() as server:
        local = OpenAIChatModel("local", base_url=server.url, profile="vllm", max_retries=0)
        fallback = FallbackModel(anthropic_model(bodies), calling("recording"), local)
        result = ToolService([recording]).chat(fallback, "Play it.")
    (answer,) = tool_results(result.messages)
    audio_note = (
        f"[audio: audio/wav, {len(WAV)} bytes] (left out: the model's endpoint does not take audio)"
    )
    svg = ImageContent(data=b"<svg/>", media_type="image/svg+xml")
    assert answer.content == (
        TextContent(text="The call:"),
        TextContent(text=audio_note),
        TextContent(text=PDF_NOTE),
        svg,
    )
    assert result.tool_executions[0].result.content_notes == (audio_note, PDF_NOTE)
    # Anthropic failed (500) and the scripted model answered: each request sendable as it is.
    assert result.text == "Heard."
    assert bodies[-1]["messages"][-1]["content"][0]["content"][-1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/svg+xml", "data": "PHN2Zy8+"},
    }


async def test_a_durable_tool_activity_fits_its_content_where_the_tool_runs() -> None:
    """A durable run's tool activity fits the result to the worker's model, and the notes travel
    back to the workflow with the result."""
    temporal = pytest.importorskip("agentforge_typed.temporal")
    from temporalio.testing import ActivityEnvironment

    model = OpenAIChatModel("local", base_url="http://127.0.0.1:9/v1", profile="vllm")
    durable = temporal.TemporalToolService(ToolService([recording]), model, name="content")
    _, run_tool = durable.activities
    payload = temporal.ToolActivityInput(call=ToolCall(id="c1", name="recording"))
    from temporalio.contrib.pydantic import pydantic_data_converter

    environment = ActivityEnvironment()  # with the converter `AgentForgePlugin` installs
    environment.payload_converter = pydantic_data_converter.payload_converter
    travelled = await environment.run(run_tool, payload)
    # The activity sends its result encoded once, as a `RawValue` of the JSON payload.
    back = temporal.ToolActivityResult.model_validate_json(travelled.payload.data).result()
    assert back.content_notes == (PDF_NOTE,)
    assert back.content[2:] == (
        TextContent(text=PDF_NOTE),
        ImageContent(data=b"<svg/>", media_type="image/svg+xml"),
    )
