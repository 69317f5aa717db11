"""The estimated cost on `result.usage`, from `genai-prices`: a known model at its vendor's
endpoint is priced; anything else (a local server, a test model, no `genai-prices`) is `None`."""

from __future__ import annotations

import io
import json
import sys
import time
from decimal import Decimal
from typing import Any

import httpx
import pytest
from loop_drivers import DRIVERS, drive

from agentforge_typed import (
    AnthropicChatModel,
    FakeModel,
    OpenAIChatModel,
    TokenUsage,
    ToolService,
    UsageLimitExceededError,
    UsageLimits,
    tool,
)
from agentforge_typed.cli._run import LiveDisplay
from agentforge_typed.loop._cost import prices_available

# gpt-4o-mini: $0.15 per million input tokens, $0.60 per million output tokens.
TWO_ROUNDS = Decimal("0.00015") * 2 + Decimal("0.00006") * 2

needs_prices = pytest.mark.skipif(
    not prices_available(), reason="genai-prices is not installed (it needs Python 3.11+)"
)


@tool
def lookup(city: str) -> str:
    """Look up the weather."""
    return f"sunny in {city}"


def _chunk(**fields: Any) -> bytes:
    body = {
        "id": "chatcmpl-7",
        "object": "chat.completion.chunk",
        "created": 1732000000,
        "model": "gpt-4o-mini-2024-07-18",
        **fields,
    }
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def _openai_server(model: str = "gpt-4o-mini-2024-07-18") -> Any:
    """Answers a tool call first, then text; every answer used 1000 input and 100 output tokens."""
    turns: list[int] = []
    usage = {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100}

    def handler(request: httpx.Request) -> httpx.Response:
        turns.append(1)
        first = len(turns) == 1
        call = {
            "id": "call_1",
            "type": "function",
            "function": {"name": "lookup", "arguments": '{"city": "Oslo"}'},
        }
        message: dict[str, Any] = (
            {"role": "assistant", "content": None, "tool_calls": [call]}
            if first
            else {"role": "assistant", "content": "Sunny."}
        )
        finish = "tool_calls" if first else "stop"
        if json.loads(request.content).get("stream"):
            delta = dict(message)
            if first:
                delta["tool_calls"] = [{"index": 0, **call}]
            body = (
                _chunk(choices=[{"index": 0, "delta": delta, "finish_reason": None}])
                + _chunk(choices=[{"index": 0, "delta": {}, "finish_reason": finish}])
                + _chunk(choices=[], usage=usage)
                + b"data: [DONE]\n\n"
            )
            return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)
        return httpx.Response(
            200,
            json={
                "id": "chatcmpl-7",
                "object": "chat.completion",
                "created": 1732000000,
                "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": usage,
            },
        )

    return handler


def _openai(handler: Any, **options: Any) -> OpenAIChatModel:
    transport = httpx.MockTransport(handler)
    options.setdefault("api_key", "sk-test")
    return OpenAIChatModel(
        options.pop("name", "gpt-4o-mini"),
        http_client=httpx.Client(transport=transport),
        async_http_client=httpx.AsyncClient(transport=transport),
        **options,
    )


@needs_prices
@pytest.mark.parametrize("driver", DRIVERS)
def test_a_known_model_at_its_vendor_is_priced(driver: str) -> None:
    result = drive(driver, ToolService([lookup]), _openai(_openai_server()), "Weather in Oslo?")
    assert result.usage.input_tokens == 2000
    assert result.usage.cost == TWO_ROUNDS
    # The responses themselves are as the provider parsed them.
    final = result.final_response.token_usage
    assert final is not None and final.cost is None


@needs_prices
def test_a_failed_run_carries_the_cost_so_far() -> None:
    model = _openai(_openai_server())
    limits = UsageLimits(request_limit=1)
    with pytest.raises(UsageLimitExceededError) as caught:
        ToolService([lookup]).chat(model, "Weather in Oslo?", usage_limits=limits)
    assert caught.value.usage.cost == TWO_ROUNDS / 2


@needs_prices
def test_anthropic_is_priced() -> None:
    body = {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [{"type": "text", "text": "Sunny."}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 1000, "output_tokens": 100},
    }
    transport = httpx.MockTransport(lambda request: httpx.Response(200, json=body))
    model = AnthropicChatModel(
        "claude-sonnet-4-5", api_key="sk-ant-test", http_client=httpx.Client(transport=transport)
    )
    # $3 per million input tokens, $15 per million output tokens.
    assert ToolService().chat(model, "hi").usage.cost == Decimal("0.003") + Decimal("0.0015")


def test_a_local_server_is_not_priced_as_the_hosted_model_of_the_same_name() -> None:
    model = _openai(_openai_server(), base_url="http://localhost:11434/v1")
    result = ToolService([lookup]).chat(model, "Weather in Oslo?")
    assert result.usage.total_tokens == 2200
    assert result.usage.cost is None


def test_an_unknown_model_is_not_priced() -> None:
    model = _openai(_openai_server("gpt-unreleased-9000"), name="gpt-unreleased-9000")
    assert ToolService([lookup]).chat(model, "Weather in Oslo?").usage.cost is None


def test_test_models_are_not_priced() -> None:
    result = ToolService([lookup]).chat(FakeModel(), "Weather in Oslo?")
    assert result.usage.total_tokens > 0 and result.usage.cost is None


def test_without_genai_prices_nothing_is_priced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "genai_prices", None)
    prices_available.cache_clear()
    try:
        result = ToolService([lookup]).chat(_openai(_openai_server()), "Weather in Oslo?")
    finally:
        prices_available.cache_clear()
    assert result.usage.total_tokens == 2200 and result.usage.cost is None


def test_adding_usages_keeps_a_cost_only_while_every_part_is_known() -> None:
    priced = TokenUsage(input_tokens=1, output_tokens=1, total_tokens=2, cost=Decimal("0.5"))
    unknown = TokenUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    assert (priced + priced).cost == Decimal("1.0")
    assert (priced + unknown).cost is None and (unknown + priced).cost is None
    assert sum([priced, priced], TokenUsage()).cost == Decimal("1.0")
    assert (TokenUsage() + unknown).cost is None
    assert TokenUsage.model_validate_json(priced.model_dump_json()) == priced


@needs_prices
def test_the_cli_summary_shows_the_cost() -> None:
    out = io.StringIO()
    model = _openai(_openai_server())
    LiveDisplay(out).show(ToolService([lookup]).stream(model, "Weather?"), time.perf_counter())
    assert "tokens: 2000 in / 200 out / 2200 total, est. cost $0.000420, " in out.getvalue()
    out = io.StringIO()
    LiveDisplay(out).show(
        ToolService([lookup]).stream(FakeModel(), "Weather?"), time.perf_counter()
    )
    assert "cost" not in out.getvalue()
