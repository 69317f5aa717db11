"""The run state machine, free of I/O: `Run` says what to send the model next, takes its
response, plans the calls (`Planned`: the tool to run, or the result already decided) and takes
their executions back; a driver (`_drivers`, `_service`, the durable driver) does the I/O.
Every driver runs the same `Run`, so the loop's rules exist once."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from typing_extensions import TypeForm

from .._exceptions import (
    AgentForgeError,
    ArgumentProblem,
    ToolArgumentsError,
    ToolExecutionError,
    ToolLoopLimitError,
    UnknownToolError,
)
from .._identity import CallIds
from .._messages import AiMessage, ChatMessage, ToolCall, ToolResultMessage, UserMessage, shown_name
from .._records import (
    ALLOWED,
    Approval,
    CallDecision,
    ErrorKind,
    GuardrailOutcome,
    PendingResult,
    ToolExecution,
    ToolExecutionResult,
    unanswered_calls,
)
from .._request import ChatRequest, ChatRequestParameters
from .._response import NO_USAGE, ChatResponse, FinishReason, TokenUsage
from ..providers import _tracing as model_tracing
from ..tools._base import ReturnBehavior, ToolContext, ToolLike, is_external, may_wait, run_context
from ..tools._budget import DEFAULT_MAX_RESULT_CHARS, ContentFit, fit_result, within_budget
from ._conversation import (
    carry,
    conversation,
    not_awaitable,
    owner,
    refuse_cut_off,
    result_message,
)
from ._cost import priced
from ._decisions import (
    HOOK_ANSWERED,
    HOOK_REFUSED,
    SELECTION,
    by_person,
    check_rules,
    first_match,
    held_by,
    validated,
)
from ._events import OutputCallEvent, ToolResultEvent
from ._guardrails import (
    GUARDING,
    CallCheck,
    Guardrail,
    achecked,
    checked,
    judge,
    refused_call,
)
from ._history import aprocess, process
from ._options import RUN_OPTIONS, RunOptions
from ._output import OutputSpec, OutputValidationError
from ._progress import ProgressSink
from ._registry import ToolRegistry
from ._results import Outcome, outcome
from ._run_guards import RunGuards
from ._usage import exceeded_below, spent_below

logger = logging.getLogger("agentforge_typed")

if TYPE_CHECKING:
    from ..tools._scope import Scope
    from ._approval import ApprovalState, Decided
    from ._tracing import RunTrace

__all__ = ["Planned", "Run", "as_result"]


def as_result(
    value: ToolExecutionResult | str, error_kind: ErrorKind | None
) -> ToolExecutionResult:
    if isinstance(value, ToolExecutionResult):
        return value
    if error_kind is None:
        return ToolExecutionResult(text=value, value=value)
    return ToolExecutionResult.error(value, error_kind)


@dataclass(slots=True)
class Planned:
    """A call of the current round: the tool to run, or the result already decided for it."""

    index: int
    """The call's position in the model's response."""
    call: ToolCall
    context: ToolContext[Any]
    tool: ToolLike | None
    preset: ToolExecutionResult | None = None
    decision: CallDecision = ALLOWED
    """The decision on the call (recorded on its execution when it settles)."""

    @property
    def sequential(self) -> bool:
        return self.tool is not None and self.tool.sequential


class Run(RunGuards):
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
        "plain",
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
        service: ToolRegistry[Any],
        model: object,
        messages: str | Iterable[ChatMessage] | None,
        parameters: ChatRequestParameters | None,
        deps: Any,
        output_type: TypeForm[Any] | OutputSpec[Any] | None,
        options: RunOptions,
        *,
        asynchronous: bool = False,
    ) -> None:
        if options and not RUN_OPTIONS.issuperset(options):
            # `**options` takes any keyword at run time: a misspelt `usage_limits` must not run
            # the conversation without its limits.
            unknown = next(name for name in options if name not in RUN_OPTIONS)
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
        self.limits = limits = service.usage_limits if limits is None else limits
        self.tool_calls = 0
        self.async_before, self.async_after = service._async_hooks(asynchronous)
        self.messages = messages = conversation(messages)
        if not messages:
            raise ValueError("ToolService.chat needs at least one message")
        self.output = output = None if output_type is None else _output_spec(output_type)
        self.output_value: Any = None
        self.user_parameters = parameters
        self.generation = service._generation
        self.parameters = service._request_parameters(parameters, output)
        self.selection = selection = options.get("tools")
        service._check_deps(deps, selected=selection is not None)
        if service.rules:
            check_rules(service.rules, service._groups)
        self.output_checked = False
        self.concurrent = ()
        self.deps = deps
        # A history that ends with the user's message waits on no call (the common case).
        paused, waiting = (None, ()) if messages[-1].role == "user" else unanswered_calls(messages)
        self.conversation_id = owner(options.get("conversation_id"), paused)
        self.scopes: list[Scope] = []
        """The run's `Scope` once a call asked for it (`ToolContext.scope`): what its calls keep
        beyond themselves, removed when it ends."""
        self.offer = service._offer(selection, deps, self.conversation_id, messages)
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
        self.plain = (
            limits is None
            and output is None
            and self.offer is None
            and self._approval is None
            and service.guardrails is None
            and service.before_tool_call is None
            and service.after_tool_call is None
            and not service.history_processors
            and not service.rules
        )
        """Whether nothing but the calls' tools decides this run (no limits, output type, tool
        selection, approvals given or waited on, guardrails, hooks, history processors, rules,
        nor tracing): checked once here, then each step takes its short way (`_plain_plan`)."""

    def scope(self) -> Scope:
        """The run's `Scope`, made when a call first asks for it (one, whichever thread asks:
        `list.append` is atomic)."""
        scopes = self.scopes
        if not scopes:
            from ..tools._scope import Scope

            scopes.append(Scope(self.conversation_id))
        return scopes[0]

    def resume(
        self, approvals: Mapping[str, Approval] | None, external_results: Mapping[str, Any] | None
    ) -> None:
        """Take the caller's decisions on the calls the history ends with (before the loop, or
        when a paused run gets them); raises `ValueError` for a decision on a call that is not
        pending."""
        from ._approval import ApprovalState  # the approval machinery loads when a run pauses

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
            from ._approval import ApprovalState

            self._approval = ApprovalState(None, None, asynchronous=self.asynchronous)
        return self._approval

    def deferred(self, preset: ToolExecutionResult | None) -> bool:
        """Whether `preset` is the placeholder of a call whose async `requires_approval` is
        still to decide (`approval.ahold`)."""
        approval = self._approval  # only a run with approval state holds a call
        return approval is not None and approval.deferred(preset)

    def check_decision(
        self, call_id: str, approvals: Mapping[str, Approval], external_results: Mapping[str, Any]
    ) -> None:
        """Refuse the decision on `call_id` (in `approvals` or `external_results`; a call inside
        a sub-run: its key) that `resume` would refuse, without taking it: a durable run checks
        each decision as it arrives.

        Raises:
            ValueError, TypeError, ToolArgumentsError: As `resume` would.
        """
        from ._approval import ApprovalState

        state = ApprovalState(approvals, external_results, asynchronous=True)
        calls = state.unanswered(self.messages, self.conversation_id, self.service._digests)
        owner = state.routed.get(call_id, (call_id,))[0]
        for call in calls:
            if call.id == owner:
                state.decide(call, self.service._tools.get(call.name))

    def registered(self, tool: ToolLike) -> bool:
        """Whether `tool` is the service's registered tool of its name (not the output tool, nor
        a tool search's)."""
        return self.service._tools.get(tool.name) is tool

    def resumed(self) -> list[Planned] | None:
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
                by=by_person(decided.result, decided.approved),
                waiting=True,
            )
            for i, decided in enumerate(resuming)
        ]

    def next_request(self) -> ChatRequest:
        """The request for the next model call, its messages through the service's history
        processors (an async one run to completion here: a blocking driver); raises past
        `max_round_trips`."""
        if self.plain:  # nothing checks, processes or traces the messages
            return ChatRequest.of(self.messages, self._next_parameters())
        guards = self.service.guardrails
        if guards is not None and guards.input and self.round_trips == 0:
            for guardrail in guards.input:
                self._stop_on("input", guardrail, *checked(guardrail, self.messages))
        parameters = self._next_parameters()
        processors = self.service.history_processors
        return self._request(
            process(processors, self.messages) if processors else self.messages, parameters
        )

    async def anext_request(self) -> ChatRequest:
        """`next_request` for the async drivers: an async history processor is awaited."""
        if self.plain:
            return ChatRequest.of(self.messages, self._next_parameters())
        guards = self.service.guardrails
        if guards is not None and guards.input and self.round_trips == 0:
            for guardrail in guards.input:
                if guardrail.concurrent:
                    self.concurrent += (guardrail,)
                    continue
                self._stop_on("input", guardrail, *await achecked(guardrail, self.messages))
        parameters = self._next_parameters()
        processors = self.service.history_processors
        messages = await aprocess(processors, self.messages) if processors else self.messages
        return self._request(messages, parameters)

    def answer(
        self, request: Callable[[ChatRequest], Awaitable[ChatResponse]], sent: ChatRequest
    ) -> Awaitable[ChatResponse]:
        """`request(sent)`, the model's answer; with input guardrails declared `concurrent`, they
        run while it is in flight, and it is taken only once they allow the input (a block
        cancels it and raises `GuardrailError`)."""
        if not self.concurrent:
            return request(sent)
        checks, self.concurrent = self.concurrent, ()
        return self._alongside(request(sent), checks)

    def _next_parameters(self) -> ChatRequestParameters:
        service, round_trips = self.service, self.round_trips
        if round_trips >= service.max_round_trips:
            raise ToolLoopLimitError(service.max_round_trips)
        if self.limits is not None:
            self.limits.check_request(round_trips + 1)
        self.round_trips = round_trips + 1
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

    def on_response(self, response: ChatResponse) -> list[Planned] | None:
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
        if response.finish_reason is _LENGTH and self.open_calls:
            refuse_cut_off(self.open_calls)
        if self.limits is not None:
            self.limits.check_tokens(self.usage)
            self.tool_calls += len(self.open_calls)
            self.limits.check_tool_calls(self.tool_calls)
        if self.open_calls:
            plan = self._plain_plan if self.plain else self._plan
            return [plan(i, call) for i, call in enumerate(self.open_calls)]
        if self.output is None:
            return None
        return self._on_final_text(self.output, response.ai_message.text or "")

    def _on_final_text(self, output: OutputSpec[Any], text: str) -> list[Planned] | None:
        # A text answer where structured output is wanted: valid JSON in native mode ends the
        # run; anything else is sent back with a nudge, against the output's retry budget.
        errors: Sequence[ArgumentProblem] = ()
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
        by: CallDecision | None = None,
        waiting: bool = False,
    ) -> Planned:
        """The one decision on a call, in the documented order (`_decisions`): selection, a
        person's decision, the rules, the tool's own policy, the guardrails, the hook.
        `waiting`: a call the history waits on (resumed), not one the model just made."""
        service = self.service
        context = self._context(call, answer)
        tool = service._tools.get(call.name) if self.offer is None else self.offer.lookup(call.name)
        if tool is None and self.output is not None and call.name == self.output.name:
            tool = self.output
        if decided is not None:
            return Planned(index, call, context, tool, decided, by or ALLOWED)
        if tool is None:
            names = list(service._tools) if self.offer is None else self.offer.names()
            answer = service.unknown_tool_handler and service.unknown_tool_handler(call, names)
            if answer is None:
                if waiting and call.name in service._tools:
                    raise UnknownToolError(
                        call.name, names, message=_not_offered(call, names, approved)
                    )
                reason = None
                if call.name in service._tools:
                    reason = f"{call.name!r} is registered but this run's tools= does not offer it"
                raise UnknownToolError(call.name, names, reason)
            return Planned(index, call, context, None, as_result(answer, "unknown_tool"), SELECTION)
        decision = by or ALLOWED
        if service.rules and not approved and tool is not self.output:
            ruled = first_match(
                service.rules, tool, call.name, service._groups, lambda: validated(tool, call)
            )
            if ruled is not None:
                decision = ruled
                if ruled.outcome == "refused":
                    text = f"The call to `{shown_name(call.name)}` was refused"
                    text += f": {ruled.reason}" if ruled.reason else "."
                    refused = ToolExecutionResult.error(text, "denied")
                    return Planned(index, call, context, tool, refused, ruled)
                # An external tool's call waits for its result whatever a rule says.
                approved = not is_external(tool)
                if ruled.outcome == "asked" and approved:
                    held = self.approval.ask(call, tool)
                    if held is not None:
                        return Planned(index, call, context, tool, held, ruled)
        if (
            not approved
            and may_wait(tool)
            and (held := self.approval.hold(call, context, tool)) is not None
        ):
            return Planned(index, call, context, tool, held, held_by(held))
        plan = Planned(index, call, context, tool, None, decision)
        if service.guardrails is None and service.before_tool_call is None:
            return plan  # the common case: nothing more to decide
        return self._admit(plan)

    def _plain_plan(self, index: int, call: ToolCall) -> Planned:
        """`_plan` under a plain run: a registered tool whose calls never wait runs (there is
        nothing else to decide); any other call takes `_plan`."""
        tool = self.service._tools.get(call.name)
        if tool is None or may_wait(tool):
            return self._plan(index, call)
        return Planned(index, call, self._context(call, None), tool)

    def _context(self, call: ToolCall, answer: Any) -> ToolContext[Any]:
        """The `ToolContext` of `call` in this run (`answer`: the user's answer to the question
        it paused on)."""
        name = call.name
        return run_context(
            self.deps,
            call.id,
            name,
            self.failures.get(name, 0) + 1,
            self.conversation_id,
            None if self.progress is None else self.progress.reporter(call),
            True,
            answer,
            self.scope,
        )

    def _admit(self, plan: Planned) -> Planned:
        """`plan`, allowed so far, past the call guardrails (an async one under an async run is
        left to `aadmit`) and the `before_tool_call` hook."""
        guards, tool = self.service.guardrails, plan.tool
        if guards is not None and guards.call and tool is not None and tool is not self.output:
            if self.asynchronous and guards.any_async["call"]:
                plan.preset = GUARDING
                return plan
            valid, arguments = validated(tool, plan.call)
            if valid:
                subject = CallCheck(plan.call, arguments, plan.context, tool)
                for guardrail in guards.call:
                    if self._blocked(plan, guardrail, *checked(guardrail, subject)):
                        return plan
        return self._before(plan)

    async def aadmit(self, plan: Planned) -> Planned:
        """`_admit` for a call whose guardrails include an async one, under an async run."""
        guards = self.service.guardrails
        assert guards is not None and plan.tool is not None
        plan.preset = None
        valid, arguments = validated(plan.tool, plan.call)
        if valid:
            subject = CallCheck(plan.call, arguments, plan.context, plan.tool)
            for guardrail in guards.call:
                if self._blocked(plan, guardrail, *await achecked(guardrail, subject)):
                    return plan
        return self._before(plan)

    @staticmethod
    def guarding(plan: Planned) -> bool:
        """Whether `plan` waits for its call guardrails (`aadmit`)."""
        return plan.preset is GUARDING

    def _blocked(
        self, plan: Planned, guardrail: Guardrail[Any], verdict: object, error: BaseException | None
    ) -> bool:
        judged = judge(guardrail, verdict, error)
        if judged is None:
            return False
        reason = judged.reason
        plan.preset = refused_call(plan.call, guardrail.name, reason)
        if error is not None:
            plan.preset.exception = error
        plan.decision = CallDecision("refused", f"guardrail:{guardrail.name}", reason)
        if self.trace is not None:
            self.trace.guardrail(guardrail.name, "call", "blocked")
        return True

    def _before(self, plan: Planned) -> Planned:
        before = self.service.before_tool_call
        if before is not None and not self.async_before:
            answer = not_awaitable(before(plan.call, plan.context), "before_tool_call")
            if answer is not None:
                self.answered(plan, answer)
        return plan

    @staticmethod
    def answered(plan: Planned, answer: ToolExecutionResult | str) -> None:
        """Take the `before_tool_call` hook's answer for `plan` instead of running it."""
        plan.preset = result = as_result(answer, None)
        plan.decision = HOOK_REFUSED if result.is_error else HOOK_ANSWERED

    def is_output(self, plan: Planned) -> bool:
        """Whether `plan` calls the structured-output tool rather than a registered tool."""
        return self.output is not None and plan.tool is self.output

    def result_event(
        self, plan: Planned, execution: ToolExecution
    ) -> ToolResultEvent | OutputCallEvent:
        if self.is_output(plan):
            return OutputCallEvent(execution)
        return ToolResultEvent(execution)

    def settle(self, plan: Planned, execution: ToolExecution) -> ToolExecution:
        """Apply the result guardrails (under a blocking run: an async run's driver awaits
        `aguard_result` first), the error policies (which may raise) and the `after_tool_call`
        hook to one finished call."""
        decision = plan.decision
        if decision is not execution.decision:
            execution = self._decided(execution, decision)
        guards = self.service.guardrails
        if guards is not None and guards.result and not self.asynchronous:
            if self._guarded(plan, execution):
                for guardrail in guards.result:
                    execution = self._redacted(execution, guardrail, *checked(guardrail, execution))
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
        result = execution.result
        if result.is_error:
            result = self._apply_policy(plan, result)
            if result is not execution.result:
                execution = self.finished[plan.index] = replace(execution, result=result)
        elif plan.preset is None and plan.tool is not None:
            # The budget counts consecutive failures: slips far apart do not add up.
            self.failures.pop(plan.tool.name, None)
        if type(execution.result) is PendingResult:
            # The call waits: it shows (and the history will record) the digest of what waits.
            # A tool that asked a question (an MCP elicitation) waits like a held call, and the
            # run's approval state sets it aside at the end of the round.
            from ._approval import ApprovalState, with_digest

            if self._approval is None:
                self._approval = ApprovalState(None, None, asynchronous=self.asynchronous)
            stamped = with_digest(
                execution.result, self.conversation_id, self.service._digests, execution.call
            )
            execution = self.finished[plan.index] = replace(execution, result=stamped)
        if self.service.after_tool_call is not None and not self.async_after:
            not_awaitable(self.service.after_tool_call(execution), "after_tool_call")
        return execution

    @staticmethod
    def _decided(execution: ToolExecution, decision: CallDecision) -> ToolExecution:
        """`execution` recording `decision` (and a call guardrail's block among its guardrails)."""
        outcomes = execution.guardrails
        if decision.rule.startswith("guardrail:"):
            blocked = GuardrailOutcome(decision.rule[10:], "call", "blocked", decision.reason or "")
            outcomes = (blocked, *outcomes)
        return replace(execution, decision=decision, guardrails=outcomes)

    def _fitted(self, plan: Planned, execution: ToolExecution) -> ToolExecution:
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

    def finish_round(self, planned: Sequence[Planned], settled: Sequence[ToolExecution]) -> bool:
        """Append one result message per call in the model's order; say whether the loop ends
        here (a `ReturnBehavior`, or calls that wait for a decision)."""
        # Only a call that `hold` answered, or a tool that asked a question (an MCP elicitation),
        # can wait, and either made the approval state: without it, every call ran.
        approval = self._approval
        executions, messages = self.executions, self.messages
        for execution in settled if approval is None else approval.set_aside(settled):
            executions.append(execution)
            messages.append(result_message(execution))
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

    def __enter__(self) -> Run:
        self.trace: RunTrace | None = None
        self.progress: ProgressSink | None = None
        # Off (the common case), one lookup: the run tracing is loaded when first switched on.
        if model_tracing.active is not None:
            from ._tracing import run_trace

            self.trace = run_trace(self.conversation_id)
            if self.trace is not None:
                self.progress = ProgressSink(stream=False, record=True)
                self.plain = False  # every step is traced
        return self

    async def __aenter__(self) -> Run:
        return self.__enter__()

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: object
    ) -> None:
        self.__exit__(kind, error, traceback)

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
        """Attach the run so far to `error` (see `carry`). Every call of an unfinished round is
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
        carry(
            error,
            messages=tuple(self.messages),
            tool_executions=tuple(self.executions),
            usage=self._total_usage(),
        )

    def _total_usage(self) -> TokenUsage:
        """The run's usage, priced, with its sub-runs' (`ToolService.as_tool`)."""
        usage = self.usage
        if usage.total_tokens:  # a model that reports none is not priced
            usage = priced(self.model, self.responses, usage)
        below = None if self.limits is None else spent_below(self.limits)
        return usage if below is None else usage + below

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
        self.messages.append(result_message(execution))

    def _apply_policy(self, plan: Planned, result: ToolExecutionResult) -> ToolExecutionResult:
        """The error policies on a failed call's `result` (a call the loop decided has none)."""
        service, kind, tool = self.service, result.error_kind, plan.tool
        if tool is None or plan.preset is not None:
            return result
        if kind in ("arguments", "retry"):
            failures = self.failures[tool.name] = self.failures.get(tool.name, 0) + 1
            error = result.exception
            if kind == "arguments" and service.arguments_error_handler and tool is not self.output:
                if not isinstance(error, ToolArgumentsError):
                    error = ToolArgumentsError(tool.name, [])
                return as_result(service.arguments_error_handler(error, plan.context), "arguments")
            if failures > tool.max_retries:
                if isinstance(error, ToolArgumentsError):
                    raise error
                raise ToolExecutionError(
                    tool.name, f"still failing after {tool.max_retries} retries: {result.text}"
                ) from error
        elif kind == "execution" and (exceeded := exceeded_below(self.limits)) is not None:
            raise exceeded  # a sub-run spent past this run's limits: it ends here
        elif kind == "execution" and service.execution_error_handler is not None:
            exception = result.exception or RuntimeError(result.text)
            return as_result(service.execution_error_handler(exception, plan.context), "execution")
        return result

    def result(self) -> Outcome[Any]:
        """The run's outcome, once the loop has ended: what its calls kept for a resumed run (the
        questions it paused on) outlives it from here. Under a blocking run the output
        guardrails check the answer first (`aresult` awaits them under an async one)."""
        final = None if self.service.guardrails is None else self._final()
        if final is not None:
            assert self.service.guardrails is not None
            for guardrail in self.service.guardrails.output:
                self._stop_on("output", guardrail, *checked(guardrail, final))
        if self.scopes:
            self.scopes[0].close(finished=True)
        return outcome(
            final_response=self.responses[-1] if self.responses else self.approval.final_response(),
            messages=tuple(self.messages),
            tool_executions=tuple(self.executions),
            intermediate_responses=tuple(self.responses[:-1]),
            usage=self._total_usage(),
            returned_immediately=self.returned_immediately,
            output=self.output_value,
            pending=() if self._approval is None else tuple(self._approval.pending),
            conversation_id=self.conversation_id,
        )


