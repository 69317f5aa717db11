"""A run whose conversation lives in a store: `ToolService(tools, store=...)` and the run's
`conversation_id=`.

The run claims its conversation before anything else (`claimed`: a `ConversationConflictError` at
once while another run holds it, nothing sent and nothing run), starts from the stored history
plus the new input, saves the history at every round boundary — before each batch of calls runs
(naming the calls about to run), after the round's results — and when it ends (with its result,
a pause, or an error that carries its history), then releases the claim. The drivers
(`_service`, `_drivers`) call a `StoredRun` at those points, so the `Run` itself stays free of I/O;
the rules live here (docs/design/stores.md, "The seam").

The record's state document, saved with the messages in the same statement (the store never
looks inside):

    {"format": 1, "running": {"call_3": null, "call_4": "{\\"order\\": 43}"}}

`running` names the calls whose bodies may have started and whose results are not saved (with
the arguments they run with, when an approver's differ from the model's). A run that loads a call
still named there finds it *interrupted* — its process died or its run was cancelled while the
call ran — and runs it again only where that is safe: a tool that says it is `retry_safe`
(`@tool(retry_safe=True)`: it has no effect a second run repeats, or it passes
`ToolContext.idempotency_key`, the same for the call again, to what it calls; an MCP tool that may
be sent again). Any other interrupted call is answered with an error the model reads
(`INTERRUPTED`). A call whose result was saved is never run again.

What a paused call waits for — why, the digest of the call as shown, an MCP question with its key
and state — is in the history already: the message the run paused on records it
(`PAUSED_CALLS`), so a decision given after a restart, in another process, is checked as it would
be in the process that paused.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from typing_extensions import TypeForm

from .._exceptions import ConversationStoreError
from .._identity import PAUSED_CALLS
from .._messages import AiMessage, ChatMessage, ToolCall, ToolResultMessage, shown_name
from .._records import (
    Approval,
    Approved,
    ElicitationAnswer,
    PendingResult,
    ToolExecution,
    unanswered_calls,
)
from .._request import ChatRequestParameters
from ._approval import ApprovalState, PausedCall, paused_record
from ._conversation import conversation, result_message
from ._options import RunOptions
from ._output import OutputSpec
from ._run import Planned, Run

if TYPE_CHECKING:
    from types import TracebackType

    from ..stores import Lease
    from ._registry import ToolRegistry

__all__ = ["INTERRUPTED", "STATE_FORMAT", "StoredRun", "aclaimed", "claimed"]

logger = logging.getLogger("agentforge_typed")

STATE_FORMAT = 1
"""The format of the loop's state document this version writes (and the newest it reads)."""
INTERRUPTED = "interrupted: may or may not have taken effect"
"""What the model reads of a call interrupted while it ran that is not safe to run again."""

Running = dict[str, str | None]
"""The calls a save says are running, by id: the arguments each runs with when they are not the
ones its message holds (an approver's), else `None`."""


def _shown(conversation_id: str) -> str:
    return repr(shown_name(conversation_id))


def _calls(calls: Sequence[ToolCall], most: int = 5) -> str:
    named = ", ".join(repr(shown_name(call.id)) for call in calls[:most])
    more = f" and {len(calls) - most} more" if len(calls) > most else ""
    return f"call{'' if len(calls) == 1 else 's'} {named}{more}"


# -- claiming ------------------------------------------------------------------------------------


def claimed(
    service: ToolRegistry[Any],
    model: object,
    messages: str | Iterable[ChatMessage] | None,
    parameters: ChatRequestParameters | None,
    deps: Any,
    output_type: TypeForm[Any] | OutputSpec[Any] | None,
    options: RunOptions,
) -> tuple[Run, StoredRun | None]:
    """The `Run` of a blocking driver whose service has a store, and its hold on the stored
    conversation (`None` for a run without `conversation_id`: it keeps nothing). The
    conversation is claimed before anything else (`ConversationConflictError` at once while
    another run holds it) and the run starts from its history plus `messages`; a run that
    cannot start gives the claim back."""
    store, conversation_id = service.store, options.get("conversation_id")
    if store is None or conversation_id is None:
        return Run(service, model, messages, parameters, deps, output_type, options), None
    from ..stores import hold

    lease = hold(store, conversation_id)
    try:
        history, options = _started(service, lease, messages, options)
        run = Run(service, model, history, parameters, deps, output_type, options)
    except BaseException:
        _release(lease)
        raise
    return run, StoredRun(lease, run)


