"""The database stores' schema: a database of the first version, made with version 1's DDL and
holding rows written as version 1 wrote them, is migrated forward when a store first uses it
(its rows intact and readable); one written by a newer version is refused whole, untouched; two
processes opening a new database at once create it once."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import postgres_server
import pytest
import store_support
from conformance import STORE, Surface
from store_support import HISTORY, Opener, history, raw

from agentforge_typed import ChatMessage
from agentforge_typed.stores import SCHEMA_VERSION, ConversationStoreError
from agentforge_typed.stores._postgres import POSTGRES_MIGRATIONS
from agentforge_typed.stores._sqlite import SQLITE_MIGRATIONS

# The fixtures these tests share (see `store_support`, `postgres_server`).
opener = store_support.opener
postgres = postgres_server.postgres

DATABASES = [
    pytest.param(surface, id=surface.name)
    for surface in STORE.surfaces.values()
    if surface["shared"]
]
TESTS = Path(__file__).parents[1]


def _v1(url: str) -> tuple[tuple[str, ...], str]:
    """Version 1's DDL for the database at `url`, and its statement inserting a row as version 1
    wrote it (key, id, messages, state, count, version, created, updated, holder, expires)."""
    if url.startswith("sqlite:"):
        insert = (
            "INSERT INTO agentforge_conversations (key, id, messages, state, message_count, "
            "version, created_at, updated_at, holder, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, "
            "?, ?)"
        )
        return SQLITE_MIGRATIONS[0], insert
    insert = (
        "INSERT INTO agentforge_conversations (key, id, messages, state, message_count, version, "
        "created_at, updated_at, holder, expires_at) VALUES (?, ?, ?, ?, ?, ?, to_timestamp(?), "
        "to_timestamp(?), ?, to_timestamp(?))"
    )
    return POSTGRES_MIGRATIONS[0], insert


def _dumped(messages: list[ChatMessage]) -> bytes:
    from pydantic import TypeAdapter

    return TypeAdapter(list[ChatMessage]).dump_json(messages)


@pytest.mark.parametrize("surface", DATABASES)
def test_a_version_1_database_is_migrated_with_its_rows(
    opener: Opener, surface: Surface[Any]
) -> None:
    ddl, insert = _v1(opener.url)
    postgres = not opener.url.startswith("sqlite:")
    rows: list[tuple[str, list[ChatMessage], dict[str, Any], float]] = [
        ("paused", HISTORY, {"pending": ["call_1"]}, 10),
        ("idle", history(1), {}, 1000),
        ("nul\x00id", history(3), {"n": 3}, 5),
    ]
    now = time.time()
    with raw(opener.url) as execute:
        for statement in ddl:
            execute(statement)
        execute("INSERT INTO agentforge_schema (version) VALUES (1)")
        for i, (conversation_id, messages, state, idle) in enumerate(rows):
            execute(
                insert,
                hashlib.sha256(conversation_id.encode()).digest(),
                conversation_id.encode() if postgres else conversation_id,
                _dumped(messages),
                json.dumps(state).encode(),
                len(messages),
                1 + i,
                now - 2000 + i,
                now - idle,
                None,
                None,
            )
    store = opener()
    for i, (conversation_id, messages, state, _) in enumerate(rows):
        loaded = store.load(conversation_id)
        assert loaded is not None
        assert (loaded.messages, loaded.state, loaded.version) == (tuple(messages), state, 1 + i)
    listed = store.list().conversations
    assert [c.id for c in listed] == [r[0] for r in reversed(rows)]
    assert [c.size for c in listed] == [
        len(_dumped(m)) + len(json.dumps(s).encode()) for _, m, s, _ in reversed(rows)
    ]
    claim = store.claim("paused")
    assert store.save(claim, [*HISTORY, *history(1)]).version == 2
    with raw(opener.url) as execute:
        assert execute("SELECT version FROM agentforge_schema") == [(SCHEMA_VERSION,)]
        if postgres:
            indexes = execute(
                "SELECT indexname FROM pg_indexes WHERE tablename = 'agentforge_conversations'"
            )
        else:
            indexes = execute("SELECT name FROM sqlite_master WHERE type = 'index'")
        assert ("agentforge_conversations_updated",) in indexes
    assert store.delete_older_than(60) == 1  # "idle", saved 1,000 seconds ago
    assert {c.id for c in store.list().conversations} == {"paused", "nul\x00id"}


@pytest.mark.parametrize("surface", DATABASES)
def test_a_database_of_a_newer_schema_is_refused_untouched(
    opener: Opener, surface: Surface[Any]
) -> None:
    store = opener()
    store.release(store.save(store.claim("c"), history(2)))
    with raw(opener.url) as execute:
        execute("UPDATE agentforge_schema SET version = ?", SCHEMA_VERSION + 1)
    newer = opener()
    for operation in (
        lambda: newer.load("c"),
        lambda: newer.claim("c"),
        lambda: newer.list(),
        lambda: newer.delete("c"),
    ):
        with pytest.raises(ConversationStoreError) as info:
            operation()
        assert str(info.value) == (
            f"the database holds conversations in schema version {SCHEMA_VERSION + 1}; this "
            f"agentforge-typed reads versions up to {SCHEMA_VERSION}: upgrade agentforge-typed to "
            "use it (nothing was changed)"
        )
    with raw(opener.url) as execute:
        assert execute("SELECT version FROM agentforge_schema") == [(SCHEMA_VERSION + 1,)]
        assert execute("SELECT count(*) FROM agentforge_conversations") == [(1,)]


@pytest.mark.parametrize("surface", DATABASES)
def test_processes_opening_a_new_database_at_once_create_it_once(
    opener: Opener, surface: Surface[Any], tmp_path: Path
) -> None:

    go = tmp_path / "go"
    code = (
        "import sys, time, pathlib\n"
        "from agentforge_typed.stores import store_from_url\n"
        "store = store_from_url(sys.argv[1])\n"
        "print('ready', flush=True)\n"
        "while not pathlib.Path(sys.argv[2]).exists(): time.sleep(0.001)\n"
        "store.release(store.save(store.claim(sys.argv[3]), []))\n"
        "print('done', flush=True)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS.parent), str(TESTS)])}
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", code, opener.url, str(go), f"w{n}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for n in range(3)
    ]
    try:
        for worker in workers:
            assert worker.stdout is not None and worker.stdout.readline().strip() == "ready"
        go.touch()
        results = [worker.communicate(timeout=60) for worker in workers]
    finally:
        for worker in workers:
            worker.kill()
    assert [out.split() for out, _ in results] == [["done"]] * 3, [err for _, err in results]
    listed = opener().list().conversations
    assert sorted(c.id for c in listed) == ["w0", "w1", "w2"]
    with raw(opener.url) as execute:
        assert execute("SELECT version FROM agentforge_schema") == [(SCHEMA_VERSION,)]
