"""`output_type` as any type form, not only a class: unions, `Literal`, `Annotated`, `Optional`.

The static side (`result.output` inferred as that type) is pinned in `stubs/service.py`."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatRequestParameters,
    FunctionModel,
    OutputSpec,
    ToolCall,
    ToolService,
)


class Cat(BaseModel):
    meows: bool


class Dog(BaseModel):
    barks: bool


def _final(*answers: Any) -> FunctionModel:
    """A model that answers each turn with one `final_result` call."""
    remaining = list(answers)

    def reply(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        arguments = json.dumps(remaining.pop(0))
        return AiMessage(tool_calls=[ToolCall(id="f", name="final_result", arguments=arguments)])

    return FunctionModel(reply)


@pytest.mark.parametrize(
    ("output_type", "answer", "expected"),
    [
        (Cat | Dog, {"result": {"barks": True}}, Dog(barks=True)),
        (Literal["yes", "no"], {"result": "no"}, "no"),
        (Annotated[int, Field(ge=0)], {"result": 3}, 3),
        (Dog | None, {"result": None}, None),
        (OutputSpec(Literal[1, 2]), {"result": 2}, 2),
    ],
)
async def test_type_forms_as_output_type(output_type: Any, answer: Any, expected: Any) -> None:
    blocking = await asyncio.to_thread(
        lambda: ToolService().chat(_final(answer), "?", output_type=output_type)
    )
    assert blocking.output == expected
    result = await ToolService().achat(_final(answer), "?", output_type=output_type)
    assert result.output == expected


def test_a_type_form_is_validated_like_a_class() -> None:
    # An answer outside the `Literal` or the constraint goes back to the model, then is accepted.
    result = ToolService().chat(
        _final({"result": "maybe"}, {"result": "yes"}), "?", output_type=Literal["yes", "no"]
    )
    assert result.output == "yes"
    first = result.tool_executions[0].result
    assert first.error_kind == "arguments" and 'Input should be "yes" or "no"' in first.text
    spec = OutputSpec(Annotated[int, Field(ge=0)])
    assert spec.specification.parameters["properties"]["result"] == {
        "minimum": 0,
        "type": "integer",
    }
