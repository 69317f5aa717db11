"""`PostgresStore`: conversations in PostgreSQL, for many workers on many machines (the
`postgres` extra: psycopg 3, loaded when the first store is made).

Every claim and save is one statement (an upsert or an update with `RETURNING`) in autocommit,
timed by the server's clock, so workers whose clocks disagree still agree on when a claim lapses.
Ids are stored as bytes (PostgreSQL's text cannot hold a NUL) and indexed by their SHA-256.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from datetime import timezone
from typing import Any

from .._exceptions import ConversationStoreError
from ._base import DEFAULT_CLAIM_TTL, DEFAULT_MAX_RECORD_BYTES, DEFAULT_TIMEOUT
from ._sql import Dialect, SQLStore

__all__ = ["POSTGRES_MIGRATIONS", "PostgresStore"]

_TABLE = "agentforge_conversations"
_RESULTS = "agentforge_results"
_CREDENTIALS = "agentforge_credentials"
_EPOCH = "extract(epoch from statement_timestamp())::double precision"
_NOW = "statement_timestamp()"
_LOCK = 0x61_67_66_73
"""The advisory lock the migrations take (`agfs`): one process migrates, the others wait."""

POSTGRES_MIGRATIONS: tuple[tuple[str, ...], ...] = (
    # 1: the conversations and the schema version.
    (
        f"""CREATE TABLE {_TABLE} (
            seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            key bytea NOT NULL UNIQUE,
            id bytea NOT NULL,
            messages bytea NOT NULL,
            state bytea NOT NULL,
            message_count integer NOT NULL,
            version bigint NOT NULL,
            created_at timestamptz NOT NULL,
            updated_at timestamptz NOT NULL,
            holder text,
            expires_at timestamptz
        )""",
        "CREATE TABLE agentforge_schema (version integer NOT NULL)",
    ),
    # 2: each record's size kept beside it (the cap is checked before its bytes are read), and
    # an index for expiry by age.
    (
        f"ALTER TABLE {_TABLE} ADD COLUMN size bigint NOT NULL DEFAULT 0",
        f"UPDATE {_TABLE} SET size = octet_length(messages) + octet_length(state)",
        f"CREATE INDEX agentforge_conversations_updated ON {_TABLE} (updated_at)",
    ),
    # 3: the tools' cached results (`StoreCache`), least recently used first out; times are
    # the server's (seconds since the epoch).
    (
        f"""CREATE TABLE {_RESULTS} (
            key text PRIMARY KEY,
            value bytea NOT NULL,
            size bigint NOT NULL,
            expires_at double precision,
            used_at double precision NOT NULL
        )""",
        f"CREATE INDEX agentforge_results_used ON {_RESULTS} (used_at)",
    ),
    # 4: the MCP servers' OAuth tokens and client registrations (`StoreTokens`).
    (
        f"""CREATE TABLE {_CREDENTIALS} (
            key text PRIMARY KEY,
            value bytea NOT NULL,
            updated_at timestamptz NOT NULL
        )""",
    ),
)
"""The schema's forward migrations: `POSTGRES_MIGRATIONS[v]` takes a database from version `v`
to `v + 1`."""

_RECORD = """id,
    CASE WHEN size <= %(cap)s THEN messages END,
    CASE WHEN size <= %(cap)s THEN state END,
    size, version, created_at, updated_at"""
_EXPIRY = f"{_NOW} + %(ttl)s * interval '1 second'"

POSTGRES = Dialect(
    claim=f"""INSERT INTO {_TABLE} AS c (key, id, messages, state, message_count, size, version,
        created_at, updated_at, holder, expires_at)
    VALUES (%(key)s, %(id)s, '\\x5b5d'::bytea, '\\x7b7d'::bytea, 0, 4, 0, {_NOW}, {_NOW},
        %(holder)s, {_EXPIRY})
    ON CONFLICT (key) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
    WHERE c.holder IS NULL OR c.expires_at <= {_NOW}
    RETURNING {_RECORD}, expires_at""",
    holder_of=f"SELECT expires_at FROM {_TABLE} WHERE key = %(key)s",
    save=f"""UPDATE {_TABLE} SET messages = %(messages)s, state = %(state)s,
        message_count = %(count)s, size = %(size)s, version = version + 1, updated_at = {_NOW},
        expires_at = {_EXPIRY}
    WHERE key = %(key)s AND holder = %(holder)s AND version = %(version)s
    RETURNING version, created_at, updated_at, expires_at""",
    renew=f"""UPDATE {_TABLE} SET expires_at = {_EXPIRY} WHERE key = %(key)s
        AND holder = %(holder)s
    RETURNING expires_at""",
    drop_unsaved=f"""DELETE FROM {_TABLE} WHERE key = %(key)s AND holder = %(holder)s
        AND version = 0""",
    release=f"""UPDATE {_TABLE} SET holder = NULL, expires_at = NULL
    WHERE key = %(key)s AND holder = %(holder)s""",
    load=f"SELECT {_RECORD} FROM {_TABLE} WHERE key = %(key)s AND version > 0",
    page=f"""SELECT seq, id, version, message_count, size, created_at, updated_at,
        CASE WHEN holder IS NOT NULL AND expires_at > {_NOW} THEN expires_at END
    FROM {_TABLE} WHERE version > 0 AND seq < %(before)s ORDER BY seq DESC LIMIT %(limit)s""",
    delete=f"DELETE FROM {_TABLE} WHERE key = %(key)s",
    delete_older=f"""DELETE FROM {_TABLE}
    WHERE updated_at < {_NOW} - %(age)s * interval '1 second'
    AND (holder IS NULL OR expires_at <= {_NOW})""",
    result_get=f"""UPDATE {_RESULTS} SET used_at = {_EPOCH}
    WHERE key = %(key)s AND (expires_at IS NULL OR expires_at > {_EPOCH}) RETURNING value""",
    result_put=f"""INSERT INTO {_RESULTS} (key, value, size, expires_at, used_at)
    VALUES (%(key)s, %(value)s, %(size)s, {_EPOCH} + %(ttl)s::double precision, {_EPOCH})
    ON CONFLICT (key) DO UPDATE SET value = excluded.value, size = excluded.size,
        expires_at = excluded.expires_at, used_at = excluded.used_at""",
    result_evict=(
        f"DELETE FROM {_RESULTS} WHERE expires_at <= {_EPOCH}",
        f"""DELETE FROM {_RESULTS} WHERE key IN (SELECT key FROM {_RESULTS}
            ORDER BY used_at DESC, key DESC OFFSET %(max_entries)s)""",
        f"""DELETE FROM {_RESULTS} WHERE key IN (SELECT key FROM (SELECT key,
            SUM(size) OVER (ORDER BY used_at DESC, key DESC) AS kept FROM {_RESULTS}) AS ranked
            WHERE kept > %(max_bytes)s)""",
    ),
    credential_get=f"SELECT value FROM {_CREDENTIALS} WHERE key = %(key)s",
    credential_put=f"""INSERT INTO {_CREDENTIALS} (key, value, updated_at)
    VALUES (%(key)s, %(value)s, {_NOW})
    ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at""",
    credential_delete=f"DELETE FROM {_CREDENTIALS} WHERE key = %(key)s",
    migrations=POSTGRES_MIGRATIONS,
    read_version="SELECT version FROM agentforge_schema",
    time=lambda value: value.astimezone(timezone.utc),
    id_value=lambda conversation_id: conversation_id.encode(),
    id_text=lambda stored: bytes(stored).decode(),
)


class PostgresStore(SQLStore):
    """Conversations in PostgreSQL: the `ConversationStore` for many workers on many machines
    (`pip install 'agentforge-typed[postgres]'`, psycopg 3). The tables (`agentforge_*`, in
    the connection's schema) are created when missing, and an older schema migrated forward,
    when the store is first used.

    Args:
        dsn: A libpq connection string or URL (`postgresql://user:password@host/db`); its
            password is never shown (not in `repr`, not in an error).
        claim_ttl: Seconds a claim lasts after its last save or renewal, by the server's clock.
        max_record_bytes: The most bytes of JSON (history and state) a conversation may hold;
            a larger one is refused on save and on read, never half-loaded.
        timeout: Seconds to connect (unless the DSN sets `connect_timeout`), and the most a
            statement or a lock may take (`statement_timeout`, `lock_timeout`); a free
            connection is waited for as long.
        max_connections: Connections kept open, and the worker threads the async methods run
            on.
    """

    dialect = POSTGRES

    def __init__(
        self,
        dsn: str,
        *,
        claim_ttl: float = DEFAULT_CLAIM_TTL,
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
        timeout: float = DEFAULT_TIMEOUT,
        max_connections: int = 8,
    ) -> None:
        try:
            import psycopg
            from psycopg.conninfo import conninfo_to_dict
        except ImportError as error:
            raise ImportError(
                "PostgresStore needs psycopg 3: pip install 'agentforge-typed[postgres]'"
            ) from error
        super().__init__(
            claim_ttl=claim_ttl,
            max_record_bytes=max_record_bytes,
            timeout=timeout,
            max_connections=max_connections,
        )
        try:
            self._options = conninfo_to_dict(dsn)
        except psycopg.ProgrammingError:
            raise ValueError("not a PostgreSQL connection string or URL") from None
        self._dsn = dsn
        password = self._options.get("password")
        self._secrets = tuple(s for s in (str(password) if password else "", dsn) if s)
        self._errors = (psycopg.Error, OSError)

    def __repr__(self) -> str:
        shown = {
            name: self._options[name]
            for name in ("host", "port", "dbname", "user")
            if self._options.get(name)
        }
        return "PostgresStore(" + " ".join(f"{k}={v}" for k, v in shown.items()) + ")"

    def _connect(self) -> Any:
        import psycopg

        options: dict[str, Any] = {"autocommit": True}
        if "connect_timeout" not in self._options:
            # libpq counts whole seconds, at least 2.
            options["connect_timeout"] = max(2, math.ceil(self.timeout))
        if "application_name" not in self._options:
            options["application_name"] = "agentforge-typed"
        connection = psycopg.connect(self._dsn, **options)
        try:
            limit = f"{math.ceil(self.timeout * 1000)}ms"
            connection.execute(
                "SELECT set_config('statement_timeout', %s, false),"
                " set_config('lock_timeout', %s, false)",
                (limit, limit),
            )
        except BaseException:
            connection.close()
            raise
        return connection

    def _broken(self, connection: Any) -> bool:
        return bool(connection.closed or connection.broken)

    def _has_schema(self, connection: Any) -> bool:
        rows = connection.execute("SELECT to_regclass('agentforge_schema')").fetchall()
        return rows[0][0] is not None

    @contextlib.contextmanager
    def _migrating(self, connection: Any) -> Iterator[None]:
        # The lock first, the transaction after: a transaction begun before another process's
        # migration committed would not see its tables.
        connection.execute("SELECT pg_advisory_lock(%s)", (_LOCK,))
        try:
            with connection.transaction():
                yield
        finally:
            connection.execute("SELECT pg_advisory_unlock(%s)", (_LOCK,))

    def _failure(self, error: BaseException) -> ConversationStoreError:
        import psycopg.errors

        text = " ".join(str(error).split())
        for secret in self._secrets:
            text = text.replace(secret, "***")
        if isinstance(error, (psycopg.errors.QueryCanceled, psycopg.errors.LockNotAvailable)):
            return ConversationStoreError(
                f"PostgreSQL took longer than {self.timeout:g} s (the store's timeout): {text}"
            )
        if isinstance(error, psycopg.OperationalError):
            return ConversationStoreError(f"PostgreSQL connection failed: {text}")
        return ConversationStoreError(f"PostgreSQL failed: {text}")
