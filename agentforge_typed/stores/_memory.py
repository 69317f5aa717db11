"""`MemoryStore`: conversations in this process's memory, with the same rules as the database
stores (claims, compare-and-swap saves, the size cap), for tests and for programs that keep
conversations only while they run."""

from __future__ import annotations

import itertools
import json
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from .._messages import ChatMessage
from ._base import (
    DEFAULT_CLAIM_TTL,
    DEFAULT_MAX_RECORD_BYTES,
    EMPTY_STATE,
    Claim,
    Conversation,
    ConversationInfo,
    ConversationPage,
    check_cap,
    check_size,
    check_ttl,
    conflict,
    encode,
    id_key,
    parse_cursor,
    seconds,
    utc,
)

__all__ = ["MemoryStore"]


@dataclass(slots=True)
class _Record:
    seq: int
    messages: tuple[ChatMessage, ...]
    state: bytes
    """The state as JSON: each read gets a copy of its own."""
    message_count: int
    size: int
    version: int
    created_at: float
    updated_at: float
    holder: str | None = None
    expires_at: float = 0.0


class MemoryStore:
    """Conversations kept in this process's memory: a `ConversationStore` for tests and
    single-process programs. Claims hold between the threads and tasks of the process; the
    records go when the process does.

    Args:
        claim_ttl: Seconds a claim lasts after its last save or renewal.
        max_record_bytes: The most bytes of JSON (history and state) a conversation may hold.
    """

    def __init__(
        self,
        *,
        claim_ttl: float = DEFAULT_CLAIM_TTL,
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
    ) -> None:
        self.claim_ttl = check_ttl(claim_ttl)
        self.max_record_bytes = check_cap(max_record_bytes)
        self._records: dict[bytes, tuple[str, _Record]] = {}
        self._lock = threading.Lock()
        self._seq = 0
        self._results: OrderedDict[str, tuple[bytes, float]] = OrderedDict()
        """The tools' cached results (`StoreCache`): value and expiry, least recently used first."""
        self._credentials: dict[str, bytes] = {}
        """The MCP servers' tokens and registrations (`StoreTokens`)."""

    def __repr__(self) -> str:
        return f"MemoryStore({len(self._records)} conversations)"

    def _conversation(self, conversation_id: str, record: _Record) -> Conversation:
        return Conversation(
            conversation_id,
            record.messages,
            json.loads(record.state),
            record.version,
            utc(record.created_at),
            utc(record.updated_at),
        )

    def claim(self, conversation_id: str, *, ttl: float | None = None) -> Claim:
        key = id_key(conversation_id)
        ttl = self.claim_ttl if ttl is None else check_ttl(ttl)
        holder = secrets.token_hex(16)
        with self._lock:
            now = time.time()
            found = self._records.get(key)
            if found is None:
                self._seq += 1
                record = _Record(self._seq, (), EMPTY_STATE, 0, len(EMPTY_STATE) + 2, 0, now, now)
                self._records[key] = (conversation_id, record)
            else:
                record = found[1]
                if record.holder is not None and record.expires_at > now:
                    raise conflict(conversation_id, utc(record.expires_at))
                check_size(conversation_id, record.size, self.max_record_bytes)
            record.holder, record.expires_at = holder, now + ttl
            return Claim(self._conversation(conversation_id, record), holder, utc(now + ttl), ttl)

    async def aclaim(self, conversation_id: str, *, ttl: float | None = None) -> Claim:
        return self.claim(conversation_id, ttl=ttl)

    def _held(self, claim: Claim, *, version: bool) -> _Record:
        """The record `claim` still holds (at its version, with `version`)."""
        found = self._records.get(id_key(claim.conversation_id))
        if (
            found is None
            or found[1].holder != claim.holder
            or (version and found[1].version != claim.version)
        ):
            raise conflict(claim.conversation_id)
        return found[1]

    def save(
        self,
        claim: Claim,
        messages: Sequence[ChatMessage],
        state: Mapping[str, Any] | None = None,
    ) -> Claim:
        kept = claim.conversation.state if state is None else state
        encoded = encode(claim.conversation_id, messages, kept, self.max_record_bytes)
        history = tuple(messages)
        with self._lock:
            record = self._held(claim, version=True)
            now = time.time()
            record.messages, record.state = history, encoded.state
            record.message_count, record.size = encoded.message_count, encoded.size
            record.version += 1
            record.updated_at, record.expires_at = now, now + claim.ttl
            conversation = Conversation(
                claim.conversation_id,
                history,
                json.loads(encoded.state),
                record.version,
                utc(record.created_at),
                utc(now),
            )
            return Claim(conversation, claim.holder, utc(record.expires_at), claim.ttl)

    async def asave(
        self,
        claim: Claim,
        messages: Sequence[ChatMessage],
        state: Mapping[str, Any] | None = None,
    ) -> Claim:
        return self.save(claim, messages, state)

    def renew(self, claim: Claim) -> Claim:
        with self._lock:
            record = self._held(claim, version=False)
            record.expires_at = time.time() + claim.ttl
            return Claim(claim.conversation, claim.holder, utc(record.expires_at), claim.ttl)

    async def arenew(self, claim: Claim) -> Claim:
        return self.renew(claim)

    def release(self, claim: Claim) -> None:
        key = id_key(claim.conversation_id)
        with self._lock:
            found = self._records.get(key)
            if found is None or found[1].holder != claim.holder:
                return
            if found[1].version == 0:
                del self._records[key]
            else:
                found[1].holder, found[1].expires_at = None, 0.0

    async def arelease(self, claim: Claim) -> None:
        self.release(claim)

    def load(self, conversation_id: str) -> Conversation | None:
        key = id_key(conversation_id)
        with self._lock:
            found = self._records.get(key)
            if found is None or found[1].version == 0:
                return None
            check_size(conversation_id, found[1].size, self.max_record_bytes)
            return self._conversation(conversation_id, found[1])

    async def aload(self, conversation_id: str) -> Conversation | None:
        return self.load(conversation_id)

    def list(self, *, limit: int = 50, cursor: str | None = None) -> ConversationPage:
        before = parse_cursor(cursor, limit)
        with self._lock:
            now = time.time()
            # Newest first: the records dict keeps creation order.
            found = list(
                itertools.islice(
                    (
                        (conversation_id, record)
                        for conversation_id, record in reversed(self._records.values())
                        if record.version > 0 and (before is None or record.seq < before)
                    ),
                    limit + 1,
                )
            )
            page = tuple(
                ConversationInfo(
                    conversation_id,
                    record.version,
                    record.message_count,
                    record.size,
                    utc(record.created_at),
                    utc(record.updated_at),
                    utc(record.expires_at)
                    if record.holder is not None and record.expires_at > now
                    else None,
                )
                for conversation_id, record in found[:limit]
            )
        more = len(found) > limit
        return ConversationPage(page, str(found[limit - 1][1].seq) if more else None)

    async def alist(self, *, limit: int = 50, cursor: str | None = None) -> ConversationPage:
        return self.list(limit=limit, cursor=cursor)

    def delete(self, conversation_id: str) -> bool:
        key = id_key(conversation_id)
        with self._lock:
            return self._records.pop(key, None) is not None

    async def adelete(self, conversation_id: str) -> bool:
        return self.delete(conversation_id)

    def delete_older_than(self, age: timedelta | float) -> int:
        span = seconds(age)
        with self._lock:
            now = time.time()
            old = [
                key
                for key, (_, record) in self._records.items()
                if record.updated_at < now - span
                and (record.holder is None or record.expires_at <= now)
            ]
            for key in old:
                del self._records[key]
        return len(old)

    async def adelete_older_than(self, age: timedelta | float) -> int:
        return self.delete_older_than(age)

    def get_result(self, key: str) -> bytes | None:
        """The result kept under `key` (unexpired), marked as just used; `None` when none is."""
        with self._lock:
            kept = self._results.get(key)
            if kept is None:
                return None
            if kept[1] <= time.time():
                del self._results[key]
                return None
            self._results.move_to_end(key)
            return kept[0]

    async def aget_result(self, key: str) -> bytes | None:
        """`get_result`, as a coroutine."""
        return self.get_result(key)

    def put_result(
        self, key: str, value: bytes, *, ttl: float | None, max_entries: int, max_bytes: int
    ) -> None:
        """Keep `value` under `key` for `ttl` seconds (`None`: until evicted), then drop the
        least recently used results past `max_entries` and `max_bytes` (and the expired)."""
        now = time.time()
        with self._lock:
            results = self._results
            results[key] = (value, float("inf") if ttl is None else now + ttl)
            results.move_to_end(key)
            for stale in [k for k, (_, until) in results.items() if until <= now]:
                del results[stale]
            size = sum(len(kept) for kept, _ in results.values())
            while results and (len(results) > max_entries or size > max_bytes):
                size -= len(results.popitem(last=False)[1][0])

    async def aput_result(
        self, key: str, value: bytes, *, ttl: float | None, max_entries: int, max_bytes: int
    ) -> None:
        """`put_result`, as a coroutine."""
        self.put_result(key, value, ttl=ttl, max_entries=max_entries, max_bytes=max_bytes)

    def get_credential(self, key: str) -> bytes | None:
        """The credential kept under `key`, or `None`."""
        with self._lock:
            return self._credentials.get(key)

    async def aget_credential(self, key: str) -> bytes | None:
        """`get_credential`, as a coroutine."""
        return self.get_credential(key)

    def put_credential(self, key: str, value: bytes) -> None:
        """Keep `value` under `key`, replacing what was kept there."""
        with self._lock:
            self._credentials[key] = value

    async def aput_credential(self, key: str, value: bytes) -> None:
        """`put_credential`, as a coroutine."""
        self.put_credential(key, value)

    def delete_credential(self, key: str) -> bool:
        """Forget the credential kept under `key`; whether there was one."""
        with self._lock:
            return self._credentials.pop(key, None) is not None

    async def adelete_credential(self, key: str) -> bool:
        """`delete_credential`, as a coroutine."""
        return self.delete_credential(key)

    def close(self) -> None:
        pass

    async def aclose(self) -> None:
        pass

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> MemoryStore:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
