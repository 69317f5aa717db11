"""What every conversation store shares: the protocol, the records it reads and writes, and the
one codec that turns a conversation into the bytes a store keeps and back (bounded, checked whole).

A store keeps one record per conversation: its id (an opaque string), its whole history as JSON
(`TypeAdapter(list[ChatMessage])`), a small JSON object of state the loop keeps beside the
messages, a version that every save increments, its timestamps, and the claim of the run working
on it (a holder and an expiry). Saves are compare-and-swap on the holder and the version, so two
processes never both write the conversation and no update is lost.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .._exceptions import ConversationConflictError, ConversationStoreError
from .._messages import (
    AiMessage,
    ChatMessage,
    CustomMessage,
    SystemMessage,
    ToolResultMessage,
    UserMessage,
    history_adapter,
)

if TYPE_CHECKING:
    pass

__all__ = [
    "DEFAULT_CLAIM_TTL",
    "DEFAULT_MAX_RECORD_BYTES",
    "DEFAULT_TIMEOUT",
    "MAX_CONVERSATION_ID_BYTES",
    "MAX_PAGE_SIZE",
    "Claim",
    "Conversation",
    "ConversationInfo",
    "ConversationPage",
    "ConversationStore",
    "Encoded",
    "check_cap",
    "check_size",
    "check_ttl",
    "conflict",
    "decode",
    "encode",
    "id_key",
    "parse_cursor",
    "shown",
]

DEFAULT_CLAIM_TTL = 30.0
"""Seconds a claim lasts unless renewed (each save renews it): how long a crashed run's
conversation stays closed to others."""
DEFAULT_MAX_RECORD_BYTES = 4 * 1024 * 1024
"""The most bytes of JSON (history and state together) a record may hold: 4 MiB."""
DEFAULT_TIMEOUT = 10.0
"""Seconds a database operation may wait: to connect, for a lock, for a statement."""
MAX_CONVERSATION_ID_BYTES = 16 * 1024
"""The longest conversation id, in bytes of UTF-8."""
MAX_PAGE_SIZE = 1000
"""The most conversations one page of a listing holds."""

_MESSAGE_TYPES = (SystemMessage, UserMessage, AiMessage, ToolResultMessage, CustomMessage)
EMPTY_MESSAGES = b"[]"
EMPTY_STATE = b"{}"


@dataclass(frozen=True, slots=True)
class Conversation:
    """A stored conversation, as one read or save left it."""

    id: str
    """The conversation id: an opaque string of the program's choosing."""
    messages: tuple[ChatMessage, ...] = ()
    """The whole history, as the run saved it."""
    state: Mapping[str, Any] = field(default_factory=dict)
    """What the loop keeps per conversation beyond its messages: a JSON object (a fresh copy on
    each read)."""
    version: int = 0
    """How many times it was saved; `0`: never (a claim on a conversation that does not exist
    yet)."""
    created_at: datetime | None = None
    """When it was first claimed (UTC); `None` for one a store has not written."""
    updated_at: datetime | None = None
    """When it was last saved (UTC)."""


@dataclass(frozen=True, slots=True)
class Claim:
    """A run's hold on one conversation: only its holder may save it, until it expires.

    Returned by `claim`; each `save` and `renew` returns the next one (a save with an older claim
    of the same holder is refused: its version is stale).
    """

    conversation: Conversation
    """The conversation as stored now: as claimed, or as this claim's holder last saved it."""
    holder: str
    """The claim's random token: what the store checks on each save."""
    expires_at: datetime
    """When the claim lapses unless renewed or saved again (UTC, by the database's clock)."""
    ttl: float
    """The seconds each save or renewal extends it by."""

    @property
    def conversation_id(self) -> str:
        """The claimed conversation's id."""
        return self.conversation.id

    @property
    def version(self) -> int:
        """The version the next save must find stored."""
        return self.conversation.version


