"""A run as a tool (`ToolService.as_tool`): a tool whose body is a whole run of another service.

The call's `task` is the sub-run's prompt; its typed output (or its final text) is the result.
The sub-run is tied to the run that called it through the call's context (`ToolContext.run_scope`
is that run's): its usage rolls into the parent's `result.usage`, and its spending counts
against the parent's `UsageLimits` as it happens (`RunBudget`): a sub-run cannot spend past its
parent's limits, and when it reaches them the parent run ends with `UsageLimitExceededError`. Its
stream events come in the parent's stream as `SubRunEvent`s marked with their path; cancelling
the parent cancels it (it is awaited inside the call); its conversation id is derived from the
parent's and the call's, so nothing of it meets another conversation's; depth is bounded.

A call inside a sub-run that waits (for approval, an external result, an answer) pauses the
parent: the sub-run's call waits (`PendingResult.sub_run`), the parent's `result.pending` names
the calls inside with their path (`PendingCall.key`), and the message the parent paused on
records the sub-run's history (`PAUSED_CALLS`, under its digest). Resuming the parent with
decisions keyed so runs that call again, which resumes the sub-run from that history with them
(`SubRunResume`). Where the caller cannot pause (a tool run directly), it answers its call with
an error saying so (the call inside did not run).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from typing import TYPE_CHECKING, Any

from .._identity import random_id
from .._messages import ToolCall
from .._records import PendingResult, SubRunPause, SubRunResume, ToolExecutionResult, ToolFailed
from .._response import TokenUsage
from ..tools._base import ToolContext
from ..tools._function import Tool, _awaited
from ..tools._outcomes import failure_result, success_result
from ._events import FinalResultEvent, SubRunEvent
from ._run import Run
from ._usage import RunBudget

if TYPE_CHECKING:
    from .._model import ChatModel
    from ._progress import ProgressSink

__all__ = ["DEFAULT_MAX_DEPTH", "SubRunError", "sub_run_tool"]

DEFAULT_MAX_DEPTH = 3
"""How deep sub-runs nest by default: a run's sub-run's sub-run's sub-run is refused."""


class SubRunError(Exception):
    """A sub-run could not give its call a result: too deep, or it paused where its caller
    cannot pause. Its call is answered with an error the model reads."""


class SubRunTool(Tool[..., Any]):
    """The tool behind `ToolService.as_tool`: its body a sub-run, its call waiting when the
    sub-run pauses (validated, and its context made, as any tool's)."""

    sub_service: Any
    """The service the sub-run runs."""

    def check_resume(
        self,
        call: ToolCall,
        conversation_id: str | None,
        paused: Any,
        approvals: dict[str, Any],
        external_results: dict[str, Any],
    ) -> None:
        """Refuse, before anything of the parent runs, the decisions on the calls inside the
        sub-run that it would refuse as it resumes (see `ApprovalState.decide`): its recorded
        history's calls, or, when its store keeps it, the calls recorded at the pause.

        Raises:
            ValueError, TypeError, ToolArgumentsError: As the sub-run's resume would.
        """
        from ._approval import ApprovalState

        state = ApprovalState(approvals, external_results, asynchronous=True)
        if paused.messages is None:
            state.check_recorded(paused.pending or ())
            return
        if conversation_id is None:  # no run to derive the sub-run's conversation from
            return
        service = self.sub_service
        child = sub_conversation(conversation_id, self.name, call.id)
        for inner in state.unanswered(list(paused.messages), child, service._digests):
            state.decide(inner, service._tools.get(inner.name), child)

    async def _abody(
        self,
        fields: dict[str, Any],
        repairs: tuple[str, ...],
        call: ToolCall,
        context: ToolContext[Any] | None,
        deps: Any,
    ) -> ToolExecutionResult:
        context = self._context(call, context, deps)  # made when none is given: `body` takes one
        try:
            value = await self._function(fields["task"], context)
        except BaseException as exc:  # all but the uncontained: see `failure_result`
            return failure_result(self.name, exc, repairs)
        if isinstance(value, SubRunPause):
            return PendingResult(_WAITING, sub_run=value)
        return success_result(value, repairs, self._convert, self._max_result)

    def _body(
        self,
        fields: dict[str, Any],
        repairs: tuple[str, ...],
        call: ToolCall,
        context: ToolContext[Any] | None,
        deps: Any,
    ) -> ToolExecutionResult:
        return _awaited(self._abody(fields, repairs, call, context, deps))


