"""What every tool shares, whatever backs it: its run-time context, the executor protocol, the
return behaviour and the approval policy (its result, `ToolExecutionResult`, is one of the records
every layer shares: `agentforge_typed._records`)."""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Protocol, get_args

from typing_extensions import TypeVar

from .._messages import ToolCall
from .._records import ToolExecutionResult
from .._request import ToolSpecification

__all__ = [
    "DEFAULT_CONTENT_URLS",
    "ContentURLs",
    "ExtraArguments",
    "check_extra_arguments",
    "ApprovalPolicy",
    "DeclaredTool",
    "ReturnBehavior",
    "ToolContext",
    "ToolExecutor",
    "ToolLike",
    "ToolSource",
    "approval_policy",
    "check_content_urls",
    "check_options",
    "is_external",
    "may_wait",
    "run_context",
]

DepsT = TypeVar("DepsT", default=None)


ExtraArguments = Literal["forbid", "ignore"]
"""What a tool does with arguments its schema does not declare, at any depth: `"forbid"` makes
them an arguments error the model can correct, `"ignore"` drops them, each drop recorded."""


def check_extra_arguments(value: str) -> ExtraArguments:
    """`value` as an `ExtraArguments`, or `ValueError` naming what is allowed."""
    if value == "forbid":
        return "forbid"
    if value == "ignore":
        return "ignore"
    raise ValueError(f"extra_arguments must be 'forbid' or 'ignore', got {value!r}")


ContentURLs = Literal["https", "http", "any"]
"""Which URLs the parts a tool returns may carry to the model's provider (see `_content_urls`)."""

DEFAULT_CONTENT_URLS: ContentURLs = "https"


def check_content_urls(value: object) -> ContentURLs:
    """`value`, or `ValueError` when it is not one of `ContentURLs`."""
    if value not in get_args(ContentURLs):
        raise ValueError(f"content_urls must be 'https', 'http' or 'any', got {value!r}")
    return value  # type: ignore[return-value]


class ReturnBehavior(enum.Enum):
    """What happens to a tool's result: back to the model, or the end of the loop.

    Any failed call in a round forces another round, whatever the behaviours say: the model must
    see its mistake.
    """

    TO_LLM = "to_llm"
    """Send the result back to the model for another round (the default)."""
    IMMEDIATE = "immediate"
    """End the loop with the results, when every call of the round is `IMMEDIATE` and none failed."""
    IMMEDIATE_IF_LAST = "immediate_if_last"
    """End the loop when this tool is the last call of the round and nothing failed."""


@dataclass(frozen=True, slots=True)
class ToolContext(Generic[DepsT]):
    """Run-time values injected into a tool's `ToolContext` parameter; the model never sees them."""

    deps: DepsT
    """Whatever the caller passed as `deps=` (a database handle, a user, credentials, …)."""
    tool_call_id: str
    tool_name: str
    attempt: int = 1
    """1 for the first call of this tool in the run, +1 after each failed attempt (invalid
    arguments, `ModelRetry`), and 1 again after a successful call."""
    conversation_id: str | None = None
    # `Any` rather than the callable's type: a `ToolContext` nested in a parameter's type must
    # still build a schema, for the signature check to name it (pydantic has none for callables).
    on_progress: Any = field(default=None, repr=False, compare=False)
    """Where `report_progress` goes, a `(progress, total, message) -> None` callable: set by
    `ToolService` when someone listens (`stream`, `astream`, instrumentation); `None` otherwise."""
    may_pause: bool = field(default=False, repr=False, compare=False)
    """Whether the run can pause on this call until the user answers a question it asks (a
    `ToolService` run); a tool that cannot must do without the answer."""
    answer: Any = field(default=None, repr=False, compare=False)
    """The user's answer (`ElicitationAnswer`) to the question this call paused on, when the run
    resumes with one."""
    run_scope: Any = field(default=None, repr=False, compare=False)
    """`() -> Scope`: the run's scope (`scope`), made when first asked for, so that a run none
    of whose calls keeps anything pays nothing; `None` outside a run."""

    @property
    def scope(self) -> Any:
        """Where the call keeps what must outlive it: the `Scope` of its conversation that its
        `ToolService` run holds (what the run's calls put there is removed when the run ends,
        except what they `keep`); `None` outside a run."""
        return None if self.run_scope is None else self.run_scope()

    def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Tell whoever watches the run how far the call is (a `ToolProgressEvent` in
        `stream`/`astream`, a span event when instrumented); nothing when no one does. Safe to
        call from any thread. An MCP tool forwards its server's progress notifications here."""
        if self.on_progress is not None:
            self.on_progress(progress, total, message)

    @property
    def idempotency_key(self) -> str:
        """A key for this call that stays the same when the call is executed again, to pass to
        payment or messaging APIs so that a retried or resumed call has no second effect.

        Derived from `conversation_id` and `tool_call_id` only (a SHA-256 prefix, 32 hex
        digits): stable across a resumed run as long as it keeps its `conversation_id` (a run
        resuming paused calls takes the one their pause recorded; a new run without
        `conversation_id=` gets a random id).
        """
        # JSON keeps the two parts apart: ("a:b", "c") and ("a", "b:c") give different keys.
        parts = json.dumps([self.conversation_id, self.tool_call_id]).encode()
        return hashlib.sha256(parts).hexdigest()[:32]


