from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from agentforge_typed import (
    AiMessage,
    AnthropicChatModel,
    ChatMessage,
    ChatRequestParameters,
    FakeModel,
    FunctionModel,
    OutputSpec,
    OutputValidationError,
    ResponseFormat,
    ToolCall,
    ToolResultMessage,
    ToolService,
    UserMessage,
    tool,
)


class City(BaseModel):
    name: str
    population: int = Field(ge=0)


@dataclass
class Point:
    x: float
    y: float


def scripted(*turns: AiMessage) -> tuple[FunctionModel, list[ChatRequestParameters]]:
    remaining = list(turns)
    seen: list[ChatRequestParameters] = []

    def reply(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        seen.append(parameters)
        return remaining.pop(0)

    return FunctionModel(reply), seen


def final(arguments: Any, id: str = "f1") -> AiMessage:
    return AiMessage(
        tool_calls=[ToolCall(id=id, name="final_result", arguments=json.dumps(arguments))]
    )


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(
    ("output_type", "arguments", "expected"),
    [
        (City, {"name": "Paris", "population": 2100000}, City(name="Paris", population=2100000)),
        (Point, {"x": 1.5, "y": -2}, Point(x=1.5, y=-2)),
        (list[int], {"result": [1, 2, 3]}, [1, 2, 3]),
        (int, {"result": 42}, 42),
    ],
)
def test_output_types(mode: str, output_type: Any, arguments: Any, expected: Any) -> None:
    model, seen = scripted(final(arguments))
    service = ToolService()
    messages = [UserMessage(content="answer")]
    if mode == "sync":
        result = service.chat(model, messages, output_type=output_type)
    else:
        result = asyncio.run(service.achat(model, messages, output_type=output_type))
    assert result.output == expected
    (spec,) = seen[0].tools or ()
    assert spec.name == "final_result"
    if output_type in (list[int], int):
        assert spec.parameters["required"] == ["result"]
    else:
        assert set(spec.parameters["properties"]) == set(arguments)


def test_output_schema_is_the_model() -> None:
    model, seen = scripted(final({"name": "Oslo", "population": 700000}))
    ToolService().chat(model, [UserMessage(content="?")], output_type=City)
    (spec,) = seen[0].tools or ()
    assert spec.parameters == {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "population": {"type": "integer", "minimum": 0},
        },
        "required": ["name", "population"],
    }


def test_invalid_then_corrected_output() -> None:
    model, _ = scripted(
        final({"name": "Paris", "population": "lots"}, id="a"),
        final({"name": "Paris", "population": 2100000}, id="b"),
    )
    result = ToolService().chat(model, [UserMessage(content="?")], output_type=City)
    assert result.output == City(name="Paris", population=2100000)
    error = next(m for m in result.messages if isinstance(m, ToolResultMessage))
    assert error.is_error and error.tool_call_id == "a"
    assert "$.population" in error.text and '"lots"' in error.text
    assert [e.failed for e in result.tool_executions] == [True, False]


def test_exhausted_output_retries_carry_the_last_output() -> None:
    bad = [final({"name": "Paris", "population": -i}, id=str(i)) for i in range(1, 4)]
    model, _ = scripted(*bad)
    with pytest.raises(OutputValidationError) as info:
        ToolService().chat(model, [UserMessage(content="?")], output_type=City)
    assert json.loads(info.value.output) == {"name": "Paris", "population": -3}
    assert info.value.errors[0].path == "$.population"
    assert "greater than or equal to 0" in info.value.errors[0].message


def test_output_retry_budget_is_configurable() -> None:
    model, _ = scripted(final({"name": 1, "population": 1}))
    with pytest.raises(OutputValidationError):
        ToolService().chat(
            model, [UserMessage(content="?")], output_type=OutputSpec(City, max_retries=0)
        )


@tool
def population_of(city: str) -> int:
    """Population of a city."""
    return {"Paris": 2100000}[city]


def test_output_tool_with_normal_tools_in_one_run() -> None:
    model, seen = scripted(
        AiMessage(
            tool_calls=[ToolCall(id="t", name="population_of", arguments='{"city": "Paris"}')]
        ),
        final({"name": "Paris", "population": 2100000}),
    )
    result = ToolService([population_of]).chat(model, [UserMessage(content="?")], output_type=City)
    assert result.output == City(name="Paris", population=2100000)
    assert [e.call.name for e in result.tool_executions] == ["population_of", "final_result"]
    assert [s.name for s in seen[0].tools or ()] == ["population_of", "final_result"]


def test_text_answer_is_nudged_towards_the_output_tool() -> None:
    model, _ = scripted(AiMessage(text="Paris, 2.1M"), final({"name": "Paris", "population": 1}))
    result = ToolService().chat(model, [UserMessage(content="?")], output_type=City)
    assert result.output == City(name="Paris", population=1)
    nudge = result.messages[2]
    assert nudge == UserMessage(
        content="Give your final answer by calling the `final_result` tool."
    )


def test_text_answers_exhaust_the_budget() -> None:
    model, _ = scripted(*(AiMessage(text="no") for _ in range(3)))
    with pytest.raises(OutputValidationError) as info:
        ToolService().chat(model, [UserMessage(content="?")], output_type=City)
    assert info.value.output == "no"


