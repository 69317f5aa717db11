"""What travels between a durable run's workflow and its activities, and how: the activities'
options, a tool call's input and result, the decisions an update sends, and the cap on what an
encoded payload may take (`PayloadTooLargeError`)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal

import pydantic_core
from pydantic import BaseModel, ConfigDict
from temporalio.api.common.v1 import Payloads
from temporalio.common import RawValue, RetryPolicy
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import PayloadConverter

from .._content import Content, TextContent
from .._exceptions import AgentForgeError
from .._messages import ToolCall
from .._records import (
    Approval,
    Approved,
    ElicitationAnswer,
    ErrorKind,
    PendingCall,
    PendingResult,
    SubRunPause,
    SubRunResume,
    ToolExecutionResult,
    ToolFailed,
)
from ..tools._budget import content_result
from ..tools._returns import as_parts

if TYPE_CHECKING:
    pass

__all__ = [
    "DEFAULT_MAX_PAYLOAD_BYTES",
    "DEFAULT_MAX_RESULT_BYTES",
    "DEFAULT_MODEL_OPTIONS",
    "DEFAULT_TOOL_OPTIONS",
    "MODEL_ERROR_TYPES",
    "ActivityOptions",
    "Decisions",
    "PayloadTooLargeError",
    "ToolActivityInput",
    "ToolActivityResult",
    "bounded_payload",
    "encoded",
]

_PYDANTIC = pydantic_data_converter.payload_converter


@dataclass(frozen=True)
class ActivityOptions:
    """How Temporal runs one kind of activity: its timeouts and its retry policy.

    An activity attempt fails only when the worker dies, a timeout passes, or (for a model call)
    the provider fails; a tool that raises gives an error result the model reads, not a failed
    activity. Temporal retries failed attempts following `retry_policy`.
    """

    start_to_close_timeout: timedelta = timedelta(minutes=5)
    """How long one attempt may run; past it the attempt fails (and is retried)."""
    schedule_to_close_timeout: timedelta | None = None
    """How long all attempts together may take, waiting for a worker included."""
    heartbeat_timeout: timedelta | None = None
    """When set, the worker heartbeats while the activity runs (every third of this), and a
    worker that stops heartbeating (it died) is noticed after this long rather than after
    `start_to_close_timeout`."""
    retry_policy: RetryPolicy | None = None
    """Temporal's retry policy for failed attempts; `None` for Temporal's default (retry without
    limit, backing off)."""

    def _keywords(self) -> dict[str, Any]:
        return {
            "start_to_close_timeout": self.start_to_close_timeout,
            "schedule_to_close_timeout": self.schedule_to_close_timeout,
            "heartbeat_timeout": self.heartbeat_timeout,
            "retry_policy": self.retry_policy,
        }


DEFAULT_MODEL_OPTIONS = ActivityOptions(
    start_to_close_timeout=timedelta(minutes=5),
    retry_policy=RetryPolicy(
        initial_interval=timedelta(seconds=1),
        maximum_interval=timedelta(minutes=1),
        maximum_attempts=5,
    ),
)
"""Model calls: five attempts, backing off from one second to a minute; a request the provider
refused (a 4xx other than 408, 409, 429) is not retried."""

DEFAULT_TOOL_OPTIONS = ActivityOptions(
    start_to_close_timeout=timedelta(minutes=5),
    retry_policy=RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=3),
)
"""Tool bodies: three attempts. An attempt is retried only when it did not finish (the worker
died, a timeout passed), so a tool with side effects should be idempotent or get
`maximum_attempts=1`."""


class ToolActivityInput(BaseModel):
    """What a tool activity receives: the call and the parts of `ToolContext` that travel."""

    model_config = ConfigDict(frozen=True)

    call: ToolCall
    deps: Any = None
    """The run's `deps`, as pydantic serialises them."""
    attempt: int = 1
    conversation_id: str | None = None
    answer: ElicitationAnswer | SubRunResume | None = None
    """The user's answer to the question the call paused on, when the run resumes with one (for
    a sub-run's call, what resumes its sub-run)."""


DEFAULT_MAX_RESULT_BYTES = 2_000_000
"""The most bytes a tool activity's result may take, encoded: Temporal's server refuses a payload
over 2 MiB by default (`limit.blobSize.error`), and the rest is room for the envelope."""

DEFAULT_MAX_PAYLOAD_BYTES = 2_000_000
"""The most bytes any other payload of a durable run's activities may take, encoded: the model
call's request (the whole conversation it is sent), the model's answer, a tool call's input (its
arguments and the deps); under Temporal's default 2 MiB, with room for the envelope."""


