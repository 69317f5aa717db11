from __future__ import annotations

from agentforge_typed import (
    AgentForgeError,
    ChatRequestParameters,
    FinishReason,
    ModelError,
    TokenUsage,
    ToolArgumentsError,
    ToolChoice,
    ToolExecutionError,
    ToolLoopLimitError,
    ToolSpecification,
    UnknownToolError,
)
from agentforge_typed._exceptions import ArgumentProblem


def test_merge_override_wins_per_field() -> None:
    defaults = ChatRequestParameters(model="model-a", temperature=0.7, max_tokens=2048)
    overrides = ChatRequestParameters(temperature=0.1)
    merged = defaults.merge(overrides)
    assert merged == ChatRequestParameters(model="model-a", temperature=0.1, max_tokens=2048)
    # Both inputs unchanged.
    assert defaults == ChatRequestParameters(model="model-a", temperature=0.7, max_tokens=2048)
    assert overrides == ChatRequestParameters(temperature=0.1)


def test_merge_custom_key_by_key() -> None:
    defaults = ChatRequestParameters(custom={"seed": 1, "user": "a"})
    overrides = ChatRequestParameters(custom={"user": "b", "logprobs": True})
    merged = defaults.merge(overrides)
    assert merged.custom == {"seed": 1, "user": "b", "logprobs": True}
    assert defaults.custom == {"seed": 1, "user": "a"}


def test_merge_every_field() -> None:
    spec = ToolSpecification(name="f")
    overrides = ChatRequestParameters(
        model="m",
        temperature=0.0,
        max_tokens=0,
        top_p=0.5,
        stop=["x"],
        tools=[spec],
        tool_choice="f",
        parallel_tool_calls=False,
    )
    merged = ChatRequestParameters(model="other", stop=["y"]).merge(overrides)
    # Falsy-but-set values (0, 0.0, False) still win: only None means "not set".
    assert merged == overrides
    assert ChatRequestParameters(model="a").merge(None) == ChatRequestParameters(model="a")


def test_tool_choice_strings() -> None:
    assert ChatRequestParameters(tool_choice="auto").tool_choice is ToolChoice.AUTO
    assert ChatRequestParameters(tool_choice="required").tool_choice is ToolChoice.REQUIRED
    assert ChatRequestParameters(tool_choice="get_weather").tool_choice == "get_weather"
    assert str(ToolChoice.NONE) == "none"


def test_token_usage_sums() -> None:
    a = TokenUsage(input_tokens=10, output_tokens=5, total_tokens=15)
    b = TokenUsage(input_tokens=1, output_tokens=2, total_tokens=3)
    assert a + b == TokenUsage(input_tokens=11, output_tokens=7, total_tokens=18)
    assert a + None == a
    assert sum([a, b], TokenUsage()) == a + b


def test_finish_reason_values() -> None:
    assert [r.value for r in FinishReason] == [
        "stop",
        "length",
        "tool_execution",
        "content_filter",
        "other",
    ]
    assert FinishReason("length") is FinishReason.LENGTH


def test_model_error_carries_status_and_body() -> None:
    error = ModelError(
        "rate limited", status_code=429, body={"error": {"type": "rate"}}, code="rate"
    )
    assert isinstance(error, AgentForgeError)
    assert (error.status_code, error.body, error.code) == (429, {"error": {"type": "rate"}}, "rate")
    assert str(error) == "rate limited"
    assert "429" in repr(error)
    positional = ModelError("server error", 500, "oops")
    assert (positional.status_code, positional.body, positional.code) == (500, "oops", None)


def test_error_hierarchy_and_messages() -> None:
    args_error = ToolArgumentsError("f", [ArgumentProblem(path="$.x", message="bad", input="5")])
    assert args_error.errors[0].path == "$.x"
    assert "$.x: bad" in str(args_error)
    assert "'f'" in str(ToolExecutionError("f", "ValueError: no"))
    unknown = UnknownToolError("nope", ["a", "b"])
    assert unknown.available == ("a", "b") and "a, b" in str(unknown)
    assert "3" in str(ToolLoopLimitError(3))
    for cls in (ToolArgumentsError, ToolExecutionError, UnknownToolError, ToolLoopLimitError):
        assert issubclass(cls, AgentForgeError)
