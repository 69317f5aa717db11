"""`StoreCache`: a tool's results kept in a conversation store's database, over every store kind
(`MemoryStore`, `SQLiteStore`, `PostgresStore` started by the tests): shared by the stores that
open one database, expiring, bounded least-recently-used first, and served to the loop's four
drivers (the async ones through the store's own threads)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import postgres_server
import pytest
import store_support
from conformance import Surface
from pydantic import BaseModel
from store_support import ALL, Opener

from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatRequestParameters,
    FunctionModel,
    StoreCache,
    ToolAnnotations,
    ToolCall,
    ToolExecutionResult,
    ToolResultMessage,
    ToolService,
    tool,
)
from agentforge_typed.tools._budget import cut_result

opener = store_support.opener
postgres = postgres_server.postgres


def kept(text: str, value: Any = None) -> ToolExecutionResult:
    return ToolExecutionResult(text, text if value is None else value)


@pytest.mark.parametrize("surface", ALL)
def test_a_result_round_trips_and_every_store_of_the_database_reads_it(
    opener: Opener, surface: Surface[Any]
) -> None:
    class City(BaseModel):
        name: str
        people: int

    cache = StoreCache(opener(), ttl=60)
    cache.put("a" * 64, kept('{"name":"Oslo","people":709000}', City(name="Oslo", people=709000)))
    cache.put("b" * 64, kept("sunny"))
    cache.put("c" * 64, cut_result("x" * 500, 100, "x" * 500))
    model = cache.get("a" * 64)
    assert model is not None and model.text == '{"name":"Oslo","people":709000}'
    assert model.value == {"name": "Oslo", "people": 709000}  # its JSON form
    text = cache.get("b" * 64)
    assert text is not None and (text.text, text.value) == ("sunny", "sunny")
    cut = cache.get("c" * 64)
    assert cut is not None and cut.full_text == "x" * 500 and cut.value == "x" * 500
    assert len(cut.text) < 500
    assert cache.get("d" * 64) is None
    if opener.shared:
        other = StoreCache(opener(), ttl=60).get("b" * 64)
        assert other is not None and other.text == "sunny"


@pytest.mark.parametrize("surface", ALL)
def test_a_result_expires_after_its_ttl(opener: Opener, surface: Surface[Any]) -> None:
    cache = StoreCache(opener(), ttl=0.4)
    cache.put("k" * 64, kept("soon gone"))
    assert cache.get("k" * 64) is not None
    time.sleep(0.6)
    assert cache.get("k" * 64) is None


@pytest.mark.parametrize("surface", ALL)
def test_bounded_the_least_recently_used_go_first_past_the_entries_and_the_bytes(
    opener: Opener, surface: Surface[Any]
) -> None:
    store = opener()
    cache = StoreCache(store, max_entries=3)
    for key in "abc":
        cache.put(key * 64, kept(key))
        time.sleep(0.01)  # distinct use times, whatever the clock's grain
    assert cache.get("a" * 64) is not None  # used: "b" is now the least recently used
    time.sleep(0.01)
    cache.put("d" * 64, kept("d"))
    assert [cache.get(k * 64) is not None for k in "abcd"] == [True, False, True, True]

    # Bytes: each entry's JSON is 35 bytes here; three fit in 110, a fourth evicts the oldest.
    small = StoreCache(opener(), max_bytes=110)
    store_keys = ["e", "f", "g", "h"]
    for key in store_keys:
        small.put(key * 64, kept(key * 3))
        time.sleep(0.01)
    assert [small.get(k * 64) is not None for k in store_keys] == [False, True, True, True]
    # A result over the cap is never kept.
    small.put("i" * 64, kept("i" * 200))
    assert small.get("i" * 64) is None


def test_a_value_with_no_json_form_is_not_kept() -> None:
    from agentforge_typed.stores import MemoryStore

    cache = StoreCache(MemoryStore())
    cache.put("k" * 64, ToolExecutionResult("an object", object()))
    assert cache.get("k" * 64) is None


def test_a_store_that_keeps_no_results_and_bad_bounds_are_refused() -> None:
    from agentforge_typed.stores import MemoryStore

    with pytest.raises(TypeError, match="StoreCache needs a store that keeps results"):
        StoreCache(object())
    with pytest.raises(ValueError, match="StoreCache max_entries must be a positive int"):
        StoreCache(MemoryStore(), max_entries=0)
    with pytest.raises(ValueError, match="a cache TTL must be a positive number"):
        StoreCache(MemoryStore(), ttl=-1)


@pytest.mark.parametrize("surface", ALL)
@pytest.mark.parametrize("driver", ["chat", "achat"])
def test_a_cached_tool_runs_once_for_every_service_on_the_database(
    opener: Opener, surface: Surface[Any], driver: str
) -> None:
    runs: list[str] = []
    store = opener()

    @tool(
        cache=StoreCache(store, ttl=60),
        cache_shared=True,
        annotations=ToolAnnotations(read_only=True),
    )
    def forecast(city: str) -> str:
        """The forecast."""
        runs.append(city)
        return f"sunny in {city}"

    def asking(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        if isinstance(messages[-1], ToolResultMessage):
            return AiMessage(text=messages[-1].text)
        call = ToolCall(id="f", name="forecast", arguments='{"city": "Oslo"}')
        return AiMessage(tool_calls=[call])

    model = FunctionModel(asking)
    for conversation in ("one", "two"):  # a new service each time: as after a restart
        service = ToolService(tools=[forecast])
        if driver == "chat":
            result = service.chat(model, "weather?", conversation_id=conversation)
        else:
            result = asyncio.run(service.achat(model, "weather?", conversation_id=conversation))
        assert result.text == "sunny in Oslo"
    assert runs == ["Oslo"]
    assert result.tool_executions[0].cached


async def test_the_async_drivers_await_the_store_and_never_block_the_loop() -> None:
    from agentforge_typed.stores import MemoryStore

    awaited: list[str] = []

    class Watched(MemoryStore):
        async def aget_result(self, key: str) -> bytes | None:
            awaited.append("get")
            await asyncio.sleep(0)
            return self.get_result(key)

        async def aput_result(self, key: str, value: bytes, **bounds: Any) -> None:
            awaited.append("put")
            await asyncio.sleep(0)
            self.put_result(key, value, **bounds)

        def get_result(self, key: str) -> bytes | None:
            return super().get_result(key)

    store = Watched()

    @tool(cache=StoreCache(store, ttl=60), annotations=ToolAnnotations(read_only=True))
    def forecast(city: str) -> str:
        """The forecast."""
        return f"sunny in {city}"

    call = ToolCall(id="f", name="forecast", arguments='{"city": "Oslo"}')
    model = FunctionModel(
        lambda messages, parameters: (
            AiMessage(text=messages[-1].text)
            if isinstance(messages[-1], ToolResultMessage)
            else AiMessage(tool_calls=[call])
        )
    )
    service = ToolService(tools=[forecast])
    await service.achat(model, "weather?", conversation_id="c")
    again = await service.achat(model, "weather?", conversation_id="c")
    assert awaited == ["get", "put", "get"] and again.tool_executions[0].cached
