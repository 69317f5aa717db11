"""The exception tree.

```
AgentForgeError
├── ModelError            a provider failed: HTTP non-2xx, network, malformed JSON or SSE
│   ├── UnsupportedFeatureError  a request asks for what the model's profile lacks (not sent)
│   └── AllModelsFailedError     every model of a `FallbackModel` failed (in `providers._fallback`)
├── ToolArgumentsError    a tool's arguments are invalid (and retries, if any, are spent)
├── ToolExecutionError    a tool raised and the error handler chose to propagate it
├── UnknownToolError      the model called a tool that is not registered
├── ToolLoopLimitError    the loop exceeded `max_round_trips`
├── UsageLimitExceededError  a run reached one of its `UsageLimits` (in `loop/_usage`)
├── HistoryProcessorError a history processor failed or would split a call (in `loop/_history`)
└── ConversationStoreError a store refused a record (too large, corrupt, a newer schema) or failed
    └── ConversationConflictError another run holds the conversation, or saved it first

ModelRetry                raised *inside* a tool on purpose: send its message back to the model
```

`path_step` writes one step of the JSON paths errors name (`ArgumentProblem.path`,
`SchemaDialectError.path`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from ._messages import ChatMessage, shown_name
from ._response import NO_USAGE, TokenUsage

if TYPE_CHECKING:
    from ._records import ToolExecution

__all__ = [
    "AgentForgeError",
    "ArgumentProblem",
    "ConversationConflictError",
    "ConversationStoreError",
    "GuardrailError",
    "ModelError",
    "ModelRetry",
    "ToolArgumentsError",
    "ToolExecutionError",
    "ToolLoopLimitError",
    "UnknownToolError",
    "UnsupportedFeatureError",
    "path_step",
]


_MAX_KEY_CHARS = 60
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def path_step(key: str | int) -> str:
    """One step of a JSON path: `[0]`, `.name`, or `["a key"]` (JSON-quoted, truncated) for a key
    that is not an identifier."""
    if isinstance(key, int):
        return f"[{key}]"
    if key == "[key]":  # pydantic's step for a dict key that is itself invalid
        return key
    if len(key) <= _MAX_KEY_CHARS and _IDENTIFIER.fullmatch(key):
        return f".{key}"
    if len(key) > _MAX_KEY_CHARS:
        key = key[: _MAX_KEY_CHARS - 1] + "…"
    quoted = json.dumps(key, ensure_ascii=False)
    # JSON leaves some line separators (U+2028, U+0085) unescaped: escape everything then.
    return f"[{quoted if quoted.isprintable() else json.dumps(key)}]"


class AgentForgeError(Exception):
    """Base of every error this package raises.

    An error that escapes a `ToolService` run carries the run so far, so that nothing that
    happened before it (a transfer that went through) is lost, and the conversation can be resumed
    by passing `messages` back to `chat`. Outside a run these are empty.
    """

    messages: tuple[ChatMessage, ...] = ()
    """The conversation up to the failure. Every tool call of its last `AiMessage` has a result
    message (calls that did not run get an error result saying so), so providers accept it."""
    tool_executions: tuple[ToolExecution, ...] = ()
    """Every call that ran, the failing one included, in the model's order."""
    usage: TokenUsage = NO_USAGE
    """Token usage summed over the model calls of the run."""


class ModelError(AgentForgeError):
    """A model call failed: HTTP error status, network failure, or a malformed response or stream.

    Attributes:
        status_code: The HTTP status, when there was one.
        body: The provider's response body (parsed JSON when possible), when there was one.
        code: The provider's machine-readable error code or type, when it sent one.
    """

    def __init__(
        self,
        message: str,
        status_code: int | None = None,
        body: Any = None,
        *,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code
        self.body = body
        self.code = code

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, status_code={self.status_code!r})"


class UnsupportedFeatureError(ModelError):
    """A request asks for a feature the model's `ModelProfile` says it lacks, and the profile's
    policy for that feature is `"error"` (or the feature has no adaptation); nothing was sent.

    Attributes:
        feature: The profile feature, e.g. `"tool_choice"` or `"max_tools"`.
    """

    def __init__(self, feature: str, message: str) -> None:
        super().__init__(message)
        self.feature = feature


