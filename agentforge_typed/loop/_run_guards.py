"""The points where a run's guardrails check it (`ToolService(guardrails=...)`), as `Run` takes
them: its input (before the first model call, or alongside it when declared `concurrent`), each
result before the model reads it, and the final output. The checks themselves (what a guardrail
is, how a verdict is judged) live in `_guardrails`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Sequence
from typing import TYPE_CHECKING, Any

from .._exceptions import GuardrailError
from .._records import PendingResult, ToolExecution
from .._response import ChatResponse
from ._guardrails import Block, Guardrail, Redact, RunOutput, achecked, guarded_result, judge

if TYPE_CHECKING:
    from .._messages import ChatMessage
    from ._approval import ApprovalState
    from ._registry import ToolRegistry
    from ._results import Outcome
    from ._tracing import RunTrace

__all__ = ["RunGuards"]


class RunGuards:
    """`Run`'s guardrail points (a part of `Run`, apart for its size)."""

    __slots__ = ("concurrent", "output_checked")

    concurrent: tuple[Guardrail[Any], ...]
    """The input guardrails declared `concurrent`, run alongside the first model call."""
    output_checked: bool
    """Whether the output guardrails passed the final answer (they run once)."""

    if TYPE_CHECKING:
        service: ToolRegistry[Any]
        messages: list[ChatMessage]
        trace: RunTrace | None
        _approval: ApprovalState | None
        responses: list[ChatResponse]
        output_value: Any

        def result(self) -> Outcome[Any]: ...

        def is_output(self, plan: Any) -> bool: ...

    def streamed(self, events: AsyncIterator[Any]) -> AsyncIterator[Any]:
        """`events`, the model's stream; with `concurrent` input guardrails, held back until they
        allow the input (a block closes the stream and raises `GuardrailError`)."""
        if not self.concurrent:
            return events
        checks, self.concurrent = self.concurrent, ()
        return self._held(events, checks)

    async def _acheck_input(self, checks: Sequence[Guardrail[Any]]) -> None:
        for guardrail in checks:
            self._stop_on("input", guardrail, *await achecked(guardrail, self.messages))

    async def _alongside(
        self, answer: Awaitable[ChatResponse], checks: Sequence[Guardrail[Any]]
    ) -> ChatResponse:
        import asyncio

        model = asyncio.ensure_future(answer)
        try:
            await self._acheck_input(checks)
        except BaseException:
            model.cancel()
            await asyncio.wait([model])
            if not model.cancelled():
                model.exception()  # retrieved: the block is what the run ends with
            raise
        return await model

    async def _held(
        self, events: AsyncIterator[Any], checks: Sequence[Guardrail[Any]]
    ) -> AsyncIterator[Any]:
        import asyncio

        verdict = asyncio.ensure_future(self._acheck_input(checks))
        held: list[Any] = []
        try:
            async for event in events:
                if not verdict.done():
                    held.append(event)
                    continue
                verdict.result()  # raises when the input was blocked
                for waiting in held:
                    yield waiting
                held.clear()
                yield event
            await verdict
            for waiting in held:
                yield waiting
        finally:
            if not verdict.done():
                verdict.cancel()
            elif not verdict.cancelled():
                verdict.exception()  # retrieved, whether it raised here or the stream closed first
            close = getattr(events, "aclose", None)
            if close is not None:
                await close()

    async def aguard_result(self, plan: Any, execution: ToolExecution) -> ToolExecution:
        """`execution` past the result guardrails, under an async run (before `settle`)."""
        guards = self.service.guardrails
        if guards is None or not guards.result or not self._guarded(plan, execution):
            return execution
        for guardrail in guards.result:
            execution = self._redacted(execution, guardrail, *await achecked(guardrail, execution))
        return execution

    def _guarded(self, plan: Any, execution: ToolExecution) -> bool:
        """Whether the model reads `execution`'s result now (not a call that waits, nor the
        output tool's, which the output guardrails check)."""
        return type(execution.result) is not PendingResult and not self.is_output(plan)

    def _redacted(
        self,
        execution: ToolExecution,
        guardrail: Guardrail[Any],
        verdict: object,
        error: BaseException | None,
    ) -> ToolExecution:
        judged = judge(guardrail, verdict, error)
        if judged is None:
            return execution
        assert isinstance(judged, Block | Redact)
        guarded = guarded_result(execution, guardrail.name, judged, error)
        if self.trace is not None:
            self.trace.guardrail(guardrail.name, "result", guarded.guardrails[-1].action)
        return guarded

    def _stop_on(
        self,
        point: str,
        guardrail: Guardrail[Any],
        verdict: object,
        error: BaseException | None,
    ) -> None:
        """Raise `GuardrailError` when `guardrail` blocks the run's input or output."""
        judged = judge(guardrail, verdict, error)
        if judged is None:
            return
        if self.trace is not None:
            self.trace.guardrail(guardrail.name, point, "blocked")
        raise GuardrailError(guardrail.name, point, judged.reason) from error

    def _final(self) -> RunOutput | None:
        """What the output guardrails check, once, when the run ends with an answer (not when
        it pauses on calls that wait)."""
        guards = self.service.guardrails
        if guards is None or not guards.output or self.output_checked:
            return None
        self.output_checked = True
        if self._approval is not None and self._approval.pending:
            return None
        text = self.responses[-1].ai_message.text if self.responses else None
        return RunOutput(text, self.output_value, tuple(self.messages))

    async def aresult(self) -> Outcome[Any]:
        """`result`, the output guardrails awaited (the async drivers)."""
        final = self._final()
        if final is not None:
            assert self.service.guardrails is not None
            for guardrail in self.service.guardrails.output:
                self._stop_on("output", guardrail, *await achecked(guardrail, final))
        return self.result()
