"""The library against a real llama.cpp server and a small real model (see `conftest.py`).

The tests assert what the library does with the bytes the server sends — aggregation, pairing,
validation, errors — never the model's wisdom: the prompt shows one worked example of a call, the
temperature is 0 and answers are short.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import CONTEXT
from loop_drivers import DRIVERS, drive
from pydantic import BaseModel

from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatModel,
    ChatRequest,
    ChatRequestParameters,
    ModelError,
    OutputSpec,
    ResponseComplete,
    ToolCall,
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
