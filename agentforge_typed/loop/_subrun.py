"""A run as a tool (`ToolService.as_tool`): a tool whose body is a whole run of another service.

The call's `task` is the sub-run's prompt; its typed output (or its final text) is the result.
The sub-run is tied to the run that called it through the call's context (`ToolContext.run_scope`
is that run's): its usage rolls into the parent's `result.usage`, and its spending counts
against the parent's `UsageLimits` as it happens (`RunBudget`): a sub-run cannot spend past its
parent's limits, and when it reaches them the parent run ends with `UsageLimitExceededError`. Its
stream events come in the parent's stream as `SubRunEvent`s marked with their path; cancelling
the parent cancels it (it is awaited inside the call); its conversation id is derived from the
parent's and the call's, so nothing of it meets another conversation's; depth is bounded.

A call inside a sub-run that would wait (for approval, an external result, an answer) cannot
pause the parent yet: `as_tool` refuses a service with tools that may wait, and a sub-run that
pauses anyway (a policy decided per call, an MCP server's question) answers its call with an
error saying so (the call inside did not run).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from typing import TYPE_CHECKING, Any

from .._identity import random_id
from .._response import TokenUsage
from ..tools._base import ToolContext, may_wait
from ..tools._function import Tool
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
    """A sub-run could not give its call a result: too deep, or it paused on a call. Its call
    is answered with an error the model reads."""


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
    waiting = sorted(tool.name for tool in service._tools.values() if may_wait(tool))
    if waiting:
        raise ValueError(
            f"as_tool: {', '.join(waiting)} may wait for a decision, and a sub-run cannot pause "
            "its parent run yet; run that service on its own, or without those tools"
        )

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
    return Tool(body, name=name, description=description)


def _parent(context: ToolContext[Any]) -> Run | None:
    """The run that made the call: `run_scope` is its bound `Run.scope` (`None` outside one)."""
    parent = getattr(context.run_scope, "__self__", None)
    return parent if isinstance(parent, Run) else None


def _conversation(context: ToolContext[Any]) -> str:
    """The sub-run's conversation id: the same for the same call of the same conversation (a
    resumed parent's), apart for any other."""
    if context.conversation_id is None:
        return random_id()
    parts = [
        "agentforge-subrun/1",
        context.conversation_id,
        context.tool_name,
        context.tool_call_id,
    ]
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
    try:
        if sink is None:
            result = await service.achat(
                model, task, deps=context.deps, output_type=output_type, **options
            )
        else:
            result = None
            stream = service.astream(
                model, task, deps=context.deps, output_type=output_type, **options
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
        waiting = result.pending[0]
        raise SubRunError(
            f"the sub-run paused on call {waiting.call.id!r} ({waiting.call.name}) for "
            f"{waiting.reason}, and a sub-run cannot pause its parent run yet: that call did "
            "not run"
        )
    return result.output if output_type is not None else (result.text or "")