async def aclaimed(
    service: ToolRegistry[Any],
    model: object,
    messages: str | Iterable[ChatMessage] | None,
    parameters: ChatRequestParameters | None,
    deps: Any,
    output_type: TypeForm[Any] | OutputSpec[Any] | None,
    options: RunOptions,
) -> tuple[Run, StoredRun | None]:
    """`claimed`, for the async drivers."""
    store, conversation_id = service.store, options.get("conversation_id")
    if store is None or conversation_id is None:
        run = Run(
            service, model, messages, parameters, deps, output_type, options, asynchronous=True
        )
        return run, None
    from ..stores import ahold

    lease = await ahold(store, conversation_id)
    try:
        history, options = _started(service, lease, messages, options)
        run = Run(
            service, model, history, parameters, deps, output_type, options, asynchronous=True
        )
    except BaseException:
        await _arelease(lease)
        raise
    return run, StoredRun(lease, run)


def _started(
    service: ToolRegistry[Any],
    lease: Lease,
    messages: str | Iterable[ChatMessage] | None,
    options: RunOptions,
) -> tuple[list[ChatMessage], RunOptions]:
    """The history the run starts from — the stored one, its interrupted calls settled, plus
    `messages` (the new input; `None` or none at all resumes) — and the run's options as that
    history needs them. Raises before anything runs: `ConversationStoreError` for a state this version did
    not write, `ValueError` for new input while calls wait, or for nothing to run."""
    given = None if messages is None else conversation(messages)
    stored = lease.conversation
    running = _running(stored.id, stored.state)
    history = list(stored.messages)
    paused, unanswered = unanswered_calls(history)
    interrupted = [call for call in unanswered if call.id in running]
    if interrupted:
        options = _settled(service, history, paused, interrupted, running, options)
        paused, unanswered = unanswered_calls(history)
    if given:
        if unanswered:
            raise ValueError(
                f"conversation {_shown(stored.id)} waits on {_calls(unanswered)}: resume it "
                "without new input (with approvals= or external_results= for the calls that wait "
                "on a decision), then continue it"
            )
        history += given
    elif not history:
        raise ValueError(
            f"conversation {_shown(stored.id)} has no stored history to resume: pass the first "
            "messages"
        )
    if paused is not None:
        options = _questions_filled(paused, options)
    return history, options


# -- the run -------------------------------------------------------------------------------------


