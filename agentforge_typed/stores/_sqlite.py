"""`SQLiteStore`: conversations in one SQLite file, shared by the threads and processes of one
machine (the standard library's `sqlite3`, loaded on first use).

WAL mode, so readers never wait for the writer; a busy timeout, so a writer waits for another
process's write at most `timeout` seconds; every claim and save one statement (an upsert or an
update with `RETURNING`), so it is atomic across processes without a transaction held open.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from .._exceptions import ConversationStoreError
from ._base import DEFAULT_CLAIM_TTL, DEFAULT_MAX_RECORD_BYTES, DEFAULT_TIMEOUT
from ._sql import Dialect, SQLStore

__all__ = ["SQLITE_MIGRATIONS", "SQLiteStore"]

_TABLE = "agentforge_conversations"
_RESULTS = "agentforge_results"
_CREDENTIALS = "agentforge_credentials"

SQLITE_MIGRATIONS: tuple[tuple[str, ...], ...] = (
    # 1: the conversations and the schema version.
    (
        f"""CREATE TABLE {_TABLE} (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            key BLOB NOT NULL UNIQUE,
            id TEXT NOT NULL,
            messages BLOB NOT NULL,
            state BLOB NOT NULL,
            message_count INTEGER NOT NULL,
            version INTEGER NOT NULL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            holder TEXT,
            expires_at REAL
        )""",
        "CREATE TABLE agentforge_schema (version INTEGER NOT NULL)",
    ),
    # 2: each record's size kept beside it (the cap is checked before its bytes are read), and
    # an index for expiry by age.
    (
        f"ALTER TABLE {_TABLE} ADD COLUMN size INTEGER NOT NULL DEFAULT 0",
        f"UPDATE {_TABLE} SET size = length(messages) + length(state)",
        f"CREATE INDEX agentforge_conversations_updated ON {_TABLE} (updated_at)",
    ),
    # 3: the tools' cached results (`StoreCache`), least recently used first out.
    (
        f"""CREATE TABLE {_RESULTS} (
            key TEXT PRIMARY KEY,
            value BLOB NOT NULL,
            size INTEGER NOT NULL,
            expires_at REAL,
            used_at REAL NOT NULL
        )""",
        f"CREATE INDEX agentforge_results_used ON {_RESULTS} (used_at)",
    ),
    # 4: the MCP servers' OAuth tokens and client registrations (`StoreTokens`).
    (
        f"""CREATE TABLE {_CREDENTIALS} (
            key TEXT PRIMARY KEY,
            value BLOB NOT NULL,
            updated_at REAL NOT NULL
        )""",
    ),
)
"""The schema's forward migrations: `SQLITE_MIGRATIONS[v]` takes a database from version `v` to
`v + 1`."""

_RECORD = """id,
    CASE WHEN size <= :cap THEN messages END,
    CASE WHEN size <= :cap THEN state END,
    size, version, created_at, updated_at"""


def _time(value: Any) -> datetime:
    return datetime.fromtimestamp(value, timezone.utc)


SQLITE = Dialect(
    claim=f"""INSERT INTO {_TABLE} (key, id, messages, state, message_count, size, version,
        created_at, updated_at, holder, expires_at)
    VALUES (:key, :id, X'5B5D', X'7B7D', 0, 4, 0, :now, :now, :holder, :now + :ttl)
    ON CONFLICT (key) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
    WHERE holder IS NULL OR expires_at <= :now
    RETURNING {_RECORD}, expires_at""",
    holder_of=f"SELECT expires_at FROM {_TABLE} WHERE key = :key",
    save=f"""UPDATE {_TABLE} SET messages = :messages, state = :state, message_count = :count,
        size = :size, version = version + 1, updated_at = :now, expires_at = :now + :ttl
    WHERE key = :key AND holder = :holder AND version = :version
    RETURNING version, created_at, updated_at, expires_at""",
    renew=f"""UPDATE {_TABLE} SET expires_at = :now + :ttl WHERE key = :key AND holder = :holder
    RETURNING expires_at""",
    drop_unsaved=f"DELETE FROM {_TABLE} WHERE key = :key AND holder = :holder AND version = 0",
    release=f"""UPDATE {_TABLE} SET holder = NULL, expires_at = NULL
    WHERE key = :key AND holder = :holder""",
    load=f"SELECT {_RECORD} FROM {_TABLE} WHERE key = :key AND version > 0",
    page=f"""SELECT seq, id, version, message_count, size, created_at, updated_at,
        CASE WHEN holder IS NOT NULL AND expires_at > :now THEN expires_at END
    FROM {_TABLE} WHERE version > 0 AND seq < :before ORDER BY seq DESC LIMIT :limit""",
    delete=f"DELETE FROM {_TABLE} WHERE key = :key",
    delete_older=f"""DELETE FROM {_TABLE} WHERE updated_at < :now - :age
    AND (holder IS NULL OR expires_at <= :now)""",
    result_get=f"""UPDATE {_RESULTS} SET used_at = :now
    WHERE key = :key AND (expires_at IS NULL OR expires_at > :now) RETURNING value""",
    result_put=f"""INSERT INTO {_RESULTS} (key, value, size, expires_at, used_at)
    VALUES (:key, :value, :size, :now + :ttl, :now)
    ON CONFLICT (key) DO UPDATE SET value = excluded.value, size = excluded.size,
        expires_at = excluded.expires_at, used_at = excluded.used_at""",
    result_evict=(
        f"DELETE FROM {_RESULTS} WHERE expires_at <= :now",
        f"""DELETE FROM {_RESULTS} WHERE key IN (SELECT key FROM {_RESULTS}
            ORDER BY used_at DESC, key DESC LIMIT -1 OFFSET :max_entries)""",
        f"""DELETE FROM {_RESULTS} WHERE key IN (SELECT key FROM (SELECT key,
            SUM(size) OVER (ORDER BY used_at DESC, key DESC) AS kept FROM {_RESULTS})
            WHERE kept > :max_bytes)""",
    ),
    credential_get=f"SELECT value FROM {_CREDENTIALS} WHERE key = :key",
    credential_put=f"""INSERT INTO {_CREDENTIALS} (key, value, updated_at) VALUES (:key, :value, :now)
    ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at""",
    credential_delete=f"DELETE FROM {_CREDENTIALS} WHERE key = :key",
    migrations=SQLITE_MIGRATIONS,
    read_version="SELECT version FROM agentforge_schema",
    time=_time,
    id_value=lambda conversation_id: conversation_id,
    id_text=str,
)

Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]


class SQLiteStore(SQLStore):
    """Conversations in one SQLite file: the embedded `ConversationStore`, for one machine's
    threads and processes. The file (created when missing, readable by its owner alone) holds
    them in schema version `SCHEMA_VERSION`, migrating an older one forward when first used.

    Args:
        path: The database file.
        claim_ttl: Seconds a claim lasts after its last save or renewal (at most 30 by default:
            how long a crashed run's conversation stays closed to others).
        max_record_bytes: The most bytes of JSON (history and state) a conversation may hold;
            a larger one is refused on save and on read, never half-loaded.
        timeout: Seconds an operation waits for another process's write (SQLite's busy
            timeout), and for a free connection.
        max_connections: Connections kept open, and the worker threads the async methods run
            on.
        synchronous: SQLite's `synchronous` setting: `"NORMAL"` (the default) keeps everything
            saved through a crash of the process, and may lose the last saves (never the file)
            on a power cut; `"FULL"` syncs every save to disk.
    """

    dialect = SQLITE

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        claim_ttl: float = DEFAULT_CLAIM_TTL,
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
        timeout: float = DEFAULT_TIMEOUT,
        max_connections: int = 4,
        synchronous: Synchronous = "NORMAL",
    ) -> None:
        if str(path) in ("", ":memory:") or str(path).startswith("file:"):
            raise ValueError(
                f"SQLiteStore takes a file path, not {str(path)!r} (MemoryStore keeps "
                "conversations in memory)"
            )
        if sqlite3.sqlite_version_info < (3, 35):
            raise RuntimeError(
                f"SQLiteStore needs SQLite 3.35 or later (RETURNING); this Python has "
                f"{sqlite3.sqlite_version}"
            )
        if synchronous not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise ValueError(f"synchronous must be OFF, NORMAL, FULL or EXTRA, not {synchronous!r}")
        super().__init__(
            claim_ttl=claim_ttl,
            max_record_bytes=max_record_bytes,
            timeout=timeout,
            max_connections=max_connections,
        )
        self.path = Path(path)
        self.synchronous = synchronous
        self._errors = (sqlite3.Error, OSError)

    def __repr__(self) -> str:
        return f"SQLiteStore({str(self.path)!r})"

    def _connect(self) -> sqlite3.Connection:
        if not self.path.exists():
            # Owner-only from the start: the history is the users' (SQLite gives its -wal and
            # -shm files the database's permissions).
            os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
        connection = sqlite3.connect(
            self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False
        )
        try:
            connection.execute(f"PRAGMA synchronous = {self.synchronous}")
            self._wal(connection)
        except BaseException:
            connection.close()
            raise
        return connection

    def _wal(self, connection: sqlite3.Connection) -> None:
        """Switch the file to WAL mode (once for the file), waiting out another process doing
        the same: the switch takes the file alone, and SQLite does not wait for it itself."""
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                connection.execute("PRAGMA journal_mode = WAL").fetchall()
                return
            except sqlite3.OperationalError as error:
                if "locked" not in str(error) or time.monotonic() >= deadline:
                    raise
                time.sleep(0.01)

    def _has_schema(self, connection: Any) -> bool:
        rows = connection.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'agentforge_schema'"
        ).fetchall()
        return bool(rows)

    @contextlib.contextmanager
    def _migrating(self, connection: Any) -> Iterator[None]:
        # BEGIN IMMEDIATE takes the write lock at once: one process migrates, the others wait
        # (the busy timeout) and find the work done.
        connection.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT")

    def _failure(self, error: BaseException) -> ConversationStoreError:
        text = " ".join(str(error).split())
        if "locked" in text or "busy" in text:
            return ConversationStoreError(
                f"SQLite database {str(self.path)!r} stayed locked by another writer for "
                f"{self.timeout:g} s (the store's timeout): nothing was changed"
            )
        return ConversationStoreError(f"SQLite database {str(self.path)!r} failed: {text}")
