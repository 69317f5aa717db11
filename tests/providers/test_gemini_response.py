"""Response mapping of the Gemini provider beyond the golden cases (`tests/fixtures/golden/gemini/`):
parts, other finish reasons, usage gaps, ids, errors, odd bodies."""

from __future__ import annotations

from typing import Any

import pytest

from agentforge_typed import FinishReason, ModelError, TokenUsage
from agentforge_typed.providers._gemini_wire import error_from_gemini, parse_response, retry_delay


def body(parts: list[dict[str, Any]], finish: str | None = "STOP", **extra: Any) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
    if finish is not None:
        candidate["finishReason"] = finish
    return {
        "candidates": [candidate],
        "modelVersion": "gemini-2.5-flash",
        "responseId": "resp1",
        **extra,
    }


@pytest.mark.parametrize(
    "answer", [{}, {"candidates": []}, {"responseId": "r", "usageMetadata": {}}]
)
def test_an_answer_without_candidates_or_block_reason_is_an_error(answer: Any) -> None:
    with pytest.raises(ModelError, match="Gemini returned no candidates"):
        parse_response(answer)


def test_ids_without_a_response_id_are_unique_per_answer() -> None:
    calls = [{"functionCall": {"name": "f", "args": {}}}] * 2
    first, second = (
        parse_response({"candidates": [{"content": {"parts": calls}, "finishReason": "STOP"}]})
        for _ in range(2)
    )
    ids = [call.id for r in (first, second) for call in r.ai_message.tool_calls]
    assert len(set(ids)) == 4
    assert first.ai_message.tool_calls[0].arguments == "{}"


def test_plain_text_keeps_no_parts() -> None:
    response = parse_response(body([{"text": "Hel"}, {"text": "lo"}]))
    assert response.ai_message.text == "Hello"
    assert response.ai_message.attributes == {}
    assert response.token_usage is None


def test_missing_candidates_token_count() -> None:
    usage = {"promptTokenCount": 10, "totalTokenCount": 10}
    response = parse_response(body([{"text": ""}], usageMetadata=usage))
    assert response.token_usage == TokenUsage(input_tokens=10, output_tokens=0, total_tokens=10)
    assert response.ai_message.text is None


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        # STOP, MAX_TOKENS and SAFETY: the golden cases
        ("RECITATION", FinishReason.CONTENT_FILTER),
        ("BLOCKLIST", FinishReason.CONTENT_FILTER),
        ("PROHIBITED_CONTENT", FinishReason.CONTENT_FILTER),
        ("SPII", FinishReason.CONTENT_FILTER),
        ("UNEXPECTED_TOOL_CALL", FinishReason.OTHER),
        ("SOMETHING_NEW", FinishReason.OTHER),
    ],
)
def test_finish_reasons(raw: str, reason: FinishReason) -> None:
    response = parse_response(
        body(
            [{"text": "x"}],
            raw,
        )
    )
    assert response.finish_reason is reason
    assert response.metadata.get("finish_reason") == (None if raw == "STOP" else raw)


def test_malformed_function_call_is_an_error_carrying_gemini_message() -> None:
    answer = {
        "candidates": [
            {
                "finishReason": "MALFORMED_FUNCTION_CALL",
                "finishMessage": "Malformed function call: print(default_api.get_weather(city=))",
                "index": 0,
            }
        ],
        "responseId": "r",
    }
    with pytest.raises(ModelError) as info:
        parse_response(answer)
    assert str(info.value) == (
        "Gemini produced a malformed function call: "
        "Malformed function call: print(default_api.get_weather(city=))"
    )
    assert (info.value.code, info.value.body) == ("MALFORMED_FUNCTION_CALL", answer)


def test_finish_message_is_kept() -> None:
    answer = body([{"text": "partial"}], "SAFETY")
    answer["candidates"][0]["finishMessage"] = "Blocked for safety."
    response = parse_response(answer)
    assert response.metadata["finish_message"] == "Blocked for safety."


@pytest.mark.parametrize(
    "answer",
    [
        ["not", "an", "object"],
        {"candidates": "nope"},
        {"candidates": [{"content": {"parts": "text"}}]},
        {"candidates": [{"content": {"parts": ["text"]}}]},
        {"candidates": [{"content": {"parts": [{"text": 5}]}}]},
        {"candidates": [{"content": {"parts": [{"functionCall": {"args": {}}}]}}]},
        {"candidates": [{"content": {"parts": [{"functionCall": {"name": 3}}]}}]},
        {"candidates": [{"content": {"parts": [{"functionCall": {"name": "f", "args": [1]}}]}}]},
        {"candidates": [{"content": {"parts": [{"functionCall": {"name": "f", "id": 7}}]}}]},
        {
            "candidates": [{"content": {"parts": [{"text": "x"}]}}],
            "usageMetadata": {"promptTokenCount": "5"},
        },
        {
            "candidates": [{"content": {"parts": [{"text": "x"}]}}],
            "usageMetadata": {"totalTokenCount": 1.5},
        },
    ],
)
def test_malformed_bodies_are_model_errors(answer: Any) -> None:
    with pytest.raises(ModelError, match="Gemini"):
        parse_response(answer)


QUOTA = {
    "error": {
        "code": 429,
        "message": "You exceeded your current quota, please check your plan and billing details.",
        "status": "RESOURCE_EXHAUSTED",
        "details": [
            {
                "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                "violations": [
                    {
                        "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests"
                    }
                ],
            },
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"},
        ],
    }
}


def test_error_body_in_a_200_answer() -> None:
    with pytest.raises(ModelError) as info:
        parse_response(QUOTA)
    assert str(info.value) == (
        "Gemini returned an error: You exceeded your current quota, please check your plan and "
        "billing details."
    )
    assert (info.value.status_code, info.value.code) == (None, "RESOURCE_EXHAUSTED")


def test_error_from_gemini_in_a_stream() -> None:
    error = error_from_gemini(QUOTA, streaming=True)
    assert str(error) == (
        "Gemini stream error: You exceeded your current quota, please check your plan and "
        "billing details."
    )
    assert (error.status_code, error.code, error.body) == (None, "RESOURCE_EXHAUSTED", QUOTA)


@pytest.mark.parametrize("status", [None, "", 7])
def test_gemini_status_only_when_there_is_one(status: Any) -> None:
    body = {"error": {"code": 500, "message": "boom", "status": status}}
    assert error_from_gemini(body).code == "500"


@pytest.mark.parametrize(
    ("delay", "seconds"),
    [
        ("37s", 37.0),
        ("1.5s", 1.5),
        ("0s", 0.0),
        ("37", None),
        ("-3s", None),
        ("soon", None),
        (5, None),
        ("9" * 400 + "s", None),
    ],
)
def test_retry_delay(delay: Any, seconds: float | None) -> None:
    error = {
        "error": {
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay}]
        }
    }
    assert retry_delay(error) == seconds


@pytest.mark.parametrize("answer", [None, "text", {"error": "x"}, {"error": {"details": "x"}}, {}])
def test_retry_delay_absent(answer: Any) -> None:
    assert retry_delay(answer) is None
