"""`ToolService`: drives model → tools → model until the model gives a final answer.

The loop itself lives in `_Run`, a state machine free of I/O: a driver asks it for the next
request, feeds it the model's response, executes the calls it plans and feeds the executions
back. `chat` and `achat` are thin drivers over the same `_Run`, so the rules exist once.
"""

from __future__ import annotations

import inspect
import logging
from collections import Counter
from collections.abc import (
    AsyncGenerator,
    Awaitable,
    Callable,
    Collection,
    Generator,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Generic, cast, overload

import pydantic_core
from typing_extensions import Self, TypedDict, TypeForm, TypeVar, Unpack

from .._exceptions import (
    AgentForgeError,
    ArgumentError,
    ModelError,
    ToolArgumentsError,
    ToolExecutionError,
    ToolLoopLimitError,
    UnknownToolError,
)
from .._identity import CallDigests, CallIds, random_id, recorded_conversation
from .._messages import AiMessage, ChatMessage, ToolCall, ToolResultMessage, UserMessage, shown_name
from .._model import ChatModel, ResponseComplete, StreamEvent, ToolCallDelta
from .._records import (
    Approval,
    ErrorKind,
    PendingResult,
    ToolExecution,
    ToolExecutionResult,
    unanswered_calls,
)
from .._request import ChatRequest, ChatRequestParameters, ToolSpecification
from .._response import NO_USAGE, ChatResponse, FinishReason
from .._sync import running_loop
from ..providers import _tracing as model_tracing
from ..tools._base import DepsT, ReturnBehavior, ToolContext, ToolExecutor, ToolLike, may_wait
from ..tools._budget import (
    DEFAULT_MAX_RESULT_CHARS,
    ContentFit,
    check_max_result_chars,
    fit_result,
    within_budget,
)
from ..tools._invoke import is_async_callable
from ..tools._outcomes import alinks_checked, describe_exception, links_checked, reraise_uncontained
from ..tools._scope import Scope
from ..tools._signature import deps_accepted, needing_deps, type_name
from ._approval import ApprovalState, Decided, no_events, with_digest
from ._cost import priced
from ._events import (
    FinalResultEvent,
    OutputCallEvent,
    PartialArgumentsEvent,
    ToolCallEvent,
    ToolLoopEvent,
    ToolResultEvent,
)
from ._history import (
    MESSAGE_TYPES,
    HistoryProcessor,
    aprocess,
    check_processors,
    is_message,
    process,
)
from ._output import OutputSpec, OutputValidationError
from ._progress import ProgressSink
from ._results import ToolChatResult
from ._toolsets import Offer, PrepareTools, ToolSearch, ToolSelection, add_to_groups, group_sources
from ._usage import UsageLimits

logger = logging.getLogger("agentforge_typed")

if TYPE_CHECKING:
    import asyncio

    from ._tracing import RunTrace

__all__ = [
    "AfterToolCall",
    "ArgumentsErrorHandler",
    "BeforeToolCall",
    "ExecutionErrorHandler",
    "RunOptions",
    "ToolService",
    "UnknownToolHandler",
    "is_tool",
    "available_tools_handler",
    "list_available_tools",
    "tools_from",
]

OutputT = TypeVar("OutputT", default=None)

ArgumentsErrorHandler = Callable[
    [ToolArgumentsError, ToolContext[Any]], "ToolExecutionResult | str"
]
"""Replaces the default arguments-error policy: return what the model reads, or raise to stop."""
ExecutionErrorHandler = Callable[[BaseException, ToolContext[Any]], "ToolExecutionResult | str"]
"""Replaces the default execution-error result: return what the model reads, or raise to stop."""
UnknownToolHandler = Callable[[ToolCall, Sequence[str]], "ToolExecutionResult | str | None"]
"""Answers a call to an unregistered tool (given the registered names); `None` raises."""
BeforeToolCall = Callable[
    [ToolCall, ToolContext[Any]],
    "ToolExecutionResult | str | Awaitable[ToolExecutionResult | str | None] | None",
]
"""Runs before each call; a result (or text) is used instead of executing the tool. It may be an
async function under `achat`/`astream` (an approval that asks a service)."""
AfterToolCall = Callable[[ToolExecution], "Awaitable[None] | None"]
"""Sees every execution, after error policies (audit, metrics, logging); it may be an async
function under `achat`/`astream`."""
_AsyncAnswer = Awaitable["ToolExecutionResult | str | None"]


class RunOptions(TypedDict, total=False):
    """The options of one run that `chat`, `achat`, `stream` and `astream` take as keywords,
    besides `deps` and `output_type`. Each may be left out or given as `None` (the default).

    Type a wrapper's keywords with it to forward them unchanged:
    `def ask(prompt: str, **options: Unpack[RunOptions]) -> str`.
    """

    tools: ToolSelection | None
    """Narrow what this run offers: tool names, `"group:NAME"` groups, or a `ToolSearch`;
    a name or group that is not registered is a `ValueError` before any model call."""
    conversation_id: str | None
    """The id tools see as `ToolContext.conversation_id` and traces record; a random one by
    default."""
    approvals: Mapping[str, Approval] | None
    """Decisions on the calls awaiting approval that the history ends with, by tool call id
    (`True`, `False`, a reason to deny, or `Approved(arguments=...)`); a decision on a call that
    is not pending is a `ValueError`."""
    external_results: Mapping[str, Any] | None
    """Results of the pending external calls the history ends with, by tool call id: a value
    (converted like a tool's return value) or `ToolFailed("why")`."""
    usage_limits: UsageLimits | None
    """Caps for this run, replacing the service's `usage_limits`."""


_RUN_OPTIONS = frozenset(RunOptions.__annotations__)


def available_tools_handler(call: ToolCall, available: Sequence[str]) -> ToolExecutionResult:
    """An `unknown_tool_handler` that tells the model which tools exist, so it can correct itself
    (quoting at most `MAX_NAME_CHARS` characters of the name it sent)."""
    names = ", ".join(f"`{name}`" for name in available) or "none"
    return ToolExecutionResult.error(
        f"There is no tool named `{shown_name(call.name)}`. Available tools: {names}.",
        "unknown_tool",
    )


list_available_tools = available_tools_handler
"""The former name of `available_tools_handler`, kept for existing code."""


def _as_result(
    value: ToolExecutionResult | str, error_kind: ErrorKind | None
) -> ToolExecutionResult:
    if isinstance(value, ToolExecutionResult):
        return value
    if error_kind is None:
        return ToolExecutionResult(text=value, value=value)
    return ToolExecutionResult.error(value, error_kind)


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _crashed(exc: BaseException) -> ToolExecutionResult:
    # Executors report failures as results; this only catches a custom executor that raised.
    reraise_uncontained(exc)
    return ToolExecutionResult.error(describe_exception(exc), "execution", exception=exc)


@dataclass(slots=True)
class _Planned:
    """A call of the current round: the tool to run, or the result already decided for it."""

    index: int
    """The call's position in the model's response."""
    call: ToolCall
    context: ToolContext[Any]
    tool: ToolLike | None
    preset: ToolExecutionResult | None = None

    @property
    def sequential(self) -> bool:
        return self.tool is not None and self.tool.sequential


class _Run:
    """The state of one `chat` run, free of I/O."""

    __slots__ = (
        "_approval",
        "async_after",
        "async_before",
        "asynchronous",
        "call_ids",
        "conversation_id",
        "deps",
        "executions",
        "failures",
        "finished",
        "fit",
        "generation",
        "limits",
        "messages",
        "model",
        "offer",
        "open_calls",
        "output",
        "output_value",
        "parameters",
        "progress",
        "responses",
        "resuming",
        "returned_immediately",
        "round_trips",
        "scopes",
        "selection",
        "service",
        "tool_calls",
        "trace",
        "usage",
        "user_parameters",
    )

    def __init__(
        self,
        service: ToolService[Any],
        model: object,
        messages: str | Iterable[ChatMessage],
        parameters: ChatRequestParameters | None,
        deps: Any,
        output_type: TypeForm[Any] | OutputSpec[Any] | None,
        options: RunOptions,
        *,
        asynchronous: bool = False,
    ) -> None:
        if not _RUN_OPTIONS.issuperset(options):
            # `**options` takes any keyword at run time: a misspelt `usage_limits` must not run
            # the conversation without its limits.
            unknown = next(name for name in options if name not in _RUN_OPTIONS)
            raise TypeError(
                f"unexpected keyword argument {unknown!r}; a run takes deps, output_type, "
                + ", ".join(RunOptions.__annotations__)
            )
        self.service = service
        self.model = model
        """The model answering, when known: `result.usage` is priced for it."""
        self.fit: ContentFit | None = _fit_unknown
        """The model's `fit_tool_content` (`None`: it has none), looked up at the first result
        with content."""
        limits = options.get("usage_limits")
        self.limits = service.usage_limits if limits is None else limits
        self.tool_calls = 0
        self.async_before, self.async_after = service._async_hooks(asynchronous)
        self.messages = _conversation(messages)
        if not self.messages:
            raise ValueError("ToolService.chat needs at least one message")
        self.output = output = _output_spec(output_type)
        self.output_value: Any = None
        self.user_parameters = parameters
        self.generation = service._generation
        self.parameters = service._request_parameters(parameters, output)
        service._check_deps(deps, selected=options.get("tools") is not None)
        self.deps = deps
        paused, waiting = unanswered_calls(self.messages)
        self.conversation_id = _owner(options.get("conversation_id"), paused)
        self.scopes: list[Scope] = []
        """The run's `Scope` once a call asked for it (`ToolContext.scope`): what its calls keep
        beyond themselves, removed when it ends."""
        self.selection = options.get("tools")
        self.offer = service._offer(self.selection, deps, self.conversation_id, self.messages)
        self.responses: list[ChatResponse] = []
        self.usage = NO_USAGE
        """The usage summed over `responses`, kept as they arrive."""
        self.executions: list[ToolExecution] = []
        self.failures: dict[str, int] = {}
        """Consecutive failed calls (invalid arguments, `ModelRetry`) per tool."""
        self.open_calls: Sequence[ToolCall] = ()
        """The calls of the last response that have no result message yet."""
        self.finished: dict[int, ToolExecution] = {}
        """The executions of the open round so far, by call position."""
        self.round_trips = 0
        self.returned_immediately = False
        self.asynchronous = asynchronous
        self._approval: ApprovalState | None = None
        """Built only when there is something to decide: most runs never wait for anyone."""
        self.call_ids: CallIds | None = None
        """The call ids taken in the conversation, built at the first answer with calls."""
        self.resuming: list[Decided] = []
        """The caller's decisions on the unanswered calls at the end of the history."""
        approvals, external_results = options.get("approvals"), options.get("external_results")
        if approvals or external_results or waiting:
            self.resume(approvals, external_results)

    def scope(self) -> Scope:
        """The run's `Scope`, made when a call first asks for it (one, whichever thread asks:
        `list.append` is atomic)."""
        scopes = self.scopes
        if not scopes:
            scopes.append(Scope(self.conversation_id))
        return scopes[0]

    def resume(
        self, approvals: Mapping[str, Approval] | None, external_results: Mapping[str, Any] | None
    ) -> None:
        """Take the caller's decisions on the calls the history ends with (before the loop, or
        when a paused run gets them); raises `ValueError` for a decision on a call that is not
        pending."""
        state = self._approval = ApprovalState(
            approvals, external_results, asynchronous=self.asynchronous
        )
        unanswered = state.unanswered(self.messages, self.conversation_id, self.service._digests)
        self.resuming = [
            state.decide(call, self.service._tools.get(call.name), self.conversation_id)
            for call in unanswered
        ]

    @property
    def approval(self) -> ApprovalState:
        """The run's approvals: the decisions it was given and the calls it paused on."""
        if self._approval is None:
            self._approval = ApprovalState(None, None, asynchronous=self.asynchronous)
        return self._approval

    def resumed(self) -> list[_Planned] | None:
        """Once, the round of the history's unanswered calls (run, denied, answered or held
        again); `None` when there is none."""
        if not self.resuming:
            return None
        resuming, self.resuming = self.resuming, []
        # An `Approved` override changes a call's arguments, never its id: the result pairs.
        self.open_calls, self.finished = [decided.call for decided in resuming], {}
        return [
            self._plan(
                i,
                decided.call,
                decided=decided.result,
                approved=decided.approved,
                answer=decided.answer,
            )
            for i, decided in enumerate(resuming)
        ]

    def next_request(self) -> ChatRequest:
        """The request for the next model call, its messages through the service's history
        processors (an async one run to completion here: a blocking driver); raises past
        `max_round_trips`."""
        parameters = self._next_parameters()
        processors = self.service.history_processors
        return self._request(
            process(processors, self.messages) if processors else self.messages, parameters
        )

    async def anext_request(self) -> ChatRequest:
        """`next_request` for the async drivers: an async history processor is awaited."""
        parameters = self._next_parameters()
        processors = self.service.history_processors
        messages = await aprocess(processors, self.messages) if processors else self.messages
        return self._request(messages, parameters)

    def _next_parameters(self) -> ChatRequestParameters:
        if self.round_trips >= self.service.max_round_trips:
            raise ToolLoopLimitError(self.service.max_round_trips)
        if self.limits is not None:
            self.limits.check_request(self.round_trips + 1)
        self.round_trips += 1
        service = self.service
        # Between rounds, never during one: sources whose tools changed bring their new lists.
        if service._watched:
            service._refresh()
        if self.generation != service._generation:
            self.generation = service._generation
            self.parameters = service._request_parameters(self.user_parameters, self.output)
            if self.offer is not None:
                self.offer = service._offer(
                    self.selection, self.deps, self.conversation_id, self.messages
                )
        if self.offer is not None:
            return self.offer.parameters(self.parameters, self.round_trips, self.messages)
        return self.parameters

    def _request(
        self, messages: Sequence[ChatMessage], parameters: ChatRequestParameters
    ) -> ChatRequest:
        if self.output is not None and self.output.prompted:
            messages = self.output.with_instructions(messages)
        request = ChatRequest.of(messages, parameters)
        if self.trace is not None:
            self.trace.request(request)
        return request

    def on_response(self, response: ChatResponse) -> list[_Planned] | None:
        """Record the model's response; return the calls to execute, or `None` when it is final.

        The calls are admitted first: each gets an id of its own in the conversation
        (`_identity`), so that every decision keyed on an id concerns exactly one call.
        """
        message = response.ai_message
        if message.tool_calls:
            if self.call_ids is None:
                self.call_ids = CallIds(self.messages)
            admitted = self.call_ids.admit(message)
            if admitted is not message:
                message = admitted
                response = response.model_copy(update={"ai_message": message})
            self.open_calls, self.finished = message.tool_calls, {}
        self.responses.append(response)
        if response.token_usage is not None:
            self.usage += response.token_usage
        self.messages.append(message)
        if response.finish_reason is FinishReason.LENGTH and self.open_calls:
            _refuse_cut_off(self.open_calls)
        if self.limits is not None:
            self.limits.check_tokens(self.usage)
            self.tool_calls += len(self.open_calls)
            self.limits.check_tool_calls(self.tool_calls)
        if self.open_calls:
            return [self._plan(i, call) for i, call in enumerate(self.open_calls)]
        if self.output is None:
            return None
        return self._on_final_text(self.output, response.ai_message.text or "")

    def _on_final_text(self, output: OutputSpec[Any], text: str) -> list[_Planned] | None:
        # A text answer where structured output is wanted: valid JSON in native mode ends the
        # run; anything else is sent back with a nudge, against the output's retry budget.
        errors: Sequence[ArgumentError] = ()
        if output.in_text:
            try:
                self.output_value = output.validate(text)
                return None
            except OutputValidationError as error:
                errors = error.errors
        failures = self.failures[output.name] = self.failures.get(output.name, 0) + 1
        if failures > output.max_retries:
            raise output.exhausted(errors, text)
        self.messages.append(UserMessage(content=output.nudge(errors)))
        return []

    def _plan(
        self,
        index: int,
        call: ToolCall,
        *,
        decided: ToolExecutionResult | None = None,
        approved: bool = False,
        answer: Any = None,
    ) -> _Planned:
        service = self.service
        attempt = self.failures.get(call.name, 0) + 1
        progress = None if self.progress is None else self.progress.reporter(call)
        context: ToolContext[Any] = ToolContext(
            self.deps,
            call.id,
            call.name,
            attempt,
            self.conversation_id,
            progress,
            True,
            answer,
            self.scope,
        )
        tool = service._tools.get(call.name) if self.offer is None else self.offer.lookup(call.name)
        if tool is None and self.output is not None and call.name == self.output.name:
            tool = self.output
        if decided is not None:
            return _Planned(index, call, context, tool, decided)
        if tool is None:
            names = list(service._tools) if self.offer is None else self.offer.names()
            answer = service.unknown_tool_handler and service.unknown_tool_handler(call, names)
            if answer is None:
                reason = None
                if call.name in service._tools:
                    reason = (
                        f"{call.name!r} is registered but this run's tools= does not offer it; "
                        "a call the history waits on runs only when offered: include it"
                    )
                raise UnknownToolError(call.name, names, reason)
            return _Planned(index, call, context, None, _as_result(answer, "unknown_tool"))
        if (
            not approved
            and may_wait(tool)
            and (held := self.approval.hold(call, context, tool)) is not None
        ):
            return _Planned(index, call, context, tool, held)
        if service.before_tool_call is not None and not self.async_before:
            answer = _not_awaitable(service.before_tool_call(call, context), "before_tool_call")
            if answer is not None:
                return _Planned(index, call, context, tool, _as_result(answer, None))
        return _Planned(index, call, context, tool)

    def is_output(self, plan: _Planned) -> bool:
        """Whether `plan` calls the structured-output tool rather than a registered tool."""
        return self.output is not None and plan.tool is self.output

    def result_event(
        self, plan: _Planned, execution: ToolExecution
    ) -> ToolResultEvent | OutputCallEvent:
        if self.is_output(plan):
            return OutputCallEvent(execution)
        return ToolResultEvent(execution)

    def settle(self, plan: _Planned, execution: ToolExecution) -> ToolExecution:
        """Apply the error policies (which may raise) and the `after_tool_call` hook to one
        finished call."""
        # The result budget first: hooks, traces and the history see the text the model reads.
        budget = self.service.max_result_chars
        if budget is not None or len(execution.result.text) > DEFAULT_MAX_RESULT_CHARS:
            own = getattr(plan.tool, "max_result_chars", None)
            result = within_budget(execution.result, own, budget)
            if result is not execution.result:
                execution = replace(execution, result=result)
        if type(execution.result) is not ToolExecutionResult and execution.result.content:
            execution = self._fitted(plan, execution)
        # Recorded before anything may raise, so that a failed run still reports the call.
        self.finished[plan.index] = execution
        if self.trace is not None:
            progress = self.progress.recorded(plan.call.id) if self.progress else []
            known = plan.tool is not None
            self.trace.tool(execution, plan.context.attempt, known=known, progress=progress)
        result = self._apply_policy(plan, execution.result)
        if result is not execution.result:
            execution = self.finished[plan.index] = replace(execution, result=result)
        if type(execution.result) is PendingResult:
            # The call waits: it shows (and the history will record) the digest of what waits.
            # A tool that asked a question (an MCP elicitation) waits like a held call, and the
            # run's approval state sets it aside at the end of the round.
            if self._approval is None:
                self._approval = ApprovalState(None, None, asynchronous=self.asynchronous)
            stamped = with_digest(execution.result, self.conversation_id, self.service._digests)
            execution = self.finished[plan.index] = replace(execution, result=stamped)
        if self.service.after_tool_call is not None and not self.async_after:
            _not_awaitable(self.service.after_tool_call(execution), "after_tool_call")
        return execution

    def _fitted(self, plan: _Planned, execution: ToolExecution) -> ToolExecution:
        """`execution` with its content as the model takes it (its `fit_tool_content`), decided
        here, at the tool result, so that no later request fails on the history."""
        fit = self.fit
        if fit is _fit_unknown:
            fit = self.fit = getattr(self.model, "fit_tool_content", None)
        if fit is None:
            return execution
        try:
            result = fit_result(execution.result, fit)
        except AgentForgeError:  # refused under an "error" policy: the call did run
            self.finished[plan.index] = execution
            raise
        return execution if result is execution.result else replace(execution, result=result)

    def finish_round(self, planned: Sequence[_Planned], settled: Sequence[ToolExecution]) -> bool:
        """Append one result message per call in the model's order; say whether the loop ends
        here (a `ReturnBehavior`, or calls that wait for a decision)."""
        # Only a call that `hold` answered, or a tool that asked a question (an MCP elicitation),
        # can wait, and either made the approval state: without it, every call ran.
        approval = self._approval
        for execution in settled if approval is None else approval.set_aside(settled):
            self.executions.append(execution)
            self._record(execution)
        self.open_calls = ()
        if approval is not None and (approval.pending or approval.paused_on is not None):
            self._record_pause(approval)
            if approval.pending:
                return True
        if self.output is not None:
            for execution in settled:
                if execution.call.name == self.output.name and not execution.failed:
                    self.output_value = execution.result.value
                    return True
        # With an output type only a valid output ends the run, so `.output` is always one.
        self.returned_immediately = (
            bool(planned) and self.output is None and _returns_now(planned, settled)
        )
        return self.returned_immediately

    def __enter__(self) -> _Run:
        self.trace: RunTrace | None = None
        self.progress: ProgressSink | None = None
        # Off (the common case), one lookup: the run tracing is loaded when first switched on.
        if model_tracing.active is not None:
            from ._tracing import run_trace

            self.trace = run_trace(self.conversation_id)
            if self.trace is not None:
                self.progress = ProgressSink(stream=False, record=True)
        return self

    def stream_progress(self, wake: Callable[[], None] | None = None) -> ProgressSink:
        """Keep the calls' progress for a streaming driver (which yields `take()`), waking it
        with `wake` at each report."""
        self.progress = ProgressSink(stream=True, record=self.trace is not None, wake=wake)
        return self.progress

    def __exit__(self, kind: object, error: BaseException | None, traceback: object) -> None:
        # Every driver runs its loop inside `with run:`, so no error leaves a run empty-handed:
        # the program's own exception (a hook's, a handler's) too. Not a cancellation, an
        # interrupt or a stream closed by its consumer: those are not failures of the run.
        if isinstance(error, Exception):
            self.fail(error)
        if self.scopes:  # ended without its result (failed, cancelled, its stream closed)
            self.scopes[0].close(finished=False)
        if self.trace is not None:
            self.trace.end(error, self.usage)

    def fail(self, error: Exception) -> None:
        """Attach the run so far to `error` (see `_carry`). Every call of an unfinished round is
        answered (those that did not complete with an error result saying so), so the messages
        can be resumed."""
        for index, call in enumerate(self.open_calls):
            execution = self.finished.get(index)
            if execution is None:
                reason = f"the run stopped on {type(error).__name__} first"
                # "did not complete" rather than "did not run": under `achat` a sibling's failure
                # cancels calls that may have started, so their side effects are unknown.
                text = f"Tool `{shown_name(call.name)}` did not complete: {reason}."
                self._answer(call, text, True)
            else:
                self.executions.append(execution)
                self._record(execution)
        self.open_calls = ()
        _carry(
            error,
            messages=tuple(self.messages),
            tool_executions=tuple(self.executions),
            usage=priced(self.model, self.responses, self.usage),
        )

    def _record_pause(self, approval: ApprovalState) -> None:
        """Record on the message the run pauses on its conversation id, so that the run that
        resumes its calls keeps the same owner, and what each call waits for (or, once none of
        its calls waits, drop that record): see `ApprovalState.recorded`."""
        messages = self.messages
        for position in range(len(messages) - 1, -1, -1):
            message = messages[position]
            if isinstance(message, AiMessage):
                messages[position] = approval.recorded(message, self.conversation_id)
                return

    def _answer(self, call: ToolCall, text: str, is_error: bool) -> None:
        self.messages.append(
            ToolResultMessage(
                tool_call_id=call.id, tool_name=call.name, text=text, is_error=is_error
            )
        )

    def _record(self, execution: ToolExecution) -> None:
        """Answer an executed call with its result: text, and any content beyond text."""
        call, result = execution.call, execution.result
        if not result.content:
            self._answer(call, result.text, result.is_error)
            return
        self.messages.append(
            ToolResultMessage(
                tool_call_id=call.id,
                tool_name=call.name,
                text=result.text,
                content=result.content,
                is_error=result.is_error,
            )
        )

    def _apply_policy(self, plan: _Planned, result: ToolExecutionResult) -> ToolExecutionResult:
        service, kind, tool = self.service, result.error_kind, plan.tool
        if tool is None or plan.preset is not None:
            return result
        if not result.is_error:
            # The budget counts consecutive failures: slips far apart do not add up.
            self.failures.pop(tool.name, None)
        elif kind in ("arguments", "retry"):
            failures = self.failures[tool.name] = self.failures.get(tool.name, 0) + 1
            error = result.exception
            if kind == "arguments" and service.arguments_error_handler and tool is not self.output:
                if not isinstance(error, ToolArgumentsError):
                    error = ToolArgumentsError(tool.name, [])
                return _as_result(service.arguments_error_handler(error, plan.context), "arguments")
            if failures > tool.max_retries:
                if isinstance(error, ToolArgumentsError):
                    raise error
                raise ToolExecutionError(
                    tool.name, f"still failing after {tool.max_retries} retries: {result.text}"
                ) from error
        elif kind == "execution" and service.execution_error_handler is not None:
            exception = result.exception or RuntimeError(result.text)
            return _as_result(service.execution_error_handler(exception, plan.context), "execution")
        return result

    def result(self) -> ToolChatResult[Any]:
        """The run's outcome, once the loop has ended: what its calls kept for a resumed run (the
        questions it paused on) outlives it from here."""
        if self.scopes:
            self.scopes[0].close(finished=True)
        return ToolChatResult._of(
            final_response=self.responses[-1] if self.responses else self.approval.final_response(),
            messages=tuple(self.messages),
            tool_executions=tuple(self.executions),
            intermediate_responses=tuple(self.responses[:-1]),
            usage=priced(self.model, self.responses, self.usage),
            returned_immediately=self.returned_immediately,
            output=self.output_value,
            pending=() if self._approval is None else tuple(self._approval.pending),
            conversation_id=self.conversation_id,
        )


def _owner(given: str | None, paused: AiMessage | None) -> str:
    """The run's conversation id: the one given, else the one recorded on the message whose calls
    it resumes, else a new random one. A given id that differs from the recorded one is refused:
    the paused calls, their questions and their idempotency keys belong to that conversation."""
    recorded = recorded_conversation(paused)
    if not given:
        return recorded or random_id()
    if recorded is not None and recorded != given:
        raise ValueError(
            f"the history's pending calls belong to conversation {recorded!r}, not "
            f"{given!r}; resume them with conversation_id={recorded!r} (or without one)"
        )
    return given


_CARRIED = "_agentforge_carried"
"""The history attributes a run set on an exception of the program's own."""


def _carry(error: Exception, **history: Any) -> None:
    """Set the run's history (`messages`, `tool_executions`, `usage`) on `error`. An
    `AgentForgeError` declares them; an exception of the program's own (a hook or handler that
    raised, a model of its own that failed) propagates as it is and carries them too, unless it
    has attributes of those names of its own, which are left as they are."""
    carried = getattr(error, _CARRIED, ())
    if not isinstance(error, AgentForgeError):
        history = {
            name: value
            for name, value in history.items()
            if name in carried or not hasattr(error, name)
        }
    try:
        for name, value in history.items():
            # `object.__setattr__`: a frozen dataclass exception takes them too.
            object.__setattr__(error, name, value)
        if not isinstance(error, AgentForgeError):
            object.__setattr__(error, _CARRIED, tuple(history))
    except (AttributeError, TypeError):  # an exception that takes no attributes at all
        pass


def _fit_unknown(parts: Sequence[Any]) -> tuple[tuple[Any, ...], tuple[str, ...]]:
    """`_Run.fit` until the model is asked for its own (never called)."""
    raise AssertionError("the model's fit_tool_content was not looked up")


def _refuse_cut_off(calls: Sequence[ToolCall]) -> None:
    """Raise `ModelError` for an answer cut off by the token limit in the middle of a call (its
    arguments are not whole JSON): such a call is never executed, and the model could only guess
    what it was told it did wrong. The calls of the answer are then answered as not completed, so
    the history can be resumed (with a larger `max_tokens`)."""
    for call in calls:
        try:
            pydantic_core.from_json(call.arguments or "{}")
        except ValueError:
            raise ModelError(
                f"the answer was cut off by the token limit (finish_reason 'length') in the "
                f"middle of the call to `{shown_name(call.name)}`, which was not executed; raise "
                "max_tokens",
                code="cut_off_tool_call",
            ) from None


def _not_awaitable(value: Any, hook: str) -> Any:
    """`value`, unless a hook gave an awaitable where it is not awaited (a sync function that
    returns a coroutine): a `TypeError` rather than a coroutine the loop would treat as an answer."""
    if inspect.isawaitable(value):
        if inspect.iscoroutine(value):
            value.close()  # never awaited: no "coroutine was never awaited" warning
        raise TypeError(
            f"{hook} returned an awaitable; make it an async function (run under achat/astream)"
        )
    return value


def _returns_now(planned: Sequence[_Planned], executions: Sequence[ToolExecution]) -> bool:
    """Stop when every call of the round may end the loop — `IMMEDIATE`, or `IMMEDIATE_IF_LAST`
    as the round's last call — and none of them failed (a failure goes back to the model, which
    must see it)."""
    last = len(planned) - 1
    for index, plan in enumerate(planned):
        behavior = plan.tool.return_behavior if plan.tool is not None else ReturnBehavior.TO_LLM
        if behavior is ReturnBehavior.TO_LLM:
            return False
        if behavior is ReturnBehavior.IMMEDIATE_IF_LAST and index != last:
            return False
    return not any(e.failed for e in executions)


class ToolService(Generic[DepsT]):
    """Registered tools plus the loop that lets a model use them.

    Generic in the type of the `deps` its tools receive through `ToolContext[DepsT]`: annotate
    (`ToolService[Db]()`) or pass `deps_type=Db`; then `chat` and the other runs require
    `deps: Db`. `ToolService()` alone takes no deps (`ToolService[None]`).

    Args:
        tools: Tools to register now (anything `register` accepts).
        max_round_trips: Model calls allowed in one `chat`; one more raises `ToolLoopLimitError`.
        arguments_error_handler: Replaces the default for invalid arguments (send the error to the
            model while the tool's `max_retries` lasts, then raise `ToolArgumentsError`).
        execution_error_handler: Replaces the default for a tool that raised (send
            "ExceptionType: message" to the model).
        unknown_tool_handler: Answers calls to unregistered tools; by default they raise
            `UnknownToolError`. `available_tools_handler` is a ready one.
        parallel: Under `achat`, run the independent calls of a round concurrently.
        before_tool_call: Hook that may answer a call instead of executing it (deny, approve, cache).
        after_tool_call: Hook that sees every execution (audit, metrics); see `logging_hook`.
        deps_type: The class of the `deps` every run gets (checked with `isinstance` when a run
            starts); a tool whose `ToolContext[X]` does not accept it is refused at registration.
        groups: Named groups to register: `{"billing": [charge, refund]}` (see `register`).
        prepare_tools: Hook choosing each round's tools from the run's deps (see `PrepareTools`).
        tool_search: Offer a core set plus a search tool instead of every tool (`ToolSearch`).
        usage_limits: Caps on each run's requests, tool calls and tokens (a run's own
            `usage_limits=` replaces them); exceeding one raises `UsageLimitExceeded`.
        max_result_chars: The result budget of tools without their own: the most characters of
            a result's text the model reads (at least 100; a longer text keeps its head and
            tail around a marker). `None`: 100,000 (`DEFAULT_MAX_RESULT_CHARS`).
        history_processors: Functions (sync or async) run in order before every model call,
            each taking the messages about to be sent and returning the ones to send (see
            `keep_last_rounds`, `drop_old_tool_results`); the run's own history keeps every
            message.
        blocking_in_event_loop: Let the blocking `chat` and `stream` run in a thread whose event
            loop is running (a notebook): they block that loop until the run ends. Off, they
            refuse there before any model call, naming `achat`/`astream`.
        digest_secret: Key the digests of paused calls (HMAC-SHA-256; at least 16 bytes) for
            histories kept by a party that must not change them: a call changed since it was
            shown is refused even when its record was changed too. Never logged or recorded;
            `None` (default): plain SHA-256 digests.
    """

    def __init__(
        self,
        tools: Iterable[object] | None = None,
        *,
        max_round_trips: int = 100,
        arguments_error_handler: ArgumentsErrorHandler | None = None,
        execution_error_handler: ExecutionErrorHandler | None = None,
        unknown_tool_handler: UnknownToolHandler | None = None,
        parallel: bool = True,
        before_tool_call: BeforeToolCall | None = None,
        after_tool_call: AfterToolCall | None = None,
        deps_type: type[DepsT] | None = None,
        groups: Mapping[str, Iterable[object]] | None = None,
        prepare_tools: PrepareTools | None = None,
        tool_search: ToolSearch | None = None,
        usage_limits: UsageLimits | None = None,
        max_result_chars: int | None = None,
        history_processors: Sequence[HistoryProcessor] | None = None,
        blocking_in_event_loop: bool = False,
        digest_secret: str | bytes | None = None,
    ) -> None:
        if max_round_trips < 1:
            raise ValueError("max_round_trips must be at least 1")
        self.max_round_trips = max_round_trips
        self.arguments_error_handler = arguments_error_handler
        self.execution_error_handler = execution_error_handler
        self.unknown_tool_handler = unknown_tool_handler
        self.parallel = parallel
        self.before_tool_call = before_tool_call
        self.after_tool_call = after_tool_call
        self.deps_type = deps_type
        self.usage_limits = usage_limits
        self.max_result_chars = check_max_result_chars(max_result_chars)
        self.history_processors = check_processors(history_processors)
        self.blocking_in_event_loop = blocking_in_event_loop
        self._digests = CallDigests(digest_secret)
        """The digests of paused calls (the secret lives only inside it)."""
        self._tools: dict[str, ToolLike] = {}
        self._watched: list[_Watched] = []
        """The registered sources whose tools may change (`tools_version`)."""
        self._generation = 0
        """+1 whenever the registered tools change after a run may have started."""
        self._default_parameters: ChatRequestParameters | None = None
        self._needy: list[str] | None = None
        """The registered tools that need deps (`needing_deps`), found at the first run."""
        self.prepare_tools = prepare_tools
        self.tool_search = tool_search
        self._groups: dict[str, list[str]] = {}
        for item in tools or ():
            self.register(item)
        for group, source in group_sources(groups or {}):
            self.register(source, group=group)

    def __repr__(self) -> str:
        return f"ToolService(tools={list(self._tools)!r})"

    # -- registration ------------------------------------------------------------------------

    @property
    def tools(self) -> Sequence[ToolLike]:
        """The registered tools, in registration order."""
        return tuple(self._tools.values())

    @property
    def specifications(self) -> Sequence[ToolSpecification]:
        """What the model is offered."""
        return tuple(t.specification for t in self._tools.values())

    @property
    def groups(self) -> Mapping[str, Sequence[str]]:
        """The named groups and the names of their tools, in registration order."""
        return {group: tuple(names) for group, names in self._groups.items()}

    def register(self, source: object, *, group: str | Iterable[str] | None = None) -> Self:
        """Register a `Tool` (or any `ToolLike`), a plain typed function (decorated on the fly),
        a `ToolSource` such as an entered `MCPServer`, or an object whose methods carry `@tool`.

        A source registers whole or not at all: when one of its tools cannot be registered,
        none is. `group` puts its tools into one or several named groups, which a run selects
        with `tools=["group:NAME"]`; registering the same tool object again with a
        `group` adds it to that group.

        Raises:
            ValueError: a tool with the same name is already registered, or `source` holds two
                tools of one name.
            SchemaDialectError: a tool asks for a provider-enforced schema (`strict_schema`)
                that the OpenAI strict dialect cannot express — refused now, not at the first
                request.
            TypeError: `source` holds no tool, a tool's `ToolContext[X]` does not accept the
                service's `deps_type`, or a tool's declared return type cannot be serialized to
                JSON (a plain class: pydantic has no schema for it).
        """
        items = tools_from(source)
        if group is not None and all(self._tools.get(item.name) is item for item in items):
            add_to_groups(self._groups, group, [item.name for item in items])
            return self
        self._admissible(items, source)
        add_to_groups(self._groups, group, [item.name for item in items])
        self._tools.update((item.name, item) for item in items)
        version = getattr(source, "tools_version", None)
        if isinstance(version, int) and not is_tool(source):
            self._watched.append(_Watched(source, [item.name for item in items], group, version))
        self._changed()
        return self

    def _admissible(
        self, items: Sequence[ToolLike], source: object, replacing: Collection[str] = ()
    ) -> None:
        """Raise when `items` (from `source`, in place of the tools named `replacing`) cannot
        be registered; see `register`."""
        counts = Counter(item.name for item in items)
        taken = [name for name in counts if name in self._tools and name not in replacing]
        clash = next(iter(taken), None) or next((n for n in counts if counts[n] > 1), None)
        if clash is not None:
            problem = (
                f"a tool named {clash!r} is already registered"
                if taken
                else f"two of its tools are named {clash!r}"
            )
            raise ValueError(
                problem if len(items) == 1 else f"{problem}; nothing from {source!r} was registered"
            )
        for item in items:
            expected = getattr(item, "deps_type", Any)
            if self.deps_type is not None and not deps_accepted(expected, self.deps_type):
                raise TypeError(
                    f"tool {item.name!r} takes ToolContext[{type_name(expected)}], which does not "
                    f"accept this service's deps type {type_name(self.deps_type)}"
                )
            if item.specification.strict_schema:
                # What OpenAI's strict mode cannot express (`dict[str, X]`) is refused here, for
                # every kind of tool, rather than at the first request.
                from ..providers._dialects import render_schema

                render_schema(item.specification.parameters, "openai-strict")
            _require_serializable_return(item)

    def _changed(self) -> None:
        self._default_parameters = None
        self._needy = None
        self._generation += 1

    def _refresh(self) -> None:
        """Take the new tool list of each watched source whose `tools_version` moved, whole:
        one that cannot be registered (a name another tool holds) is refused, with a warning,
        and the source's old tools stay."""
        changed = False
        for watched in self._watched:
            version = getattr(watched.source, "tools_version", watched.version)
            if version == watched.version:
                continue
            watched.version = version
            old = set(watched.names)
            try:
                items = tools_from(watched.source)
                self._admissible(items, watched.source, replacing=old)
            except (TypeError, ValueError) as exc:
                logger.warning(
                    "the changed tools of %s were refused, its former tools stay: %s",
                    repr(watched.source),  # as it is now, not when the record is formatted
                    exc,
                )
                continue
            names = [item.name for item in items]
            for group, members in self._groups.items():
                if any(name in old for name in members):
                    members[:] = [name for name in members if name not in old]
                    add_to_groups(self._groups, group, names)
            add_to_groups(self._groups, watched.group, names)
            for name in old:
                del self._tools[name]
            self._tools.update((item.name, item) for item in items)
            watched.names = names
            changed = True
        if changed:
            self._changed()

    def _offer(
        self,
        tools: ToolSelection | None,
        deps: Any,
        conversation_id: str,
        messages: Sequence[ChatMessage],
    ) -> Offer | None:
        """What a run offers when it selects, searches or prepares its tools; `None` when it
        offers every registered tool (the fast path)."""
        if tools is None and self.tool_search is None and self.prepare_tools is None:
            return None
        return Offer(
            self._tools,
            self._groups,
            tools,
            self.tool_search,
            self.prepare_tools,
            deps,
            conversation_id,
            messages,
        )

    def register_spec(
        self,
        specification: ToolSpecification,
        handler: Callable[[dict[str, Any]], Any] | ToolExecutor,
        **options: Any,
    ) -> Self:
        """Register a tool defined by a hand-written JSON schema; arguments are validated against
        the schema itself before `handler` (a sync or async callable receiving the arguments
        dict, or a `ToolExecutor`) runs. `options` go to `SchemaTool`."""
        from ..tools._schema_tool import SchemaTool

        return self.register(SchemaTool(specification, handler, **options))

    def _async_hooks(self, asynchronous: bool) -> tuple[bool, bool]:
        """Whether `before_tool_call` and `after_tool_call` are async functions; under a blocking
        run (`chat`, `stream`) one that is is a `TypeError`, before any model call."""
        if self.before_tool_call is None and self.after_tool_call is None:
            return False, False
        hooks = {"before_tool_call": self.before_tool_call, "after_tool_call": self.after_tool_call}
        found = {name: hook is not None and is_async_callable(hook) for name, hook in hooks.items()}
        for name, is_async in found.items():
            if is_async and not asynchronous:
                raise TypeError(
                    f"{name} is an async function: it runs only under achat/astream; "
                    "use a plain function with chat/stream"
                )
        return found["before_tool_call"], found["after_tool_call"]

    def _check_deps(self, deps: Any, *, selected: bool = False) -> None:
        """Refuse, before any model call, `deps` that are not an instance of `deps_type`, or,
        without a `deps_type`, no deps for tools that need them (not an `AttributeError` inside a
        tool that the model would read). A run that `selected` its tools may leave those out."""
        expected = self.deps_type
        if expected is None:
            if deps is None and not selected:
                if self._needy is None:
                    self._needy = needing_deps(self._tools.values())
                if self._needy:
                    raise TypeError(
                        f"{', '.join(self._needy)} need{'s' if len(self._needy) == 1 else ''} "
                        "deps: pass deps=... to the run (and deps_type=... to ToolService, for "
                        "mypy to check them)"
                    )
            return
        if deps_accepted(expected, type(deps)):
            return
        raise TypeError(
            f"deps must be an instance of {type_name(expected)} (this service's deps_type), "
            f"not {type(deps).__qualname__}"
        )

    def _refuse_in_event_loop(self, driver: str, instead: str) -> None:
        if self.blocking_in_event_loop or running_loop() is None:
            return
        raise RuntimeError(
            f"ToolService.{driver}() blocks, and this thread runs an event loop (async code or a "
            f"notebook): use `{instead}` there, or ToolService(blocking_in_event_loop=True) to "
            "block the loop until the run ends"
        )

    def _request_parameters(
        self, user: ChatRequestParameters | None, output: OutputSpec[Any] | None
    ) -> ChatRequestParameters:
        # Registered tools are always offered; the caller's parameters win for everything else.
        if user is None and output is None:
            if self._default_parameters is None:
                tools = self.specifications or None
                self._default_parameters = ChatRequestParameters.model_construct(tools=tools)
            return self._default_parameters
        specifications = list(self.specifications)
        if user is not None and user.tools:
            specifications += [s for s in user.tools if s.name not in self._tools]
        if output is not None and not output.in_text:
            if output.name in self._tools:
                raise ValueError(
                    f"the output tool name {output.name!r} is taken by a registered tool"
                )
            specifications.append(output.specification)
        merged = ChatRequestParameters().merge(user)
        merged = merged.model_copy(update={"tools": tuple(specifications) or None})
        return output.request_parameters(merged) if output and output.native else merged

    # -- the loop ----------------------------------------------------------------------------

    @overload
    def chat(
        self: ToolService[None],
        model: ChatModel,
        messages: str | Iterable[ChatMessage],
        parameters: ChatRequestParameters | None = None,
        *,
        deps: None = None,
        output_type: TypeForm[OutputT] = ...,
        **options: Unpack[RunOptions],
    ) -> ToolChatResult[OutputT]: ...

    @overload
    def chat(
        self: ToolService[None],
        model: ChatModel,
        messages: str | Iterable[ChatMessage],
        parameters: ChatRequestParameters | None = None,
        *,
        deps: None = None,
        output_type: OutputSpec[OutputT],
        **options: Unpack[RunOptions],
    ) -> ToolChatResult[OutputT]: ...

    @overload
    def chat(
        self,
        model: ChatModel,
        messages: str | Iterable[ChatMessage],
        parameters: ChatRequestParameters | None = None,
        *,
        deps: DepsT,
        output_type: TypeForm[OutputT] = ...,
        **options: Unpack[RunOptions],
    ) -> ToolChatResult[OutputT]: ...

    @overload
    def chat(
        self,
        model: ChatModel,
        messages: str | Iterable[ChatMessage],
        parameters: ChatRequestParameters | None = None,
        *,
        deps: DepsT,
        output_type: OutputSpec[OutputT],
        **options: Unpack[RunOptions],
    ) -> ToolChatResult[OutputT]: ...

    def chat(
        self,
        model: ChatModel,
        messages: str | Iterable[ChatMessage],
        parameters: ChatRequestParameters | None = None,
        *,
        deps: Any = None,
        output_type: TypeForm[Any] | OutputSpec[Any] | None = None,
        **options: Unpack[RunOptions],
    ) -> ToolChatResult[Any]:
        """Run the loop until the model answers without tool calls (or a `ReturnBehavior` ends
        it). Calls run one after another; `messages` is not modified.

        Args:
            model: The model to converse with.
            messages: The conversation so far (a string is one user message).
            parameters: Request parameters; the registered tools are added to them.
            deps: What tools receive as `ToolContext.deps` (required when the service has a deps
                type).
            output_type: The type of `result.output`, answered through a `final_result` tool (or
                an `OutputSpec` choosing how).
            **options: The run's options (`tools`, `conversation_id`, `approvals`,
                `external_results`, `usage_limits`), documented on `RunOptions`.
        """
        self._refuse_in_event_loop("chat", "await service.achat(...)")
        run = _Run(self, model, messages, parameters, deps, output_type, options)
        with run:
            while True:
                planned = run.resumed() or run.on_response(model.chat(run.next_request()))
                if planned is None:
                    return run.result()
                settled = [run.settle(plan, _execute(plan)) for plan in planned]
                if run.finish_round(planned, settled):
                    return run.result()

    @overload
    async def achat(
        self: ToolService[None],
        model: ChatModel,
        messages: str | Iterable[ChatMessage],
        parameters: ChatRequestParameters | None = None,
        *,
        deps: None = None,
        output_type: TypeForm[OutputT] = ...,
        **options: Unpack[RunOptions],
    ) -> ToolChatResult[OutputT]: ...

    @overload
    async def achat(
        self: ToolService[None],
        model: ChatModel,
        messages: str | Iterable[ChatMessage],
        parameters: ChatRequestParameters | None = None,
        *,
        deps: None = None,
        output_type: OutputSpec[OutputT],
        **options: Unpack[RunOptions],
    ) -> ToolChatResult[OutputT]: ...

    @overload
    async def achat(
        self,
        model: ChatModel,
        messages: str | Iterable[ChatMessage],
        parameters: ChatRequestParameters | None = None,
        *,
        deps: DepsT,
        output_type: TypeForm[OutputT] = ...,
        **options: Unpack[RunOptions],
    ) -> ToolChatResult[OutputT]: ...

    @overload
    async def achat(
        self,
        model: ChatModel,
        messages: str | Iterable[ChatMessage],
        parameters: ChatRequestParameters | None = None,
        *,
        deps: DepsT,
        output_type: OutputSpec[OutputT],
        **options: Unpack[RunOptions],
    ) -> ToolChatResult[OutputT]: ...

    async def achat(
        self,
        model: ChatModel,
        messages: str | Iterable[ChatMessage],
        parameters: ChatRequestParameters | None = None,
        *,
        deps: Any = None,
        output_type: TypeForm[Any] | OutputSpec[Any] | None = None,
        **options: Unpack[RunOptions],
    ) -> ToolChatResult[Any]:
        """Async `chat`, with the same arguments: independent calls of a round run concurrently
        (`sequential` tools run alone, in order), and sync tools run in worker threads."""
        run = _Run(self, model, messages, parameters, deps, output_type, options, asynchronous=True)
        return await _adrive(run, model.achat, _aexecute)

    @overload
    def stream(
        self: ToolService[None],
        model: ChatModel,
        messages: str | Iterable[ChatMessage],
        parameters: ChatRequestParameters | None = None,
        *,
        deps: None = None,
        output_type: TypeForm[OutputT] = ...,
        **options: Unpack[RunOptions],
    ) -> Generator[ToolLoopEvent[OutputT], None, None]: ...

    @overload
    def stream(
        self: ToolService[None],
        model: ChatModel,
        messages: str | Iterable[ChatMessage],
        parameters: ChatRequestParameters | None = None,
        *,
        deps: None = None,
        output_type: OutputSpec[OutputT],
        **options: Unpack[RunOptions],
    ) -> Generator[ToolLoopEvent[OutputT], None, None]: ...

    @overload
    def stream(
        self,
        model: ChatModel,
        messages: str | Iterable[ChatMessage],
        parameters: ChatRequestParameters | None = None,
        *,
        deps: DepsT,
        output_type: TypeForm[OutputT] = ...,
        **options: Unpack[RunOptions],
    ) -> Generator[ToolLoopEvent[OutputT], None, None]: ...

    @overload
    def stream(
        self,
        model: ChatModel,
        messages: str | Iterable[ChatMessage],
        parameters: ChatRequestParameters | None = None,
        *,
        deps: DepsT,
        output_type: OutputSpec[OutputT],
        **options: Unpack[RunOptions],
    ) -> Generator[ToolLoopEvent[OutputT], None, None]: ...

    def stream(
        self,
        model: ChatModel,
        messages: str | Iterable[ChatMessage],
        parameters: ChatRequestParameters | None = None,
        *,
        deps: Any = None,
        output_type: TypeForm[Any] | OutputSpec[Any] | None = None,
        **options: Unpack[RunOptions],
    ) -> Generator[ToolLoopEvent, None, None]:
        """`chat`, with the same arguments, yielding events as they happen: each round's model
        stream events (with `PartialArgumentsEvent`s for live displays), a `ToolCallEvent` before
        and a `ToolResultEvent` after each call (an `OutputCallEvent` for a call of the output
        tool), and last a `FinalResultEvent`."""
        self._refuse_in_event_loop("stream", "async for event in service.astream(...)")
        run = _Run(self, model, messages, parameters, deps, output_type, options)
        with run:
            progress = run.stream_progress()
            while True:
                reader = _RoundReader()
                for event in () if run.resuming else model.stream(run.next_request()):
                    yield event
                    if update := reader.feed(event):
                        yield update
                planned = run.resumed() or run.on_response(reader.response())
                if planned is None:
                    break
                settled = []
                for plan in planned:
                    if not run.is_output(plan):
                        yield ToolCallEvent(plan.call)
                    settled.append(run.settle(plan, _execute(plan)))
                    # Blocking: what the call reported comes when it returns, before its result.
                    yield from progress.take()
                    yield run.result_event(plan, settled[-1])
                if run.finish_round(planned, settled):
                    break
            yield FinalResultEvent(run.result())

    @overload
    def astream(
        self: ToolService[None],
        model: ChatModel,
        messages: str | Iterable[ChatMessage],
        parameters: ChatRequestParameters | None = None,
        *,
        deps: None = None,
        output_type: TypeForm[OutputT] = ...,
        **options: Unpack[RunOptions],
    ) -> AsyncGenerator[ToolLoopEvent[OutputT], None]: ...

    @overload
    def astream(
        self: ToolService[None],
        model: ChatModel,
        messages: str | Iterable[ChatMessage],
        parameters: ChatRequestParameters | None = None,
        *,
        deps: None = None,
        output_type: OutputSpec[OutputT],
        **options: Unpack[RunOptions],
    ) -> AsyncGenerator[ToolLoopEvent[OutputT], None]: ...

    @overload
    def astream(
        self,
        model: ChatModel,
        messages: str | Iterable[ChatMessage],
        parameters: ChatRequestParameters | None = None,
        *,
        deps: DepsT,
        output_type: TypeForm[OutputT] = ...,
        **options: Unpack[RunOptions],
    ) -> AsyncGenerator[ToolLoopEvent[OutputT], None]: ...

    @overload
    def astream(
        self,
        model: ChatModel,
        messages: str | Iterable[ChatMessage],
        parameters: ChatRequestParameters | None = None,
        *,
        deps: DepsT,
        output_type: OutputSpec[OutputT],
        **options: Unpack[RunOptions],
    ) -> AsyncGenerator[ToolLoopEvent[OutputT], None]: ...

    async def astream(
        self,
        model: ChatModel,
        messages: str | Iterable[ChatMessage],
        parameters: ChatRequestParameters | None = None,
        *,
        deps: Any = None,
        output_type: TypeForm[Any] | OutputSpec[Any] | None = None,
        **options: Unpack[RunOptions],
    ) -> AsyncGenerator[ToolLoopEvent, None]:
        """Async `stream`, with the same arguments: calls run as under `achat`, and each
        `ToolResultEvent` is yielded as soon as its call finishes."""
        run = _Run(self, model, messages, parameters, deps, output_type, options, asynchronous=True)
        import asyncio  # loaded by then; not at import, for blocking programs

        loop = asyncio.get_running_loop()
        reported = asyncio.Event()

        def wake() -> None:  # tools may report from other threads (an MCP session's loop)
            loop.call_soon_threadsafe(reported.set)

        with run:
            progress = run.stream_progress(wake)
            while True:
                reader = _RoundReader()
                async for event in (
                    no_events() if run.resuming else model.astream(await run.anext_request())
                ):
                    yield event
                    if update := reader.feed(event):
                        yield update
                planned = run.resumed() or run.on_response(reader.response())
                if planned is None:
                    break
                for plan in planned:
                    if not run.is_output(plan):
                        yield ToolCallEvent(plan.call)
                # Results arrive in completion order and are recorded in the model's order;
                # progress as it is reported, each call's before its result.
                settled: dict[int, ToolExecution] = {}
                for batch in _batches(planned, self.parallel):
                    started = [asyncio.ensure_future(_asettle_at(run, plan)) for plan in batch]
                    completed: list[asyncio.Future[Any]] = []  # in the order they finish
                    for task in started:
                        task.add_done_callback(completed.append)
                    try:
                        for _ in started:
                            while not completed:
                                running = [task for task in started if not task.done()]
                                if not running:  # done: its callback runs at the next step
                                    await asyncio.sleep(0)
                                    continue
                                woken = asyncio.ensure_future(reported.wait())
                                await asyncio.wait(
                                    {*running, woken}, return_when=asyncio.FIRST_COMPLETED
                                )
                                woken.cancel()
                                reported.clear()
                                for event in progress.take():
                                    yield event
                            for event in progress.take():
                                yield event
                            index, settled[index] = completed.pop(0).result()
                            yield run.result_event(planned[index], settled[index])
                    finally:
                        await _cancel_unfinished(started)
                if run.finish_round(planned, [settled[i] for i in range(len(planned))]):
                    break
            yield FinalResultEvent(run.result())


def _conversation(messages: str | Iterable[ChatMessage]) -> list[ChatMessage]:
    """The caller's messages as a new list: a string is one user message; anything that is not a
    message is refused here, before any model call."""
    if isinstance(messages, str):
        return [UserMessage(content=messages)]
    if not isinstance(messages, (list, tuple)) and not isinstance(messages, Iterable):
        raise TypeError(
            f"messages must be a string or an iterable of chat messages, not {type(messages).__name__}"
        )
    conversation = list(messages)
    for position, message in enumerate(conversation):
        if not is_message(message):
            raise TypeError(
                f"messages[{position}] is of type {type(message).__name__!r}, not a chat message"
                f" ({', '.join(t.__name__ for t in MESSAGE_TYPES)})"
            )
    return conversation


def _output_spec(output_type: TypeForm[Any] | OutputSpec[Any] | None) -> OutputSpec[Any] | None:
    if output_type is None or isinstance(output_type, OutputSpec):
        return output_type
    return OutputSpec(output_type)


_Execute = Callable[[_Planned], Awaitable[ToolExecution]]
"""Runs one planned call of a round (the tool itself, or a durable activity)."""


def _batches(planned: Sequence[_Planned], parallel: bool) -> Iterator[list[_Planned]]:
    """Group a round's calls for concurrent execution: runs of independent calls together,
    each `sequential` call alone, in the model's order."""
    batch: list[_Planned] = []
    for plan in planned:
        if parallel and not plan.sequential:
            batch.append(plan)
            continue
        if batch:
            yield batch
            batch = []
        yield [plan]
    if batch:
        yield batch


async def _adrive(
    run: _Run,
    request: Callable[[ChatRequest], Awaitable[ChatResponse]],
    execute: _Execute,
) -> ToolChatResult[Any]:
    """The async loop over `run`: `request` answers each model call and `execute` runs each
    planned call. `achat` passes the model and the tools themselves; a durable driver passes
    activities."""
    with run:
        while True:
            planned = run.resumed() or run.on_response(await request(await run.anext_request()))
            if planned is None:
                return run.result()
            settled: list[ToolExecution] = []
            for batch in _batches(planned, run.service.parallel):
                settled += await _settle_batch(run, batch, execute)
            if run.finish_round(planned, settled):
                return run.result()


async def _settle_batch(
    run: _Run, batch: Sequence[_Planned], execute: _Execute
) -> list[ToolExecution]:
    import asyncio  # loaded by then; not at import, for blocking programs

    tasks = [asyncio.ensure_future(_asettle(run, plan, execute)) for plan in batch]
    gathered = asyncio.gather(*tasks)
    try:
        return await gathered
    except GeneratorExit:
        # The run's coroutine is being closed (a durable workflow torn down mid-round): it may
        # await nothing more. Cancelling the gathering cancels every call, and logs nothing.
        gathered.cancel()
        raise
    except BaseException:
        await _cancel_unfinished(tasks)
        raise


async def _cancel_unfinished(tasks: Sequence[asyncio.Future[Any]]) -> None:
    # When one call of a round raises (a policy or hook) or the run is cancelled, the others must
    # not keep running unobserved after the run has ended: cancel them and wait for their cleanup.
    pending = [task for task in tasks if not task.done()]
    for task in pending:
        task.cancel()
    if pending:
        import asyncio

        await asyncio.wait(pending)
    # Only the first failure propagates; the others are retrieved here, or asyncio logs each
    # one as "Task exception was never retrieved".
    for task in tasks:
        if not task.cancelled():
            task.exception()


async def _asettle(run: _Run, plan: _Planned, execute: _Execute | None = None) -> ToolExecution:
    before, after = run.service.before_tool_call, run.service.after_tool_call
    if plan.tool is not None and ApprovalState.deferred(plan.preset):
        held = await run.approval.ahold(plan.call, plan.context, plan.tool)
        if held is None:
            plan = run._plan(plan.index, plan.call, approved=True)
        else:
            plan = replace(plan, preset=held)
    if run.async_before and before is not None and plan.tool is not None and plan.preset is None:
        answer = await cast(_AsyncAnswer, before(plan.call, plan.context))
        if answer is not None:
            plan = replace(plan, preset=_as_result(answer, None))
    execution = run.settle(plan, await (execute or _aexecute)(plan))
    if run.async_after and after is not None:
        await cast(Awaitable[None], after(execution))
    return execution


async def _asettle_at(run: _Run, plan: _Planned) -> tuple[int, ToolExecution]:
    return plan.index, await _asettle(run, plan)


_EVERY_DELTA_BELOW = 1024
"""Arguments shorter than this (in characters) are parsed for display on every delta."""


class _PartialCall:
    """One streamed tool call as the loop reads it: its name, and references to the provider's
    argument deltas (the strings themselves, not a copy), joined only to be parsed."""

    __slots__ = ("chunks", "name", "parsed_size", "size")

    def __init__(self) -> None:
        self.name: str | None = None
        self.chunks: list[str] = []
        self.size = 0
        self.parsed_size = 0

    def due(self) -> bool:
        """Whether to parse now: on every delta while short, then each time the arguments have
        grown by a quarter, so that parsing costs a bounded multiple of their size in all."""
        grown = self.size - self.parsed_size
        return self.size < _EVERY_DELTA_BELOW or grown >= self.parsed_size // 4


class _RoundReader:
    """What the loop reads from one round's model stream: the complete response, and the
    tool-call arguments so far, parsed leniently for display."""

    def __init__(self) -> None:
        self.calls: dict[int, _PartialCall] = {}
        self.complete: ChatResponse | None = None

    def feed(self, event: StreamEvent) -> PartialArgumentsEvent | None:
        """Take one stream event; return the arguments parsed so far when it extends them (and
        a parse is due)."""
        if isinstance(event, ResponseComplete):
            self.complete = event.response
            self.calls = {}  # the response holds the arguments now; the deltas can go
        elif isinstance(event, ToolCallDelta):
            return self._arguments(event)
        return None

    def response(self) -> ChatResponse:
        """The round's complete response; raises `ModelError` when the stream ended without one."""
        if self.complete is None:
            raise ModelError("the model stream ended without a complete response")
        return self.complete

    def _arguments(self, delta: ToolCallDelta) -> PartialArgumentsEvent | None:
        call = self.calls.get(delta.index)
        if call is None:
            call = self.calls[delta.index] = _PartialCall()
        if delta.name:
            call.name = delta.name
        if not delta.arguments_delta:
            return None
        call.chunks.append(delta.arguments_delta)
        call.size += len(delta.arguments_delta)
        if not call.due():
            return None
        # Counted even when the text does not parse yet, so a broken stream stays linear too.
        call.parsed_size = call.size
        try:
            parsed = pydantic_core.from_json("".join(call.chunks), allow_partial="trailing-strings")
        except ValueError:
            return None
        return PartialArgumentsEvent(delta.index, call.name, parsed)


def _execute(plan: _Planned) -> ToolExecution:
    started = _now()
    result = plan.preset
    if result is None:
        assert plan.tool is not None
        try:
            result = plan.tool.execute(plan.call, plan.context)
        except BaseException as exc:
            result = _crashed(exc)
    elif result.content:  # an external result's links, as its tool's `content_urls` allows
        result = links_checked(result, getattr(plan.tool, "content_urls", "https"))
    return ToolExecution(plan.call, result, started, _now())


async def _aexecute(plan: _Planned) -> ToolExecution:
    started = _now()
    result = plan.preset
    if result is None:
        assert plan.tool is not None
        try:
            result = await plan.tool.aexecute(plan.call, plan.context)
        except BaseException as exc:
            result = _crashed(exc)
    elif result.content:
        result = await alinks_checked(result, getattr(plan.tool, "content_urls", "https"))
    return ToolExecution(plan.call, result, started, _now())


def is_tool(value: object) -> bool:
    """Whether `value` looks like a `ToolLike` (a specification and an executor)."""
    return hasattr(value, "specification") and hasattr(value, "aexecute")


def _require_serializable_return(item: ToolLike) -> None:
    from ..tools._function import Tool

    if isinstance(item, Tool) and (problem := item.unserializable_return()) is not None:
        raise TypeError(f"tool {item.name!r}: {problem}")


@dataclass
class _Watched:
    """A registered source whose tools may change, and what the service took from it."""

    source: Any
    names: list[str]
    group: str | Iterable[str] | None
    version: int


def tools_from(source: object) -> list[ToolLike]:
    """The tools `source` holds, as `ToolService.register` reads it.

    Raises:
        TypeError: `source` holds no tool.
    """
    if is_tool(source):
        from ..tools._function import Tool

        if isinstance(source, Tool):
            source.require_bound()  # a method taken from the class: refused now, not per call
        return [source]  # type: ignore[list-item]
    tools = getattr(source, "tools", None)
    if callable(tools) and not inspect.isclass(source):
        return list(tools())
    if inspect.isfunction(source) or inspect.ismethod(source):
        from ..tools._function import tool

        return [tool(source)]
    found = [
        getattr(source, name)
        for name, member in inspect.getmembers(type(source))
        if is_tool(member)
    ]
    if not found:
        raise TypeError(
            f"{source!r} is not a tool, a function, a tool source, or an object with @tool methods"
        )
    return found
