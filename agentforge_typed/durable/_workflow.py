"""`TemporalToolService`: the tool loop as workflow code, model calls and tool bodies as
activities.

`chat` drives the same `Run` as `ToolService.achat` (the loop's drivers' seam, `loop/_drivers`)
from inside a workflow, with `adrive`: each model call and each tool body an activity
(`_activities`), what is pure (validating arguments, the error policies, the round bookkeeping)
in the workflow. A call that waits for a decision keeps the run waiting on the `<name>.decide`
update, routed per workflow by `_Desk` to the runs waiting on it, then the same run resumes
(`Run.resume`): approvals add no second loop."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pydantic_core
from pydantic import BaseModel, TypeAdapter
from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError
from temporalio.exceptions import TimeoutError as ActivityTimeoutError
from typing_extensions import TypeVar

from .._exceptions import ModelError, ToolArgumentsError
from .._identity import recorded_conversation
from .._messages import ChatMessage
from .._model import ChatModel
from .._records import (
    Approval,
    ElicitationAnswer,
    PendingCall,
    ToolExecution,
    ToolExecutionResult,
    unanswered_calls,
)
from .._request import ChatRequest, ChatRequestParameters
from .._response import ChatResponse
from ..loop._drivers import Planned, Run, RunOptions, adrive, conversation
from ..loop._output import OutputSpec
from ..loop._results import Outcome, ToolChatResult
from ..loop._service import ToolService
from ..loop._toolsets import ToolSelection
from ..tools._base import ToolLike
from ..tools._outcomes import arguments_error_result, execution_error_result, failure_result
from ._activities import model_activity, tool_activity, without_retries
from ._payloads import (
    DEFAULT_MAX_PAYLOAD_BYTES,
    DEFAULT_MAX_RESULT_BYTES,
    DEFAULT_MODEL_OPTIONS,
    DEFAULT_TOOL_OPTIONS,
    MODEL_ERROR_TYPES,
    ActivityOptions,
    Decisions,
    PayloadTooLargeError,
    ToolActivityInput,
    ToolActivityResult,
    encoded,
)

if TYPE_CHECKING:
    from temporalio.client import WorkflowHandle

__all__ = ["TemporalToolService"]

OutputT = TypeVar("OutputT", default=None)

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,100}$")


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
        waiting = {p.key: p for p in pending}
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
        """Hand each decision to its run; the keys (`PendingCall.key`: a call's id, or its path
        inside a sub-run) of the calls still waiting for one."""
        approvals, results = decisions.split()
        for call_id in [*approvals, *results]:
            self._holder(call_id).accept(call_id, approvals, results)
        return [pending.key for pending in self.pending()]

    def _holder(self, call_id: str) -> _Waiting:
        holders = [waiting for waiting in self.runs if call_id in waiting.undecided]
        if len(holders) > 1:
            # Never guess which run a decision was meant for.
            raise ValueError(
                f"{len(holders)} runs wait on a call with the id {call_id!r}; a decision cannot "
                "tell them apart"
            )
        if not holders:
            waiting_ids = ", ".join(repr(p.key) for p in self.pending()) or "none"
            raise ValueError(
                f"no call waits for a decision with the id {call_id!r}; waiting: {waiting_ids}"
            )
        return holders[0]


def _refuse_store(service: ToolService) -> None:
    if service.store is not None:
        raise ValueError(
            "a TemporalToolService's runs keep their conversation in the workflow's history, not "
            "in a ConversationStore: pass a ToolService without store= (the workflow's id names "
            "the conversation; ToolService(store=...) is for chat, achat, stream and astream)"
        )


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
        ValueError: `name` is not 1-100 letters, digits, `_` or `-`, `tool_options` names a
            tool that is not registered, or `service` has a `store`: a durable run's
            conversation lives in the workflow's history (a store's I/O has no place in
            workflow code), so such a service is refused rather than its store ignored.
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
        _refuse_store(service)
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
        """Send decisions on waiting calls, by call id (`PendingCall.key` for a call inside a
        sub-run), as `ToolService.chat` takes them; the runs go on with them.

        Returns:
            The keys of the calls still waiting for a decision (their ids, outside sub-runs).

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
        model = without_retries(self.model)
        found: list[Callable[..., Any]] = [
            model_activity(self.model_activity_name, model, self.max_payload_bytes)
        ]
        for tool in self.service.tools:
            options = self.tool_activity_options(tool.name)
            found.append(self._tool_activity(tool, options.heartbeat_timeout))
        return found

    def _tool_activity(self, tool: ToolLike, heartbeat: timedelta | None) -> Callable[..., Any]:
        return tool_activity(
            tool,
            self.tool_activity_name(tool.name),
            heartbeat=heartbeat,
            deps_adapter=self._deps,
            resolve=self._resolve_deps,
            limit=self.max_result_bytes,
            budget=self.service.max_result_chars,
            fit=getattr(self.model, "fit_tool_content", None),
        )

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
    ) -> Outcome[OutputT]:
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
        _refuse_store(self.service)  # given one since this durable service was built
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
        raw, size = encoded(value, workflow.payload_converter())
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
            if isinstance(cause, ApplicationError) and cause.type in MODEL_ERROR_TYPES:
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
