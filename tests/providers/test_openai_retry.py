"""OpenAI retries and errors over HTTP, for every client path; the API key never leaks."""

from __future__ import annotations

import logging

import httpx
import pytest
from openai_support import API_KEY, Server, call, fixture_bytes, fixture_json, sse_response

from agentforge_typed import ChatRequest, ModelError, UserMessage
from agentforge_typed.providers._openai_wire import parse_response

REQUEST = ChatRequest(messages=[UserMessage(content="hi")])
MODES = ["chat", "achat", "stream", "astream"]
RATE_LIMITED = {
    "error": {
        "message": "Rate limit reached for gpt-4o-mini in organization org-x on requests per min "
        "(RPM): Limit 3, Used 3, Requested 1. Please try again in 20s.",
        "type": "requests",
        "param": None,
        "code": "rate_limit_exceeded",
    }
}


def success(mode: str) -> httpx.Response:
    if mode.endswith("stream"):
        return sse_response(fixture_bytes("thinking/stream.sse"))
    return httpx.Response(200, json=fixture_json("thinking/response.json"))


@pytest.mark.parametrize("mode", MODES)
async def test_429_with_retry_after_then_200(mode: str) -> None:
    server = Server(
        httpx.Response(429, headers={"retry-after": "20"}, json=RATE_LIMITED),
        httpx.Response(503, headers={"retry-after-ms": "1500"}, text="Service Unavailable"),
        success(mode),
    )
    response = await call(server.model(), REQUEST, mode)
    assert response == parse_response(fixture_json("thinking/response.json"))
    assert server.waits == [20.0, 1.5]
    assert len(server.requests) == 3
    assert server.bodies[0] == server.bodies[2]  # the same request is sent again


@pytest.mark.parametrize("mode", MODES)
async def test_400_is_not_retried(mode: str) -> None:
    body = {
        "error": {
            "message": "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' "
            "are specified.",
            "type": "invalid_request_error",
            "param": "tool_choice",
            "code": None,
        }
    }
    server = Server(httpx.Response(400, json=body), success(mode))
    with pytest.raises(ModelError) as info:
        await call(server.model(), REQUEST, mode)
    error = info.value
    assert error.status_code == 400
    assert error.code == "invalid_request_error"
    assert error.body == body
    assert str(error) == (
        "OpenAI API error 400: Invalid value for 'tool_choice': 'tool_choice' is only allowed "
        "when 'tools' are specified."
    )
    assert len(server.requests) == 1 and server.waits == []


@pytest.mark.parametrize("mode", MODES)
async def test_exhaustion_raises_the_last_status(mode: str) -> None:
    server = Server(
        httpx.Response(429, json=RATE_LIMITED),
        httpx.Response(
            500, json={"error": {"message": "The server had an error", "type": "server_error"}}
        ),
        httpx.Response(529, text="overloaded"),
        httpx.Response(502, text="Bad gateway"),
    )
    with pytest.raises(ModelError) as info:
        await call(server.model(max_retries=3), REQUEST, mode)
    assert info.value.status_code == 502
    assert info.value.message == "OpenAI API error 502: Bad gateway"
    assert len(server.requests) == 4
    assert len(server.waits) == 3
    for attempt, wait in enumerate(server.waits):  # exponential backoff, up to 25% jitter
        assert 0.375 * 2**attempt <= wait <= 0.5 * 2**attempt


@pytest.mark.parametrize("mode", MODES)
async def test_timeout_is_retried_then_raised(mode: str) -> None:
    def timeout() -> httpx.Response:
        raise httpx.ReadTimeout("timed out")

    server = Server(timeout, timeout)
    with pytest.raises(
        ModelError, match=r"OpenAI request to \S+ failed: ReadTimeout: timed out"
    ) as info:
        await call(server.model(max_retries=1), REQUEST, mode)
    assert isinstance(info.value.__cause__, httpx.ReadTimeout)
    assert len(server.requests) == 2 and len(server.waits) == 1


@pytest.mark.parametrize("mode", MODES)
async def test_api_key_never_in_errors_or_logs(mode: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    body = {
        "error": {
            "message": f"Incorrect API key provided: {API_KEY}. You can find your API key at "
            "https://platform.openai.com/account/api-keys.",
            "type": "invalid_request_error",
            "param": None,
            "code": "invalid_api_key",
        }
    }
    server = Server(httpx.Response(500), httpx.Response(401, json=body))
    model = server.model()
    with pytest.raises(ModelError) as info:
        await call(model, REQUEST, mode)
    error = info.value
    assert error.status_code == 401 and error.code == "invalid_api_key"
    for text in (str(error), repr(error), str(error.body), repr(model)):
        assert API_KEY not in text
    assert "[redacted]" in str(error)
    assert any("retry 1 of 2" in record.getMessage() for record in caplog.records)
    assert all(API_KEY not in record.getMessage() for record in caplog.records)
