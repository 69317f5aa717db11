"""Per-round overhead of `ToolService.chat` against a minimal hand-written loop.

Both run the same conversation — the model asks for one tool call, then answers — against the
same scripted model, and do the same work per round: build the request, call the model, validate
the arguments from the raw JSON, call the function, turn the result into text, append the result
message. The floor is measured in the same run, in turns with the loop (so that a burst of other
work on the machine slows both alike); the ratio is what to watch (target: ratio <= 1.5).
Instrumentation switched off must cost nothing measurable: the last two rows show it switched on
with OpenTelemetry's no-op tracer (the cost of building the spans' attributes, not of exporting
them), then switched off again (it should match the `ToolService.chat` row).

    python benchmarks/loop.py
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from pydantic import BaseModel, ConfigDict, TypeAdapter

from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatRequest,
    ChatRequestParameters,
    FunctionModel,
    ToolCall,
    ToolResultMessage,
    ToolService,
    UserMessage,
    tool,
)
from agentforge_typed.loop import instrument

CALL = AiMessage(tool_calls=[ToolCall(id="c1", name="add", arguments='{"a": 2, "b": 3}')])
ANSWER = AiMessage(text="5")


def script(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
    return ANSWER if isinstance(messages[-1], ToolResultMessage) else CALL


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class AddArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    a: int
    b: int


def plain_add(a: int, b: int) -> int:
    return a + b


MODEL = FunctionModel(script)
SERVICE = ToolService([add])
PROMPT: list[ChatMessage] = [UserMessage(content="2 + 3?")]
ARGS = TypeAdapter(AddArgs)
TO_TEXT = TypeAdapter(int)


def with_service() -> None:
    SERVICE.chat(MODEL, PROMPT)


def hand_written() -> None:
    messages = list(PROMPT)
    parameters = ChatRequestParameters(tools=[add.specification])
    while True:
        response = MODEL.chat(ChatRequest.of(messages, parameters))
        messages.append(response.ai_message)
        if not response.ai_message.tool_calls:
            return
        for call in response.ai_message.tool_calls:
            args = ARGS.validate_json(call.arguments)
            text = TO_TEXT.dump_json(plain_add(args.a, args.b)).decode()
            messages.append(ToolResultMessage(tool_call_id=call.id, tool_name=call.name, text=text))


def per_round_us(
    floor: Callable[[], None], ours: Callable[[], None], rounds_per_run: int = 2, repeat: int = 15
) -> tuple[float, float]:
    """The best µs per round of `floor` and of `ours` over `repeat` turns (timed alternately)."""
    number = 1000
    timings: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeat):
        for fn, found in zip((floor, ours), timings, strict=True):
            start = time.perf_counter()
            for _ in range(number):
                fn()
            found.append((time.perf_counter() - start) / number / rounds_per_run * 1e6)
    return min(timings[0]), min(timings[1])


def main() -> None:
    with_service()  # warm up
    hand_written()
    floor, ours = per_round_us(hand_written, with_service)
    print(f"{'workload':<30}{'µs/round':>10}{'ratio':>8}")
    print(f"{'floor (hand-written loop)':<30}{floor:>10.1f}{1.0:>8.2f}")
    print(f"{'ToolService.chat':<30}{ours:>10.1f}{ours / floor:>8.2f}")
    print(f"target: ratio ≤ 1.5 → {'met' if ours / floor <= 1.5 else 'NOT met'}")
    try:
        handle = instrument()
    except ImportError:
        return
    with handle:
        # Against the floor measured above: instrumented, the floor's own model calls are traced.
        _, traced = per_round_us(hand_written, with_service)
    print(f"{'instrument() (no-op tracer)':<30}{traced:>10.1f}{traced / floor:>8.2f}")
    floor, off = per_round_us(hand_written, with_service)
    print(f"{'instrument() switched off':<30}{off:>10.1f}{off / floor:>8.2f}")


if __name__ == "__main__":
    main()