@dataclass(frozen=True, slots=True)
class ConversationInfo:
    """One entry of a listing: what a conversation is, without its history."""

    id: str
    version: int
    message_count: int
    size: int
    """Bytes of JSON the record holds (history and state)."""
    created_at: datetime
    updated_at: datetime
    claimed_until: datetime | None
    """When the current claim lapses; `None` when no run holds it."""


@dataclass(frozen=True, slots=True)
class ConversationPage:
    """One page of a listing, newest first."""

    conversations: tuple[ConversationInfo, ...]
    next_cursor: str | None
    """Pass it as `cursor=` for the next page; `None` on the last. Conversations created while
    paging never shift a page: they are newer than the cursor."""


@runtime_checkable
class ConversationStore(Protocol):
    """Where conversations live between runs: `MemoryStore`, `SQLiteStore`, `PostgresStore`, or
    a class of the program's own with these methods.

    Each operation exists blocking and as a coroutine (`a` prefix), for the loop's blocking and
    async drivers. A run claims its conversation (`claim`: refused at once with
    `ConversationConflictError` while another run's claim holds), saves it at each round boundary
    (`save`: compare-and-swap on the claim's holder and version) and releases it at the end
    (`release`); a claim lapses `ttl` seconds after its last save or `renew`, so a crashed
    run's conversation opens again on its own. `hold` and `ahold` do all of it, renewing in the
    background.
    """

    def claim(self, conversation_id: str, *, ttl: float | None = None) -> Claim:
        """Claim the conversation for one run, creating it when it does not exist (at version
        0, empty); `ttl` overrides the store's `claim_ttl`. Raises `ConversationConflictError`
        at once while another claim holds, and `ConversationStoreError` for a record it refuses
        (then nothing stays claimed)."""
        ...

    async def aclaim(self, conversation_id: str, *, ttl: float | None = None) -> Claim:
        """`claim`, as a coroutine."""
        ...

    def save(
        self,
        claim: Claim,
        messages: Sequence[ChatMessage],
        state: Mapping[str, Any] | None = None,
    ) -> Claim:
        """Store `messages` (the whole history) and `state` (`None` keeps the stored state) if
        `claim` still holds and its version is the stored one; renews the claim. Raises
        `ConversationConflictError` otherwise (nothing written), `ConversationStoreError` for a
        record over `max_record_bytes`."""
        ...

    async def asave(
        self,
        claim: Claim,
        messages: Sequence[ChatMessage],
        state: Mapping[str, Any] | None = None,
    ) -> Claim:
        """`save`, as a coroutine."""
        ...

    def renew(self, claim: Claim) -> Claim:
        """Extend the claim by its `ttl` from now; `ConversationConflictError` if it was lost
        (it lapsed and another run claimed the conversation, or it was deleted)."""
        ...

    async def arenew(self, claim: Claim) -> Claim:
        """`renew`, as a coroutine."""
        ...

    def release(self, claim: Claim) -> None:
        """Give the conversation up (a claimed conversation never saved is removed). Does
        nothing when the claim was already lost."""
        ...

    async def arelease(self, claim: Claim) -> None:
        """`release`, as a coroutine."""
        ...

    def load(self, conversation_id: str) -> Conversation | None:
        """The stored conversation (whoever holds it), or `None` when none was saved."""
        ...

    async def aload(self, conversation_id: str) -> Conversation | None:
        """`load`, as a coroutine."""
        ...

    def list(self, *, limit: int = 50, cursor: str | None = None) -> ConversationPage:
        """A page of the saved conversations, newest (first created) first."""
        ...

    async def alist(self, *, limit: int = 50, cursor: str | None = None) -> ConversationPage:
        """`list`, as a coroutine."""
        ...

    def delete(self, conversation_id: str) -> bool:
        """Delete the conversation, claimed or not (a run holding it then fails on its next
        save); whether there was one."""
        ...

    async def adelete(self, conversation_id: str) -> bool:
        """`delete`, as a coroutine."""
        ...

    def delete_older_than(self, age: timedelta | float) -> int:
        """Delete every conversation not saved for `age` (seconds, or a `timedelta`) that no
        live claim holds; how many."""
        ...

    async def adelete_older_than(self, age: timedelta | float) -> int:
        """`delete_older_than`, as a coroutine."""
        ...

    def close(self) -> None:
        """Close the store's connections."""
        ...

    async def aclose(self) -> None:
        """`close`, as a coroutine."""
        ...


