"""What `ToolService` accepts at its boundary: the messages of a run."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from typing import Any

import pytest

from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatRequestParameters,
    FunctionModel,
    ToolCall,
    ToolService,
    UserMessage,
    tool,
)

DRIVERS = ["chat", "achat", "stream", "astream"]


def drive(driver: str, service: ToolService, model: FunctionModel, messages: Any) -> Any:
    """Run under `driver`; return the run's `ToolChatResult`."""
    if driver == "chat":
        return service.chat(model, messages)
    if driver == "achat":
        return asyncio.run(service.achat(model, messages))
    if driver == "stream":
        events: list[Any] = list(service.stream(model, messages))
        return events[-1].result

    async def consume() -> Any:
        events: list[Any] = [event async for event in service.astream(model, messages)]
        return events[-1].result

    return asyncio.run(consume())


class Recorder:
    def __init__(self) -> None:
        self.seen: list[list[ChatMessage]] = []
        self.model = FunctionModel(self.reply)

    def reply(
        self, messages: Sequence[ChatMessage], parameters: ChatRequestParameters
    ) -> AiMessage:
        self.seen.append(list(messages))
        return AiMessage(text="Sunny.")


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_string_is_one_user_message(driver: str) -> None:
    recorder = Recorder()
    result = drive(driver, ToolService(), recorder.model, "What's the weather?")
    assert recorder.seen == [[UserMessage(content="What's the weather?")]]
    assert result.messages[0] == UserMessage(content="What's the weather?")


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize(
    ("messages", "complaint"),
    [
        ([UserMessage(content="hi"), "and this"], "messages[1] is of type 'str'"),
        (["hi"], "messages[0] is of type 'str'"),
        (
            [UserMessage(content="hi"), {"role": "user", "content": "x"}],
            "messages[1] is of type 'dict'",
        ),
        ([None], "messages[0] is of type 'NoneType'"),
        (b"hi", "messages[0] is of type 'int'"),
        (UserMessage(content="hi"), "messages[0] is of type 'tuple'"),
        (42, "messages must be a string or an iterable of chat messages, not int"),
    ],
)
def test_anything_else_is_refused_before_any_model_call(
    driver: str, messages: Any, complaint: str
) -> None:
    recorder = Recorder()
    with pytest.raises(TypeError, match=re.escape(complaint)):
        drive(driver, ToolService(), recorder.model, messages)
    assert recorder.seen == []


def test_a_parameter_colliding_with_a_renamed_one_is_refused_naming_both() -> None:
    def first(_x: int, arg0_x: str) -> str:
        return f"{_x} {arg0_x}"

    def second(arg1_json: str, json: int) -> str:
        return arg1_json

    with pytest.raises(TypeError, match="parameters `_x` and `arg0_x`"):
        tool(first)
    with pytest.raises(TypeError, match="parameters `arg1_json` and `json`"):
        tool(second)


def test_renamed_parameters_keep_their_json_names() -> None:
    @tool
    def both(_x: int, x: int, json: int) -> int:
        """Sum."""
        return _x + x + json

    assert list(both.specification.parameters["properties"]) == ["_x", "x", "json"]
    result = both.execute(ToolCall(id="1", name="both", arguments='{"_x": 1, "x": 2, "json": 3}'))
    assert result.text == "6"
