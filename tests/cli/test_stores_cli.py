"""`agentforge-typed conversations`: list, show and delete against real SQLite files and a real
PostgreSQL server; every failure one line (exit status 1, 2 for a URL that names no store),
every stored text printed on printable lines, the store's password never shown, and every wait
bounded by `--timeout` (the CLI axis's guarantees for this command, see `conformance.CLI`)."""

from __future__ import annotations

import hashlib
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import postgres_server
import pytest
from store_support import HISTORY, history, raw
from test_conformance_secrets import KEY

from agentforge_typed import AiMessage, ChatMessage, ToolCall, UserMessage
from agentforge_typed.cli import main
from agentforge_typed.stores import DEFAULT_MAX_RECORD_BYTES, SQLiteStore, store_from_url

# The fixtures these tests share (see `store_support`, `postgres_server`).
postgres = postgres_server.postgres


@pytest.fixture
def database(tmp_path: Path) -> Iterator[str]:
    """A SQLite store URL holding three conversations (the newest still claimed)."""
    url = f"sqlite:///{tmp_path / 'c.db'}"
    store = store_from_url(url)
    store.release(store.save(store.claim("c-1"), HISTORY, {"pending": ["call_1"]}))
    store.release(store.save(store.claim("c-2"), history(1)))
    store.save(store.claim("held"), history(2))
    store.close()
    yield url


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(["conversations", *argv])
    out, err = capsys.readouterr()
    return status, out, err


def _one_line_failure(status: int, err: str, expected: int = 1) -> str:
    assert status == expected and "Traceback" not in err, err
    (line,) = err.splitlines()
    assert line.startswith("agentforge-typed: ")
    return line


