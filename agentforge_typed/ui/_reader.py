"""What a page shows of a run: the loop's stream read into moments, whatever the protocol.

`RunReader` is the one translator both protocols share (sans-IO: `ToolService.astream`'s events
in, `Moment`s out; `_agui` and `_vercel` render each moment as their protocol's events). It
follows the model's rounds — text and reasoning as they stream, each tool call announced as soon
as its id and name arrive, under the id the loop will give it, with its arguments as they come
— closes what it opened, reports each result, and at the end seals what the client must send back
(`_seal`) and says what the run waits on.

Streamed deltas are a preview: the loop runs calls from the complete response. Where the preview
and the response disagree on a call's id (a server that streams one id and answers another), the
complete call is announced as well, and the previewed one is closed with a result saying it was
not called, sealed as standing for nothing; arguments that streamed otherwise than the complete
call has them stay as shown (a protocol's arguments only grow), and the call's end and its seal
carry them as they are.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import pydantic_core

from .._content import Content
from .._exceptions import AgentForgeError
from .._identity import CallIds, random_id
from .._messages import AiMessage, ChatMessage, ToolCall, ToolResultMessage
from .._model import ResponseComplete, TextDelta, ThinkingDelta, ToolCallDelta
from .._response import ChatResponse, TokenUsage
from .._transport._redaction import NO_SECRETS, Redactor
from ..loop._events import (
    FinalResultEvent,
    ToolCallEvent,
    ToolProgressEvent,
    ToolResultEvent,
)
from ._conversation import Turn, Waiting
from ._seal import Sealer

__all__ = [
    "CallChunk",
    "CallProgress",
    "CallReady",
    "CallResult",
    "Asked",
    "CallStarted",
    "Failed",
    "Finished",
    "Moment",
    "Paused",
    "RunReader",
    "Sealed",
    "StepFinished",
    "StepStarted",
    "TextChunk",
    "TextEnded",
    "TextStarted",
    "ThinkingChunk",
    "ThinkingEnded",
    "ThinkingStarted",
]

NOT_CALLED = "Not called: the model's complete answer does not hold this call as it was streamed."


@dataclass(frozen=True, slots=True)
class StepStarted:
    """A model round begins (or a resumed run's first results)."""


@dataclass(frozen=True, slots=True)
class StepFinished:
    """The round ended: its answer and its calls' results are all out."""


@dataclass(frozen=True, slots=True)
class TextStarted:
    message_id: str
    for_calls: bool = False
    """Opened before any text, to hold the round's tool calls (AG-UI needs the parent message
    to exist; a protocol without that need may wait for its first chunk)."""


@dataclass(frozen=True, slots=True)
class TextChunk:
    message_id: str
    text: str


@dataclass(frozen=True, slots=True)
class TextEnded:
    message_id: str


@dataclass(frozen=True, slots=True)
class ThinkingStarted:
    thinking_id: str


@dataclass(frozen=True, slots=True)
class ThinkingChunk:
    thinking_id: str
    text: str


@dataclass(frozen=True, slots=True)
class ThinkingEnded:
    thinking_id: str


@dataclass(frozen=True, slots=True)
class CallStarted:
    call_id: str
    name: str
    message_id: str
    """The round's assistant message, which holds the call."""


@dataclass(frozen=True, slots=True)
class CallChunk:
    call_id: str
    text: str
    """The next piece of the arguments' JSON text."""


@dataclass(frozen=True, slots=True)
class CallReady:
    """The call's arguments are complete (what its chunks add up to)."""

    call_id: str
    name: str
    arguments: str
    input: Any
    """The arguments parsed (`None` when they are not JSON)."""


@dataclass(frozen=True, slots=True)
class CallProgress:
    call_id: str
    progress: float
    total: float | None
    message: str | None


@dataclass(frozen=True, slots=True)
class CallResult:
    call_id: str
    message_id: str
    """The id of the tool message the result is shown as."""
    text: str
    content: tuple[Content, ...] = ()
    is_error: bool = False
    denied: bool = False
    """A person denied the call."""


@dataclass(frozen=True, slots=True)
class Sealed:
    """The seal the client sends back with the message `message_id` (see `_seal`)."""

    message_id: str
    token: str


@dataclass(frozen=True, slots=True)
class Asked:
    """The round asks about these calls (before it ends; `Paused` follows)."""

    waiting: tuple[Waiting, ...]


@dataclass(frozen=True, slots=True)
class Paused:
    """The run ended waiting on these calls."""

    waiting: tuple[Waiting, ...]
    usage: TokenUsage | None = None


@dataclass(frozen=True, slots=True)
class Finished:
    """The run ended with its answer."""

    usage: TokenUsage | None = None


@dataclass(frozen=True, slots=True)
class Failed:
    """The run ended with an error; nothing follows."""

    message: str
    code: str


Moment = (
    StepStarted
    | StepFinished
    | TextStarted
    | TextChunk
    | TextEnded
    | ThinkingStarted
    | ThinkingChunk
    | ThinkingEnded
    | CallStarted
    | CallChunk
    | CallReady
    | CallProgress
    | CallResult
    | Sealed
    | Asked
    | Paused
    | Finished
    | Failed
)
"""Anything `RunReader` reports."""


def new_id(prefix: str) -> str:
    """A fresh protocol id (`m-…` messages, `r-…` results, `t-…` reasoning)."""
    return f"{prefix}-{random_id()[:24]}"


@dataclass(slots=True)
class _Streamed:
    """One tool call of a round as its deltas arrive (by the provider's index)."""

    server_id: str | None = None
    name: list[str] = field(default_factory=list)
    arguments: list[str] = field(default_factory=list)
    call_id: str | None = None
    """The id announced (the one the loop is expected to give it); `None` until announced."""


@dataclass(slots=True)
class _Round:
    message_id: str | None = None
    text_open: bool = False
    text: list[str] = field(default_factory=list)
    thinking_id: str | None = None
    thinking: list[str] = field(default_factory=list)
    streamed: dict[int, _Streamed] = field(default_factory=dict)
    announced: dict[str, _Streamed] = field(default_factory=dict)
    """Calls announced from deltas and not matched with the loop's calls yet."""
    complete: bool = False
    """The model's answer is complete: what follows are its calls and their results."""
    matching: bool = False
    """The loop is announcing the round's calls (`ToolCallEvent`s)."""


class RunReader:
    """Reads one run's events into `Moment`s (see the module).

    Args:
        turn: The request: its thread, the history the run starts from and the protocol id of
            each of its messages.
        sealer: Seals what the client sends back (`None`: the server keeps the conversation).
        group: The one protocol message every message of this run is shown in (the AI SDK's
            assistant message); `None`: each message its own (AG-UI).
        redactor: The secrets replaced in what the seals carry (the model's keys).
    """

    def __init__(
        self,
        turn: Turn,
        *,
        sealer: Sealer | None,
        group: str | None = None,
        redactor: Redactor = NO_SECRETS,
    ) -> None:
        self.turn = turn
        self.sealer = sealer
        self.group = group
        self.redactor = redactor
        self.started = False
        """Whether any event was read (an error before is about the request itself)."""
        self._round: _Round | None = None
        self._call_ids: CallIds | None = None
        self._loop_calls: list[ToolCall] = []
        self._diverged = False
        self._announced: set[str] = set()
        self._rounds: list[str] = []
        """The assistant message id of each model answer, in order."""
        self._results: dict[str, str] = {}
        """The tool message id of each result shown, by call id."""
        self._shown: dict[str, None] = {} if group is None else {group: None}
        """Every message this run showed the client (ordered): each gets a seal at the end,
        one that stands for nothing when no message of the history is shown in it (a call
        announced and not called, the text of a round the run failed in)."""
        self._earlier = {
            call.id
            for message in turn.history
            if message.role == "assistant"
            for call in message.tool_calls
        }
        """The calls of the history the run starts from: a resumed run's, shown already."""

    # -- reading -------------------------------------------------------------------------------

    def feed(self, event: object) -> list[Moment]:
        """The moments `event` (one of `astream`'s) adds."""
        self.started = True
        out: list[Moment] = []
        if isinstance(event, TextDelta | ThinkingDelta | ToolCallDelta | ResponseComplete):
            self._model(event, out)
        elif isinstance(event, ToolCallEvent):
            self._match(event.call, out)
        elif isinstance(event, ToolResultEvent):
            self._end_matching(out)
            self._open_round(out)
            execution = event.execution
            if execution.pending is None:
                result = execution.result
                self._result(
                    execution.call,
                    result.text,
                    result.content,
                    result.is_error,
                    result.error_kind == "denied",
                    out,
                )
        elif isinstance(event, ToolProgressEvent):
            self._end_matching(out)
            out.append(CallProgress(event.call.id, event.progress, event.total, event.message))
        elif isinstance(event, FinalResultEvent):
            run = event.result
            self._end_matching(out)
            self._reconcile(run.messages, out)
            usage = run.usage if run.usage.total_tokens else None
            waiting = tuple(
                Waiting(p.call, p.reason, p.digest or "", p.elicitation, p.call_ids)
                for p in run.pending
            )
            if waiting:
                out.append(Asked(waiting))
            self._close_round(out)
            out.append(Paused(waiting, usage) if waiting else Finished(usage))
        # `PartialArgumentsEvent` adds nothing: the chunks are the arguments as they come, which
        # each protocol's client parses for itself; `OutputCallEvent` cannot come (no output type).
        return out

    def failed(self, error: BaseException) -> list[Moment]:
        """The moments that end a run `error` ended: the seals of the history it carries (so the
        client's copy goes on from there), then `Failed`."""
        out: list[Moment] = []
        messages = getattr(error, "messages", None)
        if isinstance(messages, Sequence) and len(messages) >= len(self.turn.history):
            self._reconcile(messages, out)
        else:  # nothing new to seal; what the run showed stands for nothing
            self._seal_nothing(set(self.turn.ids), out)
        if self.explains(error):
            message, code = str(error) or type(error).__name__, type(error).__name__
        else:
            message, code = (
                f"the run failed ({type(error).__name__}); see the server's log",
                ("internal"),
            )
        out.append(Failed(message, code))
        return out

    def explains(self, error: BaseException) -> bool:
        """Whether `error`'s own message is what the client reads: the package's errors, and
        the loop's refusals of the request before it read anything (a decision that does not
        match its call). They are worded for whoever made the request and hold no secret (the
        providers' pass through one redactor); anything else is the program's own: the client
        reads only its type."""
        return isinstance(error, AgentForgeError) or (
            not self.started and isinstance(error, ValueError | TypeError)
        )

    # -- the model's answer --------------------------------------------------------------------

    def _model(
        self, event: TextDelta | ThinkingDelta | ToolCallDelta | ResponseComplete, out: list[Moment]
    ) -> None:
        self._end_matching(out)
        current = self._round
        if current is None or current.complete:
            self._close_round(out)
            current = self._open_round(out)
        if isinstance(event, ThinkingDelta):
            self._think(current, event.text, out)
            return
        self._stop_thinking(current, out)
        if isinstance(event, TextDelta):
            self._say(current, event.text, out)
        elif isinstance(event, ToolCallDelta):
            self._stream_call(current, event, out)
        else:
            self._complete(current, event.response, out)

    def _open_round(self, out: list[Moment]) -> _Round:
        if self._round is None:
            self._round = _Round()
            out.append(StepStarted())
        return self._round

    def _close_round(self, out: list[Moment]) -> None:
        current = self._round
        if current is None:
            return
        self._stop_thinking(current, out)
        if current.text_open:
            current.text_open = False
            out.append(TextEnded(self._message(current)))
        self._round = None
        out.append(StepFinished())

    def _message(self, current: _Round) -> str:
        if current.message_id is None:
            current.message_id = new_id("m")
        return current.message_id

    def _think(self, current: _Round, text: str, out: list[Moment]) -> None:
        if not text:
            return
        if current.thinking_id is None:
            current.thinking_id = new_id("t")
            out.append(ThinkingStarted(current.thinking_id))
        current.thinking.append(text)
        out.append(ThinkingChunk(current.thinking_id, text))

    def _stop_thinking(self, current: _Round, out: list[Moment]) -> None:
        if current.thinking_id is not None:
            out.append(ThinkingEnded(current.thinking_id))
            current.thinking_id = None

    def _say(self, current: _Round, text: str, out: list[Moment]) -> None:
        if not text:
            return
        if not current.text_open:  # the round's message stays open until its answer is complete
            current.text_open = True
            self._show(self._message(current))
            out.append(TextStarted(self._message(current)))
        current.text.append(text)
        out.append(TextChunk(self._message(current), text))

    def _parent(self, current: _Round, out: list[Moment]) -> str:
        """The round's assistant message, which holds its calls: opened now when nothing was
        said yet."""
        if not current.text_open and not current.complete:
            current.text_open = True
            self._show(self._message(current))
            out.append(TextStarted(self._message(current), for_calls=True))
        return self._message(current)

    def _stream_call(self, current: _Round, delta: ToolCallDelta, out: list[Moment]) -> None:
        streamed = current.streamed.get(delta.index)
        if streamed is None:
            streamed = current.streamed[delta.index] = _Streamed()
        if delta.name:
            streamed.name.append(delta.name)
        if delta.id and streamed.server_id is None:
            streamed.server_id = delta.id
        if delta.arguments_delta:
            streamed.arguments.append(delta.arguments_delta)
        if streamed.call_id is not None:
            if delta.arguments_delta:
                out.append(CallChunk(streamed.call_id, delta.arguments_delta))
        elif streamed.server_id is not None and streamed.name:
            name = "".join(streamed.name)
            streamed.call_id = self._expected_id(streamed.server_id)
            current.announced[streamed.call_id] = streamed
            self._announced.add(streamed.call_id)
            out.append(CallStarted(streamed.call_id, name, self._parent(current, out)))
            if streamed.arguments:
                out.append(CallChunk(streamed.call_id, "".join(streamed.arguments)))

    def _expected_id(self, server_id: str) -> str:
        """The id the loop will give the call the server named `server_id` (`_identity`: the
        server's, unless the conversation has it already)."""
        if self._call_ids is None or self._diverged:
            taken: list[ChatMessage] = [*self.turn.history, AiMessage(tool_calls=self._loop_calls)]
            self._call_ids, self._diverged = CallIds(taken), False
        return self._call_ids.admit_id(server_id)

    def _complete(self, current: _Round, response: ChatResponse, out: list[Moment]) -> None:
        message = response.ai_message
        self._rest(current.thinking, message.thinking, current, out, thinking=True)
        self._rest(current.text, message.text, current, out, thinking=False)
        if message.tool_calls:
            self._parent(current, out)
        if current.text_open:
            current.text_open = False
            out.append(TextEnded(self._message(current)))
        current.complete = True
        self._rounds.append(self._message(current))

    def _rest(
        self,
        streamed: list[str],
        final: str | None,
        current: _Round,
        out: list[Moment],
        *,
        thinking: bool,
    ) -> None:
        """Show what the complete answer says beyond what streamed (a server that sends some of
        it, or all, only at the end)."""
        if not final:
            return
        shown = "".join(streamed)
        if len(final) <= len(shown) or not final.startswith(shown):
            return  # all shown, or shown otherwise: the seal holds the answer as it is
        rest = final[len(shown) :]
        if thinking:
            self._think(current, rest, out)
            self._stop_thinking(current, out)
        else:
            self._say(current, rest, out)

    # -- the loop's calls ----------------------------------------------------------------------

    def _match(self, call: ToolCall, out: list[Moment]) -> None:
        """Close the call announced under the loop's id, or announce it now."""
        if call.id in self._earlier:
            return  # a resumed call: shown in an earlier response, its result comes next
        current = self._open_round(out)
        current.matching = True
        self._loop_calls.append(call)
        streamed = current.announced.pop(call.id, None)
        if streamed is None:
            self._diverged = True  # the loop took an id this reader did not expect
            self._announce(call, self._parent(current, out), out)
            return
        shown = "".join(streamed.arguments)
        if len(call.arguments) > len(shown) and call.arguments.startswith(shown):
            out.append(CallChunk(call.id, call.arguments[len(shown) :]))
        # Arguments streamed otherwise than the complete call has them stay as shown (a
        # protocol's arguments only grow); `CallReady` carries them as they are.
        out.append(CallReady(call.id, call.name, call.arguments, _parsed(call.arguments)))

    def _announce(self, call: ToolCall, parent: str, out: list[Moment]) -> None:
        self._announced.add(call.id)
        out.append(CallStarted(call.id, call.name, parent))
        if call.arguments:
            out.append(CallChunk(call.id, call.arguments))
        out.append(CallReady(call.id, call.name, call.arguments, _parsed(call.arguments)))

    def _end_matching(self, out: list[Moment]) -> None:
        """Once the loop has announced the round's calls: close the previewed ones it did not
        announce, as not called."""
        current = self._round
        if current is None or not current.matching:
            return
        current.matching = False
        for streamed in current.announced.values():
            assert streamed.call_id is not None
            arguments = "".join(streamed.arguments)
            name = "".join(streamed.name)
            out.append(CallReady(streamed.call_id, name, arguments, _parsed(arguments)))
            message_id = new_id("r")
            self._show(message_id)
            out.append(CallResult(streamed.call_id, message_id, NOT_CALLED, is_error=True))
            self._diverged = True
        current.announced.clear()

    def _result(
        self,
        call: ToolCall,
        text: str,
        content: Sequence[Content],
        is_error: bool,
        denied: bool,
        out: list[Moment],
    ) -> None:
        message_id = new_id("r")
        self._results[call.id] = message_id
        self._show(message_id)
        out.append(CallResult(call.id, message_id, text, tuple(content), is_error, denied))

    # -- the end -------------------------------------------------------------------------------

    def _reconcile(self, messages: Sequence[ChatMessage], out: list[Moment]) -> None:
        """Show the run's results not shown yet, and seal every message the client must send
        back that is new or changed (the message the run paused on loses its record once
        nothing waits)."""
        start = len(self.turn.history)
        ids: list[str | None] = list(self.turn.ids)
        rounds = iter(self._rounds)
        for message in messages[start:]:
            message_id: str | None = None
            if isinstance(message, AiMessage):
                message_id = next(rounds, None)
                # Calls the run never announced (it failed first): shown before their results.
                unseen = [c for c in message.tool_calls if c.id not in self._announced]
                if message_id is not None and unseen:
                    self._open_round(out)
                    for call in unseen:
                        self._announce(call, message_id, out)
            elif isinstance(message, ToolResultMessage):
                message_id = self._results.get(message.tool_call_id)
                if message_id is None:
                    call = ToolCall(id=message.tool_call_id, name=message.tool_name)
                    self._result(call, message.text, message.content, message.is_error, False, out)
                    message_id = self._results[message.tool_call_id]
            ids.append(message_id if self.group is None else self.group)
        if self.sealer is None:
            return
        groups: dict[str, list[int]] = {}
        for position, message_id in enumerate(ids):
            # The user's messages are the client's own: only the model's side is sealed.
            if message_id is not None and messages[position].role in ("assistant", "tool"):
                groups.setdefault(message_id, []).append(position)
        history = self.turn.history
        for message_id, positions in groups.items():
            if all(p < start and messages[p] == history[p] for p in positions):
                continue  # the client has it, sealed as it is
            sealed = [messages[p] for p in positions]
            token = self.sealer.seal(self.turn.thread_id, sealed, self.redactor)
            out.append(Sealed(message_id, token))
        self._seal_nothing(groups.keys(), out)

    def _show(self, message_id: str) -> None:
        """Note a message shown to the client (with a `group`, every one is the group's)."""
        if self.group is None:
            self._shown[message_id] = None

    def _seal_nothing(self, holding: Collection[str | None], out: list[Moment]) -> None:
        """Seal each message shown that holds none of the history (`holding` are the ids that
        do) as standing for nothing: the client sends it back, and it adds nothing."""
        if self.sealer is None:
            return
        for message_id in self._shown:
            if message_id not in holding:
                out.append(Sealed(message_id, self.sealer.seal(self.turn.thread_id, [])))


def _parsed(arguments: str) -> Any:
    try:
        return pydantic_core.from_json(arguments or "{}")
    except ValueError:
        return None