class StoredRun:
    """One run's hold on its stored conversation, and the saves it makes. The driver enters it
    in place of the run (`with stored:` / `async with stored:` enter and leave the run too) and
    calls `before` and `after` at the round boundaries."""

    __slots__ = ("_running", "_saved", "lease", "run")

    def __init__(self, lease: Lease, run: Run) -> None:
        self.lease = lease
        self.run = run
        self._saved = -1
        """How many messages the last save held."""
        self._running: Running = {}
        """What the last save said is running."""

    def __repr__(self) -> str:
        return f"<StoredRun {self.lease!r}>"

    # -- saving ----------------------------------------------------------------------------------

    def before(self, batch: Sequence[Planned]) -> None:
        """Save the history, naming the calls of `batch` that are about to run: before a call
        body starts, its run holds the conversation, and a crash leaves it known as
        interrupted."""
        running = _about_to_run(self.run, batch)
        if running:
            messages = self._round()
            self.lease.save(messages, _state(running))
            self._saved, self._running = len(messages), running

    async def abefore(self, batch: Sequence[Planned]) -> None:
        """`before`, as a coroutine."""
        running = _about_to_run(self.run, batch)
        if running:
            messages = self._round()
            await self.lease.asave(messages, _state(running))
            self._saved, self._running = len(messages), running

    def settled(
        self, planned: Sequence[Planned], execute: Callable[[Planned], ToolExecution]
    ) -> list[ToolExecution]:
        """A blocking round: each call settled (`execute`, then the run's policies) after a
        save naming it as running."""
        run, settled = self.run, []
        for plan in planned:
            self.before((plan,))
            settled.append(run.settle(plan, execute(plan)))
        return settled

    def after(self) -> None:
        """Save the history once a round's results are in it (unless nothing changed)."""
        messages = self.run.messages
        if self._running or len(messages) != self._saved:
            self.lease.save(messages, _state({}))
            self._saved, self._running = len(messages), {}

    async def aafter(self) -> None:
        """`after`, as a coroutine."""
        messages = self.run.messages
        if self._running or len(messages) != self._saved:
            await self.lease.asave(messages, _state({}))
            self._saved, self._running = len(messages), {}

    def _round(self) -> Sequence[ChatMessage]:
        """The history with the results of the open round so far, in the model's order (a call
        that waits has none yet)."""
        run = self.run
        finished = run.finished
        if not finished:
            return run.messages
        results = [
            result_message(finished[index])
            for index in sorted(finished)
            if not _waits(finished[index])
        ]
        return [*run.messages, *results]

    # -- the run's span --------------------------------------------------------------------------

    def __enter__(self) -> Run:
        return self.run.__enter__()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Leave the run (which answers a failed run's open calls), then the last save — the
        run's history, or the one its error carries — and the release. A last save that fails a
        run that had no error raises its error, carrying the run."""
        try:
            self.run.__exit__(kind, error, tb)
            if self._saved_at_end(error):
                try:
                    self.lease.save(self.run.messages, _state({}))
                except Exception as failed:
                    self._unsaved(error, failed)
        finally:
            _release(self.lease)

    async def __aenter__(self) -> Run:
        return self.run.__enter__()

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """`__exit__`, for the async drivers."""
        try:
            self.run.__exit__(kind, error, tb)
            if self._saved_at_end(error):
                try:
                    await self.lease.asave(self.run.messages, _state({}))
                except Exception as failed:
                    self._unsaved(error, failed)
        finally:
            await _arelease(self.lease)

    def _saved_at_end(self, error: BaseException | None) -> bool:
        """Whether the run's end is saved: it ended with its result, or with an error of its own
        (its open calls answered by then) while its claim holds. A run cancelled, interrupted
        or closed early is not: the calls the last save names as running stay so, for the next
        run to find interrupted."""
        if isinstance(error, Exception):
            return not self.lease.lost
        return error is None

    def _unsaved(self, error: BaseException | None, failed: Exception) -> None:
        """A failed last save: raised, carrying the run, for a run that had no error; logged
        otherwise (the run's own error goes on)."""
        if error is None:
            self.run.fail(failed)
            raise failed
        logger.warning(
            "could not save the history of the failed run on conversation %s: %s",
            _shown(self.run.conversation_id),
            " ".join(str(failed).split())[:300],
        )


def _release(lease: Lease) -> None:
    """Give the conversation up (once; a failure is logged: the claim lapses on its own)."""
    try:
        lease.release()
    except Exception as error:
        _unreleased(lease, error)


async def _arelease(lease: Lease) -> None:
    """`_release`, as a coroutine."""
    try:
        await lease.arelease()
    except Exception as error:
        _unreleased(lease, error)


def _unreleased(lease: Lease, error: Exception) -> None:
    logger.warning(
        "could not release conversation %s (its claim lapses on its own): %s",
        _shown(lease.conversation.id),
        " ".join(str(error).split())[:300],
    )


def _state(running: Running) -> dict[str, Any]:
    return {"format": STATE_FORMAT, "running": running}


def _waits(execution: ToolExecution) -> bool:
    result = execution.result
    return isinstance(result, PendingResult) and result.pending is not None


def _about_to_run(run: Run, batch: Sequence[Planned]) -> Running:
    """The calls of `batch` whose bodies may run: not answered already (held, denied, decided
    by a hook), nor the output tool's (which only validates)."""
    running: Running = {}
    shown: dict[str, str] | None = None
    for plan in batch:
        if plan.preset is not None and not ApprovalState.deferred(plan.preset):
            continue
        if run.is_output(plan):
            continue
        if shown is None:
            shown = {call.id: call.arguments for call in _open_message(run.messages)}
        arguments = plan.call.arguments
        running[plan.call.id] = None if shown.get(plan.call.id) == arguments else arguments
    return running


def _open_message(messages: Sequence[ChatMessage]) -> Sequence[ToolCall]:
    """The calls of the history's last message with calls (the open round's)."""
    for position in range(len(messages) - 1, -1, -1):
        message = messages[position]
        if message.role == "assistant" and message.tool_calls:
            return message.tool_calls
        if message.role != "tool":
            break
    return ()


# -- reading the state back ----------------------------------------------------------------------


def _running(conversation_id: str, state: Mapping[str, Any]) -> Running:
    """What the stored state says is running; refuses a state this version did not write."""
    if not state:
        return {}  # never saved by a run (a new conversation, or one a program saved itself)
    found = state.get("format")
    if isinstance(found, int) and not isinstance(found, bool) and found > STATE_FORMAT:
        raise ConversationStoreError(
            f"conversation {_shown(conversation_id)} was saved by a newer agentforge_typed (its "
            f"loop state has format {found}; this version reads format {STATE_FORMAT}): "
            "refused whole, nothing ran",
            conversation_id,
        )
    running = state.get("running")
    if (
        found != STATE_FORMAT
        or isinstance(found, bool)
        or not set(state) <= {"format", "running"}
        or not isinstance(running, dict)
        or not all(
            isinstance(call_id, str) and (arguments is None or isinstance(arguments, str))
            for call_id, arguments in running.items()
        )
    ):
        raise ConversationStoreError(
            f"conversation {_shown(conversation_id)} is corrupt: its loop state is not one a run "
            f'writes ({{"format": {STATE_FORMAT}, "running": {{call id: arguments or null}}}}); '
            "refused whole, nothing ran",
            conversation_id,
        )
    return running


def _settled(
    service: ToolRegistry[Any],
    history: list[ChatMessage],
    paused: AiMessage | None,
    interrupted: Iterable[ToolCall],
    running: Running,
    options: RunOptions,
) -> RunOptions:
    """Settle the calls a crash interrupted, in `history`: run again the retry-safe ones (an
    approved one as it was approved), answer the others with an error saying so. A decision
    the caller gives for one is dropped: it was decided, and ran. The options the run takes."""
    record = paused_record(paused)
    approvals: dict[str, Approval] = dict(options.get("approvals") or {})
    external = dict(options.get("external_results") or {})
    answered: set[str] = set()
    for call in interrupted:
        approvals.pop(call.id, None)
        external.pop(call.id, None)
        tool = service._tools.get(call.name)
        if tool is not None and getattr(tool, "retry_safe", False) is True:
            waited = record.get(call.id)
            if waited is not None and waited.reason == "approval":
                approvals[call.id] = _approved_again(call, running[call.id])
            logger.info("running the interrupted call %s again (retry-safe)", repr(call.id))
            continue
        answered.add(call.id)
        history.append(
            ToolResultMessage(
                tool_call_id=call.id,
                tool_name=call.name,
                text=f"Tool `{shown_name(call.name)}` was {INTERRUPTED} (the run stopped while "
                "it ran); check before calling it again.",
                is_error=True,
            )
        )
    if paused is not None and answered & record.keys():
        _drop_records(history, paused, answered)
    return {**options, "approvals": approvals or None, "external_results": external or None}


def _approved_again(call: ToolCall, arguments: str | None) -> Approval:
    if arguments is None:
        return True
    try:
        given = json.loads(arguments)
    except ValueError:
        given = None
    if not isinstance(given, dict):
        raise ConversationStoreError(
            f"the running call {call.id!r} has arguments that are not a JSON object; refused "
            "whole, nothing ran"
        )
    return Approved(given)


def _drop_records(history: list[ChatMessage], paused: AiMessage, answered: set[str]) -> None:
    """Remove from the paused message the record of the calls now answered."""
    recorded = paused.attributes[PAUSED_CALLS]
    kept = {call_id: value for call_id, value in recorded.items() if call_id not in answered}
    attributes = {k: v for k, v in paused.attributes.items() if k != PAUSED_CALLS}
    if kept:
        attributes[PAUSED_CALLS] = kept
    position = max(i for i, message in enumerate(history) if message is paused)
    history[position] = paused.model_copy(update={"attributes": attributes})


def _questions_filled(paused: AiMessage, options: RunOptions) -> RunOptions:
    """The options, each bare answer to a question the history's paused call records given that
    question: the record is the store's, so any process can send the answer to it (an MCP
    server's keyed question goes back with its key and state)."""
    approvals = options.get("approvals")
    if not approvals or not any(
        isinstance(decision, ElicitationAnswer) and decision.question is None
        for decision in approvals.values()
    ):
        return options
    record: Mapping[str, PausedCall] = paused_record(paused)
    filled: dict[str, Approval] = {}
    for call_id, decision in approvals.items():
        waited = record.get(call_id) if isinstance(call_id, str) else None
        if (
            isinstance(decision, ElicitationAnswer)
            and decision.question is None
            and waited is not None
            and waited.question is not None
        ):
            decision = dataclasses.replace(decision, question=waited.question)
        filled[call_id] = decision
    return {**options, "approvals": filled}
