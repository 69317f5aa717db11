"""Static-typing contract of the conversation stores: each store is a `ConversationStore`, its
records are typed, and claims, leases and URLs are checked."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from typing_extensions import assert_type

from agentforge_typed import AgentForgeError, ChatMessage, UserMessage
from agentforge_typed.stores import (
    DEFAULT_CLAIM_TTL,
    DEFAULT_MAX_RECORD_BYTES,
    MAX_CONVERSATION_ID_BYTES,
    SCHEMA_VERSION,
    Claim,
    Conversation,
    ConversationConflictError as TopLevelConflict,
    ConversationConflictError,
    ConversationInfo,
    ConversationPage,
    ConversationStore,
    ConversationStoreError,
    Lease,
    MemoryStore,
    PostgresStore,
    SQLiteStore,
    ahold,
    hold,
    store_from_url,
)

assert_type(DEFAULT_CLAIM_TTL, float)
assert_type(DEFAULT_MAX_RECORD_BYTES, int)
assert_type(MAX_CONVERSATION_ID_BYTES, int)
assert_type(SCHEMA_VERSION, int)
conflict: type[AgentForgeError] = TopLevelConflict
same: type[ConversationStoreError] = ConversationConflictError

memory: ConversationStore = MemoryStore(claim_ttl=10, max_record_bytes=1 << 20)
sqlite: ConversationStore = SQLiteStore("conversations.db", timeout=5.0, synchronous="FULL")
postgres: ConversationStore = PostgresStore("postgresql://app@db/chats", max_connections=16)
assert_type(store_from_url("sqlite:///conversations.db", claim_ttl=15), ConversationStore)

claim = memory.claim("c-17", ttl=20)
assert_type(claim, Claim)
assert_type(claim.conversation, Conversation)
assert_type(claim.conversation_id, str)
assert_type(claim.version, int)
assert_type(claim.expires_at, datetime)
assert_type(claim.conversation.messages, tuple[ChatMessage, ...])
assert_type(claim.conversation.state, Mapping[str, Any])
assert_type(claim.conversation.updated_at, datetime | None)
history: list[ChatMessage] = [UserMessage(content="hi")]
assert_type(memory.save(claim, history, {"pending": []}), Claim)
assert_type(memory.renew(claim), Claim)
assert_type(memory.release(claim), None)
assert_type(memory.load("c-17"), Conversation | None)
page = memory.list(limit=10, cursor=None)
assert_type(page, ConversationPage)
assert_type(page.conversations, tuple[ConversationInfo, ...])
assert_type(page.next_cursor, str | None)
assert_type(memory.delete("c-17"), bool)
assert_type(memory.delete_older_than(timedelta(days=30)), int)
assert_type(memory.delete_older_than(3600.0), int)

lease = hold(sqlite, "c-17", ttl=30)
assert_type(lease, Lease)
assert_type(lease.conversation, Conversation)
assert_type(lease.save(history), Claim)
assert_type(lease.lost, bool)
lease.check()
with lease as held:
    assert_type(held, Lease)


async def asynchronous(store: ConversationStore) -> None:
    claim = await store.aclaim("c-17")
    assert_type(claim, Claim)
    assert_type(await store.asave(claim, history), Claim)
    assert_type(await store.aload("c-17"), Conversation | None)
    assert_type(await store.alist(), ConversationPage)
    lease = await ahold(store, "c-18")
    async with lease:
        assert_type(await lease.asave(history), Claim)


# Misuse
memory.save(claim, ["not a message"])  # type: ignore[list-item]
memory.claim(17)  # type: ignore[arg-type]
memory.list(limit="ten")  # type: ignore[arg-type]
SQLiteStore("x.db", synchronous="SOMETIMES")  # type: ignore[arg-type]
PostgresStore("postgresql://h/db", claim_ttl="30s")  # type: ignore[arg-type]
claim.conversation.messages.append(UserMessage(content="x"))  # type: ignore[attr-defined]
