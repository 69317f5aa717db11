"""Prompted output (`OutputSpec(T, prompted=True)`): for a server with neither tools nor a
JSON-schema format, the schema goes into each request's instructions (never into the run's
history), the answer's text is validated, and an invalid one goes back with field-level
feedback, under every driver."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import httpx
import pytest
from loop_drivers import DRIVERS, drive
from pydantic import BaseModel, Field

from agentforge_typed import (
    AiMessage,
    AnthropicChatModel,
    ChatMessage,
    ChatRequestParameters,
    FunctionModel,
    OutputSpec,
    OutputValidationError,
    SystemMessage,
    ToolService,
    UserMessage,
)


class City(BaseModel):
    name: str
    population: int = Field(ge=0)


SCHEMA = (
    '{"properties":{"name":{"type":"string"},'
    '"population":{"minimum":0,"type":"integer"}},"required":["name","population"],'
    '"type":"object"}'
)
INSTRUCTION = SystemMessage(
    text="When you give your final answer, answer with JSON only (no other text, no code fence) "
    "that matches this JSON Schema:\n" + SCHEMA
)


class Script:
    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.sent: list[list[ChatMessage]] = []
        self.offered: list[Any] = []
        self.model = FunctionModel(self._reply)

    def _reply(
        self, messages: Sequence[ChatMessage], parameters: ChatRequestParameters
    ) -> AiMessage:
        self.sent.append(list(messages))
        self.offered.append((parameters.tools, parameters.response_format))
        return AiMessage(text=self.answers.pop(0))


@pytest.mark.parametrize("driver", DRIVERS)
def test_the_schema_is_in_each_request_and_feedback_names_the_field(driver: str) -> None:
    script = Script('{"name": "Rome", "population": -1}', '{"name": "Rome", "population": 2800000}')
    prompt: list[ChatMessage] = [SystemMessage(text="Be brief."), UserMessage(content="Rome?")]
    spec = OutputSpec(City, prompted=True)
    result = drive(driver, ToolService(), script.model, prompt, output_type=spec)
    assert result.output == City(name="Rome", population=2800000)
    first, second = script.sent
    assert first == [prompt[0], INSTRUCTION, prompt[1]]
    assert second[:3] == first
    assert second[-1] == UserMessage(
        content="Your answer is not valid output:\n"
        "- $.population: Input should be greater than or equal to 0 (input: -1)\n"
        "Answer again with only JSON that matches the schema."
    )
    # Neither a final-result tool nor a response format was asked for.
    assert script.offered == [(None, None), (None, None)]
    # The run's history has no instruction in it.
    assert INSTRUCTION not in result.messages
    assert [m.role for m in result.messages] == ["system", "user", "assistant", "user", "assistant"]


def test_an_answer_in_a_code_fence_is_read_inside_it() -> None:
    script = Script('```json\n{"name": "Oslo", "population": 700000}\n```')
    result = ToolService().chat(script.model, "Oslo?", output_type=OutputSpec(City, prompted=True))
    assert result.output == City(name="Oslo", population=700000)
    # Without a system prompt, the instruction comes first.
    assert script.sent[0] == [INSTRUCTION, UserMessage(content="Oslo?")]


def test_spent_retries_end_the_run_with_the_last_problems() -> None:
    script = Script("Rome.", '{"name": "Rome"}')
    with pytest.raises(OutputValidationError) as raised:
        ToolService().chat(
            script.model, "Rome?", output_type=OutputSpec(City, prompted=True, max_retries=1)
        )
    assert str(raised.value) == (
        "the model's final answer is not valid output, and its 1 retries are spent: "
        "$.population: Field required"
    )
    assert raised.value.output == '{"name": "Rome"}'


def test_native_and_prompted_together_are_refused() -> None:
    with pytest.raises(ValueError) as raised:
        OutputSpec(City, native=True, prompted=True)
    assert str(raised.value) == "an OutputSpec is native or prompted, not both"


def test_a_provider_is_sent_the_instruction_as_part_of_its_system_prompt() -> None:
    sent: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(
            200,
            json={
                "id": "msg_01",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5-20250929",
                "content": [{"type": "text", "text": '{"name": "Rome", "population": 1}'}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 60, "output_tokens": 12},
            },
        )

    model = AnthropicChatModel(
        "claude-sonnet-4-5",
        api_key="sk-ant-test",
        http_client=httpx.Client(transport=httpx.MockTransport(handler)),
    )
    prompt: list[ChatMessage] = [SystemMessage(text="Be brief."), UserMessage(content="Rome?")]
    result = ToolService().chat(model, prompt, output_type=OutputSpec(City, prompted=True))
    assert result.output == City(name="Rome", population=1)
    # Anthropic joins system messages into its top-level `system`; no tool, no output_config.
    assert sent == [
        {
            "model": "claude-sonnet-4-5",
            "max_tokens": 1024,
            "system": "Be brief.\n\n" + INSTRUCTION.text,
            "messages": [{"role": "user", "content": "Rome?"}],
        }
    ]
