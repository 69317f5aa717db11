"""Anthropic strict tool use: a `strict_schema` tool goes out with `strict: true` and its schema in
the `anthropic-strict` dialect, as https://docs.anthropic.com/en/docs/build-with-claude/structured-outputs
describes it (closed objects, optional properties allowed; numeric bounds, lengths and `minItems`
over 1 not enforced, so moved into descriptions and still validated here; no recursion)."""

from __future__ import annotations

import json
from typing import Annotated

import httpx
import pytest
from pydantic import BaseModel, Field

from agentforge_typed import (
    AnthropicChatModel,
    ChatRequest,
    ChatRequestParameters,
    SchemaDialectError,
    ToolCall,
    UserMessage,
    tool,
)
from agentforge_typed.providers._anthropic_wire import map_tool


class Line(BaseModel):
    """One order line."""

    sku: Annotated[str, Field(pattern=r"^[A-Z]{3}-\d+$")]
    quantity: Annotated[int, Field(ge=1, le=99)]


@tool(strict_schema=True)
def order(lines: Annotated[list[Line], Field(min_length=2)], note: str | None = None) -> str:
    """Place an order.

    Args:
        lines: What to order.
        note: For the warehouse.
    """
    return f"{len(lines)} lines"


def test_a_strict_tool_is_sent_strict_in_the_anthropic_dialect() -> None:
    assert map_tool(order.specification) == {
        "name": "order",
        "description": "Place an order.",
        "input_schema": {
            "$defs": {
                "Line": {
                    "description": "One order line.",
                    "type": "object",
                    "properties": {
                        "sku": {"type": "string", "pattern": "^[A-Z]{3}-\\d+$"},
                        "quantity": {"type": "integer", "description": "maximum: 99, minimum: 1"},
                    },
                    "required": ["sku", "quantity"],
                    "additionalProperties": False,
                }
            },
            "type": "object",
            "properties": {
                "lines": {
                    "type": "array",
                    "items": {"$ref": "#/$defs/Line"},
                    "description": "What to order. (minItems: 2)",
                },
                "note": {
                    "anyOf": [{"type": "string"}, {"type": "null"}],
                    "description": "For the warehouse. (default: null)",
                },
            },
            "required": ["lines"],  # optional stays optional: Anthropic allows it
            "additionalProperties": False,
        },
        "strict": True,
    }


def test_a_non_strict_tool_is_sent_as_before() -> None:
    plain = order.specification.model_copy(update={"strict_schema": False})
    sent = map_tool(plain)
    assert "strict" not in sent
    assert sent["input_schema"]["properties"]["lines"]["minItems"] == 2


def test_what_the_model_was_only_told_is_still_enforced() -> None:
    def problems(lines: list[dict[str, object]]) -> str:
        call = ToolCall(id="toolu_1", name="order", arguments=json.dumps({"lines": lines}))
        result = order.execute(call)
        assert result.is_error
        return result.text

    line = {"sku": "ABC-1", "quantity": 5}
    assert "- $.lines: List should have at least 2 items after validation, not 1" in problems(
        [line]
    )
    too_many = problems([line, {**line, "quantity": 120}])
    assert "- $.lines[1].quantity: Input should be less than or equal to 99" in too_many


class Node(BaseModel):
    name: str
    children: list[Node] = []


@tool(strict_schema=True)
def walk(tree: Node) -> str:
    """Walk a tree."""
    return tree.name


def test_a_recursive_strict_tool_is_refused_before_anything_is_sent() -> None:
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(500)

    model = AnthropicChatModel(
        "claude-sonnet-4-5",
        api_key="sk-ant-test",
        http_client=httpx.Client(transport=httpx.MockTransport(handler)),
    )
    request = ChatRequest(
        messages=[UserMessage(content="walk")],
        parameters=ChatRequestParameters(tools=[walk.specification]),
    )
    with pytest.raises(SchemaDialectError) as raised:
        model.chat(request)
    assert str(raised.value) == (
        "the anthropic-strict schema dialect cannot express $.tree.children[*]: a recursive "
        "schema ('#/$defs/Node')"
    )
    assert sent == []
