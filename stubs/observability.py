"""Static-typing contract of usage limits and instrumentation."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

from typing_extensions import assert_type

from agentforge_typed import (
    AgentForgeError,
    AiMessage,
    ChatMessage,
    ChatRequestParameters,
    FunctionModel,
    ToolChatResult,
    ToolService,
    UsageLimitExceededError,
    UsageLimits,
)
from agentforge_typed.loop import FinishedChatResult, Instrumentation, PausedChatResult, instrument
from agentforge_typed.providers import TokenUsage
from opentelemetry.sdk.trace import TracerProvider


def reply(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
    return AiMessage(text="hi")


async def main() -> None:
    limits = UsageLimits(request_limit=3, tool_calls_limit=10, total_tokens_limit=50_000)
    service = ToolService(usage_limits=limits)
    model = FunctionModel(reply)
    assert_type(service.chat(model, "hi", usage_limits=UsageLimits()), FinishedChatResult[None] | PausedChatResult[None])
    assert_type(await service.achat(model, "hi", usage_limits=limits), FinishedChatResult[None] | PausedChatResult[None])
    for _ in service.stream(model, "hi", usage_limits=limits):
        pass
    async for _ in service.astream(model, "hi", usage_limits=None):
        pass
    try:
        service.chat(model, "hi")
    except UsageLimitExceededError as error:
        assert_type(error, UsageLimitExceededError)
        assert isinstance(error, AgentForgeError)
        assert_type(error.limit, str)
        assert_type(error.maximum, int)
        assert_type(error.value, int)

    UsageLimits(request_limit="3")  # type: ignore[arg-type]
    service.chat(model, "hi", usage_limits=5)  # type: ignore[call-overload]
    limits.request_limit = 4  # type: ignore[misc]


def tracing() -> None:
    handle = instrument(TracerProvider(), include_content=True)
    assert_type(handle, Instrumentation)
    assert_type(handle.active, bool)
    handle.uninstrument()
    with instrument() as scoped:
        assert_type(scoped, Instrumentation)
    assert_type(instrument(False), Instrumentation)

    instrument("otlp")  # type: ignore[arg-type]
    instrument(include_content="yes")  # type: ignore[arg-type]


def cost(result: ToolChatResult[None]) -> None:
    assert_type(result.usage.cost, Decimal | None)
    TokenUsage(cost=0.5)  # type: ignore[arg-type]
