"""OpenAI Responses answers beyond the golden cases (`tests/fixtures/golden/openai_responses/`):
other statuses, failures, hosted calls that never run, malformed bodies."""

from __future__ import annotations

import copy
from typing import Any

import httpx
import pytest
from responses_support import ResponsesServer, fixture_json

from agentforge_typed import (
    ChatRequest,
    FinishReason,
    ModelError,
    ToolService,
    UserMessage,
    tool,
)
from agentforge_typed.providers._responses_wire import OUTPUT_ATTRIBUTE, parse_response

REQUEST = ChatRequest(messages=[UserMessage(content="hi")])


@pytest.mark.parametrize(
    ("status", "details", "reason"),
    [
        # completed, incomplete for max_output_tokens and content_filter: the golden cases
        ("incomplete", None, FinishReason.OTHER),
        ("in_progress", None, FinishReason.OTHER),
        (None, None, FinishReason.STOP),
    ],
)
def test_other_statuses(status: str | None, details: Any, reason: FinishReason) -> None:
    body = fixture_json("finish_length/response.json")
    body["status"], body["incomplete_details"] = status, details
    assert parse_response(body).finish_reason is reason


def test_failed_response_is_a_model_error_with_the_error_object() -> None:
    body = fixture_json("finish_length/response.json")
    body["status"] = "failed"
    body["error"] = {"code": "server_error", "message": "The model failed to generate a response."}
    with pytest.raises(ModelError) as info:
        parse_response(body)
    assert info.value.message == (
        "OpenAI response failed: The model failed to generate a response."
    )
    assert info.value.code == "server_error"
    assert info.value.body == body


def _broken(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    body: dict[str, Any] = copy.deepcopy(fixture_json("parallel_tool_calls/response.json"))
    target = body
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return body


@pytest.mark.parametrize(
    "body",
    [
        [],
        "oops",
        {"id": "resp_1"},
        _broken(("output",), {"type": "message"}),
        _broken(("output", 0), "reasoning"),
        _broken(("output", 1, "call_id"), 123),
        _broken(("output", 1, "name"), None),
        _broken(("output", 1, "arguments"), ["a"]),
        _broken(("output", 0, "summary"), [{"type": "summary_text", "text": 5}]),
        _broken(("output", 1), {"type": "function_call"}),
        _broken(("usage", "input_tokens"), "312"),
        _broken(("usage", "output_tokens"), 1.5),
        _broken(("usage", "output_tokens_details"), [1]),
        _broken(("usage",), [312]),
    ],
)
@pytest.mark.parametrize("mode", ["chat", "achat"])
async def test_malformed_bodies_are_model_errors(body: Any, mode: str) -> None:
    server = ResponsesServer(httpx.Response(200, json=body))
    model = server.model()
    with pytest.raises(ModelError) as info:
        if mode == "chat":
            model.chat(REQUEST)
        else:
            await model.achat(REQUEST)
    assert info.value.body == body


def test_hosted_or_custom_calls_named_like_a_registered_tool_never_run() -> None:
    ran: list[str] = []

    @tool
    def get_weather(city: str) -> str:
        """Weather."""
        ran.append(city)
        return "sunny"

    body = fixture_json("web_search/response.json")
    body["output"][:1] = [
        {
            "type": "mcp_call",
            "id": "mcp_1",
            "server_label": "weather",
            "name": "get_weather",
            "arguments": '{"city": "Paris"}',
            "output": "sunny",
        },
        {
            "type": "custom_tool_call",
            "id": "ctc_1",
            "call_id": "call_custom",
            "name": "get_weather",
            "input": "Paris",
        },
        {"type": "local_shell_call", "id": "lsh_1", "call_id": "call_sh", "action": {}},
    ]
    server = ResponsesServer(httpx.Response(200, json=body))
    result = ToolService([get_weather]).chat(server.model(), [UserMessage(content="Paris?")])
    assert ran == [] and result.tool_executions == ()
    answer = result.final_response.ai_message
    assert answer.tool_calls == ()
    assert answer.attributes[OUTPUT_ATTRIBUTE][:3] == body["output"][:3]
