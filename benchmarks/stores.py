"""CPU and time a conversation store adds per request, at 10, 1,000 and 100,000 stored
conversations, against openai-agents' `SQLiteSession` on the same workload in the same run.

The workload, one *cycle*: a request resumes a conversation of 20 messages (a random one of the N
stored), runs one round and gives it back: `claim` (which reads the record), `save` of the
history with the round's two messages (a tool call and its result), `release`. `SQLiteSession`
does the same with its own API: `get_items()`, `add_items(the round)`; it is made per request
(as its guide does) and closed, and timed again without that. Its history is cut back to 20 items
outside the timing, so every cycle reads as much as the first.

CPU is this process's (`time.process_time`, all threads: SQLite's work is in-process, PostgreSQL's
server is not and shows in the wall time). Targets (issue 42), on the CPU a store adds: SQLite
<= 1 ms at the median, PostgreSQL (local) <= 3 ms at p99, both flat in N.

    python benchmarks/stores.py [--cycles 2000] [--sizes 10,1000,100000] [--postgres DSN]

Without `--postgres`, a server is started from the machine's binaries (as the tests do) when
they are installed. `SQLiteSession` needs the `bench` extra (`pip install -e '.[bench]'`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import importlib.util
import json
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

from agentforge_typed import AiMessage, ChatMessage, ToolCall, ToolResultMessage, UserMessage
from agentforge_typed.stores import (
    ConversationStore,
    MemoryStore,
    PostgresStore,
    SQLiteStore,
)
from agentforge_typed.stores._base import encode, id_key

HISTORY: list[ChatMessage] = [
    UserMessage(content="Refund order 42, it arrived broken.")
    if i % 4 == 0
    else AiMessage(
        tool_calls=[ToolCall(id=f"call_{i}", name="lookup", arguments=json.dumps({"order": i}))]
    )
    if i % 4 == 1
    else ToolResultMessage(
        tool_call_id=f"call_{i - 1}", tool_name="lookup", text=f"order {i}: shipped, 2 items"
    )
    if i % 4 == 2
    else AiMessage(text="The order shipped on Monday with two items; I can refund it.")
    for i in range(20)
]
ROUND: list[ChatMessage] = [
    AiMessage(tool_calls=[ToolCall(id="call_r", name="refund", arguments='{"order": 42}')]),
    ToolResultMessage(tool_call_id="call_r", tool_name="refund", text="refunded"),
]
ITEMS: list[dict[str, Any]] = [
    {"role": "user", "content": "Refund order 42, it arrived broken."}
    if i % 4 == 0
    else {
        "type": "function_call",
        "call_id": f"call_{i}",
        "name": "lookup",
        "arguments": json.dumps({"order": i}),
    }
    if i % 4 == 1
    else {
        "type": "function_call_output",
        "call_id": f"call_{i - 1}",
        "output": f"order {i}: shipped, 2 items",
    }
    if i % 4 == 2
    else {
        "role": "assistant",
        "content": "The order shipped on Monday with two items; I can refund it.",
    }
    for i in range(20)
]
ROUND_ITEMS: list[dict[str, Any]] = [
    {"type": "function_call", "call_id": "call_r", "name": "refund", "arguments": '{"order": 42}'},
    {"type": "function_call_output", "call_id": "call_r", "output": "refunded"},
]


def ids(n: int) -> list[str]:
    return [f"conversation-{i:06d}" for i in range(n)]


# -- filling a place with N conversations ----------------------------------------------------------


def fill_sqlite(path: Path, n: int) -> None:
    SQLiteStore(path).load("warm")  # the schema
    record = encode("c", HISTORY, {}, 1 << 30)
    now = time.time()
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as connection:
        connection.execute("BEGIN")
        connection.executemany(
            "INSERT INTO agentforge_conversations (key, id, messages, state, message_count, size, "
            "version, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?)",
            (
                (id_key(c), c, record.messages, record.state, 20, record.size, now, now)
                for c in ids(n)
            ),
        )
        connection.execute("COMMIT")


def fill_postgres(dsn: str, n: int) -> None:
    import psycopg

    PostgresStore(dsn).load("warm")
    record = encode("c", HISTORY, {}, 1 << 30)
    with psycopg.connect(dsn, autocommit=True) as connection, connection.cursor() as cursor:
        columns = "key, id, messages, state, message_count, size, version, created_at, updated_at"
        with cursor.copy(f"COPY agentforge_conversations ({columns}) FROM STDIN") as copy:
            for c in ids(n):
                row = (id_key(c), c.encode(), record.messages, record.state, 20, record.size)
                copy.write_row((*row, 1, "now", "now"))
        connection.execute("ANALYZE agentforge_conversations")


def fill_memory(store: MemoryStore, n: int) -> None:
    for c in ids(n):
        store.release(store.save(store.claim(c), HISTORY))


def fill_session(path: Path, n: int) -> None:
    sessions: Any = importlib.import_module("agents.memory")
    sessions.SQLiteSession("warm", str(path)).close()  # its schema
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as connection:
        connection.execute("BEGIN")
        connection.executemany(
            "INSERT INTO agent_sessions (session_id) VALUES (?)", ((c,) for c in ids(n))
        )
        connection.executemany(
            "INSERT INTO agent_messages (session_id, message_data) VALUES (?, ?)",
            ((c, json.dumps(item)) for c in ids(n) for item in ITEMS),
        )
        connection.execute("COMMIT")


# -- cycles --------------------------------------------------------------------------------------


def store_cycle(store: ConversationStore) -> Callable[[str], None]:
    def cycle(conversation_id: str) -> None:
        claim = store.claim(conversation_id)
        claim = store.save(claim, [*claim.conversation.messages[:20], *ROUND])
        store.release(claim)

    return cycle


def store_acycle(store: ConversationStore) -> Callable[[str], Awaitable[None]]:
    async def cycle(conversation_id: str) -> None:
        claim = await store.aclaim(conversation_id)
        claim = await store.asave(claim, [*claim.conversation.messages[:20], *ROUND])
        await store.arelease(claim)

    return cycle


class Timings:
    def __init__(self) -> None:
        self.cpu: list[float] = []
        self.wall: list[float] = []

    @contextlib.contextmanager
    def timed(self) -> Iterator[None]:
        cpu, wall = time.process_time(), time.perf_counter()
        yield
        self.cpu.append(time.process_time() - cpu)
        self.wall.append(time.perf_counter() - wall)

    def row(self) -> tuple[float, float, float, float]:
        """CPU p50, CPU p99, wall p50, wall p99, in milliseconds."""
        return (
            statistics.median(self.cpu) * 1e3,
            _p99(self.cpu) * 1e3,
            statistics.median(self.wall) * 1e3,
            _p99(self.wall) * 1e3,
        )


def _p99(values: list[float]) -> float:
    return sorted(values)[min(len(values) - 1, int(len(values) * 0.99))]


def run_sync(cycle: Callable[[str], None], n: int, cycles: int) -> Timings:
    chosen = ids(n)
    for c in random.sample(chosen, min(n, 50)):  # warm-up: connections, statements
        cycle(c)
    timings = Timings()
    for _ in range(cycles):
        c = random.choice(chosen)
        with timings.timed():
            cycle(c)
    return timings


def run_async(cycle: Callable[[str], Awaitable[None]], n: int, cycles: int) -> Timings:
    async def main() -> Timings:
        chosen = ids(n)
        for c in random.sample(chosen, min(n, 50)):
            await cycle(c)
        timings = Timings()
        for _ in range(cycles):
            c = random.choice(chosen)
            with timings.timed():
                await cycle(c)
        return timings

    return asyncio.run(main())


def both_ways(
    name: str, store: SQLiteStore | PostgresStore, n: int, cycles: int
) -> list[tuple[str, int, tuple[float, float, float, float]]]:
    """The rows of a database store: its blocking methods, then its coroutines."""
    with store:
        blocking = run_sync(store_cycle(store), n, cycles).row()
        coroutines = run_async(store_acycle(store), n, cycles).row()
    return [(name, n, blocking), (f"{name} async", n, coroutines)]


def run_sessions(path: Path, n: int, cycles: int) -> tuple[Timings, Timings]:
    """`SQLiteSession`, made per request (first), and the reads and writes alone (second)."""
    sessions: Any = importlib.import_module("agents.memory")

    async def main() -> tuple[Timings, Timings]:
        chosen = ids(n)
        whole, calls = Timings(), Timings()
        for i in range(cycles + 50):
            c = random.choice(chosen)
            cpu, wall = time.process_time(), time.perf_counter()
            session = sessions.SQLiteSession(c, str(path))
            made_cpu, made_wall = time.process_time(), time.perf_counter()
            await session.get_items()
            await session.add_items(ROUND_ITEMS)
            done_cpu, done_wall = time.process_time(), time.perf_counter()
            session.close()
            if i >= 50:
                whole.cpu.append(time.process_time() - cpu)
                whole.wall.append(time.perf_counter() - wall)
                calls.cpu.append(done_cpu - made_cpu)
                calls.wall.append(done_wall - made_wall)
            trim = sessions.SQLiteSession(c, str(path))  # back to 20 items, outside the timing
            await trim.pop_item()
            await trim.pop_item()
            trim.close()
        return whole, calls

    return asyncio.run(main())


# -- the table -----------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=2000)
    parser.add_argument("--sizes", default="10,1000,100000")
    parser.add_argument("--postgres", metavar="DSN", help="an empty database to fill and use")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    random.seed(42)
    rows: list[tuple[str, int, tuple[float, float, float, float]]] = []

    with contextlib.ExitStack() as stack:
        postgres = args.postgres or stack.enter_context(_local_postgres())
        if importlib.util.find_spec("agents") is None:
            print("openai-agents is not installed (pip install -e '.[bench]'): no peer rows")
        for n in sizes:
            place = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            memory = MemoryStore()
            fill_memory(memory, n)
            rows.append(("MemoryStore", n, run_sync(store_cycle(memory), n, args.cycles).row()))
            sqlite_path = place / "conversations.db"
            fill_sqlite(sqlite_path, n)
            rows += both_ways("SQLiteStore", SQLiteStore(sqlite_path), n, args.cycles)
            if postgres:
                dsn = _fresh(postgres, n)
                fill_postgres(dsn, n)
                rows += both_ways("PostgresStore", PostgresStore(dsn), n, args.cycles)
            if importlib.util.find_spec("agents") is not None:
                session_path = place / "sessions.db"
                fill_session(session_path, n)
                whole, calls = run_sessions(session_path, n, args.cycles)
                rows.append(("SQLiteSession (made per request)", n, whole.row()))
                rows.append(("SQLiteSession (get + add only)", n, calls.row()))
            print(f"N={n:,} measured", file=sys.stderr)
    _report(rows, sizes)


def _report(
    rows: list[tuple[str, int, tuple[float, float, float, float]]], sizes: list[int]
) -> None:
    by = {(name, n): row for name, n, row in rows}
    print(
        f"\ncycle: claim (read 20 messages) + save (22) + release; {len(HISTORY)}-message history"
    )
    print(
        f"{'store':34} {'N':>8} {'CPU p50':>9} {'CPU p99':>9} {'wall p50':>9} {'wall p99':>9}  ms"
    )
    for name, n, (cpu50, cpu99, wall50, wall99) in rows:
        print(f"{name:34} {n:>8,} {cpu50:9.3f} {cpu99:9.3f} {wall50:9.3f} {wall99:9.3f}")
    peer = "SQLiteSession (get + add only)"
    print("\nratios (CPU p50), against SQLiteSession's reads and writes alone / made per request:")
    for name in ("SQLiteStore", "SQLiteStore async", "PostgresStore", "PostgresStore async"):
        for n in sizes:
            if (name, n) in by and (peer, n) in by:
                alone = by[name, n][0] / by[peer, n][0]
                made = by[name, n][0] / by["SQLiteSession (made per request)", n][0]
                print(f"  {name:22} N={n:>7,}: {alone:.2f}x / {made:.2f}x")
    print("\nflat in N (CPU p50 at the largest N over the smallest):")
    for name in dict.fromkeys(name for name, _, _ in rows):
        if (name, sizes[0]) in by and (name, sizes[-1]) in by:
            print(f"  {name:34} {by[name, sizes[-1]][0] / by[name, sizes[0]][0]:.2f}x")
    print("\ntargets:")
    for n in sizes:
        if ("SQLiteStore", n) in by:
            cpu = by["SQLiteStore", n][0]
            print(
                f"  SQLite CPU p50 <= 1 ms at N={n:,}: {cpu:.3f} ms {'met' if cpu <= 1 else 'MISSED'}"
            )
        if ("PostgresStore", n) in by:
            cpu99, wall99 = by["PostgresStore", n][1], by["PostgresStore", n][3]
            verdict = "met" if cpu99 <= 3 else "MISSED"
            print(
                f"  PostgreSQL CPU p99 <= 3 ms at N={n:,}: {cpu99:.3f} ms {verdict} "
                f"(wall p99 {wall99:.3f} ms, the server's work and the machine's load included)"
            )


@contextlib.contextmanager
def _local_postgres() -> Iterator[str | None]:
    """A server from the machine's binaries, as the tests start one (`None` without them)."""
    sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))
    server_module: Any = importlib.import_module("postgres_server")
    found = server_module.binaries()
    if found is None:
        print(f"PostgreSQL is not installed ({server_module.INSTALL}): no PostgreSQL rows")
        yield None
        return
    server = server_module.PostgresServer(found)
    try:
        server.start()
        yield server.url
    finally:
        server.stop()


def _fresh(dsn: str, n: int) -> str:
    """A new schema in the database at `dsn`, as a DSN whose connections work in it."""
    import psycopg

    schema = f"bench_{n}_{int(time.time())}"
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(f"CREATE SCHEMA {schema}")
    separator = "&" if "?" in dsn else "?"
    return f"{dsn}{separator}options=-csearch_path%3D{schema}"


if __name__ == "__main__":
    main()
