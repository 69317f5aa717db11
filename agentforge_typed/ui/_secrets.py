"""The keys a page never sees: the model's, replaced wherever a server might echo them.

An error from a provider is redacted where it is raised (the HTTP shell), and a tool kind that
holds secrets redacts its results; what nothing on the way redacts is the model's own answer,
which a server can fill with the key it was sent. So, as the CLI's `run` does, what a run shows
goes through the `Redactor` of its model's keys: streamed text held back only as long as a key
could be starting there, and whole values (arguments, results, errors) replaced; the messages a
seal carries are redacted before they are sealed (`Sealer.seal`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .._transport._redaction import Redactor, StreamRedactor
from ._conversation import Waiting
from ._reader import (
    CallChunk,
    CallReady,
    CallResult,
    Failed,
    Moment,
    Paused,
    TextChunk,
    TextEnded,
    ThinkingChunk,
    ThinkingEnded,
)

__all__ = ["Scrub"]


class Scrub:
    """A run's moments with `redactor`'s secrets replaced (see the module)."""

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        self._streams: dict[tuple[str, str], StreamRedactor] = {}

    def __call__(self, moments: list[Moment]) -> list[Moment]:
        if not self.redactor:
            return moments
        out: list[Moment] = []
        for moment in moments:
            if isinstance(moment, TextChunk):
                self._piece(("text", moment.message_id), moment.text, out, TextChunk)
            elif isinstance(moment, ThinkingChunk):
                self._piece(("thinking", moment.thinking_id), moment.text, out, ThinkingChunk)
            elif isinstance(moment, CallChunk):
                self._piece(("call", moment.call_id), moment.text, out, CallChunk)
            elif isinstance(moment, TextEnded):
                self._rest(("text", moment.message_id), out, TextChunk)
                out.append(moment)
            elif isinstance(moment, ThinkingEnded):
                self._rest(("thinking", moment.thinking_id), out, ThinkingChunk)
                out.append(moment)
            elif isinstance(moment, CallReady):
                self._rest(("call", moment.call_id), out, CallChunk)
                arguments = self.redactor.replace(moment.arguments)
                out.append(
                    replace(moment, arguments=arguments, input=self.redactor.redact(moment.input))
                )
            elif isinstance(moment, CallResult):
                out.append(replace(moment, text=self.redactor.replace(moment.text)))
            elif isinstance(moment, Failed):
                out.append(replace(moment, message=self.redactor.replace(moment.message)))
            elif isinstance(moment, Paused):
                waiting = tuple(self._waiting(w) for w in moment.waiting)
                out.append(replace(moment, waiting=waiting))
            else:
                out.append(moment)
        return out

    def _piece(self, key: tuple[str, str], text: str, out: list[Moment], kind: Any) -> None:
        stream = self._streams.get(key)
        if stream is None:
            stream = self._streams[key] = self.redactor.stream()
        shown = stream.feed(text)
        if shown:
            out.append(kind(key[1], shown))

    def _rest(self, key: tuple[str, str], out: list[Moment], kind: Any) -> None:
        stream = self._streams.pop(key, None)
        if stream is not None and (rest := stream.end()):
            out.append(kind(key[1], rest))

    def _waiting(self, waiting: Waiting) -> Waiting:
        arguments = self.redactor.replace(waiting.call.arguments)
        if arguments == waiting.call.arguments:
            return waiting
        return replace(waiting, call=waiting.call.model_copy(update={"arguments": arguments}))
