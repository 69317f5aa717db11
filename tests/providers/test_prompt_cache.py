"""Prompt caching: Anthropic `cache_control` breakpoints placed by `prompt_cache=` (exact
payloads, as https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching shows them:
`cache_control: {"type": "ephemeral"}` on the last tool, on a system text block, on a message's
content block; `"ttl": "1h"` for the longer cache); OpenAI's `prompt_cache_key` and
`prompt_cache_retention` passed through
(https://platform.openai.com/docs/api-reference/chat/create); cache reads and writes priced."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import httpx
import pytest
from openai_support import API_KEY

from agentforge_typed import (
    AnthropicChatModel,
    ChatMessage,
    ChatRequest,
    ChatRequestParameters,
    CustomMessage,
    OpenAIChatModel,
    OpenAIResponsesModel,
    SystemMessage,
    ToolService,
    UserMessage,
    tool,
)
from agentforge_typed.loop._cost import prices_available
from agentforge_typed.providers._anthropic_cache import AUTO_MIN_CHARS, place_breakpoints

EPHEMERAL = {"type": "ephemeral"}
LONG = "Answer as the company's travel desk. " * 120  # 4,440 characters: about 1,100 tokens
ANSWER = {
    "id": "msg_01",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5-20250929",
    "content": [{"type": "text", "text": "Done."}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 50, "output_tokens": 5},
}


@tool
def book(city: str) -> str:
    """Book a trip.

    Args:
        city: Where to.
    """
    return f"booked {city}"


class Recorder:
    def __init__(self, *answers: dict[str, Any]) -> None:
        self.answers = list(answers)
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.bodies.append(json.loads(request.content))
        return httpx.Response(
            200, json=self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        )


def _anthropic(recorder: Recorder, **options: Any) -> AnthropicChatModel:
    return AnthropicChatModel(
        "claude-sonnet-4-5",
        api_key="sk-ant-test",
        http_client=httpx.Client(transport=httpx.MockTransport(recorder)),
        **options,
    )


def _calls(city: str) -> dict[str, Any]:
    content = [{"type": "tool_use", "id": "toolu_1", "name": "book", "input": {"city": city}}]
    return ANSWER | {"content": content, "stop_reason": "tool_use"}


BOOK = {
    "name": "book",
    "description": "Book a trip.",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string", "description": "Where to."}},
        "required": ["city"],
        "additionalProperties": False,
    },
}


def test_auto_marks_a_long_system_prompt_and_then_the_conversation_of_a_loop() -> None:
    recorder = Recorder(_calls("Oslo"), ANSWER)
    model = _anthropic(recorder)
    ToolService([book]).chat(model, [SystemMessage(text=LONG), UserMessage(content="Oslo")])
    first, second = recorder.bodies
    # The first round: the system prompt is long enough to cache; the conversation not yet.
    assert first["system"] == [{"type": "text", "text": LONG, "cache_control": EPHEMERAL}]
    assert first["tools"] == [BOOK]  # a short tool list alone is below the minimum
    assert first["messages"] == [{"role": "user", "content": "Oslo"}]
    # The next round re-sends it all: the conversation is marked at its last block.
    assert second["system"] == first["system"]
    assert second["messages"] == [
        {"role": "user", "content": "Oslo"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "book", "input": {"city": "Oslo"}}
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": "booked Oslo",
                    "cache_control": EPHEMERAL,
                }
            ],
        },
    ]


def test_auto_leaves_a_short_request_as_it_was() -> None:
    recorder = Recorder(_calls("Oslo"), ANSWER)
    ToolService([book]).chat(
        _anthropic(recorder), [SystemMessage(text="Be brief."), UserMessage(content="Oslo")]
    )
    assert "cache_control" not in json.dumps(recorder.bodies)
    assert recorder.bodies[0]["system"] == "Be brief."


def test_auto_marks_a_long_tool_list() -> None:
    tools = {"tools": [BOOK | {"description": LONG}, BOOK | {"name": "cancel"}]}
    payload = place_breakpoints(
        {"messages": [{"role": "user", "content": "hi"}], **tools}, "auto", "5m"
    )
    assert payload["tools"] == [tools["tools"][0], tools["tools"][1] | {"cache_control": EPHEMERAL}]
    assert payload["messages"] == [{"role": "user", "content": "hi"}]
    assert len(json.dumps(tools["tools"])) >= AUTO_MIN_CHARS


def test_chosen_places_are_marked_whatever_their_size_with_the_ttl_asked() -> None:
    recorder = Recorder(ANSWER)
    model = _anthropic(recorder, prompt_cache=["tools", "system", "messages"], cache_ttl="1h")
    history: list[ChatMessage] = [SystemMessage(text="Be brief."), UserMessage(content="Oslo?")]
    model.chat(
        ChatRequest(messages=history, parameters=ChatRequestParameters(tools=[book.specification]))
    )
    marker = {"type": "ephemeral", "ttl": "1h"}
    assert recorder.bodies == [
        {
            "model": "claude-sonnet-4-5",
            "max_tokens": 1024,
            "system": [{"type": "text", "text": "Be brief.", "cache_control": marker}],
            "messages": [
                {
                    "role": "user",
                    "content": [{"type": "text", "text": "Oslo?", "cache_control": marker}],
                }
            ],
            "tools": [BOOK | {"cache_control": marker}],
        }
    ]


def test_off_marks_nothing_and_anthropic_s_own_automatic_caching_is_left_alone() -> None:
    request = ChatRequest(messages=[SystemMessage(text=LONG), UserMessage(content="hi")])
    recorder = Recorder(ANSWER)
    _anthropic(recorder, prompt_cache="off").chat(request)
    assert recorder.bodies[0]["system"] == LONG
    automatic = ChatRequestParameters(custom={"cache_control": EPHEMERAL})
    _anthropic(recorder).chat(request.model_copy(update={"parameters": automatic}))
    assert recorder.bodies[1]["system"] == LONG
    assert recorder.bodies[1]["cache_control"] == EPHEMERAL


def test_breakpoints_already_in_the_payload_count_against_the_limit_of_four() -> None:
    marked = [
        {"type": "web_search_20250305", "name": f"search{i}", "cache_control": EPHEMERAL}
        for i in range(3)
    ]
    payload = {"tools": marked, "system": "s", "messages": [{"role": "user", "content": "hi"}]}
    placed = place_breakpoints(payload, {"system", "messages"}, "5m")
    assert placed["system"] == [{"type": "text", "text": "s", "cache_control": EPHEMERAL}]
    assert placed["messages"] == [{"role": "user", "content": "hi"}]  # no room left


def test_a_thinking_block_is_never_marked_and_raw_content_is_never_changed() -> None:
    raw = [
        {"type": "text", "text": "Let me think."},
        {"type": "thinking", "thinking": "...", "signature": "EqQB"},
    ]
    answer = CustomMessage(attributes={"anthropic_message": {"role": "assistant", "content": raw}})
    recorder = Recorder(ANSWER)
    model = _anthropic(recorder, prompt_cache={"messages"})
    model.chat(ChatRequest(messages=[UserMessage(content="hi"), answer]))
    assert recorder.bodies[0]["messages"][1]["content"] == [
        {"type": "text", "text": "Let me think.", "cache_control": EPHEMERAL},
        {"type": "thinking", "thinking": "...", "signature": "EqQB"},
    ]
    assert "cache_control" not in raw[0]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"prompt_cache": "on"},
            'prompt_cache must be "auto", "off" or a collection of "tools", "system" and "messages", got \'on\'',
        ),
        (
            {"prompt_cache": ["tools", "history"]},
            'prompt_cache places are "tools", "system" and "messages", not [\'history\']',
        ),
        ({"cache_ttl": "24h"}, 'cache_ttl must be "5m" or "1h", got \'24h\''),
    ],
)
def test_cache_options_are_checked_when_the_model_is_built(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError) as raised:
        _anthropic(Recorder(ANSWER), **options)
    assert str(raised.value) == message


COMPLETION = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1741569952,
    "model": "gpt-4o-2024-08-06",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": "Done.",
                "refusal": None,
                "annotations": [],
            },
            "logprobs": None,
            "finish_reason": "stop",
        }
    ],
    "usage": {
        "prompt_tokens": 2000,
        "completion_tokens": 100,
        "total_tokens": 2100,
        "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0},
    },
}
RESPONSE = {
    "id": "resp_1",
    "object": "response",
    "created_at": 1741569952,
    "status": "completed",
    "model": "gpt-4o-2024-08-06",
    "output": [
        {
            "type": "message",
            "id": "msg_1",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Done.", "annotations": []}],
        }
    ],
    "usage": {
        "input_tokens": 2000,
        "input_tokens_details": {"cached_tokens": 1024},
        "output_tokens": 100,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 2100,
    },
}


@pytest.mark.parametrize("kind", ["chat", "responses"])
def test_openai_cache_key_and_retention_are_sent_and_a_request_may_override_them(kind: str) -> None:
    recorder = Recorder(COMPLETION if kind == "chat" else RESPONSE)
    cls = OpenAIChatModel if kind == "chat" else OpenAIResponsesModel
    model = cls(
        "gpt-4o",
        api_key=API_KEY,
        http_client=httpx.Client(transport=httpx.MockTransport(recorder)),
        prompt_cache_key="travel-desk-v3",
        prompt_cache_retention="24h",
    )
    request = ChatRequest(messages=[UserMessage(content="hi")])
    response = model.chat(request)
    assert recorder.bodies[0]["prompt_cache_key"] == "travel-desk-v3"
    assert recorder.bodies[0]["prompt_cache_retention"] == "24h"
    assert response.metadata["cached_tokens"] == 1024
    own = ChatRequestParameters(custom={"prompt_cache_key": "user-42"})
    model.chat(request.model_copy(update={"parameters": own}))
    assert recorder.bodies[1]["prompt_cache_key"] == "user-42"
    assert recorder.bodies[1]["prompt_cache_retention"] == "24h"
    plain = cls(
        "gpt-4o", api_key=API_KEY, http_client=httpx.Client(transport=httpx.MockTransport(recorder))
    )
    plain.chat(request)
    assert "prompt_cache_key" not in recorder.bodies[2]


needs_prices = pytest.mark.skipif(not prices_available(), reason="genai-prices is not installed")


@needs_prices
def test_anthropic_cache_reads_and_writes_are_priced() -> None:
    usage = {
        "input_tokens": 100,
        "cache_creation_input_tokens": 2000,
        "cache_read_input_tokens": 10000,
        "output_tokens": 50,
    }
    recorder = Recorder(ANSWER | {"usage": usage})
    result = ToolService().chat(_anthropic(recorder), "hi")
    # Claude Sonnet 4.5 per million tokens: $3 input, $3.75 cache writes, $0.30 cache reads, $15 output.
    assert result.usage.cost == (
        Decimal("0.0003") + Decimal("0.0075") + Decimal("0.003") + Decimal("0.00075")
    )


@needs_prices
@pytest.mark.parametrize("kind", ["chat", "responses"])
def test_openai_cached_tokens_are_priced_at_the_cached_rate(kind: str) -> None:
    recorder = Recorder(COMPLETION if kind == "chat" else RESPONSE)
    cls = OpenAIChatModel if kind == "chat" else OpenAIResponsesModel
    model = cls(
        "gpt-4o", api_key=API_KEY, http_client=httpx.Client(transport=httpx.MockTransport(recorder))
    )
    # gpt-4o per million tokens: $2.50 input, $1.25 cached input, $10 output.
    expected = Decimal("0.00244") + Decimal("0.00128") + Decimal("0.001")
    assert ToolService().chat(model, "hi").usage.cost == expected


def test_a_cached_count_larger_than_the_input_is_not_believed() -> None:
    from agentforge_typed import TokenUsage
    from agentforge_typed.loop._cost import _input_counts

    usage = TokenUsage(input_tokens=10, output_tokens=1, total_tokens=11)
    alone = {"input_tokens": 10}
    assert _input_counts(usage, {"cached_tokens": 11}) == alone
    assert _input_counts(usage, {"cached_tokens": True}) == alone
    gemini = {"usage_metadata": {"cachedContentTokenCount": 4}}
    assert _input_counts(usage, gemini) == alone | {"cache_read_tokens": 4}
    anthropic = {"cache_read_input_tokens": 5}
    assert _input_counts(usage, anthropic) == alone | {
        "cache_read_tokens": 5,
        "cache_write_tokens": 0,
    }
    assert _input_counts(usage, {"cache_creation_input_tokens": 11}) == alone
    # A split of the writes by lifetime that does not add up is not believed either.
    lying = {
        "cache_creation_input_tokens": 6,
        "cache_creation": {"ephemeral_5m_input_tokens": 1, "ephemeral_1h_input_tokens": 9},
    }
    assert _input_counts(usage, lying) == alone | {"cache_read_tokens": 0, "cache_write_tokens": 6}


@needs_prices
def test_anthropic_one_hour_cache_writes_are_priced_at_their_own_rate() -> None:
    usage = {
        "input_tokens": 100,
        "cache_creation_input_tokens": 3000,
        "cache_read_input_tokens": 0,
        "cache_creation": {"ephemeral_5m_input_tokens": 1000, "ephemeral_1h_input_tokens": 2000},
        "output_tokens": 50,
    }
    recorder = Recorder(ANSWER | {"usage": usage})
    result = ToolService().chat(_anthropic(recorder), "hi")
    # Claude Sonnet 4.5 per million tokens: $3 input, $3.75 5-minute writes, $6 one-hour writes,
    # $15 output.
    assert result.usage.cost == (
        Decimal("0.0003") + Decimal("0.00375") + Decimal("0.012") + Decimal("0.00075")
    )
    assert result.final_response.metadata["cache_creation"] == usage["cache_creation"]


def test_placing_breakpoints_changes_no_list_or_block_of_the_payload() -> None:
    payload: dict[str, Any] = {
        "system": [{"type": "text", "text": "s"}],
        "tools": [BOOK],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    }
    before = json.dumps(payload)
    placed = place_breakpoints(payload, {"tools", "system", "messages"}, "5m")
    assert json.dumps(payload) == before
    assert json.dumps(placed).count("cache_control") == 3
