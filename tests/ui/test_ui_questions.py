"""An MCP server's questions through the UI endpoints: a form question and a URL-mode one, each
shown to the client (an AG-UI interrupt, an AI SDK `data-agentforge-question` part), answered,
and the answer reaching the server; a URL-mode question is answered with no payload, and one
with a payload is refused before anything runs. The server is tests/mcp_raw_server.py."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

pytest.importorskip("mcp")
pytest.importorskip("ag_ui")

from test_mcp_url_and_tasks import RAW_SERVER, TOOL, ask_url
from ui_support import agui_run, sse

from agentforge_typed import MCPServer, ToolService
from agentforge_typed.ui import create_app
from agentforge_typed.ui._agui import NO_ANSWER_SCHEMA

THREAD = "thread-questions-0123456789"
URL = "https://auth.example.com/consent?flow=1"
NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
ASK_NAME = {"ask": {"mode": "form", "message": "Your name?", "requestedSchema": NAME}}


def model() -> Any:
    from agentforge_typed import AiMessage, FunctionModel, ToolCall, ToolResultMessage

    def reply(messages: Any, parameters: Any) -> AiMessage:
        if isinstance(messages[-1], ToolResultMessage):
            return AiMessage(text=f"Done: {messages[-1].text}")
        return AiMessage(tool_calls=[ToolCall(id="call_0", name="go", arguments="{}")])

    return FunctionModel(reply)


@pytest.fixture(params=["url", "form"])
def asked(request: pytest.FixtureRequest) -> Iterator[tuple[str, Any]]:
    """The UI's app over a server whose tool asks a URL-mode or a form question."""
    step = ask_url() if request.param == "url" else ASK_NAME
    script = {"tools": [TOOL], "calls": {"go": [step]}}
    server = MCPServer.stdio(sys.executable, [RAW_SERVER, json.dumps(script)], revision="handshake")
    with server as mcp:
        yield request.param, create_app(ToolService([mcp]), model())


def client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")


def resolved(interrupt: dict[str, Any], payload: Any = None) -> list[dict[str, Any]]:
    answer: dict[str, Any] = {"interruptId": interrupt["id"], "status": "resolved"}
    if payload is not None:
        answer["payload"] = payload
    return [answer]


async def test_a_question_round_trip_over_ag_ui(asked: tuple[str, Any]) -> None:
    mode, app = asked
    async with client(app) as http:
        await _round_trip_over_ag_ui(mode, http)


async def _round_trip_over_ag_ui(mode: str, http: httpx.AsyncClient) -> None:
    messages: list[dict[str, Any]] = [{"id": "u1", "role": "user", "content": "go"}]
    events = await agui_run(http, THREAD, messages)
    [interrupt] = events[-1]["outcome"]["interrupts"]
    assert interrupt["reason"] == "input_required" and interrupt["toolCallId"] == "call_0"
    if mode == "url":
        assert interrupt["message"] == "Sign in"
        assert interrupt["metadata"]["url"] == URL
        assert interrupt["responseSchema"] == NO_ANSWER_SCHEMA
        events = await agui_run(http, THREAD, messages, resolved(interrupt))
        expected: dict[str, Any] = {"action": "accept"}
    else:
        assert "url" not in interrupt["metadata"]
        assert interrupt["responseSchema"] == NAME
        events = await agui_run(http, THREAD, messages, resolved(interrupt, {"name": "Ada"}))
        expected = {"action": "accept", "content": {"name": "Ada"}}
    result = next(e for e in events if e["type"] == "TOOL_CALL_RESULT")
    assert json.loads(result["content"]) == expected


@pytest.mark.parametrize("asked", ["url"], indirect=True)
async def test_a_url_question_answered_with_a_payload_is_refused(asked: tuple[str, Any]) -> None:
    _, app = asked
    async with client(app) as http:
        await _answered_with_a_payload(http)


async def _answered_with_a_payload(http: httpx.AsyncClient) -> None:
    messages: list[dict[str, Any]] = [{"id": "u1", "role": "user", "content": "go"}]
    events = await agui_run(http, THREAD, messages)
    [interrupt] = events[-1]["outcome"]["interrupts"]
    body = {
        "threadId": THREAD,
        "runId": "run-2",
        "messages": messages,
        "resume": resolved(interrupt, {"done": True}),
    }
    response = await http.post("/ag-ui", json=body)
    assert response.status_code == 422
    assert "is answered at its URL: resolve it with no payload once done" in response.text


async def test_a_question_round_trip_over_the_ai_sdk_stream(asked: tuple[str, Any]) -> None:
    mode, app = asked
    async with client(app) as http:
        await _round_trip_over_the_ai_sdk_stream(mode, http)


async def _round_trip_over_the_ai_sdk_stream(mode: str, http: httpx.AsyncClient) -> None:
    first = [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "go"}]}]
    body = {"id": THREAD, "messages": first, "trigger": "submit-message"}
    chunks = sse((await http.post("/api/chat", json=body)).text)
    start = next(c for c in chunks if c["type"] == "start")
    [question] = [c for c in chunks if c["type"] == "data-agentforge-question"]
    if mode == "url":
        assert question["data"]["url"] == URL and question["data"]["schema"] == {}
        answer: dict[str, Any] = {}
        expected: dict[str, Any] = {"action": "accept"}
    else:
        assert "url" not in question["data"] and question["data"]["schema"] == NAME
        answer = {"name": "Ada"}
        expected = {"action": "accept", "content": {"name": "Ada"}}
    parts: list[dict[str, Any]] = []
    for chunk in chunks:
        if chunk["type"] == "tool-input-available":
            part = {"type": "tool-go", "toolCallId": chunk["toolCallId"]}
            parts.append({**part, "state": "input-available", "input": chunk["input"]})
        elif chunk["type"] == "data-agentforge-question":
            data = {**chunk["data"], "answer": answer}
            parts.append({"type": chunk["type"], "id": chunk["id"], "data": data})
    metadata: dict[str, Any] = {}
    for chunk in chunks:
        if chunk["type"] == "message-metadata":
            metadata.update(chunk["messageMetadata"])
    assistant = {"id": start["messageId"], "role": "assistant", "parts": parts}
    if metadata:
        assistant["metadata"] = metadata
    body = {
        "id": THREAD,
        "messages": [*first, assistant],
        "trigger": "submit-message",
        "messageId": start["messageId"],
    }
    response = await http.post("/api/chat", json=body)
    assert response.status_code == 200, response.text
    chunks = sse(response.text)
    output = next(c for c in chunks if c["type"] == "tool-output-available")
    assert json.loads(output["output"]) == expected
