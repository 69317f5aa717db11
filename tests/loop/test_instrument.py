"""`instrument()`: OpenTelemetry spans and metrics after the GenAI semantic conventions, checked
with the SDK's in-memory exporter."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from loop_drivers import DRIVERS, drive
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracer, NoOpTracerProvider, StatusCode
from pydantic import BaseModel

import agentforge_typed as af
from agentforge_typed import (
    AiMessage,
    AnthropicChatModel,
    ChatMessage,
    ChatRequest,
    ChatRequestParameters,
    ChatResponse,
    FakeModel,
    FunctionModel,
    GeminiChatModel,
    ModelError,
    ModelRetry,
    OpenAIChatModel,
    TokenUsage,
    ToolCall,
    ToolService,
    UsageLimitExceededError,
    UsageLimits,
    UserMessage,
    available_tools_handler,
    tool,
)
from agentforge_typed.providers._tracing import MAX_RESPONSE_MODELS, MAX_RESPONSE_VALUE_CHARS

API_KEY = "sk-proj-SECRETKEY0123456789abcdef"
USAGE = TokenUsage(input_tokens=10, output_tokens=2, total_tokens=12)


class Telemetry:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    @property
    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [s for s in self.spans if s.name.startswith(prefix)]

    def everything(self) -> str:
        """Every span, attribute and event, as text."""
        return "\n".join(span.to_json() for span in self.spans)

    def metrics(self) -> dict[str, list[Any]]:
        data = self.reader.get_metrics_data()
        found: dict[str, list[Any]] = {}
        assert data is not None
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    found.setdefault(metric.name, []).extend(metric.data.data_points)
        return found


@pytest.fixture
def otel() -> Iterator[Telemetry]:
    telemetry = Telemetry()
    with af.instrument(telemetry.tracer_provider, meter_provider=telemetry.meter_provider):
        yield telemetry


@tool
def lookup(city: str) -> str:
    """Look up the weather."""
    return f"sunny in {city}"


@tool(max_retries=3)
def fragile(n: int) -> str:
    """Fails on odd numbers."""
    if n % 2:
        raise ModelRetry("odd numbers are not allowed")
    if n == 0:
        raise RuntimeError("zero")
    return "ok"


@tool(timeout=0.01)
async def slow() -> str:
    """Takes too long."""
    await asyncio.sleep(5)
    return "late"


def script(*turns: Sequence[ToolCall] | str) -> FunctionModel:
    remaining = list(turns)

    def reply(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> ChatResponse:
        turn = remaining.pop(0)
        message = AiMessage(text=turn) if isinstance(turn, str) else AiMessage(tool_calls=turn)
        return ChatResponse(ai_message=message, token_usage=USAGE)

    return FunctionModel(reply, name="scripted")


def call(id: str, name: str, arguments: Any) -> ToolCall:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return ToolCall(id=id, name=name, arguments=text)


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_run_is_an_invoke_agent_span_over_its_model_and_tool_spans(
    otel: Telemetry, driver: str
) -> None:
    model = script([call("c1", "lookup", {"city": "Oslo"})], "Sunny.")
    drive(driver, ToolService([lookup]), model, "Weather?")
    [run] = otel.named("invoke_agent")
    chats = otel.named("chat ")
    [execution] = otel.named("execute_tool")
    assert [s.name for s in chats] == ["chat scripted", "chat scripted"]
    assert execution.name == "execute_tool lookup"
    assert run.parent is None
    for child in [*chats, execution]:
        assert child.parent is not None and child.parent.span_id == run.context.span_id
        assert child.context.trace_id == run.context.trace_id
    assert run.attributes is not None and execution.attributes is not None
    assert run.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert run.attributes["gen_ai.usage.input_tokens"] == 20
    assert run.attributes["gen_ai.usage.output_tokens"] == 4
    assert dict(execution.attributes) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "lookup",
        "gen_ai.tool.call.id": "c1",
        "gen_ai.tool.type": "function",
        "agentforge.tool.attempt": 1,
    }
    assert execution.status.status_code is StatusCode.UNSET
    assert run.status.status_code is StatusCode.UNSET
    # Nothing the conversation said is recorded by default.
    assert "Oslo" not in otel.everything() and "Sunny" not in otel.everything()


def _completion(message: dict[str, Any], finish: str) -> Any:
    return {
        "id": "chatcmpl-9xYz",
        "object": "chat.completion",
        "created": 1732000000,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {"prompt_tokens": 57, "completion_tokens": 17, "total_tokens": 74},
    }


def _openai(handler: Any, **defaults: Any) -> OpenAIChatModel:
    transport = httpx.MockTransport(handler)
    return OpenAIChatModel(
        "gpt-4o-mini",
        api_key=API_KEY,
        http_client=httpx.Client(transport=transport),
        async_http_client=httpx.AsyncClient(transport=transport),
        max_retries=0,
        **defaults,
    )


@pytest.mark.parametrize("include_content", [False, True])
def test_openai_chat_span_attributes_and_no_key(include_content: bool) -> None:
    telemetry = Telemetry()
    answer = {"role": "assistant", "content": "Sunny in Oslo."}
    model = _openai(
        lambda request: httpx.Response(200, json=_completion(answer, "stop")), top_p=0.9
    )
    with af.instrument(
        telemetry.tracer_provider,
        meter_provider=telemetry.meter_provider,
        include_content=include_content,
    ):
        # The model's defaults count as much as the request's own parameters.
        parameters = ChatRequestParameters(temperature=0.2, max_tokens=100)
        ToolService([lookup]).chat(model, "Weather in Oslo?", parameters)
    [span] = telemetry.named("chat ")
    assert span.name == "chat gpt-4o-mini"
    attributes = dict(span.attributes or {})
    expected = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.request.temperature": 0.2,
        "gen_ai.request.max_tokens": 100,
        "gen_ai.request.top_p": 0.9,
        "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
        "gen_ai.response.id": "chatcmpl-9xYz",
        "gen_ai.response.finish_reasons": ("stop",),
        "gen_ai.usage.input_tokens": 57,
        "gen_ai.usage.output_tokens": 17,
    }
    assert {k: attributes.pop(k) for k in expected} == expected
    if include_content:
        assert "Weather in Oslo?" in str(attributes.pop("gen_ai.input.messages"))
        assert "Sunny in Oslo." in str(attributes.pop("gen_ai.output.messages"))
    assert attributes == {}
    assert API_KEY not in telemetry.everything()
    assert "SECRETKEY" not in telemetry.everything()
    metrics = telemetry.metrics()
    tokens = {
        p.attributes["gen_ai.token.type"]: p.sum for p in metrics["gen_ai.client.token.usage"]
    }
    assert tokens == {"input": 57, "output": 17}
    [duration] = metrics["gen_ai.client.operation.duration"]
    assert duration.count == 1 and duration.attributes["gen_ai.provider.name"] == "openai"


@pytest.mark.parametrize("mode", ["chat", "achat", "stream", "astream"])
def test_a_model_call_outside_a_run_is_a_root_chat_span(otel: Telemetry, mode: str) -> None:
    model = FakeModel()
    request = ChatRequest(messages=[UserMessage(content="hi")])
    if mode == "chat":
        model.chat(request)
    elif mode == "achat":
        asyncio.run(model.achat(request))
    elif mode == "stream":
        list(model.stream(request))
    else:

        async def consume() -> None:
            async for _ in model.astream(request):
                pass

        asyncio.run(consume())
    # One span per call: the test model's `stream` replaying its own `chat` is not a second call.
    [span] = otel.spans
    assert span.name == "chat fake" and span.parent is None
    assert span.attributes is not None
    assert span.attributes["gen_ai.response.model"] == "fake"


def test_a_failed_model_call_marks_its_span_and_the_run(otel: Telemetry) -> None:
    body = {"error": {"message": f"Incorrect API key provided: {API_KEY}", "type": "auth"}}
    model = _openai(lambda request: httpx.Response(401, json=body))
    with pytest.raises(ModelError):
        ToolService().chat(model, "hi")
    [chat] = otel.named("chat ")
    [run] = otel.named("invoke_agent")
    assert chat.attributes is not None and run.attributes is not None
    assert chat.status.status_code is StatusCode.ERROR
    assert chat.attributes["error.type"] == "401"
    assert run.status.status_code is StatusCode.ERROR
    assert run.attributes["error.type"] == "401"
    assert API_KEY not in otel.everything()
    [duration] = otel.metrics()["gen_ai.client.operation.duration"]
    assert duration.attributes["error.type"] == "401"


@pytest.mark.parametrize("driver", DRIVERS)
def test_tool_errors_mark_their_spans(otel: Telemetry, driver: str) -> None:
    calls = [
        call("a", "fragile", '{"n": "two"}'),  # arguments
        call("b", "fragile", {"n": 0}),  # execution
        call("c", "nowhere", {}),  # unknown tool, answered by the handler
        call("d", "fragile", {"n": 3}),  # ModelRetry
    ]
    if driver in ("achat", "astream"):
        calls.append(call("e", "slow", {}))  # timeout
    service = ToolService([fragile, slow], unknown_tool_handler=available_tools_handler)
    drive(driver, service, script(calls, "Done."), "Weather?")
    spans = {
        str((s.attributes or {})["gen_ai.tool.call.id"]): s for s in otel.named("execute_tool")
    }
    kinds = {"a": "arguments", "b": "execution", "c": "unknown_tool", "d": "retry", "e": "timeout"}
    assert set(spans) == set(kinds) & {c.id for c in calls}
    for call_id, span in spans.items():
        assert span.status.status_code is StatusCode.ERROR
        assert span.attributes is not None
        assert span.attributes["error.type"] == kinds[call_id]
    # The error texts may quote the arguments: they stay out of the spans by default.
    assert "two" not in otel.everything() and "zero" not in otel.everything()


def test_repairs_and_retries_are_on_the_tool_span(otel: Telemetry) -> None:
    model = script(
        [call("a", "fragile", {"n": 1})],
        [call("b", "fragile", json.dumps(json.dumps({"n": 2})))],  # double-encoded
        "Done.",
    )
    ToolService([fragile]).chat(model, "go")
    first, second = otel.named("execute_tool")
    assert second.attributes is not None
    assert second.attributes["agentforge.tool.attempt"] == 2
    assert [e.name for e in second.events] == ["retry"]
    assert second.attributes["agentforge.tool.repair_kinds"] == ("double_encoded",)
    assert "agentforge.tool.repairs" not in second.attributes
    assert first.events == ()


@tool(extra_arguments="ignore")
def tally(counts: dict[str, list[int]]) -> str:
    """Count things."""
    return "counted"


@tool(strict_schema=True)
def page(limit: int = 5) -> str:
    """Read a page."""
    return "read"


SECRET_KEY = "ssn-078-05-1120"
REPAIRED = [
    # Each repair quotes a name or path the model wrote: none of it may reach a span by default.
    (tally, {"counts": {}, SECRET_KEY: 1}, "unknown_argument_dropped"),
    (tally, {"counts": {SECRET_KEY: "[1, 2]"}}, "string_encoded_json"),
    (page, {"limit": None}, "null_read_as_not_given"),
    (page, "", "empty_arguments"),
    (page, '{"limit": 1,}', "trailing_commas"),
]


@pytest.mark.parametrize(("target", "arguments", "kind"), REPAIRED)
@pytest.mark.parametrize("driver", DRIVERS)
def test_repairs_record_kinds_not_the_names_the_model_wrote(
    otel: Telemetry, driver: str, target: af.Tool[..., str], arguments: Any, kind: str
) -> None:
    model = script([call("c1", target.name, arguments)], "ok")
    drive(driver, ToolService([target]), model, "go")
    assert SECRET_KEY not in otel.everything()
    [span] = otel.named("execute_tool")
    assert span.attributes is not None
    assert not span.attributes.get("gen_ai.tool.call.arguments")
    assert span.attributes["agentforge.tool.repair_kinds"] == (kind,)
    assert "agentforge.tool.repairs" not in span.attributes


def test_repairs_of_schema_tools_record_kinds_only(otel: Telemetry) -> None:
    schema = {"type": "object", "properties": {"q": {"type": "object"}}}
    specification = af.ToolSpecification(name="search", parameters=schema)
    search = af.SchemaTool(specification, lambda arguments: "found", extra_arguments="ignore")
    arguments = {"q": json.dumps({"x": 1}), SECRET_KEY: 1}
    ToolService([search]).chat(script([call("c1", "search", arguments)], "ok"), "go")
    assert SECRET_KEY not in otel.everything()
    [span] = otel.named("execute_tool")
    assert span.attributes is not None
    kinds = span.attributes["agentforge.tool.repair_kinds"]
    assert set(kinds) == {"string_encoded_json", "unknown_argument_dropped"}  # type: ignore[arg-type]


def test_include_content_records_the_repair_texts() -> None:
    telemetry = Telemetry()
    arguments = {"counts": {}, SECRET_KEY: 1}
    with af.instrument(telemetry.tracer_provider, include_content=True):
        ToolService([tally]).chat(script([call("c1", "tally", arguments)], "ok"), "go")
    [span] = telemetry.named("execute_tool")
    assert span.attributes is not None
    assert span.attributes["agentforge.tool.repairs"] == (
        f"dropped unknown argument `{SECRET_KEY}`",
    )
    assert span.attributes["agentforge.tool.repair_kinds"] == ("unknown_argument_dropped",)


def test_include_content_records_tool_arguments_and_results() -> None:
    telemetry = Telemetry()
    with af.instrument(telemetry.tracer_provider, include_content=True):
        ToolService([lookup]).chat(script([call("c1", "lookup", {"city": "Oslo"})], "ok"), "w")
    [span] = telemetry.named("execute_tool")
    assert span.attributes is not None
    assert json.loads(str(span.attributes["gen_ai.tool.call.arguments"])) == {"city": "Oslo"}
    assert span.attributes["gen_ai.tool.call.result"] == "sunny in Oslo"


@tool
async def nap(seconds: float) -> str:
    """Sleep a little."""
    await asyncio.sleep(seconds)
    return "rested"


@pytest.mark.parametrize("driver", ["achat", "astream"])
def test_concurrent_tool_spans_are_siblings(otel: Telemetry, driver: str) -> None:
    calls = [call(f"n{i}", "nap", {"seconds": 0.05}) for i in range(3)]
    drive(driver, ToolService([nap]), script(calls, "Rested."), "Weather?")
    [run] = otel.named("invoke_agent")
    naps = otel.named("execute_tool")
    assert len(naps) == 3
    assert {s.parent.span_id for s in naps if s.parent} == {run.context.span_id}
    # They overlapped in time: each started before the others ended.
    assert max(s.start_time or 0 for s in naps) < min(s.end_time or 0 for s in naps)


def test_a_stream_closed_early_ends_its_spans(otel: Telemetry) -> None:
    events = ToolService([lookup]).stream(
        script([call("c1", "lookup", {"city": "Oslo"})], "Sunny."), "Weather?"
    )
    next(events)
    events.close()
    names = [s.name for s in otel.spans]
    assert names == ["chat scripted", "invoke_agent"]
    assert all(s.status.status_code is StatusCode.UNSET for s in otel.spans)


def test_an_async_stream_closed_early_ends_its_spans(otel: Telemetry) -> None:
    async def first_event() -> None:
        events = ToolService([lookup]).astream(
            script([call("c1", "lookup", {"city": "Oslo"})], "Sunny."), "Weather?"
        )
        await anext(events)
        await events.aclose()

    asyncio.run(first_event())
    assert [s.name for s in otel.spans] == ["chat scripted", "invoke_agent"]


def test_a_usage_limit_fails_the_run_span(otel: Telemetry) -> None:
    model = script([call("c1", "lookup", {"city": "Oslo"})], "Sunny.")
    with pytest.raises(UsageLimitExceededError):
        ToolService([lookup]).chat(model, "w", usage_limits=UsageLimits(request_limit=1))
    [run] = otel.named("invoke_agent")
    assert run.attributes is not None
    assert run.attributes["error.type"] == "UsageLimitExceededError"


def test_switched_off_records_nothing() -> None:
    telemetry = Telemetry()
    handle = af.instrument(telemetry.tracer_provider)
    assert handle.active
    handle.uninstrument()
    assert not handle.active
    ToolService([lookup]).chat(script([call("c1", "lookup", {"city": "x"})], "ok"), "w")
    af.instrument(telemetry.tracer_provider)
    af.instrument(False)
    FakeModel().chat(ChatRequest(messages=[UserMessage(content="hi")]))
    assert telemetry.spans == []


def test_without_opentelemetry_instrument_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    with pytest.raises(ImportError, match=r"agentforge-typed\[otel\]"):
        af.instrument()
    # Nothing else changed: runs go on, untraced.
    assert ToolService().chat(FakeModel(), "hi").text


ANTHROPIC_SSE = (
    Path(__file__).parents[1]
    / "fixtures"
    / "golden"
    / "anthropic"
    / "parallel_tool_calls"
    / "stream.sse"
).read_bytes()


def _anthropic(body: bytes) -> AnthropicChatModel:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    transport = httpx.MockTransport(handler)
    return AnthropicChatModel(
        "claude-sonnet-4-5",
        api_key=API_KEY,
        http_client=httpx.Client(transport=transport),
        async_http_client=httpx.AsyncClient(transport=transport),
        max_retries=0,
    )


async def _consume(model: AnthropicChatModel, mode: str) -> None:
    request = ChatRequest(messages=[UserMessage(content="Weather in Hangzhou and Zürich?")])
    if mode == "stream":
        list(model.stream(request))
    else:
        async for _ in model.astream(request):
            pass


@pytest.mark.parametrize("mode", ["stream", "astream"])
async def test_an_anthropic_stream_is_one_chat_span(otel: Telemetry, mode: str) -> None:
    await _consume(_anthropic(ANTHROPIC_SSE), mode)
    [span] = otel.spans
    assert span.name == "chat claude-sonnet-4-5"
    attributes = dict(span.attributes or {})
    assert attributes["gen_ai.provider.name"] == "anthropic"
    assert attributes["gen_ai.response.model"] == "claude-sonnet-4-5-20250929"
    assert attributes["gen_ai.response.id"] == "msg_01XFDUDYJgAACzvnptvVoYEL"
    assert attributes["gen_ai.response.finish_reasons"] == ("tool_execution",)
    assert attributes["gen_ai.usage.input_tokens"] == 472
    assert span.status.status_code is StatusCode.UNSET
    assert API_KEY not in otel.everything()


@pytest.mark.parametrize("mode", ["stream", "astream"])
async def test_a_cut_stream_fails_its_span(otel: Telemetry, mode: str) -> None:
    with pytest.raises(ModelError):
        await _consume(_anthropic(ANTHROPIC_SSE[: len(ANTHROPIC_SSE) // 2]), mode)
    [span] = otel.spans
    assert span.status.status_code is StatusCode.ERROR
    assert dict(span.attributes or {})["error.type"] == "ModelError"


def test_a_run_refused_before_it_starts_leaves_no_open_span(otel: Telemetry) -> None:
    started: list[str] = []

    class Starts(SpanProcessor):
        def on_start(self, span: Any, parent_context: Any = None) -> None:
            started.append(span.name)

    otel.tracer_provider.add_span_processor(Starts())
    with pytest.raises(ValueError, match="no pending call"):
        ToolService([lookup]).chat(FakeModel(), "hi", approvals={"nope": True})
    with pytest.raises(TypeError):
        ToolService().chat(FakeModel(), [42])  # type: ignore[list-item]
    assert started == []
    ToolService().chat(FakeModel(), "hi")
    assert started == ["invoke_agent", "chat fake"]
    assert [s.name for s in otel.spans] == ["chat fake", "invoke_agent"]


@tool(requires_approval=True)
def pay(cents: int) -> str:
    """Pay, once a person approves."""
    return "paid"


@tool(external=True)
def open_page(url: str) -> str:
    """Open a page in the user's browser."""
    raise NotImplementedError


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_paused_call_is_an_event_on_the_run_not_a_tool_span(otel: Telemetry, driver: str) -> None:
    calls = [call("p1", "pay", {"cents": 9}), call("o1", "open_page", {"url": "https://x.test"})]
    result = drive(driver, ToolService([pay, open_page]), script(calls, "never"), "Pay.")
    assert len(result.pending) == 2
    assert otel.named("execute_tool") == []
    [run] = otel.named("invoke_agent")
    pending = [dict(e.attributes or {}) for e in run.events]
    # Under achat/astream the two settle concurrently: their order is not the point.
    assert sorted(
        (e["gen_ai.tool.call.id"], e["agentforge.tool.pending.reason"]) for e in pending
    ) == [
        ("o1", "external"),
        ("p1", "approval"),
    ]