_CONTEXT_FIELDS = (
    "deps",
    "tool_call_id",
    "tool_name",
    "attempt",
    "conversation_id",
    "on_progress",
    "may_pause",
    "answer",
    "run_scope",
)
"""`ToolContext`'s fields in order (a test keeps them so)."""
(_deps, _call_id, _name, _attempt, _conversation, _progress, _may_pause, _answer, _scope) = (
    getattr(ToolContext, name).__set__ for name in _CONTEXT_FIELDS
)


def run_context(
    deps: Any,
    tool_call_id: str,
    tool_name: str,
    attempt: int,
    conversation_id: str | None,
    on_progress: Any,
    may_pause: bool,
    answer: Any,
    run_scope: Any,
) -> ToolContext[Any]:
    """`ToolContext(...)` of every field, as the loop builds one per call: equal to it, at half
    the cost (a frozen dataclass's `__init__` sets each field through `object.__setattr__`; this
    calls each slot's setter directly)."""
    context: ToolContext[Any] = object.__new__(ToolContext)
    _deps(context, deps)
    _call_id(context, tool_call_id)
    _name(context, tool_name)
    _attempt(context, attempt)
    _conversation(context, conversation_id)
    _progress(context, on_progress)
    _may_pause(context, may_pause)
    _answer(context, answer)
    _scope(context, run_scope)
    return context


class ToolExecutor(Protocol):
    """Anything that executes a `ToolCall`: a local function, a JSON-schema handler, HTTP, MCP.

    Implementations never raise for a failed call: they return an error `ToolExecutionResult`.
    """

    def execute(self, call: ToolCall, context: ToolContext[Any]) -> ToolExecutionResult:
        """Run the call, blocking."""
        ...

    async def aexecute(self, call: ToolCall, context: ToolContext[Any]) -> ToolExecutionResult:
        """Run the call without blocking the event loop."""
        ...


class ToolLike(ToolExecutor, Protocol):
    """What `ToolService` needs of a registered tool: an executor plus its declaration and options."""

    @property
    def name(self) -> str:
        """The name the model calls the tool by."""
        ...

    @property
    def specification(self) -> ToolSpecification:
        """The declaration offered to the model."""
        ...

    @property
    def return_behavior(self) -> ReturnBehavior:
        """What the loop does with the tool's result."""
        ...

    @property
    def max_retries(self) -> int:
        """How many consecutive failed calls (invalid arguments, `ModelRetry`) the loop sends back
        before raising."""
        ...

    @property
    def sequential(self) -> bool:
        """Whether the tool must not run concurrently with the other calls of its round."""
        ...


class ToolSource(Protocol):
    """Something that provides several tools at once (e.g. an `MCPServer`): `ToolService.register`
    registers everything `tools()` returns."""

    def tools(self) -> Sequence[ToolLike]:
        """The tools this source offers now."""
        ...


class DeclaredTool:
    """Base of the tool kinds declared by a `ToolSpecification` (schema, HTTP and MCP tools).

    A subclass sets `_specification` and the loop options `_return_behavior`, `_max_retries` and
    `_sequential` (or overrides their properties); this provides the read-only `ToolLike` side.
    """

    _specification: ToolSpecification
    _return_behavior: ReturnBehavior
    _max_retries: int
    _sequential: bool

    @property
    def name(self) -> str:
        """The tool's name, as the model calls it."""
        return self._specification.name

    @property
    def description(self) -> str:
        """The tool's description, as offered to the model."""
        return self._specification.description

    @property
    def specification(self) -> ToolSpecification:
        """The declaration offered to the model."""
        return self._specification

    @property
    def return_behavior(self) -> ReturnBehavior:
        """What the loop does with this tool's result."""
        return self._return_behavior

    @property
    def max_retries(self) -> int:
        """How many consecutive failed calls the loop tolerates before raising."""
        return self._max_retries

    @property
    def sequential(self) -> bool:
        """Whether this tool must not run concurrently with the other calls of its round."""
        return self._sequential


def check_options(options: Mapping[str, object], declared: Any, owner: str) -> None:
    """Refuse keywords that the options `TypedDict` `declared` does not name: mypy refuses them
    statically, but `**options` takes any at run time.

    Raises:
        TypeError: Naming the unknown keywords and `owner`.
    """
    unknown = options.keys() - declared.__optional_keys__ - declared.__required_keys__
    if unknown:
        raise TypeError(f"unknown {owner} option(s): {', '.join(sorted(unknown))}")


ApprovalPolicy = bool | Callable[[ToolCall, ToolContext[Any]], "bool | Awaitable[bool]"]
"""A tool's `requires_approval`: always, never, or decided per call by a sync or async
`(call, context) -> bool` (which sees only calls whose arguments are valid)."""


def approval_policy(tool: ToolLike) -> ApprovalPolicy:
    """The `requires_approval` of `tool` (`False` for a kind that has none)."""
    return getattr(tool, "requires_approval", False)


def is_external(tool: ToolLike) -> bool:
    """Whether `tool` runs outside the loop (its results come in `external_results=`)."""
    return bool(getattr(tool, "external", False))


def may_wait(tool: ToolLike) -> bool:
    """Whether calls of `tool` may wait (it has an approval policy or is external); read from
    the tool on every call, as a policy may change after registration (an MCP server's)."""
    # `approval_policy` and `is_external` inlined: the loop asks for every call.
    return getattr(tool, "requires_approval", False) is not False or bool(
        getattr(tool, "external", False)
    )


# The former names, for code written against them.
SpecifiedTool = DeclaredTool
ConfiguredTool = DeclaredTool