# -- the codec -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Encoded:
    """A conversation as a store writes it."""

    messages: bytes
    state: bytes
    message_count: int

    @property
    def size(self) -> int:
        return len(self.messages) + len(self.state)


def encode(
    conversation_id: str,
    messages: Sequence[ChatMessage],
    state: Mapping[str, Any],
    max_record_bytes: int,
) -> Encoded:
    """The JSON a store writes for the conversation, refused when over `max_record_bytes`."""
    history = messages if isinstance(messages, list) else list(messages)
    for message in history:
        if type(message) not in _MESSAGE_TYPES and not isinstance(message, _MESSAGE_TYPES):
            raise TypeError(f"messages must be ChatMessages, not {type(message).__name__}")
    body = history_adapter().dump_json(history)
    if not isinstance(state, Mapping):
        raise TypeError(f"state must be a JSON object (a mapping), not {type(state).__name__}")
    try:
        kept = json.dumps(
            state, ensure_ascii=False, allow_nan=False, separators=(",", ":")
        ).encode()
    except (TypeError, ValueError) as exc:
        raise TypeError(f"state must be a JSON object: {exc}") from None
    encoded = Encoded(body, kept, len(history))
    if encoded.size > max_record_bytes:
        raise ConversationStoreError(
            f"conversation {shown(conversation_id)} is {encoded.size:,} bytes of JSON, over "
            f"max_record_bytes={max_record_bytes:,}: nothing was saved (raise the store's "
            "max_record_bytes, or start a new conversation)",
            conversation_id,
        )
    return encoded


def decode(
    conversation_id: str,
    messages: bytes | None,
    state: bytes | None,
    size: int,
    max_record_bytes: int,
) -> tuple[tuple[ChatMessage, ...], dict[str, Any]]:
    """The history and state of a stored record, checked whole: one over `max_record_bytes`
    (whose bytes the store did not even read: `None`) or corrupt is refused."""
    if messages is None or state is None:
        raise _oversize(conversation_id, size, max_record_bytes)
    # The larger of the two: a row may have been written behind the store's back.
    check_size(conversation_id, max(size, len(messages) + len(state)), max_record_bytes)
    try:
        history = history_adapter().validate_json(messages)
    except ValueError as exc:
        raise _corrupt(conversation_id, "its history", exc) from None
    try:
        kept = json.loads(state)
    except ValueError as exc:
        raise _corrupt(conversation_id, "its state", exc) from None
    if not isinstance(kept, dict):
        raise _corrupt(conversation_id, "its state", f"a JSON {type(kept).__name__}, not an object")
    return tuple(history), kept


def check_size(conversation_id: str, size: int, max_record_bytes: int) -> None:
    """Refuse a stored record of `size` bytes over the cap."""
    if size > max_record_bytes:
        raise _oversize(conversation_id, size, max_record_bytes)


def _oversize(conversation_id: str, size: int, max_record_bytes: int) -> ConversationStoreError:
    return ConversationStoreError(
        f"conversation {shown(conversation_id)} is {size:,} bytes of JSON, over "
        f"max_record_bytes={max_record_bytes:,}: refused whole (raise the store's "
        "max_record_bytes to read it)",
        conversation_id,
    )


def _corrupt(conversation_id: str, part: str, problem: object) -> ConversationStoreError:
    return ConversationStoreError(
        f"conversation {shown(conversation_id)} is corrupt, {part} does not load: "
        f"{_first_line(problem)}; refused whole",
        conversation_id,
    )


