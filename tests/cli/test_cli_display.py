"""`run`'s live display (`cli/_run.py`): linear in what it shows, whatever it redacts."""

from __future__ import annotations

import io
import time
from collections.abc import Iterator
from typing import Any

from conformance import assert_linear

from agentforge_typed import AiMessage, ResponseComplete, TextDelta, ToolService
from agentforge_typed._transport._redaction import Redactor
from agentforge_typed.cli._run import LiveDisplay
from agentforge_typed.loop import FinishedChatResult, PausedChatResult
from agentforge_typed.loop._events import FinalResultEvent, ToolLoopEvent
from agentforge_typed.providers._function import FunctionModel

KEY = "sk-canary-0123456789abcdefghijKLMNOPQR"


def _final() -> FinishedChatResult[Any] | PausedChatResult[Any]:
    model = FunctionModel(lambda messages, parameters: AiMessage(text="done"))
    return ToolService().chat(model, "hi")


FINAL = _final()


def _events(deltas: int) -> Iterator[ToolLoopEvent]:
    for _ in range(deltas):
        yield TextDelta(text="ab " * 70)
    yield ResponseComplete(response=FINAL.final_response)
    yield FinalResultEvent(result=FINAL)


def test_the_live_display_is_linear_in_the_streamed_text() -> None:
    """A long answer streamed in pieces (the text of a round was `+=` onto a string: 8x the
    pieces took 58x the time), through a redactor with a secret to hold back for."""

    def run(size: int) -> None:
        LiveDisplay(io.StringIO(), Redactor([KEY])).show(_events(size), time.perf_counter())

    assert_linear(run, 1_000, what="the live display", clock=time.process_time)
