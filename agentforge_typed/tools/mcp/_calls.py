"""One call of an MCP tool, from any thread or event loop, to its result.

The MCP SDK is async-only. Entered with `async with`, the session lives on the caller's event loop
and a call goes to it directly. Entered with `with`, the session runs on a background thread with
its own event loop (an anyio blocking portal), and calls reach it through that portal. Every call
is bounded by the server's `timeout`; a connection lost during a call is an error result unless
the call is safe to send again (`MCPTool.retry_safe`), then sent once more on a new session; an
`input_required` result is answered (`_questions`) and the call sent again.

`ServerCalls` is the base of `MCPServer` that does this."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ..._messages import ToolCall
from ..._records import ToolExecutionResult
from ..._sync import running_loop
from .._base import ContentURLs, ToolContext
from .._outcomes import execution_error_result, failure_result, timeout_result
from ._connection import Connection, Held, ListedTool, SessionHolder
from ._questions import MAX_INPUT_ROUNDS, Flight, OpenCall, Resend, scope_of
from ._results import OutputSchema, OutputType, amap_call_result
from ._session import call_tool, describe, is_connection_lost, url_required
from ._tasks import call_as_task

if TYPE_CHECKING:
    from mcp import ClientSession

    from .._scope import Scope

__all__ = ["RemoteTool", "ServerCalls"]

logger = logging.getLogger("agentforge_typed.mcp")

_PORTAL_GRACE = 5.0
"""Extra seconds a blocking caller waits for the portal beyond the call's own timeout."""
_STATE_ONLY_FIRST_DELAY = 0.05
"""Seconds before sending a call again when its server only asked for its state back; doubled
each time, up to `_STATE_ONLY_MAX_DELAY`."""
_STATE_ONLY_MAX_DELAY = 0.25


class RemoteTool(ListedTool, Protocol):
    """What a call reads of the tool it calls (an `MCPTool`)."""

    remote_name: str
    output_schema: OutputSchema | None
    as_task: bool

    @property
    def name(self) -> str: ...

    @property
    def retry_safe(self) -> bool: ...


CallT = TypeVar("CallT", bound=RemoteTool)


