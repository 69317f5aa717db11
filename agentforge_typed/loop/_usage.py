"""Usage limits: caps on what one `ToolService` run may spend.

Each limit is checked at the last moment it can still prevent the spending: the request count
before each model call (a request that would exceed it is never sent), the token counts after each
response (tokens are known only then), the tool-call count before a round's calls run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from .._exceptions import AgentForgeError
from .._response import TokenUsage

__all__ = ["RunBudget", "UsageLimitExceededError", "UsageLimits", "exceeded_below", "spent_below"]


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


class _Spender(Protocol):
    """What a budget reads of the run it belongs to (`Run`)."""

    round_trips: int
    tool_calls: int
    usage: TokenUsage


class _Tally:
    """What a run's sub-runs spent: counts for the limits, priced usage for the result."""

    __slots__ = ("exceeded", "requests", "tokens", "tool_calls", "usage")

    def __init__(self) -> None:
        self.requests = self.tool_calls = 0
        self.tokens = TokenUsage.model_construct()
        """Tokens as counted for the limits (as they are spent, unpriced)."""
        self.usage = TokenUsage.model_construct()
        """The usage of the sub-runs that ended, priced (`ToolChatResult.usage`)."""
        self.exceeded: UsageLimitExceededError | None = None
        """The run's own cap that a sub-run's spending exceeded: the run ends with it."""


class RunBudget(UsageLimits):
    """The limits of a run that has sub-runs (`ToolService.as_tool`), or is one: its own caps
    checked against what it and its sub-runs spent together, and what it spends reported to the
    run above it, whose caps are checked too. A sub-run cannot spend past its parent's limits.

    Built by the sub-run tool; a run's `usage_limits` stay plain `UsageLimits`.
    """

    __slots__ = ("depth", "max_depth", "own", "reported", "sub", "up")

    own: UsageLimits | None
    up: tuple[RunBudget, _Spender] | None
    depth: int
    """How deep the run is: 0 for a run that is no sub-run."""
    max_depth: int | None
    """The deepest its sub-runs may nest (the least `max_depth` of the tools above it)."""
    sub: _Tally
    reported: _Tally

    def __init__(
        self,
        own: UsageLimits | None,
        up: tuple[RunBudget, _Spender] | None,
        depth: int,
        max_depth: int | None = None,
    ) -> None:
        super().__init__()
        for name, value in (
            ("own", own),
            ("up", up),
            ("depth", depth),
            ("max_depth", max_depth),
            ("sub", _Tally()),
            ("reported", _Tally()),
        ):
            object.__setattr__(self, name, value)

    def __post_init__(self) -> None:  # its caps are `own`'s, checked there
        pass

    def _own(self, check: Callable[[], None]) -> None:
        try:
            check()
        except UsageLimitExceededError as error:
            self.sub.exceeded = error
            raise

    def check_request(self, requests: int) -> None:
        total = requests + self.sub.requests
        if self.own is not None:
            own = self.own
            self._own(lambda: own.check_request(total))
        if self.up is not None:
            budget, run = self.up
            budget.sub.requests += total - self.reported.requests
            self.reported.requests = total
            budget.check_request(run.round_trips)

    def check_tool_calls(self, tool_calls: int) -> None:
        total = tool_calls + self.sub.tool_calls
        if self.own is not None:
            own = self.own
            self._own(lambda: own.check_tool_calls(total))
        if self.up is not None:
            budget, run = self.up
            budget.sub.tool_calls += total - self.reported.tool_calls
            self.reported.tool_calls = total
            budget.check_tool_calls(run.tool_calls)

    def check_tokens(self, usage: TokenUsage) -> None:
        total = _tokens(usage, self.sub.tokens, 1)
        if self.own is not None:
            own = self.own
            self._own(lambda: own.check_tokens(total))
        if self.up is not None:
            budget, run = self.up
            budget.sub.tokens = _tokens(
                budget.sub.tokens, _tokens(total, self.reported.tokens, -1), 1
            )
            self.reported.tokens = total
            budget.check_tokens(run.usage)


def _tokens(left: TokenUsage, right: TokenUsage, sign: int) -> TokenUsage:
    """The token counts of `left` plus (or minus) `right`, without a cost."""
    return TokenUsage.model_construct(
        input_tokens=left.input_tokens + sign * right.input_tokens,
        output_tokens=left.output_tokens + sign * right.output_tokens,
        total_tokens=left.total_tokens + sign * right.total_tokens,
    )


def spent_below(limits: UsageLimits | None) -> TokenUsage | None:
    """The usage of a run's sub-runs that ended (priced), when it had any."""
    if type(limits) is RunBudget and limits.sub.usage.total_tokens:
        return limits.sub.usage
    return None


def exceeded_below(limits: UsageLimits | None) -> UsageLimitExceededError | None:
    """The run's own limit that its sub-runs' spending exceeded, if any: the run ends with it."""
    return limits.sub.exceeded if type(limits) is RunBudget else None
