"""The conversation stores' behaviour, for every registered kind (`conformance.STORE`): what a
save keeps, claims and their expiry, compare-and-swap saves, leases renewed in the background,
listing, deletion and expiry by age, the async methods, store URLs and lazy imports. Real SQLite
files and a real PostgreSQL server (`conftest.postgres`); the guarantees each kind keeps are in
`test_conformance_stores.py`, the schema's migrations in `test_stores_schema.py`."""

from __future__ import annotations

import asyncio
import os
import stat
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import postgres_server
import pytest
import store_support
from conformance import STORE, Surface
from store_support import ALL, HISTORY, Opener, history, raw

import agentforge_typed as af
from agentforge_typed import AgentForgeError, UserMessage
from agentforge_typed.stores import (
    MAX_CONVERSATION_ID_BYTES,
    MAX_PAGE_SIZE,
    Claim,
    ConversationConflictError,
    ConversationStore,
    ConversationStoreError,
    MemoryStore,
    SQLiteStore,
    ahold,
    hold,
    store_from_url,
)

# The fixtures these tests share (see `store_support`, `postgres_server`).
opener = store_support.opener
postgres = postgres_server.postgres

TESTS = Path(__file__).parents[1]


# -- what a save keeps -------------------------------------------------------------------------


@pytest.mark.parametrize("surface", ALL)
def test_a_history_of_every_kind_round_trips_exactly(opener: Opener, surface: Surface[Any]) -> None:
    store = opener()
    claim = store.claim("c-17")
    assert (claim.version, claim.conversation.messages, dict(claim.conversation.state)) == (
        0,
        (),
        {},
    )
    state = {"pending": {"call_1": {"digest": "ab", "asked": [1, 2.5, None]}}, "é": "ü"}
    saved = store.save(claim, HISTORY, state)
    assert saved.version == 1 and saved.conversation.messages == tuple(HISTORY)
    assert saved.conversation.state == state
    loaded = store.load("c-17")
    assert loaded is not None
    assert loaded.messages == tuple(HISTORY)
    assert [type(m) for m in loaded.messages] == [type(m) for m in HISTORY]
    assert loaded.state == state and loaded.version == 1
    assert loaded.created_at is not None and loaded.updated_at is not None
    assert loaded.created_at <= loaded.updated_at
    assert loaded.created_at.utcoffset() == timedelta(0)
    if opener.shared:  # a second store on the same database reads the same
        other = opener()
        assert other.load("c-17") == loaded


@pytest.mark.parametrize("surface", ALL)
def test_saves_increment_the_version_and_keep_the_creation_time(
    opener: Opener, surface: Surface[Any]
) -> None:
    store = opener()
    claim = store.claim("c")
    first = store.save(claim, history(2), {"n": 1})
    time.sleep(0.01)
    second = store.save(first, history(4))  # state None: kept
    assert (first.version, second.version) == (1, 2)
    assert second.conversation.state == {"n": 1}
    assert second.conversation.created_at == first.conversation.created_at
    assert second.conversation.updated_at is not None and first.conversation.updated_at is not None
    assert second.conversation.updated_at > first.conversation.updated_at
    loaded = store.load("c")
    assert loaded is not None and loaded.messages == tuple(history(4)) and loaded.version == 2


@pytest.mark.parametrize("surface", ALL)
def test_the_state_read_is_a_copy(opener: Opener, surface: Surface[Any]) -> None:
    store = opener()
    state: dict[str, Any] = {"keys": ["a"]}
    claim = store.save(store.claim("c"), history(1), state)
    state["keys"].append("changed after the save")
    assert claim.conversation.state == {"keys": ["a"]}
    loaded = store.load("c")
    assert loaded is not None
    loaded.state["keys"].append("changed after the load")
    again = store.load("c")
    assert again is not None and again.state == {"keys": ["a"]}


@pytest.mark.parametrize("surface", ALL)
@pytest.mark.parametrize(
    ("bad", "error"),
    [
        ({"k": {1, 2}}, "JSON object"),
        ({"k": float("nan")}, "JSON object"),
        ([1, 2], "mapping"),
    ],
    ids=["a set", "nan", "a list"],
)
def test_a_state_that_is_not_a_json_object_is_refused(
    opener: Opener, surface: Surface[Any], bad: Any, error: str
) -> None:
    store = opener()
    claim = store.claim("c")
    with pytest.raises(TypeError, match=error):
        store.save(claim, history(1), bad)
    assert store.save(claim, history(1)).version == 1  # nothing was written: the claim stands


