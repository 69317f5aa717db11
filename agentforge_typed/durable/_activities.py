"""The activities a worker runs for a durable service: the model call (`model_activity`, the
provider's own retries off: Temporal retries the activity) and one per tool (`tool_activity`:
the tool body with its deps, heartbeats, result budget and content fit)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter, ValidationError
from temporalio import activity
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

from .._exceptions import AgentForgeError, ModelError
from .._model import ChatModel
from .._request import ChatRequest
from ..providers._base import HttpChatModel, with_max_retries
from ..providers._fallback import FallbackModel
from ..providers._retry import RetryPolicy as HttpRetryPolicy
from ..tools._base import ToolContext, ToolLike
from ..tools._budget import fit_result, within_budget
from ._payloads import ToolActivityInput, ToolActivityResult, bounded_payload, encoded

if TYPE_CHECKING:
    pass

__all__ = ["model_activity", "tool_activity", "without_retries"]


def tool_activity(
    tool: ToolLike,
    name: str,
    *,
    heartbeat: timedelta | None,
    deps_adapter: TypeAdapter[Any] | None,
    resolve: Callable[[Any], Any] | None,
    limit: int,
    budget: int | None,
    fit: Any,
) -> Callable[..., Any]:
    """The activity `name` that runs `tool`'s body: `deps` validated back into their type
    (`deps_adapter`) and resolved (`resolve`), the result cut to the service's `budget`,
    its content fitted to the model (`fit`), and over `limit` bytes encoded an error
    result."""

    @activity.defn(name=name)
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
        async with heartbeating(heartbeat):
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
        return bounded_payload(travelling, tool.name, limit, activity.payload_converter())[1]

    return run_tool


def model_activity(name: str, model: ChatModel, limit: int) -> Callable[..., Any]:
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
        raw, size = encoded(response, activity.payload_converter())
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


def without_retries(model: ChatModel) -> ChatModel:
    """A copy of an HTTP model that does not retry by itself (Temporal retries the activity),
    a `FallbackModel` of such copies (it falls back at the first failure, and Temporal retries
    the whole chain); any other model as it is."""
    if isinstance(model, FallbackModel):
        models = [without_retries(each) for each in model.models]
        return FallbackModel(*models, fallback_on=model.fallback_on)
    if not isinstance(model, HttpChatModel):
        return model
    return with_max_retries(model, 0)


@asynccontextmanager
async def heartbeating(timeout: timedelta | None) -> AsyncIterator[None]:
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