def test_concurrent_runs_each_parent_their_own_model_calls(otel: Telemetry) -> None:
    async def both() -> None:
        service = ToolService([nap])
        runs = [
            service.achat(script([call(f"n{i}", "nap", {"seconds": 0.02})], "ok"), "go")
            for i in range(5)
        ]
        await asyncio.gather(*runs)

    asyncio.run(both())
    runs = {s.context.span_id: s.context.trace_id for s in otel.named("invoke_agent")}
    children = [*otel.named("chat "), *otel.named("execute_tool")]
    assert len(runs) == 5 and len(children) == 15
    for child in children:
        assert child.parent is not None
        assert runs[child.parent.span_id] == child.context.trace_id
    # Each run has its own two model calls and one tool call.
    per_run = [sum(c.parent.span_id == run for c in children if c.parent) for run in runs]
    assert per_run == [3] * 5


def test_gemini_calls_are_named_as_the_conventions_name_gemini(otel: Telemetry) -> None:
    body = (
        Path(__file__).parents[1] / "fixtures" / "golden" / "gemini" / "text" / "response.json"
    ).read_bytes()
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=body))
    model = GeminiChatModel(
        "gemini-2.5-flash", api_key="AIza-test-key", http_client=httpx.Client(transport=transport)
    )
    model.chat(ChatRequest(messages=[UserMessage(content="hi")]))
    [span] = otel.spans
    assert span.name == "chat gemini-2.5-flash"
    assert dict(span.attributes or {})["gen_ai.provider.name"] == "gcp.gemini"
    assert "AIza-test-key" not in otel.everything()


