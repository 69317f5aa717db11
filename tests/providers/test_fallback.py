"""`FallbackModel` against a real local server speaking two providers, faults injected: a 429, a
500 and a connection reset on the first provider each move the request to the second, with the
conversation rendered in its dialect; a refused request does not; a stream falls back only before
its first event; which model answered is on the response, in the spans and in the cost."""

from __future__ import annotations

import asyncio
from decimal import Decimal
from typing import Any

import httpx
import pytest
from fallback_server import ANTHROPIC, OPENAI, FaultServer, anthropic_message, fault_server
from loop_drivers import DRIVERS, drive
from openai_support import API_KEY
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import agentforge_typed as af
from agentforge_typed import (
    AiMessage,
    AllModelsFailedError,
    AnthropicChatModel,
    ChatMessage,
    ChatModel,
    ChatRequest,
    ChatResponse,
    FallbackModel,
    ModelError,
    OpenAIChatModel,
    ResponseComplete,
    StreamEvent,
    SystemMessage,
    TextDelta,
    ToolCall,
    ToolResultMessage,
    ToolService,
    UserMessage,
)
from agentforge_typed.loop._cost import prices_available

ANTHROPIC_KEY = "sk-ant-api03-TESTKEY0123456789abcdef"
MODES = ["chat", "achat", "stream", "astream"]

HISTORY: list[ChatMessage] = [
    SystemMessage(text="Answer briefly."),
    UserMessage(content="Weather in Paris?"),
    AiMessage(tool_calls=[ToolCall(id="call_1", name="weather", arguments='{"city": "Paris"}')]),
    ToolResultMessage(tool_call_id="call_1", tool_name="weather", text="18 C, sunny"),
]


def _models(server: FaultServer, **options: Any) -> tuple[OpenAIChatModel, AnthropicChatModel]:
    # No retries of their own: each fault moves on to the next model at once.
    openai = OpenAIChatModel(
        "gpt-4o-mini", api_key=API_KEY, base_url=f"{server.url}/v1", max_retries=0
    )
    anthropic = AnthropicChatModel(
        "claude-sonnet-4-5", api_key=ANTHROPIC_KEY, base_url=server.url, max_retries=0, **options
    )
    return openai, anthropic


def _ask(
    model: ChatModel, request: ChatRequest, mode: str
) -> tuple[ChatResponse, list[StreamEvent]]:
    async def collect() -> list[StreamEvent]:
        return [event async for event in model.astream(request)]

    if mode == "chat":
        return model.chat(request), []
    if mode == "achat":
        return asyncio.run(model.achat(request)), []
    events = list(model.stream(request)) if mode == "stream" else asyncio.run(collect())
    final = events[-1]
    assert isinstance(final, ResponseComplete)
    return final.response, events


OPENAI_FAILURES = {
    429: (
        "OpenAI API error 429: Rate limit reached for gpt-4o-mini in organization org-x on "
        "requests per min (RPM): Limit 3, Used 3, Requested 1.",
        429,
    ),
    500: (
        "OpenAI API error 500: The server had an error while processing your request. Sorry "
        "about that!",
        500,
    ),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("fault", [429, 500, "reset"])
def test_a_fault_on_the_first_provider_moves_the_request_to_the_second(
    mode: str, fault: int | str
) -> None:
    with fault_server() as server:
        server.script(openai=[fault], anthropic=["ok"])
        model = FallbackModel(*_models(server))
        response, events = _ask(model, ChatRequest(messages=HISTORY), mode)
    assert response.ai_message.text == "Sunny in Paris."
    fallback = response.metadata["fallback"]
    assert (fallback["index"], fallback["model"]) == (1, "AnthropicChatModel('claude-sonnet-4-5')")
    [failed] = fallback["failed"]
    assert failed["model"] == "OpenAIChatModel('gpt-4o-mini')"
    if isinstance(fault, int):
        assert (failed["error"], failed["status_code"]) == OPENAI_FAILURES[fault]
    else:
        assert failed["status_code"] is None
        assert failed["error"].startswith(f"OpenAI request to {server.url}")
    assert response.metadata["model"] == "claude-sonnet-4-5-20250929"
    if events:
        assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Sunny in Paris."
    # The same conversation, in each provider's dialect.
    stream = mode in ("stream", "astream")
    openai_body: dict[str, Any] = {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": "Answer briefly."},
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "weather", "arguments": '{"city": "Paris"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "18 C, sunny"},
        ],
    }
    if stream:
        openai_body |= {"stream": True, "stream_options": {"include_usage": True}}
    assert server.bodies[OPENAI] == [openai_body]
    anthropic_body: dict[str, Any] = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "system": "Answer briefly.",
        "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "call_1",
                        "name": "weather",
                        "input": {"city": "Paris"},
                    }
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "call_1", "content": "18 C, sunny"}
                ],
            },
        ],
    }
    if stream:
        anthropic_body["stream"] = True
    assert server.bodies[ANTHROPIC] == [anthropic_body]


