"""Usage limits: caps on what one `ToolService` run may spend.

Each limit is checked at the last moment it can still prevent the spending: the request count
before each model call (a request that would exceed it is never sent), the token counts after each
response (tokens are known only then), the tool-call count before a round's calls run.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._exceptions import AgentForgeError
from .._response import TokenUsage

__all__ = ["UsageLimitExceededError", "UsageLimits"]


class UsageLimitExceededError(AgentForgeError):
    """A run reached one of its `UsageLimits`; like every loop error it carries the run so far
    (`messages`, `tool_executions`, `usage`), so it can be inspected or resumed.

    Attributes:
        limit: The name of the limit, e.g. `"request_limit"`.
        maximum: The limit's value.
        value: What the run would have used (or has used, for tokens).
    """

    def __init__(self, limit: str, maximum: int, value: int) -> None:
        self.limit = limit
        self.maximum = maximum
        self.value = value
        super().__init__(f"usage limit exceeded: {limit}={maximum}, the run needs {value}")


@dataclass(frozen=True, slots=True)
class UsageLimits:
    """Caps on one run; `None` means no cap.

    Attributes:
        request_limit: Model calls; checked before each call, so the call that would exceed it
            is never sent.
        tool_calls_limit: Tool calls the model asks for (answered by the tool, a hook or an
            error result alike); checked before a round's calls run, so a round that would
            exceed it runs none of them.
        input_tokens_limit: Input tokens summed over the run's responses; checked after each.
        output_tokens_limit: Output tokens, likewise.
        total_tokens_limit: Total tokens, likewise.
    """

    request_limit: int | None = None
    tool_calls_limit: int | None = None
    input_tokens_limit: int | None = None
    output_tokens_limit: int | None = None
    total_tokens_limit: int | None = None

    def __post_init__(self) -> None:
        for name in self.__slots__:
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 0
            ):
                raise ValueError(f"{name} must be a non-negative int or None, not {value!r}")

    def check_request(self, requests: int) -> None:
        """Raise when making request number `requests` would exceed `request_limit`."""
        _check("request_limit", self.request_limit, requests)

    def check_tool_calls(self, tool_calls: int) -> None:
        """Raise when running the run's tool calls up to `tool_calls` exceeds `tool_calls_limit`."""
        _check("tool_calls_limit", self.tool_calls_limit, tool_calls)

    def check_tokens(self, usage: TokenUsage) -> None:
        """Raise when `usage`, the run's usage so far, exceeds a token limit."""
        _check("input_tokens_limit", self.input_tokens_limit, usage.input_tokens)
        _check("output_tokens_limit", self.output_tokens_limit, usage.output_tokens)
        _check("total_tokens_limit", self.total_tokens_limit, usage.total_tokens)


def _check(limit: str, maximum: int | None, value: int) -> None:
    if maximum is not None and value > maximum:
        raise UsageLimitExceededError(limit, maximum, value)
