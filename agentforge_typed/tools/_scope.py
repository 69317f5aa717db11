"""State that outlives a call, kept by its owner: the conversation, and the run within it.

Shared objects (an `MCPServer`, a `ToolService`, a model) serve many conversations at once, so
they keep nothing that belongs to one of them. What a call leaves for a later call (a question
the run paused on, a request left open for its answer) is kept in the scope of its conversation
(`conversation_id`), under a key that starts with the object that keeps it, so that two
servers' entries never meet and an id the model chose means nothing across conversations.

A run gives its calls its `Scope` (`ToolContext.scope`, made when a call first asks for it, so
a run none of whose calls keeps anything creates nothing). What a call puts there belongs to
the run and is removed when the run ends, however it ends (it returns, fails, is cancelled, its
stream is closed), with the entry's `drop` called (to cancel a request still open, say) —
except what the call marks `keep` when the run ends with its result: a question the run paused
on, left for the run that resumes it until its TTL passes. A call outside a run (a direct
`tool.execute`, a durable activity) has no run to end: what it keeps lives for its TTL.

Bounded: every entry has a TTL; a conversation keeps at most `MAX_ENTRIES` entries (making room
drops the one due soonest); at most `MAX_CONVERSATIONS` conversations keep anything (making room
drops the least recently used one, whole). Expired entries are removed (and dropped) at the next
use of the registry.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

__all__ = ["MAX_CONVERSATIONS", "MAX_ENTRIES", "Scope"]

MAX_ENTRIES = 100
"""The most entries one conversation keeps; putting one more drops the entry due soonest."""
MAX_CONVERSATIONS = 10_000
"""The most conversations keeping entries at once; a new one drops the least recently used."""

Drop = Callable[[], object]
"""Called (once, without the registry's lock) when an entry is removed other than by `take`:
its TTL passed, it made room for another, or the run that held it ended without keeping it."""


class _Entry:
    __slots__ = ("drop", "until", "value")

    def __init__(self, value: Any, until: float, drop: Drop | None) -> None:
        self.value, self.until, self.drop = value, until, drop


class _Registry:
    """Every conversation's entries, by conversation id, least recently used first; one lock,
    as calls of one conversation may run on several threads (an MCP session's own loop)."""

    def __init__(self, max_conversations: int, max_entries: int) -> None:
        self.max_conversations, self.max_entries = max_conversations, max_entries
        self.lock = threading.Lock()
        self.conversations: OrderedDict[str, dict[Hashable, _Entry]] = OrderedDict()
        self.size = 0
        self._due: list[tuple[float, int, str, Hashable, _Entry]] = []
        """A heap of (until, n, conversation, key, entry); an item whose entry was removed or
        given another `until` since is skipped when it comes up."""
        self._order = itertools.count()

    def find(self, owner: str, key: Hashable) -> _Entry | None:
        """The live entry under `key` in `owner`'s conversation; caller holds the lock."""
        entries = self.conversations.get(owner)
        if entries is None:
            return None
        self.conversations.move_to_end(owner)
        return entries.get(key)

    def put(self, owner: str, key: Hashable, entry: _Entry, dropped: list[Drop]) -> None:
        """Store `entry` (replacing and dropping any under `key`); caller holds the lock."""
        entries = self.conversations.get(owner)
        if entries is not None:
            old = entries.get(key)
            if old is not None:
                self.remove(owner, key, old, dropped)
            elif len(entries) >= self.max_entries:
                soonest = min(entries, key=lambda k: entries[k].until)
                self.remove(owner, soonest, entries[soonest], dropped)
        if owner in self.conversations:
            self.conversations.move_to_end(owner)
        else:
            if len(self.conversations) >= self.max_conversations:
                _, evicted = self.conversations.popitem(last=False)
                self.size -= len(evicted)
                dropped += [e.drop for e in evicted.values() if e.drop is not None]
            self.conversations[owner] = {}
        self.conversations[owner][key] = entry
        self.size += 1
        self.schedule(owner, key, entry)

    def schedule(self, owner: str, key: Hashable, entry: _Entry) -> None:
        heapq.heappush(self._due, (entry.until, next(self._order), owner, key, entry))
        if len(self._due) > 2 * self.size + 64:  # TTLs refreshed often: drop the stale items
            self._due = [item for item in self._due if self._current(item)]
            heapq.heapify(self._due)

    def remove(self, owner: str, key: Hashable, entry: _Entry, dropped: list[Drop] | None) -> bool:
        """Remove `entry` if it is still the one under `key`, its `drop` added to `dropped`
        (when given); caller holds the lock."""
        entries = self.conversations.get(owner)
        if entries is None or entries.get(key) is not entry:
            return False
        del entries[key]
        self.size -= 1
        if not entries:
            del self.conversations[owner]
        if dropped is not None and entry.drop is not None:
            dropped.append(entry.drop)
        return True

    def expire(self, now: float, dropped: list[Drop]) -> None:
        """Remove the entries whose TTL has passed; caller holds the lock."""
        due = self._due
        while due and due[0][0] <= now:
            until, _, owner, key, entry = heapq.heappop(due)
            if entry.until == until:
                self.remove(owner, key, entry, dropped)

    def _current(self, item: tuple[float, int, str, Hashable, _Entry]) -> bool:
        until, _, owner, key, entry = item
        entries = self.conversations.get(owner)
        return entry.until == until and entries is not None and entries.get(key) is entry

    def clear(self) -> list[Drop]:
        """Remove everything (tests); the drops to call."""
        with self.lock:
            dropped = [e.drop for es in self.conversations.values() for e in es.values() if e.drop]
            self.conversations.clear()
            self._due.clear()
            self.size = 0
        return dropped


_REGISTRY = _Registry(MAX_CONVERSATIONS, MAX_ENTRIES)


def _call(dropped: list[Drop]) -> None:
    for drop in dropped:
        drop()


class Scope:
    """A run's (or a call's) hold on what its conversation keeps beyond a call.

    A `ToolService` run makes one when a call first asks for it (`ToolContext.scope`). Key each
    entry by something your tool owns first (the tool object, a server), then the call
    (`(self, context.tool_call_id)`): a conversation's scope is shared by every tool it calls.

    Args:
        conversation_id: The conversation whose state it reaches.
    """

    __slots__ = ("_held", "conversation_id")

    def __init__(self, conversation_id: str) -> None:
        self.conversation_id = conversation_id
        self._held: dict[Hashable, tuple[_Entry, bool]] | None = None
        """What this run put or took over, by key, and whether it keeps it past its end;
        `_CLOSED` once it ended."""

    def __repr__(self) -> str:
        return f"Scope({self.conversation_id!r})"

    def get(self, key: Hashable) -> Any:
        """The value kept under `key` in this conversation (`None` when none, or its TTL
        passed)."""
        dropped: list[Drop] = []
        with _REGISTRY.lock:
            _REGISTRY.expire(time.monotonic(), dropped)
            entry = _REGISTRY.find(self.conversation_id, key)
        _call(dropped)
        return None if entry is None else entry.value

    def put(self, key: Hashable, value: Any, *, ttl: float, drop: Drop | None = None) -> None:
        """Keep `value` under `key` for at most `ttl` seconds, held by this run: removed when
        the run ends unless `keep` says otherwise. `drop` is called when it is removed other
        than by `take` (at once, when this scope's run has ended already)."""
        dropped: list[Drop] = []
        with _REGISTRY.lock:
            if self._held is _CLOSED:
                dropped.append(drop or _nothing)
            else:
                now = time.monotonic()
                _REGISTRY.expire(now, dropped)
                entry = _Entry(value, now + ttl, drop)
                _REGISTRY.put(self.conversation_id, key, entry, dropped)
                self._hold(key, entry, kept=False)
        _call(dropped)

    def hold(self, key: Hashable, *, ttl: float) -> Any:
        """Take over the entry under `key` (one an earlier run kept): this run holds it now,
        for `ttl` more seconds. Its value, or `None` when there is none."""
        return self._refresh(key, ttl, kept=False)

    def keep(self, key: Hashable, *, ttl: float) -> None:
        """Let the entry under `key` outlive this run when the run ends with its result, for
        `ttl` seconds from now (a question the run pauses on)."""
        self._refresh(key, ttl, kept=True)

    def take(self, key: Hashable) -> Any:
        """Remove the entry under `key` without dropping it (done with it); its value, or
        `None` when there is none."""
        dropped: list[Drop] = []
        with _REGISTRY.lock:
            _REGISTRY.expire(time.monotonic(), dropped)
            entry = _REGISTRY.find(self.conversation_id, key)
            if entry is not None:
                _REGISTRY.remove(self.conversation_id, key, entry, None)
        _call(dropped)
        return None if entry is None else entry.value

    def discard(self, key: Hashable) -> None:
        """Remove the entry under `key`, dropping it."""
        dropped: list[Drop] = []
        with _REGISTRY.lock:
            entry = _REGISTRY.find(self.conversation_id, key)
            if entry is not None:
                _REGISTRY.remove(self.conversation_id, key, entry, dropped)
        _call(dropped)

    def close(self, *, finished: bool) -> None:
        """End the run's hold: every entry it put or took over is removed and dropped, except
        those it marked `keep` when the run `finished` (ended with its result). Later `put`s
        drop their entry at once."""
        if self._held is None or self._held is _CLOSED:  # most runs hold nothing: no lock
            self._held = _CLOSED
            return
        dropped: list[Drop] = []
        with _REGISTRY.lock:
            held, self._held = self._held, _CLOSED
            for key, (entry, kept) in held.items():
                if not (finished and kept):
                    _REGISTRY.remove(self.conversation_id, key, entry, dropped)
        _call(dropped)

    def _refresh(self, key: Hashable, ttl: float, *, kept: bool) -> Any:
        dropped: list[Drop] = []
        with _REGISTRY.lock:
            now = time.monotonic()
            _REGISTRY.expire(now, dropped)
            entry = _REGISTRY.find(self.conversation_id, key)
            if entry is not None:
                entry.until = now + ttl
                _REGISTRY.schedule(self.conversation_id, key, entry)
                if self._held is not _CLOSED:
                    self._hold(key, entry, kept=kept)
        _call(dropped)
        return None if entry is None else entry.value

    def _hold(self, key: Hashable, entry: _Entry, *, kept: bool) -> None:
        if self._held is None:
            self._held = {}
        self._held[key] = (entry, kept)


def _nothing() -> None:
    return None


_CLOSED: dict[Hashable, tuple[_Entry, bool]] = {}
"""A closed scope's `_held` (empty: nothing more to drop)."""
