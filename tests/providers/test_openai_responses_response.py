"""OpenAI Responses answers: output items → the contract, statuses, usage, malformed bodies."""

from __future__ import annotations

import copy
from typing import Any

import httpx
import pytest
from responses_support import ResponsesServer, fixture_json

from agentforge_typed import (
    AiMessage,
    ChatRequest,
    FinishReason,
    ModelError,
    TokenUsage,
    ToolCall,
    ToolService,
    UserMessage,
    tool,
)
from agentforge_typed.providers._responses_wire import OUTPUT_ATTRIBUTE, parse_response

REQUEST = ChatRequest(messages=[UserMessage(content="hi")])


def test_reasoning_and_parallel_calls() -> None:
    body = fixture_json("parallel_tool_calls/response.json")
    response = parse_response(body)
    assert response.ai_message == AiMessage(
        thinking=(
            "**Checking the weather in two cities**\n\nThe user wants Paris and Rome. I can call "
            "get_weather once per city, in parallel.\n\n**Choosing units**\n\nNo unit was asked "
            "for, so the tool's default (Celsius) is fine — «ça va»."
        ),
        tool_calls=[
            # The id is the call_id, not the fc_ item id; arguments exactly as sent.
            ToolCall(
                id="call_Kc4QpZ1mS9wT2vN7xR3bY8eL", name="get_weather", arguments='{"city":"Paris"}'
            ),
            ToolCall(
                id="call_Hq8VnB2xM5tR9cW1zK6pJ3dF",
                name="get_weather",
                arguments='{"city":"Rome \\u2014 Città"}',
            ),
        ],
        attributes={OUTPUT_ATTRIBUTE: body["output"]},
    )
    assert response.finish_reason is FinishReason.TOOL_EXECUTION
    assert response.token_usage == TokenUsage(input_tokens=312, output_tokens=219, total_tokens=531)
    assert response.metadata == {
        "id": "resp_68b1a3f0c9d48190b7e2a51c3f0d9e7a0c2b6f1e8d4a3b5c",
        "model": "gpt-5-mini-2025-08-07",
        "created_at": 1756472304,
        "service_tier": "auto",
        "cached_tokens": 128,
        "reasoning_tokens": 128,
    }


def test_text_after_reasoning_with_an_empty_summary() -> None:
    response = parse_response(fixture_json("thinking/response.json"))
    assert response.ai_message.text == "Paris: 18 °C, sunny. Rome — Città: 24 °C, sunny. 晴れ ☀️"
    assert response.ai_message.thinking is None
    assert OUTPUT_ATTRIBUTE in response.ai_message.attributes  # the reasoning item is kept
    assert response.finish_reason is FinishReason.STOP


def test_hosted_tool_output_is_kept_and_not_a_tool_call() -> None:
    body = fixture_json("web_search/response.json")
    response = parse_response(body)
    assert response.ai_message.tool_calls == ()
    assert response.ai_message.text is not None
    assert response.ai_message.text.startswith("It is 18 °C and sunny in Paris")
    assert response.ai_message.attributes == {OUTPUT_ATTRIBUTE: body["output"]}
    assert response.finish_reason is FinishReason.STOP


def test_plain_text_and_calls_keep_no_attributes() -> None:
    body = fixture_json("finish_length/response.json")
    body["status"], body["incomplete_details"] = "completed", None
    assert parse_response(body).ai_message.attributes == {}


def test_incomplete_for_max_output_tokens_is_length() -> None:
    response = parse_response(fixture_json("finish_length/response.json"))
    assert response.finish_reason is FinishReason.LENGTH
    assert response.ai_message.text == "A future is a placeholder for a value that"
    assert response.metadata["incomplete_details"] == {"reason": "max_output_tokens"}


@pytest.mark.parametrize(
    ("status", "details", "reason"),
    [
        ("incomplete", {"reason": "content_filter"}, FinishReason.CONTENT_FILTER),
        ("incomplete", None, FinishReason.OTHER),
        ("in_progress", None, FinishReason.OTHER),
        (None, None, FinishReason.STOP),
    ],
)
def test_other_statuses(status: str | None, details: Any, reason: FinishReason) -> None:
    body = fixture_json("finish_length/response.json")
    body["status"], body["incomplete_details"] = status, details
    assert parse_response(body).finish_reason is reason


def test_refusal_is_metadata() -> None:
    body = fixture_json("finish_length/response.json")
    body["status"], body["incomplete_details"] = "completed", None
    body["output"][0]["content"] = [{"type": "refusal", "refusal": "I can't help with that."}]
    response = parse_response(body)
    assert response.ai_message.text is None
    assert response.metadata["refusal"] == "I can't help with that."


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
