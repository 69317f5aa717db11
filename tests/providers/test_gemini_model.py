"""`GeminiChatModel` over httpx.MockTransport: paths, the key header, sync/async, streaming, errors,
retries honouring `RetryInfo`, the registry, and a `ToolService` loop."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from openai_support import ChunkedStream, Recorder, mock_options, recording
from pydantic import BaseModel

from agentforge_typed import (
    ChatRequest,
    ChatRequestParameters,
    FinalResultEvent,
    GeminiChatModel,
    ModelError,
    OutputSpec,
    PartialArgumentsEvent,
    TextDelta,
    ToolCallEvent,
    ToolResultEvent,
    ToolService,
    ToolSpecification,
    UserMessage,
    get_model,
    tool,
)
from agentforge_typed.providers._gemini_wire import parse_response

FIXTURES = Path(__file__).parents[1] / "fixtures" / "golden" / "gemini"
KEY = "AIzaSyD-SECRET-do-not-leak-0123456789"
ROOT = "https://generativelanguage.googleapis.com/v1beta"
TEXT_BODY = {
    "candidates": [
        {
            "content": {"parts": [{"text": "Hello!"}], "role": "model"},
            "finishReason": "STOP",
            "index": 0,
        }
    ],
    "usageMetadata": {"promptTokenCount": 4, "candidatesTokenCount": 2, "totalTokenCount": 6},
    "modelVersion": "gemini-2.5-flash",
    "responseId": "aBc0aPqR",
}
REQUEST = ChatRequest(messages=[UserMessage(content="Hi")])
SSE = {"content-type": "text/event-stream"}


def quota(delay: str = "37s", key: str = "") -> dict[str, Any]:
    return {
        "error": {
            "code": 429,
            "message": f"Resource has been exhausted (e.g. check quota). {key}".strip(),
            "status": "RESOURCE_EXHAUSTED",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay}],
        }
    }


def sse_response(chunks: list[bytes]) -> httpx.Response:
    return httpx.Response(200, headers=SSE, stream=ChunkedStream(chunks))


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def make(
    handler: Callable[[httpx.Request], httpx.Response],
    sleeps: list[float] | None = None,
    **kwargs: Any,
) -> GeminiChatModel:
    kwargs.setdefault("api_key", KEY)
    return recording(GeminiChatModel("gemini-2.5-flash", **mock_options(handler), **kwargs), sleeps)


async def test_achat_defaults_and_a_request_model_override() -> None:
    recorder = Recorder(httpx.Response(200, json=TEXT_BODY), httpx.Response(200, json=TEXT_BODY))
    model = make(recorder, temperature=0.3, max_tokens=100)
    assert await model.achat(REQUEST) == parse_response(TEXT_BODY)
    assert recorder.json()["generationConfig"] == {"temperature": 0.3, "maxOutputTokens": 100}
    overridden = ChatRequest(
        messages=[UserMessage(content="Hi")],
        parameters=ChatRequestParameters(model="gemini-2.5-pro", temperature=0.9),
    )
    await model.achat(overridden)
    assert str(recorder.requests[1].url) == f"{ROOT}/models/gemini-2.5-pro:generateContent"
    assert recorder.json()["generationConfig"] == {"temperature": 0.9, "maxOutputTokens": 100}


def test_function_schema_option_reaches_the_payload() -> None:
    recorder = Recorder(httpx.Response(200, json=TEXT_BODY))
    spec = ToolSpecification(
        name="f", parameters={"type": "object", "properties": {"x": {"const": "a"}}}
    )
    make(recorder, function_schema="gemini", tools=[spec]).chat(REQUEST)
    declaration = recorder.json()["tools"][0]["functionDeclarations"][0]
    assert declaration == {
        "name": "f",
        "parameters": {"type": "object", "properties": {"x": {"type": "string", "enum": ["a"]}}},
    }
    with pytest.raises(ValueError, match="function_schema"):
        GeminiChatModel("gemini-2.5-flash", api_key=KEY, function_schema="openapi")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"GEMINI_API_KEY": "gk-1", "GOOGLE_API_KEY": "gk-2"}, "gk-1"),
        ({"GOOGLE_API_KEY": "gk-2"}, "gk-2"),
    ],
)
def test_key_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], expected: str
) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    recorder = Recorder(httpx.Response(200, json=TEXT_BODY))
    make(recorder, api_key=None).chat(REQUEST)
    assert recorder.requests[0].headers["x-goog-api-key"] == expected


def test_missing_key_says_how_to_fix_it(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ModelError, match="GEMINI_API_KEY") as info:
        GeminiChatModel("gemini-2.5-flash")
    assert "api_key=" in str(info.value)


def test_a_gateway_needs_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", "https://gateway.test/gemini/v1beta/")
    recorder = Recorder(httpx.Response(200, json=TEXT_BODY))
    make(recorder, api_key=None).chat(REQUEST)
    request = recorder.requests[0]
    assert (
        str(request.url)
        == "https://gateway.test/gemini/v1beta/models/gemini-2.5-flash:generateContent"
    )
    assert "x-goog-api-key" not in request.headers


def test_the_compatibility_endpoint_base_url_is_not_ours(monkeypatch: pytest.MonkeyPatch) -> None:
    # `GEMINI_BASE_URL` belongs to the `gemini-openai:` prefix (the OpenAI-compatible endpoint).
    monkeypatch.delenv("GOOGLE_GEMINI_BASE_URL", raising=False)
    monkeypatch.setenv("GEMINI_BASE_URL", f"{ROOT}/openai")
    recorder = Recorder(httpx.Response(200, json=TEXT_BODY))
    make(recorder).chat(REQUEST)
    assert str(recorder.requests[0].url) == f"{ROOT}/models/gemini-2.5-flash:generateContent"


def test_unknown_default_parameter_is_rejected() -> None:
    with pytest.raises(TypeError, match="temprature"):
        GeminiChatModel("gemini-2.5-flash", api_key=KEY, temprature=0.1)  # type: ignore[call-arg]


def test_key_never_leaks() -> None:
    body = {
        "error": {
            "code": 400,
            "message": f"API key not valid. Please pass a valid API key. ({KEY})",
            "status": "INVALID_ARGUMENT",
            "details": [
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "API_KEY_INVALID",
                    "metadata": {"key": KEY, KEY: "echoed as an object key"},
                }
            ],
        }
    }
    recorder = Recorder(httpx.Response(400, json=body))
    model = make(recorder)
    assert KEY not in repr(model)
    with pytest.raises(ModelError) as info:
        model.chat(REQUEST)
    error = info.value
    assert (error.status_code, error.code) == (400, "INVALID_ARGUMENT")
    assert str(error).startswith("Gemini API error 400: API key not valid.")
    assert KEY not in str(error) and KEY not in repr(error) and KEY not in json.dumps(error.body)
    assert len(recorder.requests) == 1  # 400 is not retried


ECHO = {"error": {"code": 400, "message": f"bad key {KEY}", "status": "INVALID_ARGUMENT"}}


def assert_clean(error: ModelError) -> None:
    assert KEY not in str(error) and KEY not in repr(error) and KEY not in error.message
    assert KEY not in json.dumps(error.body)
    # Nor in the chain of causes a logged traceback would print.
    cause = error.__cause__ or error.__context__
    while cause is not None:
        assert KEY not in f"{cause!s}{cause!r}"
        cause = cause.__cause__ or cause.__context__


@pytest.mark.parametrize(
    "answer",
    [
        ECHO,  # an error object in a 200 answer
        {"candidates": [{"content": {"parts": [{"functionCall": {"name": KEY, "args": [1]}}]}}]},
        {"candidates": [{"content": {"parts": [{"text": 5}]}}], KEY: "as a key"},
    ],
)
async def test_key_never_leaks_from_a_200_answer(answer: Any) -> None:
    for model in (make(Recorder(httpx.Response(200, json=answer))),):
        with pytest.raises(ModelError) as info:
            model.chat(REQUEST)
        assert_clean(info.value)
    with pytest.raises(ModelError) as info:
        await make(Recorder(httpx.Response(200, json=answer))).achat(REQUEST)
    assert_clean(info.value)


@pytest.mark.parametrize(
    "frame",
    [
        f"data: {json.dumps(ECHO)}\r\n\r\n",
        f'data: {{"candidates": [{{"content": {{"parts": [{{"text": "{KEY}", "thought": 1}}, 5]}}}}]}}\r\n\r\n',
        f"data: {{{KEY}\r\n\r\n",
    ],
    ids=["error-chunk", "malformed-part", "malformed-json"],
)
async def test_key_never_leaks_from_a_stream(frame: str) -> None:
    with pytest.raises(ModelError) as info:
        list(make(Recorder(sse_response([frame.encode()]))).stream(REQUEST))
    assert_clean(info.value)
    with pytest.raises(ModelError) as info:
        async for _ in make(Recorder(sse_response([frame.encode()]))).astream(REQUEST):
            pass
    assert_clean(info.value)


def test_an_error_without_secrets_keeps_its_cause() -> None:
    with pytest.raises(ModelError) as info:
        make(Recorder(httpx.Response(200, json={"candidates": "x"}))).chat(REQUEST)
    assert isinstance(info.value.__cause__, AttributeError)


def test_429_waits_the_retry_delay_gemini_asks_for() -> None:
    sleeps: list[float] = []
    recorder = Recorder(
        httpx.Response(429, json=quota("37s")),
        httpx.Response(503, json={"error": {"code": 503, "status": "UNAVAILABLE"}}),
        httpx.Response(200, json=TEXT_BODY),
    )
    assert make(recorder, sleeps).chat(REQUEST).ai_message.text == "Hello!"
    assert len(recorder.requests) == 3
    assert sleeps[0] == 37 and 0 < sleeps[1] <= 1.0


async def test_retry_after_header_wins_and_long_delays_are_capped() -> None:
    sleeps: list[float] = []
    recorder = Recorder(
        httpx.Response(429, json=quota("37s"), headers={"retry-after": "2"}),
        httpx.Response(429, json=quota("86400s")),
        httpx.Response(200, json=TEXT_BODY),
    )
    assert (await make(recorder, sleeps).achat(REQUEST)).ai_message.text == "Hello!"
    assert sleeps == [2, 60]


async def test_retries_exhausted_give_gemini_status_and_message() -> None:
    sleeps: list[float] = []
    recorder = Recorder(*[httpx.Response(429, json=quota("1s", KEY)) for _ in range(3)])
    with pytest.raises(ModelError, match="Resource has been exhausted") as info:
        await make(recorder, sleeps).achat(REQUEST)
    assert (info.value.status_code, info.value.code) == (429, "RESOURCE_EXHAUSTED")
    assert KEY not in str(info.value)
    assert sleeps == [1, 1]


def split_mid_utf8(stream: bytes) -> list[bytes]:
    cut = stream.index("ü".encode()) + 1
    return [stream[:cut], stream[cut : cut + 5], stream[cut + 5 :]]


async def test_astream_over_http_after_a_429() -> None:
    stream = fixture("text/stream.sse")
    sleeps: list[float] = []
    recorder = Recorder(httpx.Response(429, json=quota("3s")), sse_response(split_mid_utf8(stream)))
    events = [event async for event in make(recorder, sleeps).astream(REQUEST)]
    assert sleeps == [3] and len(recorder.requests) == 2
    assert events == list(make(Recorder(sse_response([stream]))).stream(REQUEST))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == (
        "Paris: 18°C and sunny. Zürich: 12°C, light rain 🌦."
    )


def test_a_json_answer_to_a_stream_request_says_what_arrived() -> None:
    model = make(Recorder(httpx.Response(200, json=quota())))
    with pytest.raises(ModelError, match="instead of server-sent events: Resource has been"):
        list(model.stream(REQUEST))


def test_an_empty_event_stream_says_no_event_arrived() -> None:
    with pytest.raises(ModelError, match="no event arrived at all"):
        list(make(Recorder(sse_response([b": keep-alive\r\n\r\n"]))).stream(REQUEST))


async def test_truncated_stream_over_http_async() -> None:
    stream = fixture("parallel_tool_calls/stream.sse")
    head = stream[: stream.rindex(b"data: ")]
    with pytest.raises(ModelError, match="ended before a finish reason"):
        async for _ in make(Recorder(sse_response([head]))).astream(REQUEST):
            pass


async def test_created_clients_are_closed_injected_ones_stay_open() -> None:
    async with GeminiChatModel("gemini-2.5-flash", api_key=KEY) as model:
        client, async_client = model._http.client, model._http.async_client
    assert client.is_closed and async_client.is_closed


@pytest.mark.parametrize("name", ["google:gemini-2.5-flash", "gemini:gemini-2.5-flash"])
def test_get_model(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    recorder = Recorder(httpx.Response(200, json=TEXT_BODY))
    with httpx.Client(transport=httpx.MockTransport(recorder)) as client:
        model = get_model(name, http_client=client)
        assert isinstance(model, GeminiChatModel)
        assert model.chat(REQUEST).ai_message.text == "Hello!"
    assert str(recorder.requests[0].url) == f"{ROOT}/models/gemini-2.5-flash:generateContent"


# -- the tool loop over Gemini's wire ---------------------------------------------------------------


@tool
def get_weather(city: str, unit: str = "celsius") -> str:
    """Weather of a city."""
    return f"{city}: 18 {unit}"


FINAL = {
    **TEXT_BODY,
    "candidates": [
        {
            "content": {"parts": [{"text": "Paris 18°, Zürich 18°."}], "role": "model"},
            "finishReason": "STOP",
        }
    ],
}


def loop_recorder(stream: bool) -> Recorder:
    if stream:
        final = f"data: {json.dumps(FINAL, ensure_ascii=False)}\r\n\r\n".encode()
        return Recorder(
            sse_response(split_mid_utf8(fixture("parallel_tool_calls/stream.sse"))),
            sse_response([final]),
        )
    calls = json.loads(fixture("parallel_tool_calls/response.json"))
    return Recorder(httpx.Response(200, json=calls), httpx.Response(200, json=FINAL))


def check_second_request(recorder: Recorder) -> None:
    sent = recorder.json(1)["contents"]
    answer = json.loads(fixture("parallel_tool_calls/response.json"))
    # The model turn goes back exactly as received (the one signature on the first call only) ...
    assert sent[1] == answer["candidates"][0]["content"]
    # ... and both results together in one user turn, paired by name and order.
    assert sent[2] == {
        "role": "user",
        "parts": [
            {
                "functionResponse": {
                    "name": "get_weather",
                    "response": {"output": "Paris: 18 celsius"},
                }
            },
            {
                "functionResponse": {
                    "name": "get_weather",
                    "response": {"output": "Zürich: 18 celsius"},
                }
            },
        ],
    }
    assert recorder.json(0)["tools"][0]["functionDeclarations"][0]["name"] == "get_weather"


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_tool_service_loop(mode: str) -> None:
    recorder = loop_recorder(stream=False)
    model = make(recorder)
    service = ToolService([get_weather])
    messages = [UserMessage(content="Paris and Zürich?")]
    result = (
        await asyncio.to_thread(lambda: service.chat(model, messages))
        if mode == "sync"
        else await service.achat(model, messages)
    )
    assert result.final_response.ai_message.text == "Paris 18°, Zürich 18°."
    assert [e.result.text for e in result.tool_executions] == [
        "Paris: 18 celsius",
        "Zürich: 18 celsius",
    ]
    check_second_request(recorder)
    assert result.usage.total_tokens == 301 + 6


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_tool_service_stream_loop(mode: str) -> None:
    recorder = loop_recorder(stream=True)
    model = make(recorder)
    service = ToolService([get_weather])
    messages = [UserMessage(content="Paris and Zürich?")]
    if mode == "sync":
        events = await asyncio.to_thread(lambda: list(service.stream(model, messages)))
    else:
        events = [event async for event in service.astream(model, messages)]
    partial = [
        (e.index, e.name, e.arguments) for e in events if isinstance(e, PartialArgumentsEvent)
    ]
    assert partial == [
        (0, "get_weather", {"city": "Paris", "unit": "celsius"}),
        (1, "get_weather", {"city": "Zürich", "unit": "celsius"}),
    ]
    calls = [e.call for e in events if isinstance(e, ToolCallEvent)]
    results = [e.execution.result.text for e in events if isinstance(e, ToolResultEvent)]
    assert [c.id for c in calls] == [
        "call_2Pq0aJ3hOIaS1dkPzNSF0Ak_0",
        "call_2Pq0aJ3hOIaS1dkPzNSF0Ak_1",
    ]
    assert results == ["Paris: 18 celsius", "Zürich: 18 celsius"]
    final = events[-1]
    assert isinstance(final, FinalResultEvent)
    assert final.result.final_response.ai_message.text == "Paris 18°, Zürich 18°."
    check_second_request(recorder)
    # The streamed run is the blocking run: same history (signatures and all), same usage.
    blocking = await service.achat(make(loop_recorder(stream=False)), messages)
    assert final.result.messages == blocking.messages
    assert final.result.usage == blocking.usage


@pytest.mark.parametrize("name", ["google:gemini-2.5-flash", "gemini:gemini-2.5-flash"])
def test_cli_model_option_reaches_the_provider(name: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "GOOGLE_"))}
    command = [sys.executable, "-m", "agentforge_typed", "run", "examples/weather.py:tools", "hi"]
    done = subprocess.run(
        [*command, "--model", name],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        env={**env, "PYTHONIOENCODING": "utf-8"},
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("agentforge-typed: error: no Gemini API key")


def test_native_structured_output_over_gemini() -> None:
    class City(BaseModel):
        name: str
        population: int

    answer = {
        **TEXT_BODY,
        "candidates": [
            {
                "content": {"parts": [{"text": '{"name": "Paris", "population": 2102650}'}]},
                "finishReason": "STOP",
            }
        ],
    }
    recorder = Recorder(httpx.Response(200, json=answer))
    result = ToolService().chat(
        make(recorder),
        [UserMessage(content="Biggest French city?")],
        output_type=OutputSpec(City, native=True),
    )
    assert result.output == City(name="Paris", population=2102650)
    config = recorder.json()["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    assert config["responseJsonSchema"]["properties"]["population"] == {"type": "integer"}
