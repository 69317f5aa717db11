"""`strict_schema=True` tools with nested optional models, enums and Literal unions: the OpenAI
strict rendering, the null-means-default reading, and FakeModel round trips."""

from __future__ import annotations

import asyncio
import json
from enum import Enum
from typing import Any, Literal

import httpx
from openai_support import Server
from pydantic import BaseModel

from agentforge_typed import (
    ChatRequest,
    ChatRequestParameters,
    FakeModel,
    ToolCall,
    ToolService,
    UserMessage,
    tool,
)


class Color(str, Enum):
    RED = "red"
    BLUE = "blue"


class Window(BaseModel):
    start: int
    end: int | None = None


class Filter(BaseModel):
    color: Color = Color.RED
    window: Window | None = None
    mode: Literal["fast", "exact"] | int = "fast"


@tool(strict_schema=True)
def search(query: str, filter: Filter | None = None, limit: int = 10) -> dict[str, Any]:
    """Search things."""
    return {"query": query, "filter": filter, "limit": limit}


def strict_schema() -> dict[str, Any]:
    server = Server(
        httpx.Response(
            200,
            json={
                "id": "chatcmpl-S",
                "object": "chat.completion",
                "created": 1,
                "model": "gpt-4o-mini",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "ok"},
                        "finish_reason": "stop",
                    }
                ],
            },
        )
    )
    server.model().chat(
        ChatRequest(
            messages=[UserMessage(content="x")],
            parameters=ChatRequestParameters(tools=[search.specification]),
        )
    )
    [sent] = server.bodies[0]["tools"]
    assert sent["function"]["strict"] is True
    return dict(sent["function"]["parameters"])


def objects(node: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    if isinstance(node, dict):
        if "properties" in node:
            found.append(node)
        for value in node.values():
            found += objects(value)
    elif isinstance(node, list):
        for value in node:
            found += objects(value)
    return found


def test_strict_rendering_requires_every_property_and_closes_every_object() -> None:
    schema = strict_schema()
    nested = objects(schema)
    assert len(nested) == 3  # arguments, Filter, Window
    for node in nested:
        assert node["additionalProperties"] is False
        assert sorted(node["required"]) == sorted(node["properties"])


def test_nulls_for_optional_nested_fields_mean_the_defaults() -> None:
    raw = json.dumps(
        {
            "query": "q",
            "limit": None,
            "filter": {"color": None, "window": {"start": 1, "end": None}, "mode": None},
        }
    )
    result = search.execute(ToolCall(id="c", name="search", arguments=raw))
    assert not result.is_error, result.text
    assert result.value["limit"] == 10
    assert result.value["filter"] == Filter(window=Window(start=1))
    # `end: null` is valid as it is (`int | None`): only the three non-nullable nulls are repairs.
    assert len(result.repairs) == 3


def test_null_for_a_required_nested_field_is_still_an_error() -> None:
    raw = json.dumps({"query": "q", "limit": 1, "filter": {"window": {"start": None}}})
    result = search.execute(ToolCall(id="c", name="search", arguments=raw))
    assert result.error_kind == "arguments" and "$.filter.window.start" in result.text


def test_enum_and_literal_union_values_are_checked() -> None:
    bad = json.dumps({"query": "q", "filter": {"color": "green", "mode": "slow"}})
    result = search.execute(ToolCall(id="c", name="search", arguments=bad))
    assert result.error_kind == "arguments"
    assert "$.filter.color" in result.text and "$.filter.mode" in result.text
    good = json.dumps({"query": "q", "filter": {"color": "blue", "mode": 3}})
    value = search.execute(ToolCall(id="c", name="search", arguments=good)).value
    assert value["filter"] == Filter(color=Color.BLUE, mode=3)


async def test_fake_model_arguments_for_strict_tools_validate() -> None:
    service = ToolService([search])
    for result in (
        await asyncio.to_thread(lambda: service.chat(FakeModel(), [UserMessage(content="go")])),
        await service.achat(FakeModel(), [UserMessage(content="go")]),
    ):
        [execution] = result.tool_executions
        assert not execution.failed, execution.result.text
        search.validate_arguments(execution.call.arguments)
