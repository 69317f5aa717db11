"""The database stores' shared core: each operation written once as SQL run on a DB-API
connection, a small pool of blocking connections, the schema's forward migrations, and the async
methods (the same operations on the store's own worker threads, one per connection, as aiosqlite
runs each connection on a thread of its own).

A dialect (`SQLiteStore`'s, `PostgresStore`'s) gives the statements, the migrations and how its
values read back; every rule (claims, compare-and-swap saves, the size cap, what is refused
whole) lives here and in `_base`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import secrets
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar, Protocol, TypeVar

from .._exceptions import ConversationStoreError
from .._messages import ChatMessage
from ._base import (
    DEFAULT_CLAIM_TTL,
    DEFAULT_MAX_RECORD_BYTES,
    DEFAULT_TIMEOUT,
    Claim,
    Conversation,
    ConversationInfo,
    ConversationPage,
    check_cap,
    check_ttl,
    conflict,
    decode,
    encode,
    id_key,
    parse_cursor,
    seconds,
    shown,
)

__all__ = ["SCHEMA_VERSION", "Dialect", "SQLStore"]

T = TypeVar("T")

SCHEMA_VERSION = 4
"""The schema this version of the package writes (and reads up to)."""
NO_CURSOR = 2**63 - 1


class Cursor(Protocol):
    rowcount: int

    def fetchall(self) -> list[Any]: ...


class Connection(Protocol):
    def execute(self, sql: Any, parameters: Any = ..., /) -> Any: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class Dialect:
    """One database's statements (named parameters: `key`, `id`, `holder`, `now`, `ttl`, ...),
    its migrations and how its values read back."""

    claim: str
    holder_of: str
    save: str
    renew: str
    drop_unsaved: str
    release: str
    load: str
    page: str
    delete: str
    delete_older: str
    result_get: str
    """A cached result by `key`, unexpired, marked used (`RETURNING value`)."""
    result_put: str
    """Keep `value` under `key` (`size`, `ttl`: `NULL` for none)."""
    result_evict: tuple[str, ...]
    """Drop the expired results, then the least recently used past `max_entries` and
    `max_bytes`."""
    credential_get: str
    """A kept credential by `key` (`value`)."""
    credential_put: str
    """Keep `value` under `key`, replacing what was kept there."""
    credential_delete: str
    """Forget the credential kept under `key`."""
    migrations: tuple[tuple[str, ...], ...]
    """`migrations[v]` takes the schema from version `v` to `v + 1` (`0`: an empty database)."""
    read_version: str
    """The schema version, from `agentforge_schema` (which exists)."""
    time: Callable[[Any], datetime]
    """A stored timestamp as an aware datetime."""
    id_value: Callable[[str], Any]
    """A conversation id as the database stores it."""
    id_text: Callable[[Any], str]
    """A stored conversation id as text."""


class SQLStore:
    """The rules every database store keeps; a subclass opens its connections and runs its
    migrations under its database's lock."""

    dialect: ClassVar[Dialect]

    def __init__(
        self,
        *,
        claim_ttl: float = DEFAULT_CLAIM_TTL,
        max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
        timeout: float = DEFAULT_TIMEOUT,
        max_connections: int = 4,
    ) -> None:
        self.claim_ttl = check_ttl(claim_ttl)
        self.max_record_bytes = check_cap(max_record_bytes)
        self.timeout = check_ttl(timeout)
        if isinstance(max_connections, bool) or not (
            isinstance(max_connections, int) and max_connections >= 1
        ):
            raise ValueError(f"max_connections must be an int >= 1, got {max_connections!r}")
        self.max_connections = max_connections
        self._idle: list[Any] = []
        self._slots = threading.BoundedSemaphore(max_connections)
        self._lock = threading.Lock()
        self._ready = False
        self._closed = False
        self._workers: concurrent.futures.ThreadPoolExecutor | None = None
        self._errors: tuple[type[BaseException], ...] = ()
        """The driver's exceptions, turned into `ConversationStoreError`s at one boundary."""

    # -- what a dialect's store provides ----------------------------------------------------------

    def _connect(self) -> Any:
        """A new connection, configured (autocommit, timeouts)."""
        raise NotImplementedError

    def _migrating(self, connection: Any) -> contextlib.AbstractContextManager[None]:
        """A transaction holding the database's migration lock."""
        raise NotImplementedError

    def _has_schema(self, connection: Any) -> bool:
        """Whether the database has the `agentforge_schema` table."""
        raise NotImplementedError

    def _failure(self, error: BaseException) -> ConversationStoreError:
        """The driver's `error` as one line that names what to do."""
        raise NotImplementedError

    def _broken(self, connection: Any) -> bool:
        """Whether `connection` can no longer be used."""
        return False

    def _now(self) -> float:
        """The `now` parameter (a dialect using the database's clock ignores it)."""
        return time.time()

    # -- connections ------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _connection(self) -> Iterator[Any]:
        if self._closed:
            raise ConversationStoreError("the store is closed")
        if not self._slots.acquire(timeout=self.timeout):
            raise ConversationStoreError(
                f"all {self.max_connections} of the store's connections stayed busy for "
                f"{self.timeout:g} s (raise max_connections or timeout)"
            )
        connection = None
        try:
            with self._lock:
                connection = self._idle.pop() if self._idle else None
            if connection is None:
                connection = self._connect()
            if not self._ready:
                self._prepare(connection)
            yield connection
        finally:
            if connection is not None:
                if self._closed or self._broken(connection):
                    with contextlib.suppress(Exception):
                        connection.close()
                else:
                    with self._lock:
                        self._idle.append(connection)
            self._slots.release()

    def _prepare(self, connection: Any) -> None:
        """Bring the schema to `SCHEMA_VERSION` (once per store), or refuse a newer one."""
        version = self._version(connection)
        if version != SCHEMA_VERSION:
            with self._migrating(connection):
                version = self._version(connection)
                self._refuse_newer(version)
                for step in self.dialect.migrations[version:]:
                    for statement in step:
                        connection.execute(statement)
                if version == 0:
                    connection.execute(
                        f"INSERT INTO agentforge_schema (version) VALUES ({SCHEMA_VERSION})"
                    )
                elif version < SCHEMA_VERSION:
                    connection.execute(f"UPDATE agentforge_schema SET version = {SCHEMA_VERSION}")
        self._ready = True

    def _version(self, connection: Any) -> int:
        if not self._has_schema(connection):
            return 0
        rows = connection.execute(self.dialect.read_version).fetchall()
        version = int(rows[0][0]) if rows else 0
        self._refuse_newer(version)
        return version

    def _refuse_newer(self, version: int) -> None:
        if version > SCHEMA_VERSION:
            raise ConversationStoreError(
                f"the database holds conversations in schema version {version}; this "
                f"agentforge-typed reads versions up to {SCHEMA_VERSION}: upgrade agentforge-typed "
                "to use it (nothing was changed)"
            )

    def _run(self, operation: Callable[[Any], T]) -> T:
        """`operation` on a connection of the pool, the driver's errors made store errors."""
        try:
            with self._connection() as connection:
                return operation(connection)
        except ConversationStoreError:
            raise
        except self._errors as error:
            raise self._failure(error) from error

    def _executor(self) -> concurrent.futures.ThreadPoolExecutor:
        with self._lock:
            if self._workers is None:
                self._workers = concurrent.futures.ThreadPoolExecutor(
                    self.max_connections, thread_name_prefix=f"agentforge-{type(self).__name__}"
                )
            return self._workers

    async def _arun(
        self, operation: Callable[[Any], T], abandoned: Callable[[T], object] | None = None
    ) -> T:
        """`_run` on the store's worker threads. With `abandoned`: what to do with the result
        of an operation whose caller was cancelled after it began (a claim it took)."""
        if self._closed:
            raise ConversationStoreError("the store is closed")
        future = self._executor().submit(self._run, operation)
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            if abandoned is not None:
                undo = abandoned

                def done(finished: concurrent.futures.Future[T]) -> None:
                    if not finished.cancelled() and finished.exception() is None:
                        with contextlib.suppress(Exception):
                            undo(finished.result())

                future.add_done_callback(done)
            raise

    # -- the operations ---------------------------------------------------------------------------

    def _claiming(self, conversation_id: str, ttl: float | None) -> Callable[[Any], Claim]:
        key = id_key(conversation_id)
        ttl = self.claim_ttl if ttl is None else check_ttl(ttl)
        holder = secrets.token_hex(16)
        dialect = self.dialect

        def claim(connection: Any) -> Claim:
            parameters = {
                "key": key,
                "id": dialect.id_value(conversation_id),
                "holder": holder,
                "now": self._now(),
                "ttl": ttl,
                "cap": self.max_record_bytes,
            }
            rows = connection.execute(dialect.claim, parameters).fetchall()
            if not rows:
                held = connection.execute(dialect.holder_of, {"key": key}).fetchall()
                raise conflict(conversation_id, dialect.time(held[0][0]) if held else None)
            stored, messages, state, size, version, created, updated, expires = rows[0]
            try:
                self._check_id(conversation_id, stored)
                history, kept = decode(
                    conversation_id, messages, state, size, self.max_record_bytes
                )
            except ConversationStoreError:
                self._give_up(connection, key, holder)
                raise
            conversation = Conversation(
                conversation_id,
                history,
                kept,
                version,
                dialect.time(created),
                dialect.time(updated),
            )
            return Claim(conversation, holder, dialect.time(expires), ttl)

        return claim

    def _give_up(self, connection: Any, key: bytes, holder: str, saved: bool = False) -> None:
        """Release the claim; a conversation never saved (`saved` says when it certainly was)
        is removed."""
        parameters = {"key": key, "holder": holder}
        if saved or connection.execute(self.dialect.drop_unsaved, parameters).rowcount == 0:
            connection.execute(self.dialect.release, parameters)

    def _check_id(self, conversation_id: str, stored: Any) -> None:
        if self.dialect.id_text(stored) != conversation_id:
            raise ConversationStoreError(
                f"conversation {shown(conversation_id)} is corrupt: its row holds another id "
                "under its key; refused whole",
                conversation_id,
            )

    def claim(self, conversation_id: str, *, ttl: float | None = None) -> Claim:
        """Claim the conversation for one run (see `ConversationStore.claim`)."""
        return self._run(self._claiming(conversation_id, ttl))

    async def aclaim(self, conversation_id: str, *, ttl: float | None = None) -> Claim:
        """`claim`, as a coroutine; a claim taken for a caller cancelled meanwhile is released."""
        return await self._arun(self._claiming(conversation_id, ttl), self.release)

    def _saving(
        self, claim: Claim, messages: Sequence[ChatMessage], state: Mapping[str, Any] | None
    ) -> Callable[[Any], Claim]:
        if not isinstance(claim, Claim):
            raise TypeError(
                f"save takes the Claim that claim() returned, not {type(claim).__name__}"
            )
        kept = claim.conversation.state if state is None else state
        dialect = self.dialect

        def save(connection: Any) -> Claim:
            encoded = encode(claim.conversation_id, messages, kept, self.max_record_bytes)
            parameters = {
                "messages": encoded.messages,
                "state": encoded.state,
                "count": encoded.message_count,
                "size": encoded.size,
                "now": self._now(),
                "ttl": claim.ttl,
                "key": id_key(claim.conversation_id),
                "holder": claim.holder,
                "version": claim.version,
            }
            rows = connection.execute(dialect.save, parameters).fetchall()
            if not rows:
                raise conflict(claim.conversation_id)
            version, created, updated, expires = rows[0]
            conversation = Conversation(
                claim.conversation_id,
                tuple(messages),
                json.loads(encoded.state),
                version,
                dialect.time(created),
                dialect.time(updated),
            )
            return Claim(conversation, claim.holder, dialect.time(expires), claim.ttl)

        return save

    def save(
        self,
        claim: Claim,
        messages: Sequence[ChatMessage],
        state: Mapping[str, Any] | None = None,
    ) -> Claim:
        """Save the whole history under `claim` (see `ConversationStore.save`)."""
        return self._run(self._saving(claim, messages, state))

    async def asave(
        self,
        claim: Claim,
        messages: Sequence[ChatMessage],
        state: Mapping[str, Any] | None = None,
    ) -> Claim:
        """`save`, as a coroutine."""
        return await self._arun(self._saving(claim, messages, state))

    def _renewing(self, claim: Claim) -> Callable[[Any], Claim]:
        def renew(connection: Any) -> Claim:
            parameters = {
                "key": id_key(claim.conversation_id),
                "holder": claim.holder,
                "now": self._now(),
                "ttl": claim.ttl,
            }
            rows = connection.execute(self.dialect.renew, parameters).fetchall()
            if not rows:
                raise conflict(claim.conversation_id)
            expires = self.dialect.time(rows[0][0])
            return Claim(claim.conversation, claim.holder, expires, claim.ttl)

        return renew

    def renew(self, claim: Claim) -> Claim:
        """Extend `claim` by its ttl (see `ConversationStore.renew`)."""
        return self._run(self._renewing(claim))

    async def arenew(self, claim: Claim) -> Claim:
        """`renew`, as a coroutine."""
        return await self._arun(self._renewing(claim))

    def _releasing(self, claim: Claim) -> Callable[[Any], None]:
        key = id_key(claim.conversation_id)
        saved = claim.version > 0
        return lambda connection: self._give_up(connection, key, claim.holder, saved)

    def release(self, claim: Claim) -> None:
        """Give the conversation up (see `ConversationStore.release`)."""
        self._run(self._releasing(claim))

    async def arelease(self, claim: Claim) -> None:
        """`release`, as a coroutine."""
        await self._arun(self._releasing(claim))

    def _loading(self, conversation_id: str) -> Callable[[Any], Conversation | None]:
        key = id_key(conversation_id)
        dialect = self.dialect

        def load(connection: Any) -> Conversation | None:
            parameters = {"key": key, "cap": self.max_record_bytes}
            rows = connection.execute(dialect.load, parameters).fetchall()
            if not rows:
                return None
            stored, messages, state, size, version, created, updated = rows[0]
            self._check_id(conversation_id, stored)
            history, kept = decode(conversation_id, messages, state, size, self.max_record_bytes)
            return Conversation(
                conversation_id,
                history,
                kept,
                version,
                dialect.time(created),
                dialect.time(updated),
            )

        return load

    def load(self, conversation_id: str) -> Conversation | None:
        """The stored conversation, or `None` (see `ConversationStore.load`)."""
        return self._run(self._loading(conversation_id))

    async def aload(self, conversation_id: str) -> Conversation | None:
        """`load`, as a coroutine."""
        return await self._arun(self._loading(conversation_id))

    def _listing(self, limit: int, cursor: str | None) -> Callable[[Any], ConversationPage]:
        before = parse_cursor(cursor, limit)
        dialect = self.dialect

        def page(connection: Any) -> ConversationPage:
            parameters = {
                "before": NO_CURSOR if before is None else before,
                "limit": limit + 1,
                "now": self._now(),
            }
            rows = connection.execute(dialect.page, parameters).fetchall()
            found = tuple(
                ConversationInfo(
                    dialect.id_text(stored),
                    version,
                    count,
                    size,
                    dialect.time(created),
                    dialect.time(updated),
                    None if claimed is None else dialect.time(claimed),
                )
                for _, stored, version, count, size, created, updated, claimed in rows[:limit]
            )
            return ConversationPage(found, str(rows[limit - 1][0]) if len(rows) > limit else None)

        return page

    def list(self, *, limit: int = 50, cursor: str | None = None) -> ConversationPage:
        """A page of the saved conversations, newest first (see `ConversationStore.list`)."""
        return self._run(self._listing(limit, cursor))

    async def alist(self, *, limit: int = 50, cursor: str | None = None) -> ConversationPage:
        """`list`, as a coroutine."""
        return await self._arun(self._listing(limit, cursor))

    def _deleting(self, conversation_id: str) -> Callable[[Any], bool]:
        key = id_key(conversation_id)
        return lambda connection: connection.execute(self.dialect.delete, {"key": key}).rowcount > 0

    def delete(self, conversation_id: str) -> bool:
        """Delete the conversation (see `ConversationStore.delete`)."""
        return self._run(self._deleting(conversation_id))

    async def adelete(self, conversation_id: str) -> bool:
        """`delete`, as a coroutine."""
        return await self._arun(self._deleting(conversation_id))

    def _expiring(self, age: timedelta | float) -> Callable[[Any], int]:
        span = seconds(age)

        def expire(connection: Any) -> int:
            parameters = {"age": span, "now": self._now()}
            return int(connection.execute(self.dialect.delete_older, parameters).rowcount)

        return expire

    def delete_older_than(self, age: timedelta | float) -> int:
        """Delete the conversations idle for `age` (see `ConversationStore.delete_older_than`)."""
        return self._run(self._expiring(age))

    async def adelete_older_than(self, age: timedelta | float) -> int:
        """`delete_older_than`, as a coroutine."""
        return await self._arun(self._expiring(age))

    # -- the tools' cached results (`StoreCache`) -------------------------------------------------

    def _getting(self, key: str) -> Callable[[Any], bytes | None]:
        def get(connection: Any) -> bytes | None:
            parameters = {"key": key, "now": self._now()}
            rows = connection.execute(self.dialect.result_get, parameters).fetchall()
            return bytes(rows[0][0]) if rows else None

        return get

    def _putting(
        self, key: str, value: bytes, ttl: float | None, max_entries: int, max_bytes: int
    ) -> Callable[[Any], None]:
        def put(connection: Any) -> None:
            parameters = {
                "key": key,
                "value": value,
                "size": len(value),
                "ttl": ttl,
                "now": self._now(),
                "max_entries": max_entries,
                "max_bytes": max_bytes,
            }
            connection.execute(self.dialect.result_put, parameters)
            for statement in self.dialect.result_evict:
                connection.execute(statement, parameters)

        return put

    def get_result(self, key: str) -> bytes | None:
        """The result kept under `key` (unexpired), marked as just used; `None` when none is."""
        return self._run(self._getting(key))

    async def aget_result(self, key: str) -> bytes | None:
        """`get_result`, as a coroutine."""
        return await self._arun(self._getting(key))

    def put_result(
        self, key: str, value: bytes, *, ttl: float | None, max_entries: int, max_bytes: int
    ) -> None:
        """Keep `value` under `key` for `ttl` seconds (`None`: until evicted), then drop the
        least recently used results past `max_entries` and `max_bytes` (and the expired)."""
        self._run(self._putting(key, value, ttl, max_entries, max_bytes))

    async def aput_result(
        self, key: str, value: bytes, *, ttl: float | None, max_entries: int, max_bytes: int
    ) -> None:
        """`put_result`, as a coroutine."""
        await self._arun(self._putting(key, value, ttl, max_entries, max_bytes))

    # -- the MCP servers' credentials (`StoreTokens`) ---------------------------------------------

    def _credential_getting(self, key: str) -> Callable[[Any], bytes | None]:
        def get(connection: Any) -> bytes | None:
            rows = connection.execute(self.dialect.credential_get, {"key": key}).fetchall()
            return bytes(rows[0][0]) if rows else None

        return get

    def _credential_putting(self, key: str, value: bytes) -> Callable[[Any], None]:
        def put(connection: Any) -> None:
            parameters = {"key": key, "value": value, "now": self._now()}
            connection.execute(self.dialect.credential_put, parameters)

        return put

    def _credential_deleting(self, key: str) -> Callable[[Any], bool]:
        def delete(connection: Any) -> bool:
            return bool(connection.execute(self.dialect.credential_delete, {"key": key}).rowcount)

        return delete

    def get_credential(self, key: str) -> bytes | None:
        """The credential kept under `key`, or `None`."""
        return self._run(self._credential_getting(key))

    async def aget_credential(self, key: str) -> bytes | None:
        """`get_credential`, as a coroutine."""
        return await self._arun(self._credential_getting(key))

    def put_credential(self, key: str, value: bytes) -> None:
        """Keep `value` under `key`, replacing what was kept there."""
        self._run(self._credential_putting(key, value))

    async def aput_credential(self, key: str, value: bytes) -> None:
        """`put_credential`, as a coroutine."""
        await self._arun(self._credential_putting(key, value))

    def delete_credential(self, key: str) -> bool:
        """Forget the credential kept under `key`; whether there was one."""
        return self._run(self._credential_deleting(key))

    async def adelete_credential(self, key: str) -> bool:
        """`delete_credential`, as a coroutine."""
        return await self._arun(self._credential_deleting(key))

    def close(self) -> None:
        """Close the store's connections (those in use close when their operation ends)."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            workers, self._workers = self._workers, None
        for connection in idle:
            with contextlib.suppress(Exception):
                connection.close()
        if workers is not None:
            workers.shutdown(wait=False)

    async def aclose(self) -> None:
        """`close`, as a coroutine."""
        self.close()

    def __enter__(self: T) -> T:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self: T) -> T:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
