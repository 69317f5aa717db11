"""Public types for public surfaces, and async `before_tool_call`/`after_tool_call` hooks."""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Sequence
from typing import Any

import pytest

import agentforge_typed
from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatRequestParameters,
    FunctionModel,
    HandlerTimeoutError,
    ToolCall,
    ToolContext,
    ToolExecution,
    ToolExecutionResult,
    ToolService,
    tool,
)

PUBLIC = ("loop", "providers", "serving", "stores", "tools")

HOMES = {
    "AfterToolCall": "agentforge_typed.loop._registry",
    "ArgumentsErrorHandler": "agentforge_typed.loop._registry",
    "BeforeToolCall": "agentforge_typed.loop._registry",
    "ExecutionErrorHandler": "agentforge_typed.loop._registry",
    "UnknownToolHandler": "agentforge_typed.loop._registry",
    "ModelFunction": "agentforge_typed.providers._function",
    "ToolLike": "agentforge_typed.tools._base",
    "MCPTool": "agentforge_typed.tools.mcp._server",
    "ErrorKind": "agentforge_typed._records",
    "Dialect": "agentforge_typed.providers._dialects",
    "HandlerTimeoutError": "agentforge_typed.tools._invoke",
}


@pytest.mark.parametrize("name", sorted(HOMES))
def test_public_surface_types_are_exported(name: str) -> None:
    value = getattr(importlib.import_module(HOMES[name]), name)
    public = [
        module
        for module in ("agentforge_typed", *(f"agentforge_typed.{sub}" for sub in PUBLIC))
        if name in importlib.import_module(module).__all__
    ]
    assert len(public) == 1, public  # one documented home (docs/reference/api.md)
    assert getattr(importlib.import_module(public[0]), name) is value
    assert getattr(agentforge_typed, name) is value  # and still importable from the top


async def test_a_timeout_result_carries_the_exported_timeout_error() -> None:
    @tool(timeout=0.05)
    async def slow() -> str:
        await asyncio.sleep(30)
        return "late"

    result = await slow.aexecute(ToolCall(id="c", name="slow", arguments="{}"))
    assert result.error_kind == "timeout"
    assert isinstance(result.exception, HandlerTimeoutError)
    assert result.exception.timeout == 0.05


# -- async hooks -------------------------------------------------------------------------------


@tool
def transfer(amount: int) -> str:
    return f"sent {amount}"


def _script() -> tuple[FunctionModel, list[int]]:
    turns: list[int] = []

    def reply(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        turns.append(1)
        if len(turns) == 1:
            return AiMessage(
                tool_calls=[
                    ToolCall(id="small", name="transfer", arguments='{"amount": 5}'),
                    ToolCall(id="big", name="transfer", arguments='{"amount": 5000}'),
                ]
            )
        return AiMessage(text="done")

    return FunctionModel(reply), turns


async def approve(call: ToolCall, context: ToolContext[Any]) -> str | None:
    await asyncio.sleep(0)  # e.g. ask an approval service
    return "denied: needs approval" if '"amount": 5000' in call.arguments else None


@pytest.mark.parametrize("driver", ["achat", "astream"])
async def test_async_hooks_run_under_achat_and_astream(driver: str) -> None:
    seen: list[tuple[str, str]] = []

    async def audit(execution: ToolExecution) -> None:
        await asyncio.sleep(0)
        seen.append((execution.call.id, execution.result.text))

    service = ToolService([transfer], before_tool_call=approve, after_tool_call=audit)
    model, _ = _script()
    if driver == "achat":
        result = await service.achat(model, "pay")
    else:
        events = [event async for event in service.astream(model, "pay")]
        result = events[-1].result  # type: ignore[union-attr]
    assert [e.result.text for e in result.tool_executions] == [
        "sent 5",
        "denied: needs approval",
    ]
    assert sorted(seen) == [("big", "denied: needs approval"), ("small", "sent 5")]


@pytest.mark.parametrize("hook", ["before_tool_call", "after_tool_call"])
async def test_an_async_hook_under_chat_or_stream_is_a_type_error_before_any_model_call(
    hook: str,
) -> None:
    async def audit(execution: ToolExecution) -> None:
        return None

    service = (
        ToolService([transfer], before_tool_call=approve)
        if hook == "before_tool_call"
        else ToolService([transfer], after_tool_call=audit)
    )
    model, turns = _script()
    message = f"{hook} is an async function: it runs only under achat/astream"
    with pytest.raises(TypeError, match=message):
        await asyncio.to_thread(lambda: service.chat(model, "pay"))
    with pytest.raises(TypeError, match=message):
        await asyncio.to_thread(lambda: list(service.stream(model, "pay")))
    assert turns == []
    assert (await service.achat(model, "pay")).text == "done"


def test_a_sync_hook_returning_a_coroutine_is_a_clear_type_error() -> None:
    def sneaky(call: ToolCall, context: ToolContext[Any]) -> Any:
        return approve(call, context)  # a coroutine, never awaited by a blocking run

    service = ToolService([transfer], before_tool_call=sneaky)
    # Closed, not leaked: an unawaited coroutine would be a RuntimeWarning (an error here).
    with pytest.raises(TypeError, match="before_tool_call returned an awaitable"):
        service.chat(_script()[0], "pay")


def test_sync_hooks_are_unchanged() -> None:
    seen: list[str] = []

    def deny_big(call: ToolCall, context: ToolContext[Any]) -> ToolExecutionResult | None:
        if '"amount": 5000' in call.arguments:
            return ToolExecutionResult.error("denied", "denied")
        return None

    service = ToolService(
        [transfer], before_tool_call=deny_big, after_tool_call=lambda e: seen.append(e.call.id)
    )
    result = service.chat(_script()[0], "pay")
    assert [e.result.error_kind for e in result.tool_executions] == [None, "denied"]
    assert seen == ["small", "big"]