def test_list_shows_a_page_newest_first(database: str, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _run(capsys, "--store", database)
    assert status == 0
    lines = out.splitlines()
    assert [line.split()[0] for line in lines] == ["held", "c-2", "c-1"]
    assert "claimed until" in lines[0] and "claimed" not in lines[1]
    assert lines[2].split()[1:4] == ["v1", f"{len(HISTORY)}", "messages"]
    status, out, _ = _run(capsys, "--store", database, "list", "--limit", "2")
    assert status == 0 and out.splitlines()[-1].startswith("(more: --cursor ")
    cursor = out.splitlines()[-1].removeprefix("(more: --cursor ").removesuffix(")")
    status, out, _ = _run(capsys, "--store", database, "list", "--cursor", cursor, "--json")
    page = json.loads(out)
    assert [c["id"] for c in page["conversations"]] == ["c-1"] and page["next_cursor"] is None
    assert set(page["conversations"][0]) == {
        "id", "version", "message_count", "size", "created_at", "updated_at", "claimed_until",
    }  # fmt: skip


def test_show_prints_a_conversation(database: str, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = _run(capsys, "--store", database, "show", "c-1")
    assert status == 0
    lines = out.splitlines()
    assert lines[0] == f"conversation c-1, version 1, {len(HISTORY)} messages"
    assert lines[2] == 'state: {"pending": ["call_1"]}'
    assert 'assistant: Let me check. -> refund {"order": 42}' in lines
    status, out, _ = _run(capsys, "--store", database, "show", "c-1", "--json")
    shown = json.loads(out)
    assert shown["id"] == "c-1" and shown["state"] == {"pending": ["call_1"]}
    assert len(shown["messages"]) == len(HISTORY) and shown["messages"][0]["role"] == "system"


def test_delete_removes_a_conversation(database: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(capsys, "--store", database, "delete", "c-2")[:2] == (0, "deleted c-2\n")
    status, _, err = _run(capsys, "--store", database, "delete", "c-2")
    assert _one_line_failure(status, err) == "agentforge-typed: no conversation c-2"
    status, _, err = _run(capsys, "--store", database, "show", "c-2")
    assert _one_line_failure(status, err) == "agentforge-typed: no conversation c-2"


def test_stored_text_reaches_the_terminal_printable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    store = store_from_url(url)
    hostile = "evil\x1b[2J\r\nforged line\u202e\x9b31m"
    call = ToolCall(id="1", name="t\x1b]0;title\x07", arguments="{}\n")
    messages: list[ChatMessage] = [
        UserMessage(content=hostile),
        AiMessage(text=hostile, tool_calls=[call]),
    ]
    store.release(store.save(store.claim(hostile), messages, {hostile: hostile}))
    for argv in (["list"], ["list", "--json"], ["show", hostile], ["show", hostile, "--json"]):
        status, out, _ = _run(capsys, "--store", url, *argv)
        assert status == 0, argv
        assert all(c.isprintable() or c == "\n" for c in out), (argv, out)
        if argv[0] == "show" and "--json" not in argv:
            assert len(out.splitlines()) == 5  # header, times, state and one line per message
    status, out, _ = _run(capsys, "--store", url, "show", hostile, "--json")
    assert json.loads(out)["messages"][0]["content"] == hostile  # whole, in JSON


def test_a_corrupt_record_is_one_line(database: str, capsys: pytest.CaptureFixture[str]) -> None:
    with raw(database) as execute:
        execute("UPDATE agentforge_conversations SET messages = ? WHERE id = 'c-1'", b"[{")
    status, _, err = _run(capsys, "--store", database, "show", "c-1")
    line = _one_line_failure(status, err)
    assert line.startswith("agentforge-typed: conversation 'c-1' is corrupt, its history")
    assert _run(capsys, "--store", database, "list")[0] == 0  # the listing reads no history


def test_a_record_over_the_cap_is_refused_in_one_line(
    database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Written behind the store's back (another program, a larger cap): refused whole by a
    command using the default cap, without reading it."""
    body = json.dumps([{"role": "user", "content": "x" * DEFAULT_MAX_RECORD_BYTES}]).encode()
    with raw(database) as execute:
        execute(
            "UPDATE agentforge_conversations SET messages = ?, size = ? WHERE id = 'c-2'",
            body,
            len(body) + 2,
        )
    status, _, err = _run(capsys, "--store", database, "show", "c-2")
    line = _one_line_failure(status, err)
    assert f"is {len(body) + 2:,} bytes of JSON, over max_record_bytes=" in line


def test_a_url_that_names_no_store_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    for url in (f"mysql://app:{KEY}@db/chats", f"{KEY}", "sqlite://"):
        status, out, err = _run(capsys, "--store", url, "list")
        line = _one_line_failure(status, err, expected=2)
        assert line.startswith("agentforge-typed: error: --store: ") and KEY not in err + out


def test_an_empty_store_lists_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(capsys, "--store", "memory:") == (0, "\n", "")
    status, out, _ = _run(capsys, "--store", "memory:", "list", "--json")
    assert status == 0 and json.loads(out) == {"conversations": [], "next_cursor": None}


def test_a_bad_cursor_id_or_option_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = _run(capsys, "--store", "memory:", "list", "--cursor", "nope")
    assert _one_line_failure(status, err, expected=2).endswith("is not a cursor a listing gave")
    status, _, err = _run(capsys, "--store", "memory:", "show", "")
    assert _one_line_failure(status, err, expected=2).endswith("a conversation id cannot be empty")
    status, _, err = _run(capsys, "--store", "memory:", "delete", "k" * 20_000)
    assert "at most 16,384 bytes" in _one_line_failure(status, err, expected=2)
    status, _, err = _run(capsys, "--store", "memory:", "--timeout", "1", "list")
    assert _one_line_failure(status, err, expected=2).endswith("a memory: store never waits")


def test_the_store_password_is_never_shown(
    postgres: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    url = postgres.dsn().replace("agentforge@", f"agentforge:{KEY}@")
    store = store_from_url(url)
    store.release(store.save(store.claim("c"), HISTORY))
    store.close()
    outputs = []
    for argv in (["list"], ["list", "--json"], ["show", "c"], ["show", "c", "--json"]):
        status, out, err = _run(capsys, "--store", url, *argv)
        assert status == 0, err
        outputs.append(out + err)
    closed = url.replace(f":{postgres.port}/", ":1/")
    status, out, err = _run(capsys, "--store", closed, "list")
    _one_line_failure(status, err)
    outputs.append(out + err)
    for text in outputs:
        assert KEY not in text and KEY[:18] not in text and KEY[18:] not in text


def test_a_locked_store_ends_within_the_timeout(
    database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Another program writing (WAL mode lets readers in, not a second writer)."""
    with raw(database) as execute:
        execute("BEGIN IMMEDIATE")
        started = time.monotonic()
        status, _, err = _run(capsys, "--store", database, "--timeout", "0.5", "delete", "c-1")
        took = time.monotonic() - started
        execute("ROLLBACK")
    assert "stayed locked by another writer for 0.5 s" in _one_line_failure(status, err)
    assert took < 0.5 + 1.5
    assert _run(capsys, "--store", database, "show", "c-1")[0] == 0


def test_a_silent_server_ends_within_the_timeout(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("psycopg")
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"postgresql://app:{KEY}@127.0.0.1:{silent.getsockname()[1]}/db"
        started = time.monotonic()
        status, out, err = _run(capsys, "--store", url, "--timeout", "1", "list")
        took = time.monotonic() - started
    line = _one_line_failure(status, err)
    assert line.startswith("agentforge-typed: PostgreSQL connection failed")
    assert took < 2 + 1.5 and KEY not in out + err


def test_ids_are_found_as_given(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.db"
    store = SQLiteStore(path)
    conversation_id = "' OR 1=1; --"
    store.release(store.save(store.claim(conversation_id), history(1)))
    store.release(store.save(store.claim("other"), history(1)))
    store.close()
    status, out, _ = _run(capsys, "--store", f"sqlite:///{path}", "delete", conversation_id)
    assert status == 0 and out == f"deleted {json.dumps(conversation_id)}\n"  # quoted: spaces
    with raw(f"sqlite:///{path}") as execute:
        keys = execute("SELECT key FROM agentforge_conversations")
    assert keys == [(hashlib.sha256(b"other").digest(),)]


# -- run --store URL --conversation ID -----------------------------------------------------------

SHOP = '''
from agentforge_typed import tool


@tool(requires_approval=True)
def refund(order: int) -> str:
    """Refund an order.

    Args:
        order: The order number.
    """
    return f"refunded {order}"
'''


@pytest.fixture
def shop(tmp_path: Path) -> str:
    """A TARGET whose one tool waits for approval (the fake model calls it on each message)."""
    (tmp_path / "shop.py").write_text(SHOP)
    return f"{tmp_path / 'shop.py'}:refund"


def _running(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(["run", *argv])
    out, err = capsys.readouterr()
    return status, out, err


def test_run_continues_a_stored_conversation_and_resumes_it_paused(
    shop: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run pauses (exit status 3) and says how to resume; another, with no PROMPT, approves
    the call; a third continues the conversation and its call is denied with a reason."""
    url = f"sqlite:///{tmp_path / 'conversations.db'}"
    stored = ["--store", url, "--conversation", "c-17"]
    status, out, _ = _running(capsys, shop, "Refund order 42", *stored)
    assert status == 3
    assert "refund (fake_call_1, approval)" in out
    assert out.splitlines()[-1] == (
        "== resume: run again with --conversation c-17 and --approve CALL or --deny "
        "CALL[=REASON] for each paused call"
    )
    status, out, _ = _running(capsys, shop, *stored, "--approve", "fake_call_1")
    assert status == 0 and "<- refund" in out and "refunded 1" in out
    status, out, _ = _running(capsys, shop, "And order 43", *stored, "--json")
    assert status == 3 and json.loads(out)["pending"][0]["call"]["id"] == "fake_call_2"
    status, out, _ = _running(capsys, shop, *stored, "--deny", "fake_call_2=not today")
    assert status == 0 and "The user denied the call to `refund`: not today" in out
    store = store_from_url(url)
    conversation = store.load("c-17")
    store.close()
    assert conversation is not None
    assert [m.role for m in conversation.messages] == ["user", "assistant", "tool", "assistant"] * 2
    assert conversation.messages[0] == UserMessage(content="Refund order 42")


def test_run_refuses_what_cannot_be_resumed_in_one_line(
    shop: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'conversations.db'}"
    stored = ["--store", url, "--conversation", "c-17"]
    refusals = [
        ([*stored], "conversation 'c-17' has no stored history to resume"),
        (["hi", "--conversation", "c-17"], "--conversation needs --store URL"),
        (["hi", "--store", url], "--store needs --conversation ID"),
        (["hi", "--approve", "x"], "--approve and --deny decide the paused calls"),
        ([], "PROMPT is required"),
        ([*stored, "--approve", "x", "--deny", "x"], "call 'x' is both approved and denied"),
        (["hi", "--store", "redis://h", "--conversation", "c"], "--store: a 'redis' URL"),
    ]
    for argv, problem in refusals:
        status, _, err = _running(capsys, shop, *argv)
        line = _one_line_failure(status, err, expected=2)
        assert problem in line, (argv, line)
    assert _running(capsys, shop, "Refund order 42", *stored)[0] == 3
    for argv, problem in [
        ([*stored, "--approve", "nope"], "no pending call has the id(s) 'nope'"),
        (["more", *stored], "conversation 'c-17' waits on call 'fake_call_1'"),
    ]:
        status, _, err = _running(capsys, shop, *argv)
        assert problem in _one_line_failure(status, err, expected=2)
    held = store_from_url(url)
    claim = held.claim("c-17")
    status, _, err = _running(capsys, shop, *stored, "--approve", "fake_call_1")
    line = _one_line_failure(status, err)
    assert line.startswith(
        "agentforge-typed: ConversationConflictError: conversation 'c-17' is held"
    )
    held.release(claim)
    held.close()
