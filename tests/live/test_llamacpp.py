"""The library against a real llama.cpp server and a small real model (see `conftest.py`).

The tests assert what the library does with the bytes the server sends — aggregation, pairing,
validation, errors — never the model's wisdom: the prompt shows one worked example of a call, the
temperature is 0 and answers are short.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Annotated, Any

import pytest
from conftest import CONTEXT
from loop_drivers import DRIVERS, drive
from pydantic import AfterValidator, BaseModel

from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatModel,
    ChatRequest,
    ChatRequestParameters,
    ModelError,
    OutputSpec,
    ResponseComplete,
    ThinkingDelta,
    ToolCall,
    ToolCallDelta,
    ToolLoopLimitError,
    ToolResultMessage,
    ToolService,
    UserMessage,
    get_model,
    tool,
)


@tool
def get_weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: The city's name.
    """
    return f"sunny in {city}"


EXAMPLE: list[ChatMessage] = [
    UserMessage(content="What is the weather in Rome? Answer with a tool call."),
    AiMessage(tool_calls=[ToolCall(id="ex1", name="get_weather", arguments='{"city": "Rome"}')]),
    ToolResultMessage(tool_call_id="ex1", tool_name="get_weather", text="sunny in Rome"),
    AiMessage(text="It is sunny in Rome."),
]
ASK = [*EXAMPLE, UserMessage(content="What is the weather in Oslo? Answer with a tool call.")]
PARAMETERS = ChatRequestParameters(temperature=0, max_tokens=60)


@pytest.fixture
def model(llama_server: str) -> Iterator[ChatModel]:
    """The model as a user gets it (`get_model("llamacpp:...")`: the built-in profile applies)."""
    built = get_model("llamacpp:gemma-3-270m", base_url=llama_server, max_retries=0, timeout=120)
    yield built
    built.close()  # type: ignore[attr-defined]  # an HTTP model: its sync client


def _stream(model: ChatModel, request: ChatRequest, asynchronous: bool) -> Any:
    if not asynchronous:
        return list(model.stream(request))[-1]

    async def collect() -> Any:
        return [event async for event in model.astream(request)][-1]

    return asyncio.run(collect())


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_streamed_answer_aggregates_to_the_blocking_one(
    model: ChatModel, asynchronous: bool
) -> None:
    parameters = PARAMETERS.model_copy(update={"tools": (get_weather.specification,)})
    request = ChatRequest(messages=ASK, parameters=parameters)
    blocking = asyncio.run(model.achat(request)) if asynchronous else model.chat(request)
    last = _stream(model, request, asynchronous)
    assert isinstance(last, ResponseComplete)
    streamed = last.response

    def shape(message: AiMessage) -> Any:
        calls = [(call.name, json.loads(call.arguments)) for call in message.tool_calls]
        return message.text, calls

    assert shape(streamed.ai_message) == shape(blocking.ai_message)
    assert streamed.finish_reason == blocking.finish_reason
    assert blocking.ai_message.tool_calls, "the worked example should make the model call"
    assert blocking.token_usage is not None and blocking.token_usage.input_tokens > 0
    assert "cached_tokens" in blocking.metadata  # llama.cpp's prompt_tokens_details
    for response in (blocking, streamed):
        assert response.metadata["timings"]["predicted_n"] > 0  # llama.cpp's own measures


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_tool_loop_under_every_driver(model: ChatModel, driver: str) -> None:
    service = ToolService([get_weather], max_round_trips=3)
    try:
        result = drive(driver, service, model, ASK, parameters=PARAMETERS)
        messages, executions = result.messages, result.tool_executions
    except (ToolLoopLimitError, ModelError) as error:
        messages, executions = error.messages, error.tool_executions
    assert executions, "the model called no tool"
    # Every call the model made has one result, after it, paired by the loop's own id.
    ids = [call.id for m in messages if isinstance(m, AiMessage) for call in m.tool_calls]
    answered = [m.tool_call_id for m in messages if isinstance(m, ToolResultMessage)]
    assert len(set(ids)) == len(ids) and sorted(answered) == sorted(ids)
    for execution in executions:
        assert execution.result.text.startswith("sunny in ") or (
            execution.result.error_kind == "arguments"
        )


