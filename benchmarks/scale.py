"""N concurrent two-round tool conversations on one model, against a real local server.

Starts `scale_server.py` under uvicorn (a production ASGI server, from the dev extra) on
127.0.0.1 in its own process, then runs N conversations at once through `ToolService.achat` or
`astream` on one `OpenAIChatModel`, each asking for its own token and expecting it back in the
final answer. Prints, per run: conversations/s, peak RSS of this (client) process, CPU ms per
conversation (this process), p50/p99 latency, and how many completed, failed with their history
(a `ModelError` carrying the conversation's messages), hung (not finished by the deadline) and
wrong (a final answer without its own token). Targets: DEVELOPERS.md, "Scale".

    python benchmarks/scale.py --n 10000 --driver achat [--faults]
    python benchmarks/scale.py --matrix   # the table in DEVELOPERS.md
    python benchmarks/scale.py --n 1000 --store sqlite:///scale.db
    python benchmarks/scale.py --n 10000 --store postgresql://user@host/db   # or --store postgres

With `--store URL`, each conversation is a stored one (`ToolService(store=...)`, its own
`conversation_id`: claimed, saved at each round boundary, released), and the same run without a
store is measured first, each in a process of its own; `--store postgres` starts a PostgreSQL
server from the machine's binaries, as the tests do, for the run. Stored conversations get new
ids on each run: a database already in use keeps its conversations.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import os
import resource
import socket
import statistics
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentforge_typed import (
    AgentForgeError,
    FinalResultEvent,
    OpenAIChatModel,
    ToolService,
    tool,
)
from agentforge_typed.stores import store_from_url

HERE = Path(__file__).parent


@tool
def lookup(token: str) -> str:
    """Look a token up."""
    return token


@dataclass
class Outcome:
    """How one batch of conversations went."""

    driver: str
    n: int
    faults: bool
    store: str
    seconds: float
    cpu_ms: float
    rss_mb: float
    latencies: list[float]
    completed: int = 0
    failed_with_history: int = 0
    failed_without: int = 0
    hung: int = 0
    wrong: int = 0

    def row(self) -> str:
        p50 = statistics.median(self.latencies) if self.latencies else float("nan")
        p99 = (
            statistics.quantiles(self.latencies, n=100)[98]
            if len(self.latencies) > 1
            else float("nan")
        )
        return (
            f"| {self.driver} | {self.store} | {self.n:,} | {'mixed' if self.faults else 'off'} "
            f"| {self.n / self.seconds:.0f} | {self.rss_mb:.0f} | {self.cpu_ms / self.n:.2f} "
            f"| {p50:.2f} / {p99:.2f} | {self.completed} | {self.failed_with_history} "
            f"| {self.hung} | {self.wrong + self.failed_without} |"
        )


HEADER = (
    "| driver | store | N | faults | conv/s | peak RSS MB | CPU ms/conv | p50 / p99 s | completed "
    "| failed (with history) | hung | wrong |\n|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def start_server(faults: bool) -> tuple[subprocess.Popen[bytes], str]:
    """uvicorn serving `scale_server:app` on 127.0.0.1; waits until it accepts connections."""
    port = _free_port()
    env = {**os.environ, "SCALE_FAULTS": "1" if faults else "0"}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "scale_server:app",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "critical",
            "--no-access-log",
            "--backlog",
            "4096",
        ],
        cwd=HERE,
        env=env,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return process, f"http://127.0.0.1:{port}/v1"
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError("the scale server did not start within 20 s")


async def _conversation(
    service: ToolService, model: OpenAIChatModel, driver: str, index: int, run_id: str
) -> tuple[str, float]:
    token = f"tok{index:05d}"
    prompt = f"Look up {token}"
    # Stored, when the service has a store: a conversation of its own (ignored without one).
    options: dict[str, Any] = {}
    if service.store is not None:
        options["conversation_id"] = f"{run_id}-{index}"
    started = time.monotonic()
    try:
        if driver == "achat":
            text = (await service.achat(model, prompt, **options)).text
        else:
            text = None
            async for event in service.astream(model, prompt, **options):
                if isinstance(event, FinalResultEvent):
                    text = event.result.text
    except AgentForgeError as error:
        kind = "failed_with_history" if error.messages else "failed_without"
        return kind, time.monotonic() - started
    if text is None or token not in text:
        return "wrong", time.monotonic() - started
    return "completed", time.monotonic() - started


async def run(
    base_url: str, driver: str, n: int, faults: bool, deadline: float, store: str | None = None
) -> Outcome:
    """N concurrent conversations; those not finished by `deadline` seconds are counted hung."""
    model = OpenAIChatModel(
        "scale", base_url=base_url, max_retries=2, timeout=30.0, total_timeout=60.0
    )
    service = ToolService([lookup], store=store)
    if service.store is not None:
        await service.store.aload("warm-up")  # connections opened and the schema ready
    run_id = uuid.uuid4().hex[:12]
    cpu, started = time.process_time(), time.monotonic()
    tasks = [
        asyncio.ensure_future(_conversation(service, model, driver, i, run_id)) for i in range(n)
    ]
    done, pending = await asyncio.wait(tasks, timeout=deadline)
    seconds = time.monotonic() - started
    for task in pending:
        task.cancel()
    if pending:
        await asyncio.wait(pending)
    outcome = Outcome(
        driver=driver,
        n=n,
        faults=faults,
        store=_kind(store),
        seconds=seconds,
        cpu_ms=(time.process_time() - cpu) * 1000,
        rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        latencies=[],
        hung=len(pending),
    )
    for task in done:
        kind, latency = task.result()
        setattr(outcome, kind, getattr(outcome, kind) + 1)
        outcome.latencies.append(latency)
    await model.aclose()
    if service.store is not None:
        await service.store.aclose()
    return outcome


def _kind(store: str | None) -> str:
    if store is None:
        return "none"
    return {"sqlite": "SQLite", "postgresql": "PostgreSQL", "postgres": "PostgreSQL"}.get(
        store.partition(":")[0], store.partition(":")[0]
    )


def measure(
    driver: str, n: int, faults: bool, deadline: float, store: str | None = None
) -> Outcome:
    """One batch in a fresh process state: its own server, its own event loop."""
    server, base_url = start_server(faults)
    try:
        return asyncio.run(run(base_url, driver, n, faults, deadline, store))
    finally:
        server.terminate()
        server.wait(10)


def _compared(args: argparse.Namespace) -> None:
    """The run without a store, then with `--store`, each in a process of its own."""
    with contextlib.ExitStack() as stack:
        store = args.store
        if store == "postgres":  # a server as the tests start one: the stores benchmark's
            store = stack.enter_context(importlib.import_module("stores")._local_postgres())
            if store is None:
                raise SystemExit("PostgreSQL is not installed")
        store_from_url(store).close()  # a URL that names no store fails here, not in the run
        for given in ("none", store):
            command = [sys.executable, __file__, "--n", str(args.n), "--driver", args.driver]
            command += ["--deadline", str(args.deadline), "--store", given, "--alone"]
            command += ["--faults"] if args.faults else []
            out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
            print(out.splitlines()[-1], flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--driver", choices=["achat", "astream"], default="achat")
    parser.add_argument("--faults", action="store_true")
    parser.add_argument("--deadline", type=float, default=600.0, help="seconds before 'hung'")
    parser.add_argument("--matrix", action="store_true", help="every row of DEVELOPERS.md")
    parser.add_argument(
        "--store",
        metavar="URL",
        help="stored conversations: a store URL, or `postgres` (a local server started for the "
        "run); the same run without a store is measured first",
    )
    parser.add_argument("--alone", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    print(HEADER)
    if args.store is not None and not args.alone:
        _compared(args)
        return
    if not args.matrix:
        store = None if args.store in (None, "none") else args.store
        outcome = measure(args.driver, args.n, args.faults, args.deadline, store)
        print(outcome.row(), flush=True)
        return
    # Each row in a process of its own, so that peak RSS is the row's.
    for driver, n, faults in [
        ("achat", 100, False),
        ("achat", 1000, False),
        ("achat", 10000, False),
        ("achat", 10000, True),
        ("astream", 1000, False),
        ("astream", 1000, True),
    ]:
        command = [sys.executable, __file__, "--n", str(n), "--driver", driver]
        command += ["--faults"] if faults else []
        out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
        print(out.splitlines()[-1], flush=True)


if __name__ == "__main__":
    main()
