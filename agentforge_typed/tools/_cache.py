"""A tool's result cache (`@tool(cache=...)`): a read that costs, paid for once.

A call's key is the tool's name, its canonical validated arguments (JSON with sorted keys), its
conversation (unless the tool declares its result shared) and the deps' declared `cache_key`, all
hashed (SHA-256). A hit answers the call with the kept result, marked `cached` (the body does not
run); a successful result is kept; an error result never is.

Concurrent identical calls run the body once (single flight, whichever drivers and threads they
come from): the first runs it, the others wait for its outcome. When the body fails, the waiters
get its error result (the body is not run again for them; the next call runs it); when the first
is cancelled, one waiter runs the body in its place.

The cache is the program's own code (`ResultCache`): whatever it raises or returns is contained.
A `get` that raises or returns something that is not a result is a miss, a `put` that raises
keeps nothing; either is logged, and the call is answered as without a cache.

`StoreCache` keeps the results in a conversation store's database (`get_result`/`put_result`
of `MemoryStore`, `SQLiteStore`, `PostgresStore`): shared by every process of the database and
kept across restarts, as JSON (a value comes back as its JSON form). The async drivers await
its `aget`/`aput` (the store's worker threads), never blocking the event loop.
"""

from __future__ import annotations

import concurrent.futures
import functools
import hashlib
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import fields
from typing import Any, Protocol, runtime_checkable

import pydantic_core

from .._records import ToolExecutionResult

__all__ = [
    "DEFAULT_MAX_CACHE_BYTES",
    "DEFAULT_MAX_CACHE_ENTRIES",
    "CachedCalls",
    "MemoryCache",
    "ResultCache",
    "StoreCache",
    "cache_key",
    "cached_copy",
    "check_cache",
    "result_size",
]

logger = logging.getLogger("agentforge_typed")

DEFAULT_MAX_CACHE_ENTRIES = 1024
"""The most results a `MemoryCache` keeps by default; one more evicts the least recently used."""
DEFAULT_MAX_CACHE_BYTES = 64 * 1024 * 1024
"""The most bytes (`result_size`) a `MemoryCache` keeps by default (64 MiB)."""


@runtime_checkable
class ResultCache(Protocol):
    """Where a cached tool keeps its results (`@tool(cache=...)`): `MemoryCache` by default.

    Keys are hex digests (they say nothing of the arguments); a value is the result as the tool
    made it. Called from any thread, and from the event loop's under `achat`/`astream`: keep both
    quick. Whatever they raise is contained (a miss; nothing kept)."""

    def get(self, key: str) -> ToolExecutionResult | None:
        """The result kept under `key`, or `None` (unknown, or expired)."""
        ...

    def put(self, key: str, result: ToolExecutionResult) -> None:
        """Keep `result` under `key` (a cache may decline: too large, say)."""
        ...


def result_size(result: ToolExecutionResult) -> int:
    """A result's size as a cache counts it: the UTF-8 bytes of its text (its whole text, when
    cut to the result budget) and its parts' `wire_size`."""
    full = result.full_text
    size = len((result.text if full is None else full).encode("utf-8", "replace"))
    for part in result.content:
        size += getattr(part, "wire_size", lambda: 0)()
    return size


