"""Conversation stores: where a conversation lives between runs, and the claim that lets one run
at a time work on it, across threads, processes and machines.

- `ConversationStore`: the protocol (blocking methods and their `a`-prefixed coroutines).
- `MemoryStore`: in this process's memory (tests, single-process programs).
- `SQLiteStore(path)`: one SQLite file, for the threads and processes of one machine.
- `PostgresStore(dsn)`: PostgreSQL, for many workers (extra `postgres`: psycopg 3).
- `hold` / `ahold`: claim a conversation and keep the claim renewed until released (`Lease`).
- `store_from_url`: the store a URL names (`sqlite:///conversations.db`, `postgresql://...`,
  `memory:`).

The database drivers load when a store that needs them is first made: importing this package
imports neither `sqlite3` nor psycopg.
"""

from typing import TYPE_CHECKING

from .. import _lazy
from .._exceptions import ConversationConflictError, ConversationStoreError
from ._base import (
    DEFAULT_CLAIM_TTL,
    DEFAULT_MAX_RECORD_BYTES,
    DEFAULT_TIMEOUT,
    MAX_CONVERSATION_ID_BYTES,
    MAX_PAGE_SIZE,
    Claim,
    Conversation,
    ConversationInfo,
    ConversationPage,
    ConversationStore,
)
from ._lease import Lease, ahold, hold
from ._memory import MemoryStore
from ._url import store_from_url

if TYPE_CHECKING:
    from ._postgres import PostgresStore
    from ._sql import SCHEMA_VERSION
    from ._sqlite import SQLiteStore

_LAZY = {
    "PostgresStore": "._postgres",
    "SCHEMA_VERSION": "._sql",
    "SQLiteStore": "._sqlite",
}

if not TYPE_CHECKING:  # hidden from type checkers, which see the imports above instead
    __getattr__, __dir__ = _lazy.lazy_exports(__name__, _LAZY)


__all__ = [
    "DEFAULT_CLAIM_TTL",
    "DEFAULT_MAX_RECORD_BYTES",
    "DEFAULT_TIMEOUT",
    "MAX_CONVERSATION_ID_BYTES",
    "MAX_PAGE_SIZE",
    "SCHEMA_VERSION",
    "Claim",
    "Conversation",
    "ConversationConflictError",
    "ConversationInfo",
    "ConversationPage",
    "ConversationStore",
    "ConversationStoreError",
    "Lease",
    "MemoryStore",
    "PostgresStore",
    "SQLiteStore",
    "ahold",
    "hold",
    "store_from_url",
]