@pytest.mark.parametrize("include_content", [False, True])
@pytest.mark.parametrize("driver", DRIVERS)
def test_a_tool_name_no_tool_has_is_content(driver: str, include_content: bool) -> None:
    telemetry = Telemetry()
    model = script([call("c1", SECRET_KEY, {}), call("c2", "lookup", {"city": "x"})], "ok")
    service = ToolService([lookup], unknown_tool_handler=available_tools_handler)
    with af.instrument(telemetry.tracer_provider, include_content=include_content):
        drive(driver, service, model, "go")
    unknown, known = sorted(
        telemetry.named("execute_tool"),
        key=lambda span: str((span.attributes or {})["gen_ai.tool.call.id"]),
    )
    assert unknown.attributes is not None and known.attributes is not None
    assert unknown.attributes["error.type"] == "unknown_tool"
    assert known.name == "execute_tool lookup"
    assert known.attributes["gen_ai.tool.name"] == "lookup"
    if include_content:
        assert unknown.name == f"execute_tool {SECRET_KEY}"
        assert unknown.attributes["gen_ai.tool.name"] == SECRET_KEY
    else:
        assert unknown.name == "execute_tool"
        assert "gen_ai.tool.name" not in unknown.attributes
        assert SECRET_KEY not in telemetry.everything()