@pytest.mark.parametrize("mode", MODES)
def test_a_refused_request_surfaces_without_asking_the_next_model(mode: str) -> None:
    with fault_server() as server:
        server.script(openai=[400], anthropic=["ok"])
        model = FallbackModel(*_models(server))
        with pytest.raises(ModelError) as raised:
            _ask(model, ChatRequest(messages=HISTORY), mode)
    assert not isinstance(raised.value, AllModelsFailedError)
    assert str(raised.value) == (
        "OpenAI API error 400: Invalid value for 'temperature': must be between 0 and 2."
    )
    assert server.bodies[ANTHROPIC] == []


@pytest.mark.parametrize("mode", MODES)
def test_fallback_on_decides_which_errors_move_on(mode: str) -> None:
    with fault_server() as server:
        server.script(openai=[400], anthropic=["ok"])
        model = FallbackModel(
            *_models(server),
            fallback_on=lambda error: FallbackModel.is_transient(error) or error.status_code == 400,
        )
        response, _ = _ask(model, ChatRequest(messages=HISTORY), mode)
        assert response.metadata["fallback"]["failed"][0]["status_code"] == 400
        # The same model without it: a 500 still moves on, a 400 does not.
        server.script(openai=[500], anthropic=["ok"])
        assert _ask(FallbackModel(*_models(server)), ChatRequest(messages=HISTORY), mode)[
            0
        ].ai_message.text


@pytest.mark.parametrize("mode", MODES)
def test_when_every_model_fails_the_error_lists_each(mode: str) -> None:
    with fault_server() as server:
        server.script(openai=[429], anthropic=[529])
        model = FallbackModel(*_models(server))
        with pytest.raises(AllModelsFailedError) as raised:
            _ask(model, ChatRequest(messages=HISTORY), mode)
    error = raised.value
    assert str(error) == (
        "every model failed: OpenAIChatModel('gpt-4o-mini'): "
        + OPENAI_FAILURES[429][0]
        + "; AnthropicChatModel('claude-sonnet-4-5'): Anthropic API error 529: Overloaded"
    )
    assert [e.status_code for e in error.errors] == [429, 529]
    assert (error.status_code, error.code) == (529, "overloaded_error")
    assert API_KEY not in repr(error.errors) and ANTHROPIC_KEY not in str(error)


@pytest.mark.parametrize("mode", ["stream", "astream"])
def test_a_stream_that_fails_after_its_first_event_does_not_fall_back(mode: str) -> None:
    with fault_server() as server:
        server.script(openai=["cut"], anthropic=["ok"])
        model = FallbackModel(*_models(server))
        with pytest.raises(ModelError) as raised:
            _ask(model, ChatRequest(messages=HISTORY), mode)
    assert str(raised.value).startswith("OpenAI stream was interrupted: ")
    assert server.bodies[ANTHROPIC] == []


THINKING_ANSWER = AiMessage(
    thinking="Paris: call the weather tool.",
    tool_calls=[ToolCall(id="toolu_01", name="weather", arguments='{"city": "Paris"}')],
    attributes={
        "anthropic_content": [
            {
                "type": "thinking",
                "thinking": "Paris: call the weather tool.",
                "signature": "EqQBCgIYAhIM",
            },
            {"type": "tool_use", "id": "toolu_01", "name": "weather", "input": {"city": "Paris"}},
        ]
    },
)


