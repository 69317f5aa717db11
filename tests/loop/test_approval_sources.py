"""`requires_approval` on the other tool kinds: `SchemaTool`, `HttpTool` (through
`httpx.MockTransport`) and MCP servers (a real one over stdio), per server and per tool name."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

import httpx
import pytest

from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatRequestParameters,
    ChatResponse,
    FunctionModel,
    HttpTool,
    SchemaTool,
    ToolCall,
    ToolResultMessage,
    ToolService,
    ToolSpecification,
)

FIXTURE_SERVER = str(Path(__file__).parents[1] / "mcp_fixture_server.py")


def scripted(*turns: AiMessage) -> FunctionModel:
    remaining = list(turns)

    def reply(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> ChatResponse:
        return ChatResponse(ai_message=remaining.pop(0))

    return FunctionModel(reply)


def call(id: str, name: str, **arguments: Any) -> ToolCall:
    return ToolCall(id=id, name=name, arguments=json.dumps(arguments))


def answers(messages: Sequence[ChatMessage]) -> dict[str, str]:
    return {m.tool_call_id: m.text for m in messages if isinstance(m, ToolResultMessage)}


ADD = ToolSpecification(
    name="add",
    description="Add two integers.",
    parameters={
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
        "additionalProperties": False,
    },
)


def test_schema_tool_pauses_and_validates_before_asking() -> None:
    ran: list[dict[str, Any]] = []

    def handler(arguments: dict[str, Any]) -> int:
        ran.append(arguments)
        return int(arguments["a"] + arguments["b"])

    service = ToolService([SchemaTool(ADD, handler, requires_approval=True)])
    model = scripted(
        AiMessage(tool_calls=[call("bad", "add", a="1", b=2)]),
        AiMessage(tool_calls=[call("ok", "add", a=1, b=2)]),
        AiMessage(text="3"),
    )

    paused = service.chat(model, "add")

    assert [p.call.id for p in paused.pending] == ["ok"]
    assert "Invalid arguments" in answers(paused.messages)["bad"] and ran == []
    done = service.chat(model, paused.messages, approvals={"ok": True})
    assert done.text == "3" and ran == [{"a": 1, "b": 2}]


def test_http_tool_sends_nothing_until_approved() -> None:
    requests: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        return httpx.Response(200, json={"deleted": request.url.path.rsplit("/", 1)[-1]})

    client = httpx.Client(transport=httpx.MockTransport(handle))
    delete = HttpTool(
        "delete_item",
        "Delete an item.",
        url="https://api.example.com/items/{item_id}",
        method="DELETE",
        http_client=client,
        requires_approval=True,
    )
    service = ToolService([delete])
    model = scripted(
        AiMessage(tool_calls=[call("x", "delete_item", item_id=7)]),  # not a string: invalid
        AiMessage(tool_calls=[call("d", "delete_item", item_id="7")]),
        AiMessage(text="Kept."),
    )

    paused = service.chat(model, "delete item 7")

    assert [p.call.id for p in paused.pending] == ["d"] and requests == []
    assert "Invalid arguments" in answers(paused.messages)["x"]
    done = service.chat(model, paused.messages, approvals={"d": "not today"})
    assert done.text == "Kept." and requests == []
    assert answers(done.messages)["d"].endswith(": not today")


@pytest.fixture
def errlog() -> Iterator[TextIO]:
    with open(os.devnull, "w") as devnull:
        yield devnull


@pytest.mark.skipif(sys.platform == "win32", reason="stdio subprocess server")
@pytest.mark.parametrize("policy", [True, {"add": True}], ids=["per server", "per tool name"])
def test_mcp_server_policy_per_server_or_per_tool(policy: Any, errlog: TextIO) -> None:
    pytest.importorskip("mcp")
    from agentforge_typed import MCPServer

    with MCPServer.stdio(
        sys.executable, [FIXTURE_SERVER], errlog=errlog, tool_prefix="fx_", requires_approval=policy
    ) as server:
        service = ToolService([server])
        model = scripted(
            AiMessage(tool_calls=[call("a", "fx_add", a=2, b=3), call("s", "fx_slow", seconds=0)]),
            AiMessage(text="5"),
        )

        paused = service.chat(model, "add")

        held = {p.call.id for p in paused.pending}
        assert held == ({"a", "s"} if policy is True else {"a"})
        if policy is not True:
            assert answers(paused.messages)["s"] == "slept 0.0"
        done = service.chat(model, paused.messages, approvals={call_id: True for call_id in held})
        assert done.text == "5" and answers(done.messages)["a"] == "5"
