"""`FakeModel`: an offline, deterministic `ChatModel` that exercises every offered tool."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence

import pydantic_core

from .._exceptions import ModelError
from .._messages import AiMessage, ChatMessage, ToolCall, ToolResultMessage, UserMessage
from .._model import StreamEvent
from .._request import ChatRequest, ToolChoice, ToolSpecification
from .._response import ChatResponse, FinishReason, TokenUsage
from ._function import response_events
from ._synthesize import synthesize_arguments
from ._tracing import traced

__all__ = ["FakeModel"]

_CALL_ID_PREFIX = "fake_call_"


@traced
class FakeModel:
    """A `ChatModel` for tests and offline runs: no network, same answer for the same request.

    Each turn looks at the conversation since the last `UserMessage`:

    - if an offered tool (`request.parameters.tools`) has not been called yet, it answers with one
      `AiMessage` calling every such tool, with arguments synthesized from the tool's JSON schema
      (valid under strict validation) and ids `fake_call_1`, `fake_call_2`, … unique across the
      conversation. `tool_choice="none"` offers nothing; a tool name restricts the calls to it;
    - otherwise, with a `response_format`, it answers with JSON synthesized from its schema;
    - otherwise, if tools answered, it returns a text with one `name: result` line per result
      (`name: error: …` for failed ones);
    - otherwise it echoes the last user message.

    Token usage is estimated as one token per four characters.
    """

    name = "fake"

    def __repr__(self) -> str:
        return "FakeModel()"

    def chat(self, request: ChatRequest) -> ChatResponse:
        """Compute the next turn (see the class docstring)."""
        messages = request.messages
        turn = _current_turn(messages)
        pending = _pending_tools(request, turn)
        if pending:
            message = AiMessage(tool_calls=_calls(pending, messages))
            reason = FinishReason.TOOL_EXECUTION
        elif request.parameters is not None and request.parameters.response_format is not None:
            answer = synthesize_arguments(request.parameters.response_format.json_schema)
            message = AiMessage(text=pydantic_core.to_json(answer).decode())
            reason = FinishReason.STOP
        else:
            results = [m for m in turn if isinstance(m, ToolResultMessage)]
            text = _summary(results) if results else _echo(messages)
            message = AiMessage(text=text)
            reason = FinishReason.STOP
        return ChatResponse(
            ai_message=message,
            token_usage=_usage(messages, message),
            finish_reason=reason,
            metadata={"model": self.name},
        )

    async def achat(self, request: ChatRequest) -> ChatResponse:
        """Same as `chat`: nothing here waits."""
        return self.chat(request)

    def stream(self, request: ChatRequest) -> Iterator[StreamEvent]:
        """Replay `chat()`'s response as deltas."""
        yield from response_events(self.chat(request))

    async def astream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Replay `achat()`'s response as deltas."""
        for event in response_events(self.chat(request)):
            yield event


def _current_turn(messages: Sequence[ChatMessage]) -> Sequence[ChatMessage]:
    """The messages after the last user message (the whole history if there is none)."""
    for index in range(len(messages) - 1, -1, -1):
        if isinstance(messages[index], UserMessage):
            return messages[index + 1 :]
    return messages


def _pending_tools(request: ChatRequest, turn: Sequence[ChatMessage]) -> list[ToolSpecification]:
    parameters = request.parameters
    if parameters is None or not parameters.tools or parameters.tool_choice == ToolChoice.NONE:
        return []
    called = {
        call.name
        for message in turn
        if isinstance(message, AiMessage)
        for call in message.tool_calls
    }
    forced = parameters.tool_choice
    return [
        spec
        for spec in parameters.tools
        if spec.name not in called
        and (not isinstance(forced, str) or isinstance(forced, ToolChoice) or spec.name == forced)
    ]


def _calls(specs: Sequence[ToolSpecification], messages: Sequence[ChatMessage]) -> list[ToolCall]:
    used = {
        call.id
        for message in messages
        if isinstance(message, AiMessage)
        for call in message.tool_calls
    }
    calls: list[ToolCall] = []
    number = 0
    for spec in specs:
        number += 1
        while f"{_CALL_ID_PREFIX}{number}" in used:
            number += 1
        try:
            arguments = synthesize_arguments(spec.parameters)
        except ValueError as exc:
            raise ModelError(
                f"FakeModel cannot synthesize arguments for tool {spec.name!r}: {exc}"
            ) from exc
        calls.append(
            ToolCall(
                id=f"{_CALL_ID_PREFIX}{number}",
                name=spec.name,
                arguments=pydantic_core.to_json(arguments).decode(),
            )
        )
    return calls


def _summary(results: Sequence[ToolResultMessage]) -> str:
    lines = []
    for result in results:
        text = " ".join(result.text.splitlines())
        lines.append(
            f"{result.tool_name}: error: {text}"
            if result.is_error
            else f"{result.tool_name}: {text}"
        )
    return "\n".join(lines)


def _echo(messages: Sequence[ChatMessage]) -> str:
    for message in reversed(messages):
        if isinstance(message, UserMessage):
            if isinstance(message.content, str):
                return f"Echo: {message.content}"
            texts = [part.text for part in message.content if part.type == "text"]
            return f"Echo: {' '.join(texts)}"
    return "Echo: (no user message)"


def _usage(messages: Sequence[ChatMessage], answer: AiMessage) -> TokenUsage:
    prompt = pydantic_core.to_json(list(messages), fallback=str)
    completion = len(answer.text or "") + sum(
        len(c.name) + len(c.arguments) for c in answer.tool_calls
    )
    input_tokens, output_tokens = _tokens(len(prompt)), _tokens(completion)
    return TokenUsage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        total_tokens=input_tokens + output_tokens,
    )


def _tokens(characters: int) -> int:
    return (characters + 3) // 4
