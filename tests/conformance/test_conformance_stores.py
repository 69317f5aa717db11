"""The conformance suite for the store axis: every conversation store (`conformance.STORE`), each
guarantee that applies to it, against real SQLite files and a real PostgreSQL server.

- **Once**: one claim wins among threads, and among worker processes racing for a paused
  conversation (the others are refused before they do anything, and so is one arriving while the
  winner is inside a call longer than the claim's ttl); a holder killed with `kill -9` loses its
  claim when it lapses, not before, and what it saved is intact, even killed mid-save.
- **Bounded**: a record one byte over `max_record_bytes` is refused on save (nothing written)
  and on read (refused whole, its bytes not even fetched).
- **Malformed**: a corrupt record, written behind the store's back, is refused whole with one
  line, and a claim on it leaves nothing claimed.
- **Deadline**: an operation waiting for another writer's lock ends within the store's timeout.
- **Secret**: the fixture key reaches nothing a store writes or shows.
- **Scoped**: conversations whose ids a careless store would confuse never see each other.
- **Linear**: a save and a load cost O(history).
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import logging
import os
import random
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import tracemalloc
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import postgres_server
import pytest
import store_support
import store_worker
from conformance import STORE, Surface, assert_linear, assert_registered
from http_server import Reply, Request, ScriptedServer
from loop_drivers import DRIVERS, drive
from store_support import HISTORY, Opener, history, raw
from store_worker import history as worker_history
from test_conformance_secrets import KEY, _echo

from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ModelError,
    OpenAIChatModel,
    ToolResultMessage,
    ToolService,
    UserMessage,
    tool,
)
from agentforge_typed.stores import (
    ConversationConflictError,
    ConversationStore,
    ConversationStoreError,
    PostgresStore,
    store_from_url,
)

# The fixtures these tests share (see `store_support`, `postgres_server`).
opener = store_support.opener
postgres = postgres_server.postgres

TESTS = Path(__file__).parents[1]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS.parent), str(TESTS)])}


def test_covers_every_surface() -> None:
    assert_registered(STORE)


# -- once ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("surface", [pytest.param(s, id=s.name) for s in STORE.surfaces.values()])
def test_one_claim_wins_among_threads(opener: Opener, surface: Surface[Any]) -> None:
    store = opener()
    store.release(store.save(store.claim("paused"), HISTORY))
    start = threading.Barrier(8)
    outcomes: list[str] = []

    def claim() -> None:
        start.wait()
        try:
            store.claim("paused")
            outcomes.append("claimed")
        except ConversationConflictError:
            outcomes.append("refused")

    threads = [threading.Thread(target=claim) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["claimed"] + ["refused"] * 7


class Worker:
    """A `store_worker.py` process and the JSON lines it prints."""

    def __init__(self, *arguments: str, env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(TESTS / "store_worker.py"), *arguments],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=ENV if env is None else env,
        )
        self._buffer = b""

    def line(self, timeout: float = 30.0) -> dict[str, Any]:
        """The next line it prints (within `timeout` seconds)."""
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.process.stdout], [], [], max(left, 0))
            chunk = os.read(self.process.stdout.fileno(), 4096) if ready else b""
            if not chunk:
                self.process.kill()
                _, err = self.process.communicate()
                raise AssertionError(f"the worker printed nothing more: {err.decode()[-2000:]}")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        found: dict[str, Any] = json.loads(line)
        return found

    def kill(self) -> None:
        """`kill -9`, then its pipes closed."""
        self.process.send_signal(signal.SIGKILL)
        self.process.communicate()

    def finish(self) -> int:
        self.process.communicate(timeout=30)
        return self.process.returncode


@contextlib.contextmanager
def workers(*argument_lists: list[str]) -> Iterator[list[Worker]]:
    started = [Worker(*arguments) for arguments in argument_lists]
    try:
        yield started
    finally:
        for worker in started:
            if worker.process.returncode is None:
                worker.kill()


PROCESSES = STORE.each("once")


@pytest.mark.parametrize("surface", PROCESSES)
def test_one_of_several_processes_claims_a_paused_conversation(
    opener: Opener, surface: Surface[Any], tmp_path: Path
) -> None:
    """Three workers resume one paused conversation at once: one runs its call (recorded in the
    ledger) for longer than the claim's ttl, renewing it, and saves; the others are refused
    before doing anything, and so is a claim made while the winner is inside the call."""
    store = opener()
    store.release(store.save(store.claim("paused"), HISTORY))
    go, ledger, ttl, call = tmp_path / "go", tmp_path / "ledger", 1.0, 2.5
    arguments = [
        ["race", opener.url, "paused", str(go), str(ledger), str(call), str(ttl), f"w{n}"]
        for n in range(3)
    ]
    with workers(*arguments) as racing:
        for worker in racing:
            assert worker.line() == {"step": "ready"}
        go.touch()
        started = time.monotonic()
        first = [worker.line() for worker in racing]
        steps = sorted(line["step"] for line in first)
        assert steps == ["claimed", "conflict", "conflict"], first
        assert all(line["seconds"] < 1.0 for line in first), first
        winner = next(w for w, line in zip(racing, first, strict=True) if line["step"] == "claimed")
        name = f"w{racing.index(winner)}"
        time.sleep(max(0.0, started + ttl + 0.5 - time.monotonic()))  # past the ttl, mid-call
        asked = time.monotonic()
        with pytest.raises(ConversationConflictError):
            store.claim("paused")
        assert time.monotonic() - asked < 1.0
        assert winner.line() == {"step": "saved", "version": 2}
        assert [worker.finish() for worker in racing] == [0, 0, 0]
    assert ledger.read_text().split() == [name]  # the call ran once
    loaded = store.load("paused")
    assert loaded is not None and loaded.version == 2
    assert loaded.messages == (*HISTORY, UserMessage(content=f"done by {name}"))


@pytest.mark.parametrize("surface", PROCESSES)
def test_a_killed_holders_claim_lapses_on_its_own_and_its_save_stays(
    opener: Opener, surface: Surface[Any]
) -> None:
    store = opener()
    ttl = 1.5
    with workers(["keep", opener.url, "c", str(ttl)]) as (worker,):
        assert worker.line() == {"step": "saved", "version": 1}
        time.sleep(ttl + 0.5)  # alive and idle past the ttl: its renewals keep the claim
        with pytest.raises(ConversationConflictError):
            store.claim("c")
        worker.kill()
    killed = time.monotonic()
    (info,) = store.list().conversations
    assert info.claimed_until is not None
    with pytest.raises(ConversationConflictError):
        store.claim("c")  # not before the claim lapses
    while True:
        try:
            claim = store.claim("c")
            break
        except ConversationConflictError:
            assert time.monotonic() - killed < ttl + 2.0, "the dead holder's claim never lapsed"
            time.sleep(0.02)
    assert datetime.now(timezone.utc) >= info.claimed_until
    assert claim.version == 1
    assert claim.conversation.messages == tuple(worker_history(5))
    assert claim.conversation.state == {"step": "paused"}


@pytest.mark.parametrize("surface", PROCESSES)
def test_a_holder_killed_mid_save_leaves_its_last_save_whole(
    opener: Opener, surface: Surface[Any]
) -> None:
    store = opener()
    with workers(["churn", opener.url, "c", "0.5"]) as (worker,):
        while worker.line()["n"] < 100:
            pass
        time.sleep(random.uniform(0, 0.05))
        worker.kill()
    deadline = time.monotonic() + 5
    while True:
        try:
            claim = store.claim("c")
            break
        except ConversationConflictError:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    saved = claim.conversation.state["saved"]
    assert saved >= 100 and claim.version == saved
    assert claim.conversation.messages == tuple(worker_history(saved))


# -- once, through runs --------------------------------------------------------------------------


def _ledger(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _wait_for(path: Path, line: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not any(line in entry for entry in _ledger(path)):
        assert time.monotonic() < deadline, (line, _ledger(path))
        time.sleep(0.01)


def _paused(opener: Opener, ledger: Path, ttl: float = 1.0) -> str:
    """Start the conversation `c` in this process: `note` runs, `refund` waits for approval.
    The id of the refund call."""
    store_worker._configure(str(ledger), 0.0, "test")
    result = store_worker.service(opener(claim_ttl=ttl)).chat(
        store_worker.MODEL, "refund 42", conversation_id="c"
    )
    (pending,) = result.pending
    return pending.call.id


@pytest.fixture
def in_test() -> Iterator[None]:
    """What this process's runs of `store_worker`'s tools write goes nowhere after the test."""
    yield
    store_worker._configure("", 0.0, "test")
    store_worker.LEDGER = None


@pytest.mark.slow
@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("surface", PROCESSES)
def test_one_of_several_workers_runs_an_approved_call(
    opener: Opener, surface: Surface[Any], driver: str, tmp_path: Path, in_test: None
) -> None:
    """Three worker processes resume one paused conversation with its approval at once, under
    `driver`: one runs the approved call (for longer than the claim's ttl) and the model after
    it; the others get `ConversationConflictError` before any model call or tool, and so does a
    run arriving while the winner is inside the call, at once."""
    ledger, go, ttl = tmp_path / "ledger", tmp_path / "go", 1.0
    call_id = _paused(opener, ledger, ttl)
    assert _ledger(ledger) == ["test model", "test note before refund"]
    arguments = [
        ["resume", opener.url, "c", driver, str(go), str(ledger), call_id, "2.5", str(ttl), f"w{n}"]
        for n in range(3)
    ]
    with workers(*arguments) as racing:
        for worker in racing:
            assert worker.line() == {"step": "ready"}
        go.touch()
        _wait_for(ledger, "refund 42")
        inside = time.monotonic()
        here = store_worker.service(opener(claim_ttl=ttl))
        approvals = {call_id: True}
        for moment in (0.0, ttl + 0.5):  # at once, and past the ttl: the winner renews its claim
            time.sleep(max(0.0, inside + moment - time.monotonic()))
            asked = time.monotonic()
            with pytest.raises(ConversationConflictError) as refused:
                here.chat(store_worker.MODEL, conversation_id="c", approvals=approvals)
            assert time.monotonic() - asked < 1.0
            assert refused.value.messages == ()  # it had nothing: it ran nothing
        lines = [worker.line(timeout=60) for worker in racing]
        assert sorted(line["step"] for line in lines) == ["conflict", "conflict", "done"], lines
        assert [worker.finish() for worker in racing] == [0, 0, 0]
    (done,) = [line for line in lines if line["step"] == "done"]
    winner = f"w{lines.index(done)}"
    assert done["text"] == "noted before refund | refund 42 done"
    written = _ledger(ledger)
    assert written[:2] == ["test model", "test note before refund"]
    assert [line.split()[:2] for line in written[2:]] == [[winner, "refund"], [winner, "model"]]
    stored = opener().load("c")
    assert stored is not None and stored.state == {"format": 1, "running": {}}
    assert isinstance(stored.messages[-1], AiMessage) and stored.messages[-1].text == done["text"]


CRASHES = {
    "charge": ("charge 42", None),
    "resend": ("resend 42", None),
    "approved refund": ("refund 42", "refund"),
}
"""What the killed worker runs: its prompt, and the call it resumes with an approval (the
conversation first paused on it here)."""


@pytest.mark.slow
@pytest.mark.parametrize("crash", list(CRASHES))
@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("surface", PROCESSES)
def test_a_worker_killed_inside_a_call_loses_nothing_that_finished(
    opener: Opener, surface: Surface[Any], driver: str, crash: str, tmp_path: Path, in_test: None
) -> None:
    """`kill -9` a worker inside a call, under `driver`; the conversation's next run (here,
    under the same driver, once the dead worker's claim lapses) never runs again a call whose
    result was saved (`note`); the interrupted call runs again only where that is safe (`resend`,
    retry-safe, with the same idempotency key), else the model reads that it was interrupted."""
    ledger, ttl = tmp_path / "ledger", 1.0
    prompt, approved = CRASHES[crash]
    env = dict(ENV)
    if approved:
        env["APPROVE"] = _paused(opener, ledger, ttl)
    name = prompt.split()[0]
    worker = Worker("start", opener.url, "c", driver, str(ledger), prompt, str(ttl), "w", env=env)
    try:
        _wait_for(ledger, f"w {name} 42")
        worker.kill()
    finally:
        if worker.process.returncode is None:
            worker.kill()
    killed = time.monotonic()
    store_worker._configure(str(ledger), 0.0, "test")
    here = store_worker.service(opener(claim_ttl=ttl))
    # The retry of the request the worker was running: the same decision, if it had one.
    options: dict[str, Any] = {"approvals": {env["APPROVE"]: True}} if approved else {}
    while True:
        try:
            result = drive(driver, here, store_worker.MODEL, None, conversation_id="c", **options)
            break
        except ConversationConflictError as refused:
            assert refused.messages == ()
            assert time.monotonic() - killed < ttl + 5, "the dead worker's claim never lapsed"
            time.sleep(0.05)
    written = _ledger(ledger)
    (started,) = [line for line in written if line.startswith(f"w {name} 42")]
    key = started.split()[-1]
    assert sum("note" in line for line in written) == 1  # saved: never run again
    if name == "resend":
        assert written[-2:] == [f"test resend 42 {key}", "test model"]
        assert result.text is not None and result.text.endswith("resend 42 done")
    else:
        assert written[-1] == "test model"  # the model, told; the call never ran again
        assert sum(f"{name} 42" in line for line in written) == 1
        (interrupted,) = [
            m for m in result.messages if isinstance(m, ToolResultMessage) and m.is_error
        ]
        assert interrupted.tool_name == name
        assert "interrupted: may or may not have taken effect" in interrupted.text
        assert result.text is not None and result.text.endswith(interrupted.text)
    assert result.pending == ()
    stored = opener().load("c")
    assert stored is not None and stored.state == {"format": 1, "running": {}}
    assert stored.messages == tuple(result.messages)


# -- bounded -------------------------------------------------------------------------------------


def _json_size(messages: Sequence[ChatMessage], state: dict[str, Any]) -> int:
    """What a record of `messages` and `state` weighs, measured here, not by the store."""
    from pydantic import TypeAdapter

    body = TypeAdapter(list[ChatMessage]).dump_json(list(messages))
    return len(body) + len(json.dumps(state, ensure_ascii=False, separators=(",", ":")).encode())


@pytest.mark.parametrize("surface", STORE.each("bounded"))
def test_a_record_one_byte_over_the_cap_is_refused_on_save(
    opener: Opener, surface: Surface[Any]
) -> None:
    state = {"note": "é"}
    size = _json_size(HISTORY, state)
    store = opener(max_record_bytes=size)
    claim = store.save(store.claim("c"), HISTORY, state)  # exactly at the cap
    assert claim.version == 1
    bigger = [*HISTORY, UserMessage(content="")]
    with pytest.raises(ConversationStoreError) as info:
        store.save(claim, bigger, state)
    over = _json_size(bigger, state)
    assert str(info.value) == (
        f"conversation 'c' is {over:,} bytes of JSON, over max_record_bytes={size:,}: nothing was "
        "saved (raise the store's max_record_bytes, or start a new conversation)"
    )
    loaded = store.load("c")
    assert loaded is not None and loaded.messages == tuple(HISTORY) and loaded.version == 1
    assert store.save(claim, HISTORY[:2]).version == 2  # the claim stands


@pytest.mark.parametrize("surface", STORE.each("bounded"))
def test_a_record_over_the_cap_is_refused_whole_on_read(
    opener: Opener, surface: Surface[Any]
) -> None:
    """A record written under a larger cap (another process, an older setting) is refused by a
    reader with a smaller one, without its bytes fetched, and a claim on it leaves nothing
    claimed."""
    big = [UserMessage(content="x" * (1 << 20))] * 3
    store = opener(max_record_bytes=8 << 20)
    store.release(store.save(store.claim("big"), big))
    size = _json_size(big, {})
    reader = opener(max_record_bytes=size - 1) if opener.shared else store
    reader.max_record_bytes = size - 1  # type: ignore[attr-defined]
    tracemalloc.start()
    try:
        with pytest.raises(ConversationStoreError, match="over max_record_bytes") as info:
            reader.load("big")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert f"is {size:,} bytes of JSON" in str(info.value) and "refused whole" in str(info.value)
    assert peak < size // 4, f"{peak:,} bytes allocated to refuse {size:,}"
    with pytest.raises(ConversationStoreError, match="over max_record_bytes"):
        reader.claim("big")
    reader.max_record_bytes = 8 << 20  # type: ignore[attr-defined]
    claim = reader.claim("big")  # the refused claim was given back
    assert claim.conversation.messages == tuple(big)


# -- malformed -----------------------------------------------------------------------------------

CORRUPTIONS: list[tuple[str, str, Callable[[bytes], Any]]] = [
    ("history not JSON", "messages", lambda good: b"{not json"),
    ("history cut short", "messages", lambda good: good[:-7]),
    ("history of unknown messages", "messages", lambda good: b'[{"role": "wizard"}]'),
    ("history not a list", "messages", lambda good: b'{"role": "user"}'),
    ("state not JSON", "state", lambda good: b"\xff\xfe{"),
    ("state not an object", "state", lambda good: b"[1, 2]"),
]


@pytest.mark.parametrize("surface", STORE.each("malformed"))
@pytest.mark.parametrize(
    ("case", "column", "corrupt"), CORRUPTIONS, ids=[c[0] for c in CORRUPTIONS]
)
def test_a_corrupt_record_is_refused_whole_with_one_line(
    opener: Opener,
    surface: Surface[Any],
    case: str,
    column: str,
    corrupt: Callable[[bytes], Any],
) -> None:
    store = opener()
    store.release(store.save(store.claim("c"), HISTORY, {"k": 1}))
    with raw(opener.url) as execute:
        ((good,),) = execute(f"SELECT {column} FROM agentforge_conversations")
        execute(f"UPDATE agentforge_conversations SET {column} = ?", corrupt(bytes(good)))
    for operation in (lambda: store.load("c"), lambda: store.claim("c")):
        with pytest.raises(ConversationStoreError) as info:
            operation()
        message = str(info.value)
        assert message.startswith("conversation 'c' is corrupt, its ")
        assert message.endswith("; refused whole") and "\n" not in message and len(message) < 400
    with raw(opener.url) as execute:
        execute(f"UPDATE agentforge_conversations SET {column} = ?", bytes(good))
    claim = store.claim("c")  # the refused claims were given back
    assert claim.conversation.messages == tuple(HISTORY)


@pytest.mark.parametrize("surface", STORE.each("malformed"))
def test_a_row_holding_another_id_under_a_key_is_refused(
    opener: Opener, surface: Surface[Any]
) -> None:
    store = opener()
    store.release(store.save(store.claim("c"), HISTORY))
    postgres = not opener.url.startswith("sqlite:")
    with raw(opener.url) as execute:
        execute("UPDATE agentforge_conversations SET id = ?", b"d" if postgres else "d")
    with pytest.raises(ConversationStoreError, match="its row holds another id under its key"):
        store.load("c")


# -- deadline ------------------------------------------------------------------------------------


@contextlib.contextmanager
def _write_locked(url: str) -> Iterator[None]:
    """Another program holding the conversations table for writing until the block ends."""
    with raw(url) as execute:
        if url.startswith("sqlite:"):
            execute("BEGIN IMMEDIATE")
        else:
            execute("BEGIN")
            execute("LOCK TABLE agentforge_conversations IN ACCESS EXCLUSIVE MODE")
        try:
            yield
        finally:
            execute("ROLLBACK")


@pytest.mark.parametrize("surface", STORE.each("deadline"))
def test_waiting_for_another_writer_ends_within_the_timeout(
    opener: Opener, surface: Surface[Any]
) -> None:
    store = opener(timeout=0.5)
    claim = store.save(store.claim("c"), HISTORY)
    with _write_locked(opener.url):
        operations: list[Callable[[], object]] = [
            lambda: store.claim("d"),
            lambda: store.save(claim, history(2)),
        ]
        for operation in operations:
            started = time.monotonic()
            with pytest.raises(ConversationStoreError, match=r"0\.5 s \(the store's timeout\)"):
                operation()
            assert time.monotonic() - started < 0.5 + 1.0
    assert store.save(claim, history(3)).version == 2  # the lock gone, it works again


def test_connecting_to_a_silent_server_ends_within_the_timeout() -> None:
    """A server that accepts the connection and never answers: libpq's `connect_timeout`
    (whole seconds, at least 2) ends it."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        store = PostgresStore(f"postgresql://app:{KEY}@127.0.0.1:{port}/db", timeout=1)
        started = time.monotonic()
        with pytest.raises(ConversationStoreError, match="PostgreSQL connection failed") as info:
            store.load("c")
        assert time.monotonic() - started < 2 + 1.5
    assert KEY not in str(info.value) and KEY not in repr(store)


# -- secret --------------------------------------------------------------------------------------


def _hidden(texts: list[str] | list[bytes], where: str) -> None:
    for text in texts:
        for piece in (KEY, KEY[: len(KEY) // 2], KEY[len(KEY) // 2 :]):
            found = piece.encode() in text if isinstance(text, bytes) else piece in text
            assert not found, (where, text[:300])


def _calls_lookup(request: Request) -> Reply:
    """A call of `lookup` (the key in a header), streamed when asked to be."""
    function = {"name": "lookup", "arguments": '{"order": 42}'}
    call = {"index": 0, "id": "call_1", "type": "function", "function": function}
    if request.json().get("stream"):
        return Reply.sse(
            [
                {"choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [call]}}]},
                {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
            ],
            done=True,
            headers={"x-echo": KEY},
        )
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    choice = {"index": 0, "message": message, "finish_reason": "tool_calls"}
    return Reply.json({"choices": [choice]}, headers={"x-echo": KEY})


@pytest.fixture
def echo_server(http_server: ScriptedServer) -> str:
    """Answers the first request of a run with a call of `lookup` (the key in a header), every
    other one as `_echo` does (401, the key in its status line, a header and its body)."""
    answered = itertools.count(1)

    def answer(request: Request) -> Reply:
        return _echo(request) if next(answered) % 2 == 0 else _calls_lookup(request)

    http_server.route("*", answer)
    return f"{http_server.url}/v1"


@tool
def lookup(order: int) -> str:
    """Look an order up.

    Args:
        order: The order number.
    """
    return f"order {order}: shipped"


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("surface", STORE.each("secret"))
def test_the_key_reaches_nothing_a_store_writes_or_shows(
    opener: Opener,
    surface: Surface[Any],
    driver: str,
    echo_server: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Runs of a service with a store, whose model holds the fixture key, against a server that
    echoes it: each run's model calls a tool (the key in the answer's headers), then fails (the
    key in the error's status line, header and body), and saves what its error carries; a
    second run continues the conversation and fails the same way. Neither the rows (the
    database files, read raw), nor a listing, a load, an error or a log line holds the key."""
    caplog.set_level(logging.DEBUG)
    model = OpenAIChatModel("m", api_key=KEY, base_url=echo_server, max_retries=0)
    store = opener()
    service = ToolService([lookup], store=store)
    shown: list[str] = []
    for prompt in ("Where is order 42?", "and now?"):
        with pytest.raises(ModelError) as failed:
            drive(driver, service, model, prompt, conversation_id="c")
        shown += [str(failed.value), repr(failed.value)]
    stored = store.load("c")
    assert stored is not None and stored.messages == failed.value.messages
    assert [m.role for m in stored.messages] == ["user", "assistant", "tool"] * 2
    claim = store.claim("c")
    shown += [repr(store), repr(store.load("c")), repr(store.list())]
    operations: list[Callable[[], object]] = [
        lambda: store.claim("c"),
        lambda: store.save(claim, [UserMessage(content="x" * 100)] * 100_000),
    ]
    for operation in operations:
        with pytest.raises(ConversationStoreError) as info:
            operation()
        shown += [str(info.value), repr(info.value)]
    store.release(claim)
    store.close()
    written: list[bytes] = [path.read_bytes() for path in tmp_path.rglob("*") if path.is_file()]
    if surface.name == "PostgresStore":
        with raw(opener.url) as execute:
            written += [
                str(row).encode()
                for row in execute("SELECT t::text FROM agentforge_conversations t")
            ]
    assert written or surface.name == "MemoryStore"
    _hidden(shown, "what the store shows")
    _hidden(written, "what the store wrote")
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    _hidden([formatter.format(record) for record in caplog.records], "a log")


def test_a_postgres_password_is_never_shown(postgres: Any) -> None:
    url = postgres.url.replace("agentforge@", f"agentforge:{KEY}@")
    store = store_from_url(url)
    store.release(store.save(store.claim("c"), HISTORY))
    refused = store_from_url(url.replace(f":{postgres.port}/", ":1/"))
    with pytest.raises(ConversationStoreError) as info:
        refused.load("c")
    _hidden([repr(store), repr(refused), str(info.value), repr(info.value)], "the store")
    store.close()


# -- scoped --------------------------------------------------------------------------------------

LOOKALIKES = [
    "a",
    "A",
    "a\x00",
    "a\x00b",
    "a ",
    "é",
    unicodedata.normalize("NFD", "é"),
    "a%",
    "a_",
    "k" * 4_000 + "1",
    "k" * 4_000 + "2",
]
"""Ids a careless store confuses: by case, by a trailing NUL or space, by Unicode normalisation,
as LIKE patterns, or by a prefix of a long id."""


@pytest.mark.parametrize("surface", STORE.each("scoped"))
def test_conversations_never_see_each_others_records(opener: Opener, surface: Surface[Any]) -> None:
    store = opener()
    claims = {conversation_id: store.claim(conversation_id) for conversation_id in LOOKALIKES}
    for i, (conversation_id, claim) in enumerate(claims.items()):  # interleaved: all claimed
        claims[conversation_id] = store.save(
            claim, [UserMessage(content=conversation_id)] * (i + 1), {"owner": conversation_id}
        )
    for conversation_id, claim in claims.items():
        loaded = store.load(conversation_id)
        assert loaded is not None and loaded.id == conversation_id
        assert loaded.messages[0] == UserMessage(content=conversation_id)
        assert loaded.state == {"owner": conversation_id}
        store.release(claim)
    assert store.delete("a")
    assert store.load("A") is not None and store.load("a\x00") is not None
    assert {c.id for c in store.list().conversations} == set(LOOKALIKES) - {"a"}


@pytest.mark.parametrize("surface", STORE.each("scoped"))
def test_a_claim_holds_only_its_own_conversation(opener: Opener, surface: Surface[Any]) -> None:
    """Claiming "a" blocks none of its lookalikes, and its holder's token saves nothing but
    "a"."""
    store = opener()
    held = store.claim("a")
    others = {other: store.save(store.claim(other), history(1)) for other in LOOKALIKES[1:]}
    forged = dataclasses.replace(
        held, conversation=dataclasses.replace(others["A"].conversation, id="A")
    )
    with pytest.raises(ConversationConflictError):
        store.save(forged, history(5))
    loaded = store.load("A")
    assert loaded is not None and loaded.messages == tuple(history(1))
    assert store.save(held, history(2)).version == 1


# -- linear --------------------------------------------------------------------------------------


@pytest.mark.parametrize("surface", STORE.each("linear"))
def test_a_save_and_a_load_cost_linear_in_the_history(
    opener: Opener, surface: Surface[Any]
) -> None:

    store: ConversationStore = opener(max_record_bytes=64 << 20)
    n = 400
    histories = {size: history(size, text="lorem ipsum " * 8) for size in (n, 8 * n)}
    claim = [store.claim("c")]

    def run(size: int) -> None:
        claim[0] = store.save(claim[0], histories[size])
        loaded = store.load("c")
        assert loaded is not None and len(loaded.messages) == size

    # CPU time, which the machine's other work does not move, for the stores in this process; a
    # server's work is in another process, so PostgreSQL is timed by the clock on the wall.
    clock = time.perf_counter if surface.name == "PostgresStore" else time.process_time
    for attempt in range(3):
        try:
            assert_linear(run, n, what=f"{surface.name} save and load", clock=clock)
            return
        except AssertionError:
            if attempt == 2:
                raise


@pytest.mark.parametrize("surface", STORE.each("malformed"))
def test_a_record_whose_stored_size_lies_is_still_refused(
    opener: Opener, surface: Surface[Any]
) -> None:
    """The size column written behind the store's back says 4 bytes; the bytes are more than
    the cap: refused, by what was read."""
    store = opener(max_record_bytes=1000)
    store.release(store.save(store.claim("c"), history(1)))
    body = json.dumps([{"role": "user", "content": "x" * 2000}]).encode()
    with raw(opener.url) as execute:
        execute("UPDATE agentforge_conversations SET messages = ?, size = 4", body)
    with pytest.raises(ConversationStoreError, match=f"is {len(body) + 2:,} bytes of JSON"):
        store.load("c")