def test_a_history_with_arguments_that_are_not_json_continues(model: ChatModel) -> None:
    # llama.cpp parses every historical call's arguments and answered 500 to this history.
    cut = ToolCall(id="c9", name="get_weather", arguments='{"city":')
    history: list[ChatMessage] = [
        *ASK,
        AiMessage(tool_calls=[cut]),
        ToolResultMessage(
            tool_call_id="c9", tool_name="get_weather", text="cut off", is_error=True
        ),
        UserMessage(content="Say done."),
    ]
    parameters = PARAMETERS.model_copy(update={"tools": (get_weather.specification,)})
    response = model.chat(ChatRequest(messages=history, parameters=parameters))
    assert {"feature": "tool_call_arguments"}.items() <= response.metadata["adaptations"][0].items()


def test_an_answer_cut_off_by_max_tokens_never_runs_a_partial_call(model: ChatModel) -> None:
    parameters = PARAMETERS.model_copy(update={"max_tokens": 12})
    service = ToolService([get_weather], max_round_trips=2)
    try:
        result = service.chat(model, ASK, parameters)
        executions = result.tool_executions
    except (ModelError, ToolLoopLimitError) as error:
        executions = error.tool_executions
    for execution in executions:
        json.loads(execution.call.arguments)  # only whole calls ever ran


def test_a_prompt_over_the_context_window_is_a_clear_model_error(model: ChatModel) -> None:
    words = " ".join(["weather"] * (CONTEXT * 2))
    with pytest.raises(ModelError) as info:
        model.chat(ChatRequest(messages=[UserMessage(content=words)], parameters=PARAMETERS))
    assert info.value.status_code == 400
    assert info.value.code == "exceed_context_size_error"
    assert info.value.message.startswith("llamacpp API error 400: ")  # the server chosen


class City(BaseModel):
    """A city and its country."""

    name: str
    country: str


def test_native_structured_output_is_validated(model: ChatModel) -> None:
    # llama.cpp turns the JSON Schema into a grammar: the answer is JSON of that shape, whatever
    # the model knows; the library validates it into the output type.
    result = ToolService().chat(
        model,
        "Name a city in Italy as JSON.",
        PARAMETERS,
        output_type=OutputSpec(City, native=True),
    )
    assert isinstance(result.output, City) and result.output.name


def test_a_response_format_the_server_cannot_use_is_a_model_error(model: ChatModel) -> None:
    parameters = PARAMETERS.model_copy(
        # A schema llama.cpp cannot turn into a grammar.
        update={
            "custom": {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"schema": {"type": "nonsense"}},
                }
            }
        }
    )
    with pytest.raises(ModelError) as info:
        model.chat(ChatRequest(messages=[UserMessage(content="hi")], parameters=parameters))
    assert info.value.status_code is not None and 400 <= info.value.status_code < 500
    assert info.value.message.startswith("llamacpp API error")


class Address(BaseModel):
    """Where a parcel goes."""

    city: str
    street: str


@tool
def ship(to: Address) -> str:
    """Ship a parcel.

    Args:
        to: The address.
    """
    return f"shipped to {to.street}, {to.city}"


NESTED: list[ChatMessage] = [
    UserMessage(content="Ship to Via Roma 1, Rome. Answer with a tool call."),
    AiMessage(
        tool_calls=[
            ToolCall(
                id="ex1",
                name="ship",
                arguments='{"to": {"city": "Rome", "street": "Via Roma 1"}}',
            )
        ]
    ),
    ToolResultMessage(tool_call_id="ex1", tool_name="ship", text="shipped to Via Roma 1, Rome"),
    AiMessage(text="Shipped."),
    UserMessage(content="Ship to Karl Johans gate 2, Oslo. Answer with a tool call."),
]