class ArgumentProblem(NamedTuple):
    """One problem with a tool call's arguments: a record, not an exception (an immutable named
    tuple: one is built per problem, on the path every invalid call takes).

    `ArgumentError`, its first name, still imports from `agentforge_typed` (deprecated).
    """

    path: str
    """JSON path of the offending value, e.g. `$.order.items[0].quantity` (`$` for the whole object)."""
    message: str
    input: Any
    """The offending value as the model sent it."""


class ToolArgumentsError(AgentForgeError):
    """Arguments failed validation; `errors` lists every problem."""

    def __init__(self, tool_name: str, errors: Sequence[ArgumentProblem]) -> None:
        # No `super().__init__`: `BaseException.__new__` has already stored `args`, and this is
        # built on every invalid call.
        self.tool_name = tool_name
        self.errors = tuple(errors)

    def __str__(self) -> str:
        # Built on demand: inside the loop the error usually travels as a result and is never
        # printed.
        return f"invalid arguments for tool {self.tool_name!r}: {self._problems()}"

    def _problems(self) -> str:
        return "; ".join(f"{e.path}: {e.message}" for e in self.errors)


class ToolExecutionError(AgentForgeError):
    """A tool raised, and the execution-error handler chose to propagate it (see `__cause__`)."""

    def __init__(self, tool_name: str, message: str) -> None:
        self.tool_name = tool_name
        super().__init__(f"tool {tool_name!r} failed: {message}")


class UnknownToolError(AgentForgeError):
    """The model called a tool name that is not registered (or that this run does not offer);
    nothing was executed. `message` replaces the whole message, for a call the model did not make
    in this run (one the history waits on, a person approved, say).

    The message quotes at most `MAX_NAME_CHARS` (200) characters of the name (the model may send
    any); `tool_name` holds it whole.
    """

    def __init__(
        self,
        tool_name: str,
        available: Sequence[str] = (),
        reason: str | None = None,
        *,
        message: str | None = None,
    ) -> None:
        self.tool_name = tool_name
        self.available = tuple(available)
        self.reason = reason
        """What else is known: a registered tool this run does not offer, say."""
        if message is None:
            shown = shown_name(tool_name)
            message = f"model called unknown tool {shown!r}; available: "
            message += ", ".join(self.available) or "none"
            if reason is not None:
                message += f" ({reason})"
        super().__init__(message)


class GuardrailError(AgentForgeError):
    """A guardrail blocked the run's input (before any model call) or its final output; nothing
    was sent after it. A guardrail that raised blocks too (its exception is the `__cause__`).

    Attributes:
        guardrail: The guardrail's name.
        point: `"input"` or `"output"`.
        reason: Why it blocked.
    """

    def __init__(self, guardrail: str, point: str, reason: str) -> None:
        self.guardrail = guardrail
        self.point = point
        self.reason = reason
        super().__init__(f"guardrail {guardrail!r} blocked the {point}: {reason}")


class ToolLoopLimitError(AgentForgeError):
    """The tool loop did not reach a final answer within `max_round_trips`."""

    def __init__(self, max_round_trips: int) -> None:
        self.max_round_trips = max_round_trips
        super().__init__(f"no final answer after {max_round_trips} model round trips")


class ConversationStoreError(AgentForgeError):
    """A conversation store refused a record or failed: a record over its size cap, one that is
    corrupt or was written by a newer schema (refused whole, never half-loaded), or the database
    failed (the driver's error is the `__cause__`).

    Attributes:
        conversation_id: The conversation the operation was on, when there was one.
    """

    def __init__(self, message: str, conversation_id: str | None = None) -> None:
        super().__init__(message)
        self.conversation_id = conversation_id


class ConversationConflictError(ConversationStoreError):
    """Another run holds the conversation (its claim has not expired), or the conversation was
    saved, claimed or deleted since this run's claim read it. Raised at once, never after
    waiting. Refused a claim, a run has sent and run nothing (and carries no history); refused a
    save mid-run (its claim was lost), it ends there, carrying its history, and saves nothing
    more."""


class ModelRetry(Exception):  # noqa: N818 - a control-flow signal, not an error
    """Raise inside a tool to send `message` back to the model as an error result to act on."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