@pytest.mark.parametrize("surface", ALL)
def test_what_is_not_a_message_is_refused(opener: Opener, surface: Surface[Any]) -> None:
    store = opener()
    claim = store.claim("c")
    with pytest.raises(TypeError, match="ChatMessages, not dict"):
        store.save(claim, [{"role": "user", "content": "hi"}])  # type: ignore[list-item]


# -- claims ------------------------------------------------------------------------------------


@pytest.mark.parametrize("surface", ALL)
def test_a_second_claim_is_refused_at_once_until_the_first_is_released(
    opener: Opener, surface: Surface[Any]
) -> None:
    store = opener()
    other = opener() if opener.shared else store
    claim = store.claim("c")
    started = time.monotonic()
    with pytest.raises(ConversationConflictError, match="held by another run until") as info:
        other.claim("c")
    assert time.monotonic() - started < 1.0
    assert info.value.conversation_id == "c"
    assert isinstance(info.value, ConversationStoreError) and isinstance(
        info.value, AgentForgeError
    )
    store.save(claim, history(1))
    with pytest.raises(ConversationConflictError):
        other.claim("c")
    store.release(claim)
    taken = other.claim("c")
    assert taken.version == 1 and taken.conversation.messages == tuple(history(1))


@pytest.mark.parametrize("surface", ALL)
def test_an_unsaved_claim_released_leaves_nothing(opener: Opener, surface: Surface[Any]) -> None:
    store = opener()
    claim = store.claim("c")
    assert store.load("c") is None and store.list().conversations == ()
    store.release(claim)
    store.release(claim)  # twice: nothing more
    assert store.load("c") is None and store.list().conversations == ()
    assert store.claim("c").version == 0


@pytest.mark.parametrize("surface", ALL)
def test_a_claim_lapses_after_its_ttl_and_not_before(opener: Opener, surface: Surface[Any]) -> None:
    store = opener(claim_ttl=0.6)
    claim = store.claim("c")
    store.save(claim, history(1))
    with pytest.raises(ConversationConflictError):
        store.claim("c")
    time.sleep(0.8)
    taken = store.claim("c", ttl=5)
    assert taken.version == 1 and taken.ttl == 5
    # The lapsed claim can no longer save, renew or release.
    with pytest.raises(ConversationConflictError, match="nothing was written"):
        store.save(claim, history(3))
    with pytest.raises(ConversationConflictError):
        store.renew(claim)
    store.release(claim)
    with pytest.raises(ConversationConflictError):
        store.claim("c")
    loaded = store.load("c")
    assert loaded is not None and loaded.messages == tuple(history(1))


@pytest.mark.parametrize("surface", ALL)
def test_a_lapsed_claim_nobody_took_still_saves(opener: Opener, surface: Surface[Any]) -> None:
    store = opener()
    claim = store.claim("c", ttl=0.2)
    time.sleep(0.3)
    assert store.save(claim, history(2)).version == 1


@pytest.mark.parametrize("surface", ALL)
def test_a_stale_claim_never_overwrites_a_newer_save(opener: Opener, surface: Surface[Any]) -> None:
    """Compare-and-swap on the version: the same holder's older claim is refused."""
    store = opener()
    claim = store.claim("c")
    newer = store.save(claim, history(2))
    with pytest.raises(ConversationConflictError):
        store.save(claim, history(1))
    assert store.save(newer, history(3)).version == 2
    loaded = store.load("c")
    assert loaded is not None and len(loaded.messages) == 3


@pytest.mark.parametrize("surface", ALL)
def test_renew_extends_the_claim(opener: Opener, surface: Surface[Any]) -> None:
    store = opener()
    claim = store.claim("c", ttl=0.5)
    for _ in range(3):
        time.sleep(0.25)
        renewed = store.renew(claim)
        assert renewed.expires_at > claim.expires_at and renewed.holder == claim.holder
        claim = renewed
        with pytest.raises(ConversationConflictError):
            store.claim("c")


@pytest.mark.parametrize("surface", ALL)
def test_a_deleted_conversation_is_not_brought_back_by_its_holder(
    opener: Opener, surface: Surface[Any]
) -> None:
    store = opener()
    claim = store.save(store.claim("c"), history(2))
    assert store.delete("c") is True
    assert store.delete("c") is False
    with pytest.raises(ConversationConflictError):
        store.save(claim, history(3))
    assert store.load("c") is None