def test_a_nested_model_argument_is_validated_or_fed_back(model: ChatModel) -> None:
    service = ToolService([ship], max_round_trips=2)
    # One call per answer: this model repeats calls until cut off (then none runs, by design).
    parameters = PARAMETERS.model_copy(update={"max_tokens": 120, "stop": ["</tool_call>"]})
    try:
        executions = service.chat(model, NESTED, parameters).tool_executions
    except (ModelError, ToolLoopLimitError) as error:
        executions = error.tool_executions
    assert executions, "the model called no tool"
    for execution in executions:
        if execution.failed:
            # Invalid arguments go back to the model with their JSON paths.
            assert execution.result.error_kind == "arguments" and "$." in execution.result.text
        else:
            assert execution.result.text.startswith("shipped to ")


# The template renders a history message's `reasoning_content` between <think> tags, from which
# llama.cpp learns the markers and parses them out of answers. This model thinks only when the
# worked example does (in its text, which the template shows as written).
REASONED: list[ChatMessage] = [
    UserMessage(content="What is the weather in Rome? Answer with a tool call."),
    AiMessage(
        text="<think>The user asks about Rome, so I call get_weather.</think>",
        tool_calls=[ToolCall(id="ex1", name="get_weather", arguments='{"city": "Rome"}')],
    ),
    ToolResultMessage(tool_call_id="ex1", tool_name="get_weather", text="sunny in Rome"),
    AiMessage(text="It is sunny in Rome."),
    UserMessage(content="What is the weather in Oslo? Answer with a tool call."),
]
ONE_CALL = PARAMETERS.model_copy(
    update={"tools": (get_weather.specification,), "stop": ["</tool_call>"]}
)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_reasoning_is_streamed_and_aggregates_to_the_blocking_answer(
    model: ChatModel, asynchronous: bool
) -> None:
    request = ChatRequest(messages=REASONED, parameters=ONE_CALL)
    blocking = asyncio.run(model.achat(request)) if asynchronous else model.chat(request)
    assert blocking.ai_message.thinking, "the model did not think"
    assert blocking.ai_message.tool_calls
    if asynchronous:

        async def collect() -> list[Any]:
            return [event async for event in model.astream(request)]

        events = asyncio.run(collect())
    else:
        events = list(model.stream(request))
    deltas = "".join(e.text for e in events if isinstance(e, ThinkingDelta))
    streamed = events[-1].response
    assert deltas == streamed.ai_message.thinking == blocking.ai_message.thinking
    assert [c.arguments for c in streamed.ai_message.tool_calls] == [
        c.arguments for c in blocking.ai_message.tool_calls
    ]


def test_output_the_server_cannot_parse_is_a_model_error(model: ChatModel) -> None:
    # Without the stop sequence the model goes on after its call, which llama.cpp cannot parse:
    # a 500 to a blocking request, an error event after the deltas of a streamed one.
    request = ChatRequest(messages=REASONED, parameters=ONE_CALL.model_copy(update={"stop": None}))
    with pytest.raises(ModelError) as blocking:
        model.chat(request)
    assert blocking.value.status_code == 500
    assert blocking.value.message.startswith("llamacpp API error 500: ")
    events: list[Any] = []
    with pytest.raises(ModelError) as streamed:
        events.extend(model.stream(request))
    assert streamed.value.message.startswith("llamacpp stream error: ")
    assert streamed.value.code == blocking.value.code == "server_error"
    assert any(isinstance(event, ThinkingDelta) for event in events)


TWO_CITIES: list[ChatMessage] = [
    UserMessage(content="What is the weather in Rome and in Paris? Answer with tool calls."),
    AiMessage(
        tool_calls=[
            ToolCall(id="ex1", name="get_weather", arguments='{"city": "Rome"}'),
            ToolCall(id="ex2", name="get_weather", arguments='{"city": "Paris"}'),
        ]
    ),
    ToolResultMessage(tool_call_id="ex1", tool_name="get_weather", text="sunny in Rome"),
    ToolResultMessage(tool_call_id="ex2", tool_name="get_weather", text="sunny in Paris"),
    AiMessage(text="Sunny in both."),
    UserMessage(content="What is the weather in Oslo and in Lima? Answer with tool calls."),
]