class ServerCalls(SessionHolder[CallT]):
    """Sends the calls of an entered server's tools."""

    timeout: float
    idempotency_key_meta: str | None
    content_urls: ContentURLs
    _connection: Connection[CallT] | None
    _max_result: int
    _output_types: dict[str, OutputType]

    @property
    def _deadline(self) -> float:
        """How long a caller outside the session's loop waits: a reconnection and two tries at
        most (the inner deadlines end it first), plus the portal's grace."""
        return self.connect_timeout + 2 * self.timeout + _PORTAL_GRACE

    def _call_blocking(
        self, tool: CallT, call: ToolCall, arguments: dict[str, Any], context: ToolContext[Any]
    ) -> ToolExecutionResult:
        connection = self._connection
        if connection is None:
            return _not_connected(tool)
        if connection.portal is None and running_loop() is connection.loop:
            return execution_error_result(
                tool.name,
                "the MCP server was entered with `async with`; "
                "call it with `aexecute` (or from another thread)",
            )
        future = self._submit(connection, tool, call, arguments, context)
        try:
            return future.result(self._deadline)
        except concurrent.futures.TimeoutError:
            future.cancel()
            return timeout_result(tool.name, self.timeout)
        except BaseException:  # KeyboardInterrupt: the call stops with its caller
            future.cancel()
            raise

    async def _call_async(
        self, tool: CallT, call: ToolCall, arguments: dict[str, Any], context: ToolContext[Any]
    ) -> ToolExecutionResult:
        connection = self._connection
        if connection is None:
            return _not_connected(tool)
        if connection.portal is None and connection.loop is asyncio.get_running_loop():
            return await self._acall(connection, tool, call, arguments, context)
        future = self._submit(connection, tool, call, arguments, context)
        wrapped = asyncio.wrap_future(future)
        try:
            done, _ = await asyncio.wait({wrapped}, timeout=self._deadline)
        except BaseException:  # cancelled: the call stops with its caller
            future.cancel()
            raise
        if not done:
            future.cancel()
            return timeout_result(tool.name, self.timeout)
        return wrapped.result()

    def _submit(
        self,
        connection: Connection[CallT],
        tool: CallT,
        call: ToolCall,
        arguments: dict[str, Any],
        context: ToolContext[Any],
    ) -> concurrent.futures.Future[ToolExecutionResult]:
        """Start the call on the session's loop, from outside that loop."""
        if connection.portal is not None:
            return connection.portal.start_task_soon(
                self._acall, connection, tool, call, arguments, context
            )
        assert connection.loop is not None
        return asyncio.run_coroutine_threadsafe(
            self._acall(connection, tool, call, arguments, context), connection.loop
        )

    async def _acall(
        self,
        connection: Connection[CallT],
        tool: CallT,
        call: ToolCall,
        arguments: dict[str, Any],
        context: ToolContext[Any],
    ) -> ToolExecutionResult:
        """Runs on the session's loop. A call resuming with the user's answer gives it to its
        waiting request; a call that may pause on a question is sent apart from the run (see
        `_questions`); any other is sent here."""
        scope = scope_of(context) if context.may_pause else None
        resend = None
        if context.answer is not None:
            resumed = await self._desk.resume(call, tool.name, context.answer, scope)
            if not isinstance(resumed, Resend):
                return resumed
            resend = resumed
        live = connection.live
        opened = None
        if scope is not None and live is not None:
            opened = self._desk.open(call, scope)
        if opened is None or scope is None or live is None:
            return await self._call(connection, tool, call, arguments, context, None, resend)
        send = (opened, connection, tool, call, arguments, context, resend)
        live.owner.start_soon(self._call_apart, *send)
        return await self._desk.next(call, opened, scope)

    async def _call_apart(
        self,
        opened: OpenCall,
        connection: Connection[CallT],
        tool: CallT,
        call: ToolCall,
        arguments: dict[str, Any],
        context: ToolContext[Any],
        resend: Resend | None,
    ) -> None:
        import anyio

        try:
            with anyio.CancelScope() as stop:
                opened.started(stop)
                opened.outcome = await self._call(
                    connection, tool, call, arguments, context, opened, resend
                )
            if stop.cancelled_caught:
                opened.outcome = execution_error_result(
                    tool.name, "the call was cancelled: its run ended without it"
                )
        except Exception as exc:  # a task of the server's task group: nothing may escape
            opened.outcome = failure_result(tool.name, exc)
        finally:
            opened.changed.set()

    async def _call(
        self,
        connection: Connection[CallT],
        tool: CallT,
        call: ToolCall,
        arguments: dict[str, Any],
        context: ToolContext[Any],
        opened: OpenCall | None,
        resend: Resend | None = None,
    ) -> ToolExecutionResult:
        """Maps every outcome of one call to a result.

        A session known to be gone is replaced before the call (nothing was sent). A connection
        lost during the call is an error result, unless the call is safe to send again: then,
        if this call did not reconnect already, once more on a new session.
        """
        live = connection.live
        if connection.closed_reason is not None or live is None:
            return execution_error_result(tool.name, connection.closed_reason or "not connected")
        reconnected = not live.held.usable()
        held = await self._usable_session(live)
        if isinstance(held, str):
            return execution_error_result(tool.name, held)
        meta = None
        if self.idempotency_key_meta is not None:
            meta = {self.idempotency_key_meta: context.idempotency_key}
        scope = scope_of(context) if context.may_pause else None
        progress = _progress_callback(context)
        send = _Send(tool, call, arguments, meta, progress, context.may_pause, scope)
        flow_failures = self._refusal.flow_failures if self._refusal is not None else 0
        outcome = await self._send(held, send, opened, resend)
        if not isinstance(outcome, Exception):
            await self._settle_listing(live)
            return outcome
        refusal = self._refusal
        if refusal is not None and refusal.flow_failures > flow_failures:
            # The authorization flow failed, ending the transport: nothing reached the server.
            assert refusal.flow_error is not None
            return failure_result(tool.name, self._explain(refusal.flow_error))
        if reconnected or not tool.retry_safe or tool.as_task:
            why = ""
            if tool.as_task:  # a second task would run beside the first, which may go on
                why = "; not sent again, as its task may still run on the server"
            elif not tool.retry_safe:
                why = "; not sent again, as it may have taken effect"
            return execution_error_result(
                tool.name,
                f"the connection to the MCP server was lost during the call ({held.lost}){why}",
                exception=outcome,
            )
        retry = await self._usable_session(live)
        if isinstance(retry, str):
            return execution_error_result(tool.name, retry, exception=outcome)
        again = await self._send(retry, send, opened, resend)
        if isinstance(again, Exception):
            return execution_error_result(
                tool.name,
                f"the connection to the MCP server was lost during the call, twice ({retry.lost})",
                exception=again,
            )
        return again

    async def _send(
        self, held: Held[CallT], send: _Send, opened: OpenCall | None, resend: Resend | None
    ) -> ToolExecutionResult | Exception:
        """One call on `held`'s session (`tools/call`, sent again for each `input_required`
        result it gets): a result, or the exception that says the connection was lost (and
        marks `held` lost)."""
        import anyio

        tool = send.tool
        flight = Flight(opened, "" if opened is not None else _cannot_pause(send))
        held.flights.add(flight)
        try:
            # On the deadline (or when its caller is cancelled) the SDK sends
            # `notifications/cancelled` for the request as it unwinds, so the server stops the
            # call rather than running it to no one.
            with anyio.CancelScope(deadline=anyio.current_time() + self.timeout) as deadline:
                flight.stop = deadline
                if opened is not None:  # a question sets the deadline aside while it waits
                    opened.deadline = deadline
                result = await self._follow(held.session, send, resend)
            if flight.refused:  # a question that must reach no one ended it
                return execution_error_result(tool.name, flight.refused)
            if deadline.cancelled_caught:
                return timeout_result(tool.name, self.timeout)
        except Exception as exc:
            if not is_connection_lost(exc):
                return failure_result(tool.name, self._explain(exc))
            held.lost = describe(exc)
            logger.warning("MCP server %s: connection lost: %r", self.label, exc)
            return exc
        finally:
            held.flights.discard(flight)
        if isinstance(result, ToolExecutionResult):
            return result
        return await amap_call_result(
            tool.name,
            result,
            self._max_result,
            tool.output_schema,
            self._output_types.get(tool.remote_name),
            self.content_urls,
        )

    async def _follow(
        self, session: ClientSession, send: _Send, resend: Resend | None
    ) -> dict[str, Any] | ToolExecutionResult:
        """The call's result (wire form) once no `input_required` result comes any more, or
        what the desk makes of one (a pending question, an error)."""
        import anyio

        delay = _STATE_ONLY_FIRST_DELAY
        for _ in range(MAX_INPUT_ROUNDS + 1):
            try:
                if send.tool.as_task:
                    result = await call_as_task(
                        session,
                        send.tool.remote_name,
                        send.arguments,
                        progress=send.progress,
                        meta=send.meta,
                    )
                else:
                    result = await call_tool(
                        session,
                        send.tool.remote_name,
                        send.arguments,
                        progress=send.progress,
                        meta=send.meta,
                        resend=resend,
                    )
            except Exception as exc:
                required = url_required(exc)
                if required is None:
                    raise
                return self._desk.required(
                    send.call,
                    send.tool.name,
                    required,
                    scope=send.scope if send.may_pause else None,
                    cannot=_cannot_pause(send),
                )
            if result.get("resultType") != "input_required":
                return result
            step = self._desk.settle(
                send.call, send.tool.name, result, may_pause=send.may_pause, scope=send.scope
            )
            if isinstance(step, ToolExecutionResult):
                return step
            if not step.responses:  # the server only wants its state back: back off a little
                await anyio.sleep(delay)
                delay = min(2 * delay, _STATE_ONLY_MAX_DELAY)
            resend = step
        return execution_error_result(
            send.tool.name,
            f"the server answered input_required more than {MAX_INPUT_ROUNDS} times",
        )


@dataclass(frozen=True)
class _Send:
    """What one call sends, however many times."""

    tool: RemoteTool
    call: ToolCall
    arguments: dict[str, Any]
    meta: Any
    progress: Any
    may_pause: bool
    scope: Scope | None
    """Where a question the call pauses on is remembered (`None`: not in this process)."""


def _cannot_pause(send: _Send) -> str:
    """Why a call sent in line cannot take a question asked mid-call."""
    if not send.may_pause:
        return "it runs outside a ToolService run, with no way to pause for the user"
    if send.scope is None:
        return "it has no conversation to keep its open request in"
    return "its conversation has the same call waiting on a question already"


def _not_connected(tool: RemoteTool) -> ToolExecutionResult:
    return execution_error_result(tool.name, "the MCP server is not connected")


def _progress_callback(context: ToolContext[Any]) -> Any:
    """The SDK's progress callback for a call, forwarding to `context.report_progress`; `None`
    (no progress token sent) when no one listens."""
    report = context.on_progress
    if report is None:
        return None

    async def forward(progress: float, total: float | None, message: str | None) -> None:
        report(progress, total, message)

    return forward