def test_native_output_validates_the_text() -> None:
    model, seen = scripted(
        AiMessage(text='{"name": "Rome", "population": "many"}'),
        AiMessage(text='{"name": "Rome", "population": 2800000}'),
    )
    spec = OutputSpec(City, native=True)
    result = ToolService().chat(model, [UserMessage(content="?")], output_type=spec)
    assert result.output == City(name="Rome", population=2800000)
    assert seen[0].tools is None
    assert seen[0].response_format == ResponseFormat(
        name="final_result", json_schema=spec.specification.parameters
    )
    assert seen[0].custom == {}
    retry = result.messages[2]
    assert isinstance(retry, UserMessage) and "$.population" in retry.text


def test_output_name_clash_is_refused() -> None:
    @tool
    def final_result(x: int) -> int:
        """Clash."""
        return x

    model, _ = scripted(AiMessage(text="."))
    with pytest.raises(ValueError, match="final_result"):
        ToolService([final_result]).chat(model, [UserMessage(content="?")], output_type=City)


class Forecast(TypedDict):
    city: str
    days: list[int]


def test_typed_dict_output() -> None:
    model, _ = scripted(final({"city": "Oslo", "days": [1, 2]}))
    result = ToolService().chat(model, [UserMessage(content="?")], output_type=Forecast)
    assert result.output == {"city": "Oslo", "days": [1, 2]}


@pytest.mark.parametrize("native", [False, True])
def test_fake_model_produces_valid_output(native: bool) -> None:
    @tool
    def population_of(city: str) -> int:
        """Population of a city."""
        return 1000

    spec = OutputSpec(City, native=native)
    result = ToolService([population_of]).chat(
        FakeModel(), [UserMessage(content="?")], output_type=spec
    )
    assert isinstance(result.output, City)
    assert result.output.population >= 0
    assert "population_of" in [e.call.name for e in result.tool_executions]


def test_native_output_goes_to_anthropic_as_output_config_format() -> None:
    """JSON outputs as https://docs.anthropic.com/en/docs/build-with-claude/structured-outputs
    shows them: `output_config: {format: {type: json_schema, schema}}`, the answer's JSON in its
    text block; constraints Anthropic does not enforce are described and validated locally."""
    sent: list[dict[str, Any]] = []
    answers = ['{"name": "Rome", "population": -5}', '{"name": "Rome", "population": 2800000}']

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        body = {
            "id": "msg_01",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": [{"type": "text", "text": answers[len(sent) - 1]}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 40, "output_tokens": 12},
        }
        return httpx.Response(200, json=body)

    client = httpx.Client(transport=httpx.MockTransport(handler))
    model = AnthropicChatModel("claude-sonnet-4-5", api_key="sk-ant-test", http_client=client)
    result = ToolService().chat(
        model, [UserMessage(content="?")], output_type=OutputSpec(City, native=True)
    )
    assert result.output == City(name="Rome", population=2800000)
    assert sent[0] == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": "?"}],
        "output_config": {
            "format": {
                "type": "json_schema",
                "schema": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "population": {"type": "integer", "description": "minimum: 0"},
                    },
                    "required": ["name", "population"],
                    "additionalProperties": False,
                },
            }
        },
    }
    # The bound the model was only told about is enforced here: the answer went back once.
    assert "population" in sent[1]["messages"][-1]["content"]


def test_native_output_exhausted_lists_the_last_attempts_problems() -> None:
    model, _ = scripted(
        AiMessage(text='{"name": "Rome", "population": "many"}'),
        AiMessage(text="Rome has about 2.8 million people."),
        AiMessage(text='{"name": "Rome", "population": -1}'),
    )
    spec = OutputSpec(City, native=True)
    with pytest.raises(OutputValidationError) as info:
        ToolService().chat(model, [UserMessage(content="?")], output_type=spec)
    error = info.value
    assert error.output == '{"name": "Rome", "population": -1}'
    assert [(e.path, e.input) for e in error.errors] == [("$.population", -1)]
    assert str(error) == (
        "the model's final answer is not valid output, and its 2 retries are spent:"
        " $.population: Input should be greater than or equal to 0"
    )
    assert len(error.messages) == 6  # the run so far: question, answers and retry prompts


def test_native_retry_prompt_asks_for_json_and_names_no_tool() -> None:
    model, seen = scripted(
        AiMessage(text="About 2.8 million."),
        AiMessage(text='{"name": "Rome", "population": "many"}'),
        AiMessage(text='{"name": "Rome", "population": 2800000}'),
    )
    result = ToolService().chat(
        model, [UserMessage(content="?")], output_type=OutputSpec(City, native=True)
    )
    prompts = [m.text for m in result.messages if isinstance(m, UserMessage)][1:]
    assert prompts == [
        "Your answer is not valid output:\n"
        '- $: Invalid JSON: expected value at line 1 column 1 (input: "About 2.8 million.")\n'
        "Answer again with only JSON that matches the schema.",
        "Your answer is not valid output:\n"
        '- $.population: Input should be a valid integer (input: "many")\n'
        "Answer again with only JSON that matches the schema.",
    ]
    assert all("final_result" not in prompt for prompt in prompts)
    assert all(parameters.tools is None for parameters in seen)


@pytest.mark.parametrize("mode", ["chat", "stream"])
def test_prose_instead_of_the_output_tool_says_so(mode: str) -> None:
    model, _ = scripted(*(AiMessage(text="Paris, I think.") for _ in range(3)))
    service = ToolService()
    with pytest.raises(OutputValidationError) as info:
        if mode == "chat":
            service.chat(model, [UserMessage(content="?")], output_type=City)
        else:
            list(service.stream(model, [UserMessage(content="?")], output_type=City))
    assert str(info.value) == (
        "no final_result call: the model answered in text instead of calling the"
        " `final_result` tool, and its 2 retries are spent"
    )
    assert info.value.errors == () and info.value.output == "Paris, I think."