def encoded(value: Any, converter: PayloadConverter) -> tuple[RawValue, int]:
    """`value` as the data converter encodes it for the wire, and its size in bytes as Temporal
    measures a payload (`limit.blobSize`; before any codec). The one measure of what an activity
    carries; sending the `RawValue` sends exactly what was measured, encoded once."""
    (payload,) = converter.to_payloads([value])
    return RawValue(payload), Payloads(payloads=[payload]).ByteSize()


class PayloadTooLargeError(AgentForgeError):
    """An activity of a durable run would carry more than `max_payload_bytes`: the model call's
    request (the conversation grew too long), the model's answer, or a tool call's input.

    Temporal refuses a payload over its limit, and retries the task that sent it without end; this
    error fails the run first, before anything is sent. Like every loop error it carries the run
    so far (`messages`, `tool_executions`, `usage`): catch it in the workflow to keep them.

    Attributes:
        carried: What would have been sent, e.g. `"the model call's request"`.
        size: Its size in bytes, as the data converter encodes it.
        limit: The `max_payload_bytes` it is over.
    """

    def __init__(self, carried: str, size: int, limit: int) -> None:
        self.carried = carried
        self.size = size
        self.limit = limit
        super().__init__(
            f"{carried} takes {size:,} bytes encoded, over the {limit:,}-byte max_payload_bytes "
            "of a durable run's activities, so the run stopped before sending it (raise the "
            "limit only with the server's limit.blobSize.error)"
        )


class ToolActivityResult(BaseModel):
    """What a tool activity returns: a `ToolExecutionResult` without its exception.

    The value travels once: when the text is the value (a `str`) or its JSON, only the text does,
    and when the value is the content (a part, or a list of text and parts), only the content
    does; `value_from` says how the workflow gets the value back.
    """

    model_config = ConfigDict(frozen=True)

    text: str
    value: Any = None
    """The tool's return value in its JSON form (what pydantic makes of it), unless `value_from`
    says it is the text."""
    value_from: Literal["text", "json", "part", "parts"] | None = None
    """`"text"`: the value is `text`; `"json"`: the value is `text` parsed as JSON; `"part"`: the
    value is the one part of `content`; `"parts"`: the value is the list of `content`'s parts,
    each text part as its `str`."""
    content: tuple[Content, ...] = ()
    """The result's parts, when it has content beyond text (bytes as base64 in JSON)."""
    content_notes: tuple[str, ...] = ()
    """What was left out of `content`, and why (`ToolExecutionResult.content_notes`)."""
    is_error: bool = False
    error_kind: ErrorKind | None = None
    repairs: tuple[str, ...] = ()
    pending: PendingCall | None = None
    """The call waits for the user's answer to the question it carries (an MCP elicitation):
    the run pauses on it."""
    sub_run: SubRunPause | None = None
    """The call's sub-run (`ToolService.as_tool`) waits on calls inside it: the run pauses on
    them."""
    cached: bool = False
    """The result came from its tool's result cache (`ToolExecutionResult.cached`)."""

    @classmethod
    def of(cls, result: ToolExecutionResult) -> ToolActivityResult:
        """The travelling form of `result`."""
        if isinstance(result, PendingResult):
            return cls(text=result.text, pending=result.pending, sub_run=result.sub_run)
        content = result.content
        value: Any = None
        value_from: Literal["text", "json", "part", "parts"] | None = None
        if content and (result.value,) == content:
            value_from = "part"
        elif (
            content and isinstance(result.value, list | tuple) and as_parts(result.value) == content
        ):
            value_from = "parts"
        else:
            value = pydantic_core.to_jsonable_python(result.value, serialize_unknown=True)
            if isinstance(value, str) and value == result.text:
                value, value_from = None, "text"
            elif value is not None and pydantic_core.to_json(value).decode() == result.text:
                value, value_from = None, "json"
        return cls(
            text=result.text,
            value=value,
            value_from=value_from,
            content=content,
            content_notes=result.content_notes,
            is_error=result.is_error,
            error_kind=result.error_kind,
            repairs=result.repairs,
            cached=result.cached,
        )

    def result(self) -> ToolExecutionResult:
        """The `ToolExecutionResult` the loop records."""
        if self.pending is not None or self.sub_run is not None:
            return PendingResult(self.text, pending=self.pending, sub_run=self.sub_run)
        value = self.value
        if self.value_from == "text":
            value = self.text
        elif self.value_from == "json":
            value = pydantic_core.from_json(self.text)
        elif self.value_from == "part":
            value = self.content[0]
        elif self.value_from == "parts":
            value = [part.text if isinstance(part, TextContent) else part for part in self.content]
        if self.content and not self.is_error:
            # Within the budget already (the activity applied it): rebuilt as it is.
            result = content_result(
                self.content, sys.maxsize, value, self.repairs, self.content_notes
            )
        else:
            result = ToolExecutionResult(
                self.text, value, self.is_error, self.error_kind, self.repairs
            )
        if self.cached:
            from ..tools._cache import cached_copy

            return cached_copy(result, self.repairs)
        return result

    def bounded(
        self, tool_name: str, limit: int, converter: PayloadConverter | None = None
    ) -> ToolActivityResult:
        """Itself, or an error result when its encoding is over `limit` bytes: Temporal would
        refuse to record it, fail the attempt and run the body again. Measured as `converter`
        (by default the pydantic data converter `AgentForgePlugin` installs) encodes it."""
        return bounded_payload(self, tool_name, limit, converter or _PYDANTIC)[0]