@pytest.mark.parametrize("surface", ALL)
def test_ids_are_opaque(opener: Opener, surface: Surface[Any]) -> None:
    """Quotes, NULs, SQL, unicode and a 10 KB id are ids like any other, each its own."""
    store = opener()
    ids = [
        "'; DROP TABLE agentforge_conversations; --",
        'a"b\\c',
        "nul\x00inside",
        "\x00",
        "ünïcødé 会话 \U0001f600",
        "%_*?[",
        "k" * 10_000,
        "k" * 9_999 + "j",
    ]
    for i, conversation_id in enumerate(ids):
        claim = store.claim(conversation_id)
        store.release(store.save(claim, history(i + 1), {"i": i}))
    for i, conversation_id in enumerate(ids):
        loaded = store.load(conversation_id)
        assert loaded is not None and loaded.id == conversation_id
        assert len(loaded.messages) == i + 1 and loaded.state == {"i": i}
    listed = store.list(limit=MAX_PAGE_SIZE).conversations
    assert sorted(info.id for info in listed) == sorted(ids)


@pytest.mark.parametrize("surface", ALL)
def test_what_is_not_an_id_is_refused(opener: Opener, surface: Surface[Any]) -> None:
    store = opener()
    with pytest.raises(TypeError, match="is a str, not int"):
        store.claim(5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cannot be empty"):
        store.load("")
    with pytest.raises(ValueError, match="not valid Unicode"):
        store.claim("lone \ud800")
    with pytest.raises(ValueError, match=f"at most {MAX_CONVERSATION_ID_BYTES:,} bytes"):
        store.claim("é" * (MAX_CONVERSATION_ID_BYTES // 2 + 1))
    assert store.claim("k" * MAX_CONVERSATION_ID_BYTES).version == 0


@pytest.mark.parametrize("surface", ALL)
@pytest.mark.parametrize("ttl", [0, -1, float("inf"), float("nan"), True])
def test_a_ttl_must_be_a_positive_number_of_seconds(
    opener: Opener, surface: Surface[Any], ttl: float
) -> None:
    with pytest.raises(ValueError, match="positive number of seconds"):
        opener().claim("c", ttl=ttl)
    with pytest.raises(ValueError, match="positive number of seconds"):
        opener(claim_ttl=ttl)


# -- leases ------------------------------------------------------------------------------------


@pytest.mark.parametrize("surface", ALL)
def test_a_lease_keeps_its_claim_past_the_ttl_while_the_run_works(
    opener: Opener, surface: Surface[Any]
) -> None:
    store = opener()
    other = opener() if opener.shared else store
    with hold(store, "c", ttl=1.0) as lease:
        time.sleep(2.2)  # inside a long tool call: the renewer keeps the claim
        lease.check()
        with pytest.raises(ConversationConflictError):
            other.claim("c")
        claim = lease.save([*lease.conversation.messages, UserMessage(content="done")])
        assert claim.version == 1 and lease.claim == claim
    assert lease.lost
    assert other.claim("c").version == 1  # released at the end of the block


@pytest.mark.parametrize("surface", ALL)
def test_a_lease_whose_claim_was_taken_is_lost(opener: Opener, surface: Surface[Any]) -> None:
    store = opener()
    lease = hold(store, "c", ttl=0.3)
    lease.save(history(1))
    assert store.delete("c")
    taken = store.claim("c")  # deleted, then claimed anew by another run
    deadline = time.monotonic() + 5
    while not lease.lost:  # the renewer finds the claim gone
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert lease.lost
    with pytest.raises(ConversationConflictError):
        lease.check()
    with pytest.raises(ConversationConflictError):
        lease.save(history(2))
    lease.release()  # does not release the other run's claim
    with pytest.raises(ConversationConflictError):
        store.claim("c")
    store.release(taken)


@pytest.mark.parametrize("surface", ALL)
def test_a_lease_refuses_to_vouch_for_a_claim_it_could_not_renew(
    opener: Opener, surface: Surface[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the database is unreachable, `check` says so once the ttl has passed since the
    last renewal: another run may hold the conversation, so nothing may run."""
    store = opener()
    lease = hold(store, "c", ttl=0.6)

    def unreachable(claim: Claim) -> Claim:
        raise ConversationStoreError("the database is down")

    monkeypatch.setattr(store, "renew", unreachable)
    lease.check()
    time.sleep(0.8)
    assert not lease.lost
    with pytest.raises(ConversationConflictError, match=r"could not be renewed for 0\.6 s"):
        lease.check()
    monkeypatch.undo()
    lease.save(history(1))  # nobody took it meanwhile: the save decides, and renews
    lease.check()
    lease.release()


@pytest.mark.parametrize("surface", ALL)
def test_leaving_a_lease_with_an_error_keeps_the_error(
    opener: Opener, surface: Surface[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = opener()

    def failing(claim: Claim) -> None:
        raise ConversationStoreError("the database is down")

    with pytest.raises(ZeroDivisionError), hold(store, "c") as lease:
        monkeypatch.setattr(store, "release", failing)
        1 / 0  # noqa: B018
    assert lease.lost
    lease2 = hold(store, "d")
    with pytest.raises(ConversationStoreError, match="down"):
        lease2.release()


# -- listing, deleting, expiry -----------------------------------------------------------------


@pytest.mark.parametrize("surface", ALL)
def test_a_listing_pages_newest_first_and_stays_put_under_inserts(
    opener: Opener, surface: Surface[Any]
) -> None:
    store = opener()
    for i in range(7):
        store.release(store.save(store.claim(f"c{i}"), history(i + 1)))
    first = store.list(limit=3)
    assert [c.id for c in first.conversations] == ["c6", "c5", "c4"]
    assert [c.message_count for c in first.conversations] == [7, 6, 5]
    assert first.next_cursor is not None
    for i in range(7, 10):  # created while paging: newer than the cursor
        store.release(store.save(store.claim(f"c{i}"), history(1)))
    store.delete("c3")
    second = store.list(limit=3, cursor=first.next_cursor)
    assert [c.id for c in second.conversations] == ["c2", "c1", "c0"]
    assert second.next_cursor is None  # the last page
    after_c1 = store.list(limit=1, cursor=store.list(limit=8).next_cursor)
    assert [c.id for c in after_c1.conversations] == ["c0"] and after_c1.next_cursor is None
    everything = store.list(limit=MAX_PAGE_SIZE)
    assert [c.id for c in everything.conversations] == [
        f"c{i}" for i in (9, 8, 7, 6, 5, 4, 2, 1, 0)
    ]
    assert everything.next_cursor is None


@pytest.mark.parametrize("surface", ALL)
def test_a_listing_shows_what_each_conversation_is(opener: Opener, surface: Surface[Any]) -> None:
    store = opener()
    claim = store.save(store.claim("held"), HISTORY, {"k": "v"})
    store.release(store.save(store.claim("free"), history(1)))
    by_id = {info.id: info for info in store.list().conversations}
    held, free = by_id["held"], by_id["free"]
    assert held.claimed_until is not None and held.claimed_until == claim.expires_at
    assert free.claimed_until is None
    assert (held.version, held.message_count) == (1, len(HISTORY))
    loaded = store.load("held")
    assert loaded is not None and held.updated_at == loaded.updated_at
    assert held.size > 100 and free.size < held.size


@pytest.mark.parametrize("surface", ALL)
@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"limit": 0}, "limit must be an int from 1 to 1000"),
        ({"limit": MAX_PAGE_SIZE + 1}, "limit must be"),
        ({"cursor": "abc"}, "not a cursor a listing gave"),
        ({"cursor": "-1"}, "not a cursor"),
        ({"cursor": "9" * 40}, "not a cursor"),
    ],
)
def test_a_listing_refuses_what_it_did_not_give(
    opener: Opener, surface: Surface[Any], options: dict[str, Any], error: str
) -> None:
    with pytest.raises(ValueError, match=error):
        opener().list(**options)


@pytest.mark.parametrize("surface", ALL)
def test_expiry_by_age_deletes_the_idle_and_keeps_the_claimed(
    opener: Opener, surface: Surface[Any]
) -> None:
    store = opener()
    store.release(store.save(store.claim("old"), history(1)))
    held = store.save(store.claim("old but held"), history(1))
    time.sleep(0.6)
    store.release(store.save(store.claim("recent"), history(1)))
    assert store.delete_older_than(timedelta(seconds=0.5)) == 1
    assert {c.id for c in store.list().conversations} == {"recent", "old but held"}
    assert store.delete_older_than(3600) == 0
    store.release(held)
    assert store.delete_older_than(0.5) == 1
    with pytest.raises(ValueError, match="non-negative"):
        store.delete_older_than(-1)


# -- async -------------------------------------------------------------------------------------


@pytest.mark.parametrize("surface", ALL)
async def test_the_async_methods_do_what_the_blocking_ones_do(
    opener: Opener, surface: Surface[Any]
) -> None:
    store = opener()
    claim = await store.aclaim("c")
    with pytest.raises(ConversationConflictError):
        await store.aclaim("c")
    saved = await store.asave(claim, HISTORY, {"a": 1})
    renewed = await store.arenew(saved)
    assert renewed.expires_at >= saved.expires_at
    await store.arelease(renewed)
    loaded = await store.aload("c")
    assert loaded is not None and loaded.messages == tuple(HISTORY) and loaded.state == {"a": 1}
    page = await store.alist(limit=1)
    assert [c.id for c in page.conversations] == ["c"]
    lease = await ahold(store, "d", ttl=1.0)
    async with lease:
        await asyncio.sleep(1.5)
        lease.check()
        await lease.asave(history(2))
    assert await store.adelete("d") is True
    assert await store.adelete_older_than(3600) == 0
    await store.aclose()


async def test_a_cancelled_claim_that_went_through_is_released(tmp_path: Path) -> None:
    """`aclaim` runs on a worker thread: cancelled while the database is locked, the claim it
    takes once the lock is gone is given back, not left held for a ttl."""
    path = tmp_path / "c.db"
    store = SQLiteStore(path, timeout=5)
    store.load("warm")  # the schema exists
    with raw(f"sqlite:///{path}") as execute:
        execute("BEGIN IMMEDIATE")
        task = asyncio.create_task(store.aclaim("c"))
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        execute("COMMIT")
    deadline = time.monotonic() + 5
    while True:
        try:
            store.release(store.claim("c"))
            break
        except ConversationConflictError:
            assert time.monotonic() < deadline, "the abandoned claim was never released"
            await asyncio.sleep(0.05)
    store.close()


# -- threads -----------------------------------------------------------------------------------


@pytest.mark.parametrize("surface", ALL)
def test_threads_saving_their_own_conversations_lose_nothing(
    opener: Opener, surface: Surface[Any]
) -> None:

    store = opener()
    errors: list[BaseException] = []

    def run(n: int) -> None:
        try:
            with hold(store, f"t{n}") as lease:
                for i in range(1, 21):
                    lease.save(history(i), {"owner": n})
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    for n in range(6):
        loaded = store.load(f"t{n}")
        assert loaded is not None
        assert (loaded.version, len(loaded.messages), loaded.state) == (20, 20, {"owner": n})


# -- store URLs, files, imports ----------------------------------------------------------------


def test_store_urls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert isinstance(store_from_url("memory:"), MemoryStore)
    relative = store_from_url("sqlite:///relative.db", claim_ttl=5)
    assert isinstance(relative, SQLiteStore) and relative.path == Path("relative.db")
    assert relative.claim_ttl == 5
    absolute = store_from_url(f"sqlite:///{tmp_path}/absolute.db")
    assert isinstance(absolute, SQLiteStore) and absolute.path == tmp_path / "absolute.db"
    for url in ("sqlite://", "sqlite:///", "mysql://u:hunter2@h/db", "hunter2", "memory:x", ""):
        with pytest.raises(ValueError, match="not a store URL") as info:
            store_from_url(url)
        assert "hunter2" not in str(info.value)
    with pytest.raises(ValueError, match="takes a file path"):
        SQLiteStore(":memory:")


def test_store_url_postgres_is_read_without_connecting() -> None:
    pytest.importorskip("psycopg")
    from agentforge_typed.stores import PostgresStore

    store = store_from_url("postgresql://app:hunter2@db.example:6543/chats")
    assert isinstance(store, PostgresStore)
    assert repr(store) == "PostgresStore(host=db.example port=6543 dbname=chats user=app)"
    assert isinstance(store_from_url("postgres://h/db"), PostgresStore)
    with pytest.raises(ValueError, match="not a PostgreSQL connection string"):
        PostgresStore("no equals sign")


def test_a_new_sqlite_file_is_its_owners_alone_and_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with SQLiteStore(path) as store:
        store.save(store.claim("c"), history(1))
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        with raw(f"sqlite:///{path}") as execute:
            assert execute("PRAGMA journal_mode") == [("wal",)]


def test_a_closed_store_refuses_work(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "c.db")
    store.load("c")
    store.close()
    with pytest.raises(ConversationStoreError, match="closed"):
        store.load("c")


def test_every_store_meets_the_protocol() -> None:
    pytest.importorskip("psycopg")
    from agentforge_typed.stores import PostgresStore

    for store in (MemoryStore(), SQLiteStore("unused.db"), PostgresStore("postgresql://h/db")):
        assert isinstance(store, ConversationStore)


def test_importing_the_package_loads_no_database_driver() -> None:
    code = (
        "import sys, agentforge_typed, agentforge_typed.stores as s; "
        "assert s.ConversationConflictError is agentforge_typed.ConversationConflictError; "
        "print(sorted(m for m in ('sqlite3', '_sqlite3', 'psycopg', 'aiosqlite', 'asyncio') "
        "if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(TESTS.parent)},
    ).stdout
    assert out.strip() == "[]"


def test_the_conflict_error_is_public_in_both_places() -> None:
    import agentforge_typed.stores as stores

    assert af.ConversationConflictError is stores.ConversationConflictError
    assert issubclass(af.ConversationConflictError, af.AgentForgeError)
    assert "ConversationConflictError" in stores.__all__


def test_a_machine_without_postgresql_skips_with_the_install_line_and_fails_under_ci(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(postgres_server, "binaries", lambda: None)
    monkeypatch.setattr(postgres_server, "_SHARED", [])
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="apt-get install postgresql"):
        postgres_server.shared()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="apt-get install postgresql"):
        postgres_server.shared()


# -- what a store refuses to be made with, and failures of its database -------------------------


def test_options_out_of_range_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_record_bytes must be at least 4"):
        MemoryStore(max_record_bytes=3)
    with pytest.raises(TypeError, match="max_record_bytes is an int, not float"):
        SQLiteStore(tmp_path / "c.db", max_record_bytes=1e6)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_connections must be an int >= 1"):
        SQLiteStore(tmp_path / "c.db", max_connections=0)
    with pytest.raises(ValueError, match="synchronous must be OFF, NORMAL, FULL or EXTRA"):
        SQLiteStore(tmp_path / "c.db", synchronous="SOMETIMES")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="positive number of seconds"):
        SQLiteStore(tmp_path / "c.db", timeout=0)


def test_an_old_sqlite_is_refused_by_name(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import sqlite3

    monkeypatch.setattr(sqlite3, "sqlite_version_info", (3, 31, 1))
    monkeypatch.setattr(sqlite3, "sqlite_version", "3.31.1")
    with pytest.raises(
        RuntimeError, match=r"needs SQLite 3\.35 or later \(RETURNING\); this Python has 3\.31\.1"
    ):
        SQLiteStore(tmp_path / "c.db")


def test_a_store_without_psycopg_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentforge_typed.stores import PostgresStore

    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(ImportError, match=r"pip install 'agentforge-typed\[postgres\]'"):
        PostgresStore("postgresql://h/db")


def test_waiting_for_a_free_connection_ends_within_the_timeout(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "c.db", max_connections=1, timeout=0.3)
    with store._connection():  # the only connection, held
        started = time.monotonic()
        with pytest.raises(
            ConversationStoreError, match=r"all 1 of the store's connections stayed busy for 0\.3 s"
        ):
            store.load("c")
        assert time.monotonic() - started < 0.3 + 1.0
    assert store.load("c") is None
    store.close()


def test_a_file_that_is_not_a_database_is_one_error(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    path.write_bytes(b"not a database at all" * 100)
    with pytest.raises(ConversationStoreError, match="failed: file is not a database"):
        SQLiteStore(path).load("c")


@pytest.mark.parametrize(
    "surface",
    [pytest.param(s, id=s.name) for s in STORE.surfaces.values() if s["shared"]],
)
def test_a_table_dropped_behind_the_stores_back_is_one_error(
    opener: Opener, surface: Surface[Any]
) -> None:
    store = opener()
    store.load("c")
    with raw(opener.url) as execute:
        execute("DROP TABLE agentforge_conversations")
    with pytest.raises(ConversationStoreError, match=r"failed: .*agentforge_conversations"):
        store.claim("c")
