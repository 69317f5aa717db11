"""Run a `ToolService` under each of its four drivers and get the `ToolChatResult` back."""

from __future__ import annotations

import asyncio
from typing import Any

from agentforge_typed import ChatModel, FinalResultEvent, ToolChatResult, ToolService

DRIVERS = ["chat", "achat", "stream", "astream"]


def drive(
    driver: str, service: ToolService[Any], model: ChatModel, prompt: Any, **kw: Any
) -> ToolChatResult[Any]:
    """`service.<driver>(model, prompt, **kw)` run to the end; the streams' last event's result."""
    if driver == "chat":
        return service.chat(model, prompt, **kw)
    if driver == "achat":
        return asyncio.run(service.achat(model, prompt, **kw))
    if driver == "stream":
        last = list(service.stream(model, prompt, **kw))[-1]
    else:

        async def consume() -> Any:
            return [event async for event in service.astream(model, prompt, **kw)][-1]

        last = asyncio.run(consume())
    assert isinstance(last, FinalResultEvent)
    return last.result