def _first_line(problem: object) -> str:
    if hasattr(problem, "errors") and hasattr(problem, "error_count"):
        # A pydantic error: where and what, without the stored values it would quote.
        first = problem.errors(include_input=False, include_url=False)[0]
        where = ".".join(str(part) for part in first["loc"]) or "the whole"
        more = problem.error_count() - 1
        return f"{where}: {first['msg']}" + (f" (and {more} more)" if more else "")
    text = " ".join(str(problem).split())
    return text if len(text) <= 200 else text[:199] + "…"


# -- ids, cursors, durations ---------------------------------------------------------------------


def id_key(conversation_id: str) -> bytes:
    """The key a store indexes the conversation by: the SHA-256 of its UTF-8 (an id of any
    length and content indexes in 32 bytes). Refuses what is not an id."""
    if not isinstance(conversation_id, str):
        raise TypeError(f"a conversation id is a str, not {type(conversation_id).__name__}")
    if not conversation_id:
        raise ValueError("a conversation id cannot be empty")
    try:
        encoded = conversation_id.encode()
    except UnicodeEncodeError:
        raise ValueError(
            f"conversation id {shown(conversation_id)} is not valid Unicode text (a lone surrogate)"
        ) from None
    if len(encoded) > MAX_CONVERSATION_ID_BYTES:
        raise ValueError(
            f"a conversation id is at most {MAX_CONVERSATION_ID_BYTES:,} bytes of UTF-8; this "
            f"one is {len(encoded):,}"
        )
    return hashlib.sha256(encoded).digest()


def shown(conversation_id: str) -> str:
    """The id as an error message quotes it: one line, at most ~60 characters."""
    text = repr(conversation_id)
    return text if len(text) <= 60 else text[:56] + "…" + text[-3:]


def parse_cursor(cursor: str | None, limit: int) -> int | None:
    """The sequence number a listing cursor stands for (`None`: from the newest)."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE_SIZE:
        raise ValueError(f"limit must be an int from 1 to {MAX_PAGE_SIZE}, got {limit!r}")
    if cursor is None:
        return None
    if not (
        isinstance(cursor, str) and cursor.isdecimal() and cursor.isascii() and len(cursor) < 20
    ):
        raise ValueError(f"cursor {cursor!r:.40} is not a cursor a listing gave")
    return int(cursor)


def check_ttl(ttl: float) -> float:
    """`ttl`, if it is a usable claim duration in seconds."""
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not 0 < ttl < math.inf:
        raise ValueError(f"a claim's ttl is a positive number of seconds, got {ttl!r}")
    return float(ttl)


def check_cap(max_record_bytes: int) -> int:
    """`max_record_bytes`, if it is a usable cap."""
    if isinstance(max_record_bytes, bool) or not isinstance(max_record_bytes, int):
        raise TypeError(f"max_record_bytes is an int, not {type(max_record_bytes).__name__}")
    if max_record_bytes < len(EMPTY_MESSAGES) + len(EMPTY_STATE):
        raise ValueError(f"max_record_bytes must be at least 4, got {max_record_bytes}")
    return max_record_bytes


def seconds(age: timedelta | float) -> float:
    """`age` in seconds, if it is a usable age."""
    value = age.total_seconds() if isinstance(age, timedelta) else age
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
        raise ValueError(f"an age is a non-negative number of seconds or a timedelta, got {age!r}")
    return float(value)


def conflict(
    conversation_id: str, claimed_until: datetime | None = None
) -> ConversationConflictError:
    """The error for a claim refused (another run holds the conversation until `claimed_until`)
    or a save or renewal whose claim was lost."""
    if claimed_until is None:
        return ConversationConflictError(
            f"conversation {shown(conversation_id)} was claimed, saved or deleted by another run "
            "since this claim: nothing was written",
            conversation_id,
        )
    return ConversationConflictError(
        f"conversation {shown(conversation_id)} is held by another run until "
        f"{claimed_until.isoformat(timespec='milliseconds')} (unless it saves or renews its "
        "claim first)",
        conversation_id,
    )


def utc(timestamp: float) -> datetime:
    """A POSIX timestamp as an aware UTC datetime."""
    return datetime.fromtimestamp(timestamp, timezone.utc)