class Guest(BaseModel):
    name: str


@tool(extra_arguments="ignore")
def seat(guest: Guest) -> str:
    """Seat a guest."""
    return guest.name


def test_every_repair_text_has_a_kind_and_a_foreign_one_is_other() -> None:
    from agentforge_typed.tools._arguments import repair_kind

    nested = seat.execute(call("c", "seat", {"guest": {"name": "A", SECRET_KEY: 1}}))
    assert nested.repairs == (f'$.guest["{SECRET_KEY}"]: unknown property dropped',)
    assert [repair_kind(r) for r in nested.repairs] == ["unknown_argument_dropped"]
    assert repair_kind(f"my own note about {SECRET_KEY}") == "other"


def test_what_an_answer_names_cannot_grow_spans_or_metric_series(otel: Telemetry) -> None:
    # A server that names a new model in every answer, with an id of any length.
    served = iter(range(1000))

    def answer(request: httpx.Request) -> httpx.Response:
        body = _completion({"role": "assistant", "content": "ok"}, "stop")
        n = next(served)
        return httpx.Response(200, json=body | {"model": f"m{n}", "id": "x" * 100_000})

    model = _openai(answer)
    for _ in range(MAX_RESPONSE_MODELS + 5):
        ToolService().chat(model, "hi")
    span = otel.named("chat ")[0]
    assert span.attributes is not None
    assert span.attributes["gen_ai.response.id"] == "x" * MAX_RESPONSE_VALUE_CHARS
    series = {
        p.attributes["gen_ai.response.model"] for p in otel.metrics()["gen_ai.client.token.usage"]
    }
    assert len(series) == MAX_RESPONSE_MODELS + 1
    assert "_OTHER" in series and "m0" in series and f"m{MAX_RESPONSE_MODELS}" not in series