def bounded_payload(
    result: ToolActivityResult, tool_name: str, limit: int, converter: PayloadConverter
) -> tuple[ToolActivityResult, RawValue]:
    """`result.bounded`, and its payload (what the tool activity sends)."""
    raw, size = encoded(result, converter)
    if size <= limit:
        return result, raw
    text = (
        f"Tool `{tool_name}` ran, but its result ({size:,} bytes) is over the {limit:,}-byte "
        "limit of a durable run's tool results, so it was not recorded."
    )
    error = ToolActivityResult(text=text, is_error=True, error_kind="unreadable_result")
    return error, encoded(error, converter)[0]


class Decisions(BaseModel):
    """Decisions on the calls a durable run waits on: the argument of its `<name>.decide` update.

    `TemporalToolService.decide` builds it from the same values `chat(approvals=...,
    external_results=...)` takes; a client in another language sends its JSON form.
    """

    model_config = ConfigDict(frozen=True)

    approvals: dict[str, bool | str | Approved] = {}
    """By call id: `True` runs the call, `False` or a reason denies it, `Approved(arguments=...)`
    runs it with other arguments (`{"arguments": {...}}` in JSON)."""
    external_results: dict[str, Any] = {}
    """By call id: the result of an external call, in its JSON form."""
    failed: dict[str, str] = {}
    """By call id: an external call that failed, with what the model reads (`ToolFailed`)."""
    answers: dict[str, ElicitationAnswer] = {}
    """By call id: the user's answer to the question the call paused on (`{"content": {...}}`,
    or `{"action": "decline"}` in JSON)."""

    @classmethod
    def of(
        cls,
        approvals: Mapping[str, Approval] | None = None,
        external_results: Mapping[str, Any] | None = None,
    ) -> Decisions:
        """The update's argument for these decisions (a `ToolFailed` result goes to `failed`)."""
        results = dict(external_results or {})
        failed = {k: v.message for k, v in results.items() if isinstance(v, ToolFailed)}
        decided: dict[str, bool | str | Approved] = {}
        answers: dict[str, ElicitationAnswer] = {}
        for call_id, approval in (approvals or {}).items():
            if isinstance(approval, ElicitationAnswer):
                answers[call_id] = approval
            else:
                decided[call_id] = approval
        return cls(
            approvals=decided,
            external_results={k: v for k, v in results.items() if k not in failed},
            failed=failed,
            answers=answers,
        )

    def split(self) -> tuple[dict[str, Approval], dict[str, Any]]:
        """`approvals=` and `external_results=` as `ToolService.chat` takes them.

        Raises:
            ValueError: A call has both a result and a failure, or both an approval and an
                answer.
        """
        both = self.external_results.keys() & self.failed.keys()
        if both:
            raise ValueError(f"calls {', '.join(sorted(both))} have both a result and a failure")
        twice = self.approvals.keys() & self.answers.keys()
        if twice:
            raise ValueError(
                f"calls {', '.join(sorted(twice))} have both an approval and an answer"
            )
        failures = {k: ToolFailed(message) for k, message in self.failed.items()}
        approvals: dict[str, Approval] = {**self.approvals, **self.answers}
        return approvals, {**self.external_results, **failures}


MODEL_ERROR_TYPES = frozenset({"ModelError", "ModelRequestRefused"})
"""The `ApplicationError` types of a model call that failed: the workflow raises `ModelError`."""