_LENGTH = FinishReason.LENGTH  # a module global: an enum member's lookup costs more
_TO_LLM, _IMMEDIATE_IF_LAST = ReturnBehavior.TO_LLM, ReturnBehavior.IMMEDIATE_IF_LAST


def _fit_unknown(parts: Sequence[Any]) -> tuple[tuple[Any, ...], tuple[str, ...]]:
    """`Run.fit` until the model is asked for its own (never called)."""
    raise AssertionError("the model's fit_tool_content was not looked up")


def _returns_now(planned: Sequence[Planned], executions: Sequence[ToolExecution]) -> bool:
    """Stop when every call of the round may end the loop — `IMMEDIATE`, or `IMMEDIATE_IF_LAST`
    as the round's last call — and none of them failed (a failure goes back to the model, which
    must see it)."""
    last = len(planned) - 1
    for index, plan in enumerate(planned):
        behavior = plan.tool.return_behavior if plan.tool is not None else _TO_LLM
        if behavior is _TO_LLM:
            return False
        if behavior is _IMMEDIATE_IF_LAST and index != last:
            return False
    return not any(e.failed for e in executions)


def _output_spec(output_type: TypeForm[Any] | OutputSpec[Any] | None) -> OutputSpec[Any] | None:
    if output_type is None or isinstance(output_type, OutputSpec):
        return output_type
    return OutputSpec(output_type)


def _not_offered(call: ToolCall, offered: Sequence[str], approved: bool) -> str:
    """Why a call the history waits on cannot run: this run's `tools=` leaves its tool out."""
    name = shown_name(call.name)
    what = "was approved" if approved else "waits in the history"
    return (
        f"call {shown_name(call.id)!r} to {name!r} {what}, but this run's tools= does not offer "
        f"{name!r} (it offers: {', '.join(offered) or 'none'}); a call the history waits on runs "
        f"only when its tool is offered: include {name!r} in tools="
        + (", or deny the call" if approved else "")
    )