@pytest.mark.parametrize("driver", DRIVERS)
def test_what_a_model_names_a_call_is_capped_on_spans(driver: str) -> None:
    """A call's id (200,000 characters) and a name no tool has are the model's to write: spans
    keep their first `MAX_RESPONSE_VALUE_CHARS`, as they keep a response's id."""
    telemetry = Telemetry()
    long_id, long_name = "c" * 200_000, "n" * 200_000
    model = script(
        [call(long_id, "lookup", {"city": "x"}), call("u" * 200_000, long_name, {})],
        [call("p" * 200_000, "pay", {"cents": 1})],
        "never",
    )
    with af.instrument(telemetry.tracer_provider, include_content=True):
        service = ToolService([lookup, pay], unknown_tool_handler=available_tools_handler)
        drive(driver, service, model, "go")
    spans = telemetry.named("execute_tool")
    assert len(spans) == 2
    [run] = telemetry.named("invoke_agent")
    for attributes in [*(span.attributes for span in spans), *(e.attributes for e in run.events)]:
        assert attributes is not None
        assert len(str(attributes["gen_ai.tool.call.id"])) <= MAX_RESPONSE_VALUE_CHARS
        assert len(str(attributes["gen_ai.tool.name"])) <= MAX_RESPONSE_VALUE_CHARS
    assert max(len(span.name) for span in spans) <= len("execute_tool ") + MAX_RESPONSE_VALUE_CHARS