def test_several_calls_in_one_answer_stream_apart_and_run_apart(model: ChatModel) -> None:
    parameters = PARAMETERS.model_copy(
        update={"tools": (get_weather.specification,), "max_tokens": 120}
    )
    # Two requests for one prompt can differ here (a cached prompt prefix shifts near-tied
    # tokens), so the stream is checked against its own deltas, not against `chat()`.
    events = list(model.stream(ChatRequest(messages=TWO_CITIES, parameters=parameters)))
    last = events[-1]
    assert isinstance(last, ResponseComplete)
    calls = last.response.ai_message.tool_calls
    assert len(calls) >= 2, "the model made one call"
    pieces: dict[int, list[str]] = {}
    for event in events:
        if isinstance(event, ToolCallDelta):
            pieces.setdefault(event.index, []).append(event.arguments_delta)
    assert [c.arguments for c in calls] == ["".join(pieces[i]) for i in sorted(pieces)]
    assert len({call.id for call in calls}) == len(calls)
    # The loop runs each whole call once and answers it by its id.
    service = ToolService([get_weather], max_round_trips=1)
    try:
        result = service.chat(model, TWO_CITIES, parameters)
        messages, executions = result.messages, result.tool_executions
    except (ModelError, ToolLoopLimitError) as error:
        messages, executions = error.messages, error.tool_executions
    first = next(m for m in messages[len(TWO_CITIES) :] if isinstance(m, AiMessage))
    ran = [e.call.id for e in executions]
    assert len(ran) == len(set(ran)) >= 2
    assert set(ran) <= {call.id for call in first.tool_calls}


def test_parallel_tool_calls_false_becomes_an_instruction(model: ChatModel) -> None:
    # The server accepts the field and still makes several calls: the profile does not send it.
    parameters = PARAMETERS.model_copy(
        update={"tools": (get_weather.specification,), "parallel_tool_calls": False}
    )
    response = model.chat(ChatRequest(messages=TWO_CITIES, parameters=parameters))
    (adaptation,) = [
        a for a in response.metadata["adaptations"] if a["feature"] == "parallel_tool_calls"
    ]
    assert "instruction" in adaptation["rule"]


def _capital_city(city: str) -> str:
    if not city.isupper():
        raise ValueError("write the city in capital letters, e.g. OSLO")
    return city


@tool
def get_forecast(city: Annotated[str, AfterValidator(_capital_city)]) -> str:
    """The forecast for a city.

    Args:
        city: The city's name.
    """
    return f"rain in {city}"


ROME = '{"city": "Rome"}'


def test_invalid_arguments_are_fed_back_and_the_loop_goes_on(model: ChatModel) -> None:
    # A rule the schema cannot say (so no grammar enforces it): the library's own validation
    # refuses "Oslo", and the model reads why in the next round.
    refused = "Invalid arguments for tool get_forecast:\n$.city: write the city in capitals"
    ask: list[ChatMessage] = [
        UserMessage(content="What is the forecast for Rome? Answer with a tool call."),
        AiMessage(tool_calls=[ToolCall(id="ex1", name="get_forecast", arguments=ROME)]),
        ToolResultMessage(tool_call_id="ex1", tool_name="get_forecast", text=refused),
        AiMessage(tool_calls=[ToolCall(id="ex2", name="get_forecast", arguments=ROME.upper())]),
        ToolResultMessage(tool_call_id="ex2", tool_name="get_forecast", text="rain in ROME"),
        AiMessage(text="Rain in Rome."),
        UserMessage(content="What is the forecast for Oslo? Answer with a tool call."),
    ]
    parameters = PARAMETERS.model_copy(update={"stop": ["</tool_call>"]})
    service = ToolService([get_forecast], max_round_trips=2)
    try:
        result = service.chat(model, ask, parameters)
        messages, executions = result.messages, result.tool_executions
    except (ModelError, ToolLoopLimitError) as error:
        messages, executions = error.messages, error.tool_executions
    failed = [e for e in executions if e.result.error_kind == "arguments"]
    assert failed, "the model wrote the city in capitals"
    (fed_back,) = [
        m
        for m in messages
        if isinstance(m, ToolResultMessage) and m.tool_call_id == failed[0].call.id
    ]
    assert "capital letters" in fed_back.text and fed_back.is_error
    answers = [m for m in messages[len(ask) :] if isinstance(m, AiMessage)]
    assert len(answers) >= 2  # a second round ran