@pytest.mark.parametrize("mode", MODES)
def test_thinking_signatures_are_not_sent_to_another_provider_and_that_is_recorded(
    mode: str,
) -> None:
    history = [
        HISTORY[1],
        THINKING_ANSWER,
        ToolResultMessage(tool_call_id="toolu_01", tool_name="weather", text="18 C"),
    ]
    with fault_server() as server:
        server.script(openai=["ok"], anthropic=[529])
        openai, anthropic = _models(server)
        response, _ = _ask(FallbackModel(anthropic, openai), ChatRequest(messages=history), mode)
    # Anthropic got its own content back, signature and all; OpenAI got the calls alone.
    assert (
        server.bodies[ANTHROPIC][0]["messages"][1]["content"]
        == (THINKING_ANSWER.attributes["anthropic_content"])
    )
    assert server.bodies[OPENAI][0]["messages"][1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "toolu_01",
                "type": "function",
                "function": {"name": "weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    }
    assert response.metadata["adaptations"] == [
        {
            "feature": "history",
            "rule": "1 earlier answer(s) carried content only another provider replays "
            "(anthropic_content): sent as their text and tool calls, without their thinking and "
            "its signatures",
        }
    ]
    assert response.metadata["fallback"]["index"] == 1


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_run_records_each_attempt_as_a_span_of_its_model(driver: str) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with fault_server() as server, af.instrument(provider):
        server.script(openai=[429], anthropic=["ok"])
        result = drive(driver, ToolService(), FallbackModel(*_models(server)), "Weather?")
    assert result.text == "Sunny in Paris."
    spans = {span.name: span for span in exporter.get_finished_spans()}
    run = spans["invoke_agent"]
    failed, answered = spans["chat gpt-4o-mini"], spans["chat claude-sonnet-4-5"]
    assert failed.parent is not None and failed.parent.span_id == run.context.span_id
    assert answered.parent is not None and answered.parent.span_id == run.context.span_id
    assert failed.attributes is not None and failed.attributes["error.type"] == "429"
    assert answered.attributes is not None
    assert answered.attributes["gen_ai.provider.name"] == "anthropic"
    assert answered.attributes["gen_ai.response.model"] == "claude-sonnet-4-5-20250929"
    assert result.usage.input_tokens == 25  # the answer's usage; the failed call used none


@pytest.mark.skipif(not prices_available(), reason="genai-prices is not installed")
def test_the_cost_is_the_answering_model_s() -> None:
    def openai(request: httpx.Request) -> httpx.Response:
        return httpx.Response(429, json={"error": {"message": "slow down", "type": "requests"}})

    def anthropic(request: httpx.Request) -> httpx.Response:
        body = anthropic_message("Sunny.") | {"usage": {"input_tokens": 1000, "output_tokens": 100}}
        return httpx.Response(200, json=body)

    model = FallbackModel(
        OpenAIChatModel(
            "gpt-4o",
            api_key=API_KEY,
            max_retries=0,
            http_client=httpx.Client(transport=httpx.MockTransport(openai)),
        ),
        AnthropicChatModel(
            "claude-sonnet-4-5",
            api_key=ANTHROPIC_KEY,
            http_client=httpx.Client(transport=httpx.MockTransport(anthropic)),
        ),
    )
    # Claude Sonnet 4.5: $3 per million input tokens, $15 per million output tokens.
    assert ToolService().chat(model, "hi").usage.cost == Decimal("0.003") + Decimal("0.0015")


def test_answering_names_the_model_of_a_response() -> None:
    first, second = af.FunctionModel(lambda m, p: AiMessage(text="a")), af.FakeModel()
    model = FallbackModel(first, second)
    assert model.answering(model.chat(ChatRequest(messages=HISTORY[1:2]))) is first
    assert model.answering(ChatResponse(ai_message=AiMessage(text="x"))) is model
    assert repr(model) == f"FallbackModel({first!r}, {second!r})"


class _RefusesAtOnce:
    """A `ChatModel` of one's own whose calls fail as soon as they are made (its streams too,
    before any iteration): the fallback moves on all the same."""

    def chat(self, request: ChatRequest) -> ChatResponse:
        raise ModelError("gateway API error 503: unavailable", 503)

    async def achat(self, request: ChatRequest) -> ChatResponse:
        raise ModelError("gateway API error 503: unavailable", 503)

    def stream(self, request: ChatRequest) -> Any:
        raise ModelError("gateway API error 503: unavailable", 503)

    def astream(self, request: ChatRequest) -> Any:
        raise ModelError("gateway API error 503: unavailable", 503)


@pytest.mark.parametrize("mode", MODES)
def test_a_model_failing_when_called_is_fallen_back_from(mode: str) -> None:
    backup = af.FunctionModel(lambda messages, parameters: AiMessage(text="from the backup"))
    response, _ = _ask(FallbackModel(_RefusesAtOnce(), backup), ChatRequest(messages=HISTORY), mode)
    assert response.ai_message.text == "from the backup"
    [failed] = response.metadata["fallback"]["failed"]
    assert "_RefusesAtOnce object at 0x" in failed["model"]  # no model name: its repr
    assert (failed["error"], failed["status_code"]) == ("gateway API error 503: unavailable", 503)