class CountingNoOpTracerProvider(NoOpTracerProvider):
    """The API's no-op tracer (no SDK configured), counting the spans asked of it."""

    def __init__(self) -> None:
        self.started: list[str] = []

    def get_tracer(self, *args: Any, **kwargs: Any) -> NoOpTracer:
        provider = self

        class Counting(NoOpTracer):
            def start_span(self, name: str, *args: Any, **kwargs: Any) -> Any:
                provider.started.append(name)
                return super().start_span(name, *args, **kwargs)

        return Counting()


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_no_op_tracer_costs_a_run_one_span_and_keeps_the_metrics(driver: str) -> None:
    # No SDK: nothing would record the model and tool spans, so none is built; the metrics
    # (which may go to a real meter) are recorded as ever.
    tracer_provider = CountingNoOpTracerProvider()
    reader = InMemoryMetricReader()
    with af.instrument(tracer_provider, meter_provider=MeterProvider(metric_readers=[reader])):
        model = script([call("c1", "lookup", {"city": "Paris"})], "done")
        result = drive(driver, ToolService([lookup]), model, [UserMessage(content="hi")])
    assert result.text == "done"
    assert tracer_provider.started == ["invoke_agent"]
    data = reader.get_metrics_data()
    assert data is not None
    points: dict[str, list[Any]] = {
        metric.name: list(metric.data.data_points)
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    }
    (duration,) = points["gen_ai.client.operation.duration"]
    assert duration.count == 2
    assert duration.attributes["gen_ai.request.model"] == "scripted"
    assert sum(point.sum for point in points["gen_ai.client.token.usage"]) == 24
