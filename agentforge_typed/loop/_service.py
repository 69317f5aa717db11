"""`ToolService`: drives model → tools → model until the model gives a final answer.

The loop itself lives in `Run` (`_run`), a state machine free of I/O: a driver asks it for the
next request, feeds it the model's response, executes the calls it plans and feeds the executions
back. `chat`, `achat`, `stream` and `astream` are thin drivers over the same `Run`, so the rules
exist once; the registry they inherit (`_registry`) holds the tools and options.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Generator, Iterable
from contextlib import aclosing
from typing import TYPE_CHECKING, Any, overload

from typing_extensions import TypeForm, TypeVar, Unpack

from .._messages import ChatMessage
from .._model import ChatModel
from .._records import ToolExecution
from .._request import ChatRequestParameters
from ..tools._base import DepsT
from ..tools._function import Tool
from ._drivers import (
    adrive,
    aexecute,
    astream_calls,
    drive,
    execute,
)
from ._events import FinalResultEvent, ToolCallEvent, ToolLoopEvent
from ._options import RunOptions
from ._output import OutputSpec
from ._registry import ToolRegistry
from ._results import Outcome
from ._run import Run
from ._stream import RoundReader, no_events
from ._subrun import DEFAULT_MAX_DEPTH, sub_run_tool

logger = logging.getLogger("agentforge_typed")

if TYPE_CHECKING:
    from ._persistence import StoredRun


__all__ = ["ToolService"]


OutputT = TypeVar("OutputT", default=None)


class ToolService(ToolRegistry[DepsT]):
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
            `usage_limits=` replaces them); exceeding one raises `UsageLimitExceededError`.
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
        guardrails: Checks at the run's input, each call's arguments, each result and the final
            output (`input_guardrail`, `call_guardrail`, `result_guardrail`,
            `output_guardrail`; `redact_secrets`, `max_cost_per_call`). A blocked input or
            output raises `GuardrailError`; a blocked call or result is an error the model reads.
        rules: `CallRule`s deciding whether each call runs, waits for approval or is refused;
            the first that matches decides (the order of the whole decision: `CallDecision`).
        store: Where conversations live between runs: a `ConversationStore` (`SQLiteStore`,
            `PostgresStore`, `MemoryStore`), or a URL `store_from_url` reads
            (`"sqlite:///conversations.db"`). A run given `conversation_id=` continues that
            stored conversation, claimed for the run (`ConversationConflictError` while another
            run holds it) and saved at every round boundary; see `agentforge_typed.stores`.
            `None` (default): runs keep nothing.
    """

    # -- a run as a tool -----------------------------------------------------------------------

    @overload
    def as_tool(
        self,
        model: ChatModel,
        *,
        name: str,
        description: str,
        output_type: None = None,
        max_depth: int = DEFAULT_MAX_DEPTH,
    ) -> Tool[..., str]: ...

    @overload
    def as_tool(
        self,
        model: ChatModel,
        *,
        name: str,
        description: str,
        output_type: TypeForm[OutputT],
        max_depth: int = DEFAULT_MAX_DEPTH,
    ) -> Tool[..., OutputT]: ...

    def as_tool(
        self,
        model: ChatModel,
        *,
        name: str,
        description: str,
        output_type: TypeForm[Any] | None = None,
        max_depth: int = DEFAULT_MAX_DEPTH,
    ) -> Tool[..., Any]:
        """A tool whose body is a whole run of this service with `model` (a sub-run): the model
        calling it passes a `task` (the sub-run's prompt); its `output_type`'s value (or, without
        one, its final text) is the result. Register it on another service.

        The sub-run gets the calling run's deps; its usage rolls into the parent's `result.usage`
        and counts against the parent's `UsageLimits` as it is spent (reaching them ends the
        parent with `UsageLimitExceededError`); its stream events come in the parent's stream as
        `SubRunEvent`s marked with their path; cancelling the parent cancels it. Its
        conversation id derives from the parent's and the call's.

        Args:
            model: The model the sub-run talks to.
            name: The tool's name.
            description: What the tool does, for the calling model.
            output_type: The type of the sub-run's `output`, and of the tool's result.
            max_depth: How deep sub-runs may nest under this tool (default 3,
                `DEFAULT_MAX_DEPTH`); a deeper one answers its call with an error.

        Raises:
            ValueError: A registered tool may wait for a decision (approval, an external
                result): a sub-run cannot pause its parent run yet. Or `max_depth` < 1.
        """
        return sub_run_tool(
            self,
            model,
            name=name,
            description=description,
            output_type=output_type,
            max_depth=max_depth,
        )

    # -- the loop ----------------------------------------------------------------------------

    @overload
    def chat(
        self: ToolService[None],
        model: ChatModel,
        messages: str | Iterable[ChatMessage] | None = None,
        parameters: ChatRequestParameters | None = None,
        *,
        deps: None = None,
        output_type: TypeForm[OutputT] = ...,
        **options: Unpack[RunOptions],
    ) -> Outcome[OutputT]: ...

    @overload
    def chat(
        self: ToolService[None],
        model: ChatModel,
        messages: str | Iterable[ChatMessage] | None = None,
        parameters: ChatRequestParameters | None = None,
        *,
        deps: None = None,
        output_type: OutputSpec[OutputT],
        **options: Unpack[RunOptions],
    ) -> Outcome[OutputT]: ...

    @overload
    def chat(
        self,
        model: ChatModel,
        messages: str | Iterable[ChatMessage] | None = None,
        parameters: ChatRequestParameters | None = None,
        *,
        deps: DepsT,
        output_type: TypeForm[OutputT] = ...,
        **options: Unpack[RunOptions],
    ) -> Outcome[OutputT]: ...

    @overload
    def chat(
        self,
        model: ChatModel,
        messages: str | Iterable[ChatMessage] | None = None,
        parameters: ChatRequestParameters | None = None,
        *,
        deps: DepsT,
        output_type: OutputSpec[OutputT],
        **options: Unpack[RunOptions],
    ) -> Outcome[OutputT]: ...

    def chat(
        self,
        model: ChatModel,
        messages: str | Iterable[ChatMessage] | None = None,
        parameters: ChatRequestParameters | None = None,
        *,
        deps: Any = None,
        output_type: TypeForm[Any] | OutputSpec[Any] | None = None,
        **options: Unpack[RunOptions],
    ) -> Outcome[Any]:
        """Run the loop until the model answers without tool calls (or a `ReturnBehavior` ends
        it). Calls run one after another; `messages` is not modified.

        Args:
            model: The model to converse with.
            messages: The conversation so far (a string is one user message). With the
                service's `store` and a `conversation_id`, the new input only, appended to the
                stored history; `None` (or no messages) resumes the stored conversation (its
                paused calls).
            parameters: Request parameters; the registered tools are added to them.
            deps: What tools receive as `ToolContext.deps` (required when the service has a deps
                type).
            output_type: The type of `result.output`, answered through a `final_result` tool (or
                an `OutputSpec` choosing how).
            **options: The run's options (`tools`, `conversation_id`, `approvals`,
                `external_results`, `usage_limits`), documented on `RunOptions`.
        """
        self._refuse_in_event_loop("chat", "await service.achat(...)")
        if self._store is None:
            run = Run(self, model, messages, parameters, deps, output_type, options)
            if not run.resuming:
                return drive(run, model.chat)
            stored = None
        else:
            from ._persistence import claimed

            run, stored = claimed(self, model, messages, parameters, deps, output_type, options)
        with run if stored is None else stored:
            while True:
                planned = run.resumed() or run.on_response(model.chat(run.next_request()))
                if planned is None:
                    return run.result()
                if stored is None:
                    settled = [run.settle(plan, execute(plan)) for plan in planned]
                else:  # each call saved as running before it runs
                    settled = stored.settled(planned, execute)
                if run.finish_round(planned, settled):
                    return run.result()
                if stored is not None:
                    stored.after()

    @overload
    async def achat(
        self: ToolService[None],
        model: ChatModel,
        messages: str | Iterable[ChatMessage] | None = None,
        parameters: ChatRequestParameters | None = None,
        *,
        deps: None = None,
        output_type: TypeForm[OutputT] = ...,
        **options: Unpack[RunOptions],
    ) -> Outcome[OutputT]: ...

    @overload
    async def achat(
        self: ToolService[None],
        model: ChatModel,
        messages: str | Iterable[ChatMessage] | None = None,
        parameters: ChatRequestParameters | None = None,
        *,
        deps: None = None,
        output_type: OutputSpec[OutputT],
        **options: Unpack[RunOptions],
    ) -> Outcome[OutputT]: ...

    @overload
    async def achat(
        self,
        model: ChatModel,
        messages: str | Iterable[ChatMessage] | None = None,
        parameters: ChatRequestParameters | None = None,
        *,
        deps: DepsT,
        output_type: TypeForm[OutputT] = ...,
        **options: Unpack[RunOptions],
    ) -> Outcome[OutputT]: ...

    @overload
    async def achat(
        self,
        model: ChatModel,
        messages: str | Iterable[ChatMessage] | None = None,
        parameters: ChatRequestParameters | None = None,
        *,
        deps: DepsT,
        output_type: OutputSpec[OutputT],
        **options: Unpack[RunOptions],
    ) -> Outcome[OutputT]: ...

    async def achat(
        self,
        model: ChatModel,
        messages: str | Iterable[ChatMessage] | None = None,
        parameters: ChatRequestParameters | None = None,
        *,
        deps: Any = None,
        output_type: TypeForm[Any] | OutputSpec[Any] | None = None,
        **options: Unpack[RunOptions],
    ) -> Outcome[Any]:
        """Async `chat`, with the same arguments: independent calls of a round run concurrently
        (`sequential` tools run alone, in order), and sync tools run in worker threads."""
        if self._store is None:
            run = Run(
                self, model, messages, parameters, deps, output_type, options, asynchronous=True
            )
            return await adrive(run, model.achat, aexecute)
        from ._persistence import aclaimed

        run, stored = await aclaimed(self, model, messages, parameters, deps, output_type, options)
        return await adrive(run, model.achat, aexecute, stored)

    @overload
    def stream(
        self: ToolService[None],
        model: ChatModel,
        messages: str | Iterable[ChatMessage] | None = None,
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
        messages: str | Iterable[ChatMessage] | None = None,
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
        messages: str | Iterable[ChatMessage] | None = None,
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
        messages: str | Iterable[ChatMessage] | None = None,
        parameters: ChatRequestParameters | None = None,
        *,
        deps: DepsT,
        output_type: OutputSpec[OutputT],
        **options: Unpack[RunOptions],
    ) -> Generator[ToolLoopEvent[OutputT], None, None]: ...

    def stream(
        self,
        model: ChatModel,
        messages: str | Iterable[ChatMessage] | None = None,
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
        if self._store is None:
            run, stored = Run(self, model, messages, parameters, deps, output_type, options), None
        else:
            from ._persistence import claimed

            run, stored = claimed(self, model, messages, parameters, deps, output_type, options)
        with run if stored is None else stored:
            progress = run.stream_progress()
            while True:
                reader = RoundReader()
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
                    if stored is not None:
                        stored.before((plan,))
                    settled.append(run.settle(plan, execute(plan)))
                    # Blocking: what the call reported comes when it returns, before its result.
                    yield from progress.take()
                    yield run.result_event(plan, settled[-1])
                if run.finish_round(planned, settled):
                    break
                if stored is not None:
                    stored.after()
            result = run.result()
        # After the run's end (its last save, its release): a consumer may stop at this event.
        yield FinalResultEvent(result)

    @overload
    def astream(
        self: ToolService[None],
        model: ChatModel,
        messages: str | Iterable[ChatMessage] | None = None,
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
        messages: str | Iterable[ChatMessage] | None = None,
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
        messages: str | Iterable[ChatMessage] | None = None,
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
        messages: str | Iterable[ChatMessage] | None = None,
        parameters: ChatRequestParameters | None = None,
        *,
        deps: DepsT,
        output_type: OutputSpec[OutputT],
        **options: Unpack[RunOptions],
    ) -> AsyncGenerator[ToolLoopEvent[OutputT], None]: ...

    async def astream(
        self,
        model: ChatModel,
        messages: str | Iterable[ChatMessage] | None = None,
        parameters: ChatRequestParameters | None = None,
        *,
        deps: Any = None,
        output_type: TypeForm[Any] | OutputSpec[Any] | None = None,
        **options: Unpack[RunOptions],
    ) -> AsyncGenerator[ToolLoopEvent, None]:
        """Async `stream`, with the same arguments: calls run as under `achat`, and each
        `ToolResultEvent` is yielded as soon as its call finishes."""
        stored: StoredRun | None = None
        if self._store is None:
            run = Run(
                self, model, messages, parameters, deps, output_type, options, asynchronous=True
            )
        else:
            from ._persistence import aclaimed

            run, stored = await aclaimed(
                self, model, messages, parameters, deps, output_type, options
            )
        import asyncio  # loaded by then; not at import, for blocking programs

        loop = asyncio.get_running_loop()
        signal = asyncio.Event()  # a call finished, or reported progress

        def wake() -> None:  # tools may report from other threads (an MCP session's loop)
            loop.call_soon_threadsafe(signal.set)

        async with run if stored is None else stored:
            progress = run.stream_progress(wake)
            while True:
                reader = RoundReader()
                async for event in (
                    no_events()
                    if run.resuming
                    else run.streamed(model.astream(await run.anext_request()))
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
                settled: dict[int, ToolExecution] = {}  # recorded in the model's order
                async with aclosing(
                    astream_calls(run, planned, progress, signal, settled, stored)
                ) as events:
                    async for event in events:
                        yield event
                if run.finish_round(planned, [settled[i] for i in range(len(planned))]):
                    break
                if stored is not None:
                    await stored.aafter()
            result = await run.aresult()
        yield FinalResultEvent(result)
