"""Static-typing contract of the result cache (`@tool(cache=...)`) and runs as tools
(`ToolService.as_tool`): the cache options are typed, a cached tool keeps its signature, a
sub-run tool's result type follows `output_type`, and `SubRunEvent` is a `ToolLoopEvent`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel
from typing_extensions import assert_type

from agentforge_typed import (
    AiMessage,
    FunctionModel,
    Tool,
    ToolExecution,
    ToolLoopEvent,
    ToolService,
    tool,
)
from agentforge_typed.loop import SubRunEvent
from agentforge_typed.tools import (
    MemoryCache,
    ResultCache,
    ToolAnnotations,
    ToolExecutionResult,
    ToolOptions,
)


@tool(cache=60, annotations=ToolAnnotations(read_only=True))
def rate(currency: str) -> float:
    return 1.0


checked_rate: Tool[[str], float] = rate
assert_type(rate("USD"), float)
assert_type(rate.cache, ResultCache | None)

memory = MemoryCache(ttl=60.0, max_entries=10, max_bytes=1_000)
kept: ResultCache = memory
assert_type(memory.get("key"), ToolExecutionResult | None)
assert_type(len(memory), int)
assert_type(memory.size, int)

options: ToolOptions = {"cache": memory, "cache_shared": True, "cache_force": False}
bad: ToolOptions = {"cache": "60"}  # type: ignore[typeddict-item]


@tool(**options)
def shared(key: str) -> str:
    return key


def cached(execution: ToolExecution) -> bool:
    assert_type(execution.result.cached, bool)
    return execution.cached


class Sum(BaseModel):
    total: int


model = FunctionModel(lambda messages, parameters: AiMessage(text="done"))
service = ToolService()
assert_type(service.as_tool(model, name="helper", description="Helps."), Tool[..., str])
assert_type(
    service.as_tool(model, name="adder", description="Adds.", output_type=Sum, max_depth=2),
    Tool[..., Sum],
)
service.as_tool(model, name="helper")  # type: ignore[call-overload]


def sub_run_paths(events: Iterator[ToolLoopEvent[Any]]) -> list[tuple[str, ...]]:
    paths = []
    for event in events:
        if isinstance(event, SubRunEvent):
            assert_type(event.path, tuple[str, ...])
            assert_type(event.call_ids, tuple[str, ...])
            paths.append(event.path)
    return paths