_WAITING = "Awaiting decisions on calls inside the sub-run."


def sub_run_tool(
    service: Any,
    model: ChatModel,
    *,
    name: str,
    description: str,
    output_type: Any = None,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> Tool[..., Any]:
    """The tool behind `ToolService.as_tool` (see there)."""
    if isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < 1:
        raise ValueError(f"max_depth must be a positive int, got {max_depth!r}")

    async def body(task: str, context: ToolContext[Any]) -> Any:
        return await _sub_run(service, model, task, context, output_type, max_depth)

    body.__annotations__ = {
        "task": str,
        "context": ToolContext[Any],
        "return": str if output_type is None else output_type,
    }
    body.__doc__ = (
        f"{description}\n\nArgs:\n    task: What to do, in full: it sees nothing else of this "
        "conversation."
    )
    body.__qualname__ = body.__name__ = name
    tool = SubRunTool(body, name=name, description=description)
    tool.sub_service = service
    return tool


def _parent(context: ToolContext[Any]) -> Run | None:
    """The run that made the call: `run_scope` is its bound `Run.scope` (`None` outside one)."""
    parent = getattr(context.run_scope, "__self__", None)
    return parent if isinstance(parent, Run) else None


def _conversation(context: ToolContext[Any]) -> str:
    """The sub-run's conversation id: the same for the same call of the same conversation (a
    resumed parent's), apart for any other."""
    if context.conversation_id is None:
        return random_id()
    return sub_conversation(context.conversation_id, context.tool_name, context.tool_call_id)


def sub_conversation(conversation_id: str, tool_name: str, call_id: str) -> str:
    """The conversation id of the sub-run that the call `call_id` of tool `tool_name` started in
    the conversation `conversation_id`."""
    parts = ["agentforge-subrun/1", conversation_id, tool_name, call_id]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:32]


async def _sub_run(
    service: Any,
    model: ChatModel,
    task: str,
    context: ToolContext[Any],
    output_type: Any,
    max_depth: int,
) -> Any:
    parent = _parent(context)
    options: dict[str, Any] = {"conversation_id": _conversation(context)}
    budget: RunBudget | None = None
    sink: ProgressSink | None = None
    if parent is not None:
        limits = parent.limits
        if type(limits) is RunBudget:
            budget = limits
        else:
            budget = parent.limits = RunBudget(limits, None, 0)
        depth = budget.depth + 1
        if budget.max_depth is not None:
            max_depth = min(max_depth, budget.max_depth)
        if depth > max_depth:
            raise SubRunError(
                f"sub-runs nest at most {max_depth} deep (max_depth); this one would be {depth} "
                "deep: answer without it"
            )
        options["usage_limits"] = RunBudget(
            service.usage_limits, (budget, parent), depth, max_depth
        )
        if parent.progress is not None and parent.progress.waiting is not None:
            sink = parent.progress
    prompt: Any = task
    resume = context.answer
    if isinstance(resume, SubRunResume):
        prompt = [] if resume.messages is None else list(resume.messages)
        failed = {key: ToolFailed(message) for key, message in resume.failed.items()}
        options["approvals"] = resume.approvals or None
        options["external_results"] = {**resume.external_results, **failed} or None
    try:
        if sink is None:
            result = await service.achat(
                model, prompt, deps=context.deps, output_type=output_type, **options
            )
        else:
            result = None
            stream = service.astream(
                model, prompt, deps=context.deps, output_type=output_type, **options
            )
            async with contextlib.aclosing(stream):
                async for event in stream:
                    if isinstance(event, FinalResultEvent):
                        result = event.result
                    sink.forward(SubRunEvent.of(context.tool_name, context.tool_call_id, event))
            assert result is not None
    except BaseException as error:
        usage = getattr(error, "usage", None)
        if budget is not None and isinstance(usage, TokenUsage):
            budget.sub.usage += usage
        raise
    if budget is not None:
        budget.sub.usage += result.usage
    if result.pending:
        if context.may_pause:
            messages = None if service.store is not None else tuple(result.messages)
            return SubRunPause(tuple(result.pending), messages)
        waiting = result.pending[0]
        raise SubRunError(
            f"the sub-run paused on call {waiting.call.id!r} ({waiting.call.name}) for "
            f"{waiting.reason}, and its caller cannot pause (it is not a ToolService run): "
            "that call did not run"
        )
    return result.output if output_type is not None else (result.text or "")
