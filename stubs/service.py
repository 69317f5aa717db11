"""Static-typing contract of ToolService: the output type flows into `ToolChatResult[T]`."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Generator, Sequence
from dataclasses import dataclass

from pydantic import BaseModel
from typing_extensions import assert_type

from agentforge_typed import (
    AgentForgeError,
    AiMessage,
    ChatMessage,
    ChatRequestParameters,
    FunctionModel,
    OutputSpec,
    TokenUsage,
    ToolChatResult,
    ToolExecution,
    ToolLoopEvent,
    ToolService,
    UserMessage,
)


class City(BaseModel):
    name: str


@dataclass
class Point:
    x: float


def reply(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
    return AiMessage(text="hi")


async def main() -> None:
    service = ToolService()
    model = FunctionModel(reply)
    prompt = [UserMessage(content="hi")]

    plain = service.chat(model, prompt)
    assert_type(plain, ToolChatResult[None])
    assert_type(plain.output, None)
    assert_type(plain.text, str | None)
    assert_type(plain.tool_executions[0], ToolExecution)

    city = service.chat(model, prompt, output_type=City)
    assert_type(city, ToolChatResult[City])
    assert_type(city.output.name, str)
    assert_type((await service.achat(model, prompt, output_type=Point)).output, Point)
    assert_type(service.chat(model, prompt, output_type=list[int]).output, list[int])
    assert_type(service.chat(model, prompt, output_type=OutputSpec(City, native=True)).output, City)

    # A string is one user message.
    assert_type(service.chat(model, "What's the weather?"), ToolChatResult[None])
    assert_type(await service.achat(model, "hi", output_type=City), ToolChatResult[City])

    # Generators, so that closing one early (which cancels running calls) type-checks.
    assert_type(service.stream(model, prompt), Generator[ToolLoopEvent, None, None])
    assert_type(service.astream(model, prompt), AsyncGenerator[ToolLoopEvent, None])

    # Misuse that must stay a type error.
    city.output.population  # type: ignore[attr-defined]
    service.chat(model, ["hi"])  # type: ignore[list-item]
    service.chat(model, 42)  # type: ignore[arg-type]
    city.output.name.upper(1)  # type: ignore[call-arg]
    service.chat(prompt, model)  # type: ignore[arg-type]
    ToolService(max_round_trips="3")  # type: ignore[arg-type]


def failed(error: AgentForgeError) -> None:
    # An error escaping a run carries the run so far.
    assert_type(error.messages, tuple[ChatMessage, ...])
    assert_type(error.tool_executions, tuple[ToolExecution, ...])
    assert_type(error.usage, TokenUsage)
