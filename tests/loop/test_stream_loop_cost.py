"""The streaming loop's cost stays a small multiple of the model stream's, in time and memory."""

from __future__ import annotations

import json
import time
import tracemalloc
from collections.abc import AsyncIterator, Iterator

from agentforge_typed import (
    AiMessage,
    ChatRequest,
    ChatResponse,
    PartialArgumentsEvent,
    ResponseComplete,
    StreamEvent,
    ToolCall,
    ToolCallDelta,
    ToolCallEvent,
    ToolService,
    UserMessage,
    tool,
)


@tool
def size(text: str) -> int:
    """Count characters."""
    return len(text)


class DeltaModel:
    """Streams one `size` call whose arguments arrive in `step`-character deltas, accumulating
    them as a provider does, then answers with text."""

    def __init__(self, length: int, step: int) -> None:
        self.arguments = json.dumps({"text": "a" * (length - 12)})
        self.step = step
        self.rounds = 0

    def _events(self) -> Iterator[StreamEvent]:
        self.rounds += 1
        if self.rounds % 2 == 0:
            yield ResponseComplete(response=ChatResponse(ai_message=AiMessage(text="done")))
            return
        chunks: list[str] = []
        yield ToolCallDelta(index=0, id="c", name="size")
        for start in range(0, len(self.arguments), self.step):
            chunks.append(self.arguments[start : start + self.step])
            yield ToolCallDelta(index=0, arguments_delta=chunks[-1])
        call = ToolCall(id="c", name="size", arguments="".join(chunks))
        yield ResponseComplete(response=ChatResponse(ai_message=AiMessage(tool_calls=[call])))

    def chat(self, request: ChatRequest) -> ChatResponse:
        raise NotImplementedError

    async def achat(self, request: ChatRequest) -> ChatResponse:
        raise NotImplementedError

    def stream(self, request: ChatRequest) -> Iterator[StreamEvent]:
        return self._events()

    async def astream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        for event in self._events():
            yield event


PROMPT = [UserMessage(content="How long?")]


def test_a_large_streamed_argument_costs_a_few_times_the_model_stream() -> None:
    # 640k characters in 4-character deltas: re-parsing the whole buffer on every delta took
    # about 90 times the model stream itself.
    model = DeltaModel(640_000, 4)
    started = time.process_time()
    for _ in model.stream(ChatRequest(messages=PROMPT)):
        pass
    alone = time.process_time() - started

    model = DeltaModel(640_000, 4)
    partials, last = 0, {}
    started = time.process_time()
    for event in ToolService([size]).stream(model, PROMPT):
        if isinstance(event, PartialArgumentsEvent):
            partials, last = partials + 1, event.arguments  # not all kept: each holds a copy
    looped = time.process_time() - started

    assert looped < 5 * alone + 0.5, (looped, alone)
    # Throttled: one per delta below 1 KiB, then one per quarter of growth.
    assert 256 < partials < 256 + 40
    assert len(last["text"]) > 0.75 * 640_000


def test_small_arguments_still_get_a_partial_event_per_delta() -> None:
    events = list(ToolService([size]).stream(DeltaModel(400, 4), PROMPT))
    partials = [e for e in events if isinstance(e, PartialArgumentsEvent)]
    assert len(partials) == 100
    assert partials[-1].arguments == {"text": "a" * 388}


def test_the_loop_holds_no_second_copy_of_the_arguments() -> None:
    length = 4_000_000
    model = DeltaModel(length, 4096)
    tracemalloc.start()
    try:
        baseline = tracemalloc.get_traced_memory()[0]
        held = []
        for event in ToolService([size]).stream(model, PROMPT):
            if isinstance(event, ToolCallEvent):
                # The stream is over: the response holds the arguments once, and nothing else.
                held.append(tracemalloc.get_traced_memory()[0] - baseline)
    finally:
        tracemalloc.stop()
    assert held and held[0] < 1.5 * length, held