class MemoryCache:
    """A bounded in-memory `ResultCache`: least recently used first out, each entry for `ttl`
    seconds. `@tool(cache=60)` is `@tool(cache=MemoryCache(ttl=60))`.

    Args:
        ttl: Seconds a result is served (`None`: until evicted).
        max_entries: The most results kept (default 1,024).
        max_bytes: The most bytes kept (`result_size`; default 64 MiB); a larger result is not
            kept at all.

    Raises:
        ValueError: A bound that is not a positive number.
    """

    def __init__(
        self,
        ttl: float | None = None,
        *,
        max_entries: int = DEFAULT_MAX_CACHE_ENTRIES,
        max_bytes: int = DEFAULT_MAX_CACHE_BYTES,
    ) -> None:
        if ttl is not None:
            _check_ttl(ttl)
        _check_bounds("MemoryCache", max_entries, max_bytes)
        self.ttl, self.max_entries, self.max_bytes = ttl, max_entries, max_bytes
        self._entries: OrderedDict[str, tuple[ToolExecutionResult, float, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def size(self) -> int:
        """The bytes kept now (`result_size` summed)."""
        return self._bytes

    def get(self, key: str) -> ToolExecutionResult | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            if entry[1] <= time.monotonic():
                self._remove(key)
                return None
            self._entries.move_to_end(key)
            return entry[0]

    def put(self, key: str, result: ToolExecutionResult) -> None:
        size = result_size(result)
        until = float("inf") if self.ttl is None else time.monotonic() + self.ttl
        with self._lock:
            if key in self._entries:
                self._remove(key)
            if size > self.max_bytes:
                return
            while self._entries and (
                len(self._entries) >= self.max_entries or self._bytes + size > self.max_bytes
            ):
                self._remove(next(iter(self._entries)))
            self._entries[key] = (result, until, size)
            self._bytes += size

    def clear(self) -> None:
        """Forget every result."""
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def _remove(self, key: str) -> None:
        self._bytes -= self._entries.pop(key)[2]


class StoreCache:
    """A `ResultCache` in a conversation store's database (`MemoryStore`, `SQLiteStore`,
    `PostgresStore`): shared by the processes that open the database, kept across restarts,
    least recently used first out, each entry for `ttl` seconds.

    A result is kept as JSON: its text, its value's JSON form (a hit gives that form: a model
    comes back as a dict), its parts; one whose value has no JSON form is not kept. The async
    drivers use `aget`/`aput`, run on the store's own threads.

    Args:
        store: The store whose database keeps the results (it has `get_result`/`put_result`).
        ttl: Seconds a result is served (`None`: until evicted).
        max_entries: The most results kept (default 1,024).
        max_bytes: The most bytes of JSON kept (default 64 MiB); a larger result is not kept.

    Raises:
        TypeError: A store that cannot keep results.
        ValueError: A bound that is not a positive number.
    """

    def __init__(
        self,
        store: Any,
        ttl: float | None = None,
        *,
        max_entries: int = DEFAULT_MAX_CACHE_ENTRIES,
        max_bytes: int = DEFAULT_MAX_CACHE_BYTES,
    ) -> None:
        if not callable(getattr(store, "get_result", None)) or not callable(
            getattr(store, "put_result", None)
        ):
            raise TypeError(
                f"StoreCache needs a store that keeps results (get_result/put_result), not "
                f"{type(store).__name__}"
            )
        if ttl is not None:
            _check_ttl(ttl)
        _check_bounds("StoreCache", max_entries, max_bytes)
        self.store, self.ttl = store, ttl
        self.max_entries, self.max_bytes = max_entries, max_bytes

    def __repr__(self) -> str:
        return f"StoreCache({self.store!r}, ttl={self.ttl!r})"

    def get(self, key: str) -> ToolExecutionResult | None:
        kept = self.store.get_result(key)
        return None if kept is None else _decoded(kept)

    def put(self, key: str, result: ToolExecutionResult) -> None:
        encoded = _encoded(result)
        if encoded is not None and len(encoded) <= self.max_bytes:
            self.store.put_result(key, encoded, **self._bounds())

    async def aget(self, key: str) -> ToolExecutionResult | None:
        kept = await self.store.aget_result(key)
        return None if kept is None else _decoded(kept)

    async def aput(self, key: str, result: ToolExecutionResult) -> None:
        encoded = _encoded(result)
        if encoded is not None and len(encoded) <= self.max_bytes:
            await self.store.aput_result(key, encoded, **self._bounds())

    def _bounds(self) -> dict[str, Any]:
        return {"ttl": self.ttl, "max_entries": self.max_entries, "max_bytes": self.max_bytes}


@functools.cache
def _parts() -> Any:
    from pydantic import TypeAdapter

    from .._content import Content

    return TypeAdapter(list[Content])


def _encoded(result: ToolExecutionResult) -> bytes | None:
    """A successful result as a store keeps it (JSON); `None` when its value has no JSON form."""
    whole = result.full_text
    form: dict[str, Any] = {"text": result.text}
    if whole is not None:
        form["full_text"] = whole
    if isinstance(result.value, str) and result.value == (result.text if whole is None else whole):
        form["value_is_text"] = True
    else:
        try:
            form["value"] = pydantic_core.to_jsonable_python(result.value)
        except pydantic_core.PydanticSerializationError:
            return None
    if result.content:
        form["content"] = _parts().dump_python(list(result.content), mode="json")
        form["content_notes"] = list(result.content_notes)
    return pydantic_core.to_json(form)


def _decoded(kept: bytes) -> ToolExecutionResult:
    """A kept result as the loop records it (raises `ValueError` for what is not one)."""
    from ._budget import _ContentResult, _CutResult

    form = pydantic_core.from_json(kept)
    text, whole = form["text"], form.get("full_text")
    if not isinstance(text, str) or not isinstance(whole, str | None):
        raise ValueError("a kept result without its text")
    value = (text if whole is None else whole) if form.get("value_is_text") else form.get("value")
    if "content" in form:
        parts = tuple(_parts().validate_python(form["content"]))
        notes = tuple(str(note) for note in form.get("content_notes", ()))
        return _ContentResult(text, value, False, None, (), None, whole, parts, parts, notes)
    if whole is not None:
        return _CutResult(text, value, False, None, (), None, whole)
    return ToolExecutionResult(text, value)


def _check_bounds(kind: str, max_entries: object, max_bytes: object) -> None:
    for name, bound in (("max_entries", max_entries), ("max_bytes", max_bytes)):
        if isinstance(bound, bool) or not isinstance(bound, int) or bound < 1:
            raise ValueError(f"{kind} {name} must be a positive int, got {bound!r}")


def _check_ttl(ttl: object) -> float:
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not 0 < ttl < float("inf"):
        raise ValueError(f"a cache TTL must be a positive number of seconds, got {ttl!r}")
    return ttl


def check_cache(cache: object) -> ResultCache:
    """`cache=` as a `ResultCache`: a TTL in seconds makes a `MemoryCache`.

    Raises:
        ValueError: A TTL that is not positive.
        TypeError: Neither a number nor an object with `get` and `put`.
    """
    if isinstance(cache, int | float) and not isinstance(cache, bool):
        return MemoryCache(_check_ttl(cache))
    if isinstance(cache, ResultCache):
        return cache
    raise TypeError(
        f"cache= takes a TTL in seconds or a ResultCache (get/put), not {type(cache).__name__}"
    )


def cache_key(name: str, fields: dict[str, Any], conversation: str | None, deps: Any) -> str:
    """The key of a call: its tool, its canonical validated arguments, its conversation (`None`
    when the result is shared) and the deps' `cache_key`, hashed.

    Raises:
        TypeError: The deps' `cache_key` is not a `str`.
        pydantic_core.PydanticSerializationError: An argument has no JSON form.
    """
    scope = getattr(deps, "cache_key", None) if deps is not None else None
    if scope is not None and not isinstance(scope, str):
        raise TypeError(f"deps.cache_key must be a str, not {type(scope).__name__}")
    canonical = json.dumps(
        ["agentforge-cache/1", name, conversation, scope, pydantic_core.to_jsonable_python(fields)],
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


_HIT_CLASSES: dict[type[ToolExecutionResult], type[ToolExecutionResult]] = {}


def cached_copy(result: ToolExecutionResult, repairs: tuple[str, ...]) -> ToolExecutionResult:
    """A copy of the kept `result` marked `cached`, with this call's repairs."""
    kind = type(result)
    marked = _HIT_CLASSES.get(kind)
    if marked is None:
        if kind in _HIT_CLASSES.values():  # already a hit's class
            marked = kind
        else:
            name = f"Cached{kind.__name__.lstrip('_')}"
            marked = type(name, (kind,), {"__slots__": (), "cached": True})
        marked = _HIT_CLASSES.setdefault(kind, marked)
    values = {field.name: getattr(result, field.name) for field in fields(result) if field.init}
    values["repairs"] = repairs
    return marked(**values)


def _contained_get(cache: ResultCache, key: str, tool: str) -> ToolExecutionResult | None:
    try:
        kept = cache.get(key)
    except Exception:
        logger.warning("the result cache of tool %r raised on get: a miss", tool, exc_info=True)
        return None
    return _usable(kept, tool)


async def _acontained_get(cache: ResultCache, key: str, tool: str) -> ToolExecutionResult | None:
    """`_contained_get`, awaiting the cache's `aget` when it has one."""
    aget = getattr(cache, "aget", None)
    if aget is None:
        return _contained_get(cache, key, tool)
    try:
        kept = await aget(key)
    except Exception:
        logger.warning("the result cache of tool %r raised on get: a miss", tool, exc_info=True)
        return None
    return _usable(kept, tool)


def _usable(kept: object, tool: str) -> ToolExecutionResult | None:
    if kept is None or (isinstance(kept, ToolExecutionResult) and not kept.is_error):
        return kept
    logger.warning("the result cache of tool %r returned %s: a miss", tool, type(kept).__name__)
    return None


def _contained_put(cache: ResultCache, key: str, result: ToolExecutionResult, tool: str) -> None:
    try:
        cache.put(key, result)
    except Exception:
        logger.warning("the result cache of tool %r raised on put", tool, exc_info=True)


async def _acontained_put(
    cache: ResultCache, key: str, result: ToolExecutionResult, tool: str
) -> None:
    """`_contained_put`, awaiting the cache's `aput` when it has one."""
    aput = getattr(cache, "aput", None)
    if aput is None:
        _contained_put(cache, key, result, tool)
        return
    try:
        await aput(key, result)
    except Exception:
        logger.warning("the result cache of tool %r raised on put", tool, exc_info=True)


_ABANDONED = object()
"""A flight's outcome when its runner was cancelled: a waiter runs the body instead."""


class CachedCalls:
    """A tool's cache and its calls in flight, by key (shared by a tool's bound copies)."""

    __slots__ = ("cache", "flights", "force", "lock", "shared")

    def __init__(self, cache: ResultCache, *, shared: bool, force: bool) -> None:
        self.cache, self.shared, self.force = cache, shared, force
        self.flights: dict[str, concurrent.futures.Future[Any]] = {}
        self.lock = threading.Lock()

    def key(
        self, name: str, fields: dict[str, Any], conversation: str | None, deps: Any
    ) -> str | None:
        """The call's key; `None` when it cannot be cached: outside a conversation for a result
        that is not shared, or an argument without a JSON form.

        Raises:
            TypeError: The deps' `cache_key` is not a `str` (see `cache_key`).
        """
        if conversation is None and not self.shared:
            return None
        try:
            return cache_key(name, fields, None if self.shared else conversation, deps)
        except pydantic_core.PydanticSerializationError:
            return None

    def _join(self, key: str) -> tuple[concurrent.futures.Future[Any], bool]:
        with self.lock:
            flight = self.flights.get(key)
            if flight is not None:
                return flight, False
            flight = self.flights[key] = concurrent.futures.Future()
            return flight, True

    def _land(
        self,
        key: str,
        flight: concurrent.futures.Future[Any],
        outcome: Any,
        tool: str,
    ) -> None:
        if isinstance(outcome, ToolExecutionResult) and not outcome.is_error:
            _contained_put(self.cache, key, outcome, tool)
        self._settle(key, flight, outcome)

    def _settle(self, key: str, flight: concurrent.futures.Future[Any], outcome: Any) -> None:
        with self.lock:
            if self.flights.get(key) is flight:
                del self.flights[key]
        if not flight.done():
            flight.set_result(outcome)

    def run(
        self,
        key: str,
        tool: str,
        repairs: tuple[str, ...],
        body: Callable[[], ToolExecutionResult],
    ) -> ToolExecutionResult:
        """The call's result: kept, awaited from the identical call in flight, or `body()`."""
        while True:
            kept = _contained_get(self.cache, key, tool)
            if kept is not None:
                return cached_copy(kept, repairs)
            flight, first = self._join(key)
            if not first:
                if _loop_running():
                    # Blocking here could hold the loop the call in flight needs: run it too.
                    return body()
                awaited = flight.result()
                if awaited is _ABANDONED:
                    continue
                return _shared(awaited, repairs)
            outcome: Any = _ABANDONED
            try:
                outcome = result = body()
            finally:
                self._land(key, flight, outcome, tool)
            return result

    async def arun(
        self,
        key: str,
        tool: str,
        repairs: tuple[str, ...],
        body: Callable[[], Awaitable[ToolExecutionResult]],
    ) -> ToolExecutionResult:
        """`run` for the async drivers: a waiter awaits the call in flight without blocking."""
        import asyncio

        while True:
            kept = await _acontained_get(self.cache, key, tool)
            if kept is not None:
                return cached_copy(kept, repairs)
            flight, first = self._join(key)
            if not first:
                # Shielded: a cancelled waiter must not cancel the flight the others wait on.
                awaited = await asyncio.shield(asyncio.wrap_future(flight))
                if awaited is _ABANDONED:
                    continue
                return _shared(awaited, repairs)
            outcome: Any = _ABANDONED
            try:
                outcome = result = await body()
                if not result.is_error:
                    await _acontained_put(self.cache, key, result, tool)
            finally:
                self._settle(key, flight, outcome)
            return result


def _shared(outcome: ToolExecutionResult, repairs: tuple[str, ...]) -> ToolExecutionResult:
    """A waiter's answer: the flight's result, a hit when it succeeded (no body ran for it)."""
    if outcome.is_error:
        return outcome
    return cached_copy(outcome, repairs)


def _loop_running() -> bool:
    import sys

    asyncio = sys.modules.get("asyncio")
    return asyncio is not None and asyncio._get_running_loop() is not None
