"""A thousand concurrent streaming chat conversations through one UI server process.

Starts `scale_server.py` (the local model server of `scale.py`: two rounds per conversation, a
`lookup` call then its result, 50-200 ms an answer), then, each in a process of its own served
by uvicorn, the endpoints under test, and drives N conversations at once against each from this
process (a conversation is one request whose stream must end with the run's end and hold its own
token):

- `bare`: the loop (`ToolService.astream`) behind a plain endpoint answering one small JSON body:
  the loop and the HTTP serving, no streaming, no protocol.
- `bare-stream`: the loop streamed with no protocol, one small SSE frame per event (Starlette's
  `StreamingResponse`): what streaming itself costs.
- `ag-ui`, `ai-sdk`: `agentforge_typed.ui`'s endpoints (`POST /ag-ui`, `POST /api/chat`).
- `pydantic-ai`: pydantic-ai's AG-UI adapter (`AGUIAdapter.dispatch_request`) on an `Agent` with
  the same tool and model server (run from `--peer-python`, a Python that has
  `pydantic-ai-slim[ag-ui,openai]`: the `bench` extra).

And `loop`: the same conversations through `astream` in one process with no server at all, the
loop's own CPU per conversation. The protocol layer's CPU is `ag-ui` (or `ai-sdk`) less `bare`,
per conversation; its target is at most 20% of `loop`'s. Read three ways:

- in turns (`--repeat`): each server alone, in turn, its best (least CPU) run kept — with its
  wall time, events per second and peak memory. The server's CPU is read from `/proc`, and other
  work on a shared machine moves it by tens of percent between runs: the differences of these
  rows are noise-bound.
- side by side (`--side-by-side`, the figure to read): `bare`, `bare-stream`, `ag-ui`, `ai-sdk`
  and the loop alone run and driven at the same time, so whatever else the machine does falls on
  all of them alike; the median over turns of each endpoint less `bare` (and less
  `bare-stream`: the protocol alone).
- the translation alone: each protocol's request parsing, event reading and rendering, the scrub
  and the seals replayed over one recorded conversation in process (no server, no noise).

    python benchmarks/ui.py [--n 1000] [--repeat 3] [--side-by-side 3] [--peer-python PY]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(ROOT)]

from scale import start_server  # noqa: E402  (the benchmarks are scripts, not a package)

KEY = "sk-bench-0123456789abcdefghij"
"""The model server's key (it checks none): one a real deployment has, which the UI redacts."""
VARIANTS = ("bare", "bare-stream", "ag-ui", "ai-sdk", "pydantic-ai")
PATHS = {
    "bare": "/ag-ui",
    "bare-stream": "/ag-ui",
    "ag-ui": "/ag-ui",
    "ai-sdk": "/api/chat",
    "pydantic-ai": "/ag-ui",
}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


# -- the servers (each run as `ui.py --serve VARIANT`) -----------------------------------------


def _ours(model_url: str) -> tuple[Any, Any]:
    from agentforge_typed import OpenAIChatModel, ToolService, tool

    @tool
    def lookup(token: str) -> str:
        """Look a token up."""
        return token

    model = OpenAIChatModel("scale", base_url=model_url, api_key=KEY, timeout=60.0)
    return ToolService([lookup]), model


def _bare_app(model_url: str) -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from agentforge_typed import FinalResultEvent

    service, model = _ours(model_url)

    async def endpoint(request: Request) -> JSONResponse:
        body = json.loads(await request.body())
        text = None
        async for event in service.astream(model, body["messages"][-1]["content"]):
            if isinstance(event, FinalResultEvent):
                text = event.result.text
        return JSONResponse({"text": text})

    return Starlette(routes=[Route("/ag-ui", endpoint, methods=["POST"])])


def _bare_stream_app(model_url: str) -> Any:
    """The loop streamed with no protocol: one small SSE frame per event (a content delta's
    text, the end, else the event's kind), by Starlette's own `StreamingResponse`."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    from agentforge_typed import FinalResultEvent, TextDelta

    service, model = _ours(model_url)

    async def frames(prompt: str) -> Any:
        async for event in service.astream(model, prompt):
            if isinstance(event, TextDelta):
                frame: dict[str, Any] = {"type": "TEXT_MESSAGE_CONTENT", "delta": event.text}
            elif isinstance(event, FinalResultEvent):
                frame = {"type": "RUN_FINISHED"}
            else:
                frame = {"type": type(event).__name__}
            yield b"data: " + json.dumps(frame).encode() + b"\n\n"

    async def endpoint(request: Request) -> StreamingResponse:
        body = json.loads(await request.body())
        stream = frames(body["messages"][-1]["content"])
        return StreamingResponse(stream, media_type="text/event-stream")

    return Starlette(routes=[Route("/ag-ui", endpoint, methods=["POST"])])


def _ui_app(model_url: str, n: int) -> Any:
    from agentforge_typed.ui import create_app

    service, model = _ours(model_url)
    return create_app(service, model, max_runs=n + 100)


def _pydantic_ai_app(model_url: str) -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    # Imported by name: pydantic-ai is the peer's Python's (the `bench` extra), not the project's.
    pydantic_ai: Any = importlib.import_module("pydantic_ai")
    models: Any = importlib.import_module("pydantic_ai.models.openai")
    providers: Any = importlib.import_module("pydantic_ai.providers.openai")
    adapter: Any = importlib.import_module("pydantic_ai.ui.ag_ui").AGUIAdapter
    # The same client limits as ours (`OpenAIChatModel`'s 100 connections, a 60 s timeout): with
    # its default client (5 s to connect, no admission) a thousand conversations at once time out.
    import httpx

    limits = httpx.Limits(max_connections=100, max_keepalive_connections=100)
    client = httpx.AsyncClient(limits=limits, timeout=60.0)
    provider = providers.OpenAIProvider(base_url=model_url, api_key=KEY, http_client=client)
    agent = pydantic_ai.Agent(models.OpenAIChatModel("scale", provider=provider))

    def lookup(token: str) -> str:
        """Look a token up."""
        return token

    agent.tool_plain(lookup)

    async def endpoint(request: Request) -> Response:
        response: Response = await adapter.dispatch_request(request, agent=agent)
        return response

    return Starlette(routes=[Route("/ag-ui", endpoint, methods=["POST"])])


def serve(variant: str, model_url: str, port: int, n: int) -> None:
    import uvicorn

    if variant == "bare":
        app = _bare_app(model_url)
    elif variant == "bare-stream":
        app = _bare_stream_app(model_url)
    elif variant == "pydantic-ai":
        app = _pydantic_ai_app(model_url)
    else:
        app = _ui_app(model_url, n)
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=port,
        log_level="critical",
        access_log=False,
        backlog=4096,
        timeout_keep_alive=60,
    )


# -- the loop alone (`ui.py --loop`) ------------------------------------------------------------


def loop_alone(model_url: str, n: int) -> None:
    from agentforge_typed import FinalResultEvent

    service, model = _ours(model_url)

    async def one(index: int) -> bool:
        token = f"tok{index:05d}"
        async for event in service.astream(model, f"Look up {token}"):
            if isinstance(event, FinalResultEvent):
                return token in (event.result.text or "")
        return False

    async def main(count: int = n) -> list[bool]:
        return await asyncio.gather(*(one(i) for i in range(count)))

    asyncio.run(main(min(n, 50)))  # warm up: validators, pools
    cpu = time.process_time()
    done = asyncio.run(main())
    cpu_ms = (time.process_time() - cpu) * 1000 / n
    translation = translation_alone(service, model)
    print(json.dumps({"cpu_ms": cpu_ms, "ok": sum(done), "translation": translation}))


def translation_alone(service: Any, model: Any, n: int = 500) -> dict[str, float]:
    """Each protocol's own CPU per conversation, with no server and no loop: one conversation's
    stream recorded, then read and rendered again and again as its endpoint does (the request
    parsed into a turn, the loop's events read into moments, the key scrubbed, the frames and
    the seals written). A server's CPU less `bare`'s also holds the HTTP writes of the events;
    this part is the same in every run, where the servers' CPU moves by tens of percent."""
    # The endpoints' private parts, as `create_app`'s handler puts them together.
    from agentforge_typed.providers._base import secrets_of
    from agentforge_typed.ui import _app
    from agentforge_typed.ui._reader import RunReader
    from agentforge_typed.ui._seal import Sealer
    from agentforge_typed.ui._secrets import Scrub

    async def record() -> list[Any]:
        return [event async for event in service.astream(model, "Look up tok00000")]

    events = asyncio.run(record())
    sealer, redactor = Sealer(), secrets_of(model)
    protocols = {"ag-ui": _app._AG_UI, "ai-sdk": _app._UI_STREAM}

    def one(protocol: Any, variant: str, index: int) -> bytes:
        parsed = protocol.parse(json.dumps(_body(variant, index)).encode())
        turn = protocol.turn(parsed, sealer=sealer, stored=None, instructions=None)
        renderer, group = protocol.renderer(parsed, turn)
        reader = RunReader(turn, sealer=sealer, group=group, redactor=redactor)
        scrub = Scrub(redactor)
        frames = [renderer.start()]
        frames += [renderer.render(scrub(reader.feed(event))) for event in events]
        frames.append(renderer.end())
        return b"".join(frames)

    best: dict[str, float] = {}
    for variant, protocol in protocols.items():
        one(protocol, variant, 0)
        for _ in range(3):
            cpu = time.process_time()
            for index in range(n):
                one(protocol, variant, index)
            spent = (time.process_time() - cpu) * 1000 / n
            best[variant] = min(best.get(variant, spent), spent)
    return best


# -- the clients --------------------------------------------------------------------------------


@dataclass
class Row:
    variant: str
    n: int
    seconds: float
    cpu_ms: float
    rss_mb: float
    events: int
    completed: int
    wrong: int

    def line(self, bare: Row | None, loop_ms: float | None) -> str:
        added = ""
        if bare is not None and loop_ms and self.variant in ("ag-ui", "ai-sdk"):
            extra = self.cpu_ms - bare.cpu_ms
            added = f"{extra:.2f} ({extra / loop_ms:.0%} of the loop's)"
        return (
            f"| {self.variant} | {self.n:,} | {self.completed} | {self.wrong} "
            f"| {self.events / self.seconds:,.0f} | {self.cpu_ms:.2f} | {added or '-'} "
            f"| {self.rss_mb:.0f} | {self.seconds:.1f} |"
        )


HEADER = (
    "| server | N | completed | wrong | events/s | server CPU ms/conv | protocol layer ms/conv "
    "| server peak RSS MB | wall s |\n|---|---|---|---|---|---|---|---|---|"
)


def _body(variant: str, index: int) -> dict[str, Any]:
    text = f"Look up tok{index:05d}"
    if variant == "ai-sdk":
        message = {"id": f"u{index}", "role": "user", "parts": [{"type": "text", "text": text}]}
        return {"id": f"chat-{index}", "messages": [message], "trigger": "submit-message"}
    return {
        "threadId": f"thread-{index}",
        "runId": f"run-{index}",
        "state": {},
        "messages": [{"id": f"u{index}", "role": "user", "content": text}],
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }


FAILURES: dict[str, int] = {}
"""Why conversations went wrong, counted by reason (a few are shown)."""


async def _conversation(client: Any, variant: str, index: int) -> tuple[bool, int]:
    token = f"tok{index:05d}"
    events = 0
    text = []
    why = "no end"
    async with client.stream("POST", PATHS[variant], json=_body(variant, index)) as response:
        if variant == "bare":
            answer = json.loads(await response.aread())
            return token in (answer["text"] or ""), 1
        async for line in response.aiter_lines():
            if not line.startswith("data:") or line == "data: [DONE]":
                continue
            event = json.loads(line[5:])
            events += 1
            kind = event["type"]
            if kind in ("TEXT_MESSAGE_CONTENT", "text-delta"):
                text.append(event["delta"])
            elif kind in ("RUN_FINISHED", "finish"):
                why = "" if token in "".join(text) else "another answer"
            elif kind in ("RUN_ERROR", "error"):
                why = str(event.get("message") or event.get("errorText"))[:200]
    if why:
        FAILURES[why] = FAILURES.get(why, 0) + 1
    return not why, events


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def _drive(url: str, variant: str, n: int) -> tuple[float, int, int, int]:
    import httpx

    limits = httpx.Limits(max_connections=n + 10, max_keepalive_connections=n + 10)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=600) as client:
        started = time.monotonic()
        outcomes = await asyncio.gather(*(_conversation(client, variant, i) for i in range(n)))
    seconds = time.monotonic() - started
    completed = sum(ok for ok, _ in outcomes)
    return seconds, sum(e for _, e in outcomes), completed, n - completed


@contextlib.contextmanager
def started(variant: str, model_url: str, n: int, python: str) -> Iterator[tuple[int, str]]:
    """A server of `variant`, warmed up: its pid and URL."""
    port = _free_port()
    command = [python, __file__, "--serve", variant, "--model-url", model_url, "--n", str(n)]
    server = subprocess.Popen([*command, "--port", str(port)], cwd=ROOT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError(f"the {variant} server did not start") from None
                time.sleep(0.05)
        asyncio.run(_drive(url, variant, min(n, 50)))  # warm up: imports, validators, pools
        yield server.pid, url
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:  # a server still busy with streams nobody reads
            server.kill()
            server.wait()


def measure(variant: str, model_url: str, n: int, python: str) -> Row:
    with started(variant, model_url, n, python) as (pid, url):
        cpu = _cpu_seconds(pid)
        seconds, events, completed, wrong = asyncio.run(_drive(url, variant, n))
        cpu_ms = (_cpu_seconds(pid) - cpu) * 1000 / n
        return Row(variant, n, seconds, cpu_ms, _peak_rss_mb(pid), events, completed, wrong)


async def _together(
    model_url: str, urls: dict[str, str], n: int
) -> tuple[list[tuple[float, int, int, int]], str]:
    """Drive every server at once, with the loop alone run beside them; what the loop printed."""
    command = [__file__, "--loop", "--model-url", model_url, "--n", str(n)]
    loop = await asyncio.create_subprocess_exec(
        sys.executable, *command, stdout=asyncio.subprocess.PIPE, cwd=ROOT
    )
    drives = asyncio.gather(*(_drive(url, variant, n) for variant, url in urls.items()))
    outcomes, (printed, _) = await asyncio.gather(drives, loop.communicate())
    return list(outcomes), printed.decode()


def side_by_side(model_url: str, n: int, turns: int) -> None:
    """`bare`, `ag-ui` and `ai-sdk` served and driven at the same time, with the loop alone
    beside them: whatever else the machine does falls on all four alike, so the protocol
    layer (an endpoint's CPU less `bare`'s) is read within one turn. Prints each turn and the
    median."""
    variants = ("bare", "bare-stream", "ag-ui", "ai-sdk")
    shares: dict[str, list[float]] = {"bare-stream": [], "ag-ui": [], "ai-sdk": []}
    over_stream: dict[str, list[float]] = {"ag-ui": [], "ai-sdk": []}
    for turn in range(turns):
        with contextlib.ExitStack() as stack:
            servers = {
                v: stack.enter_context(started(v, model_url, n, sys.executable)) for v in variants
            }

            before = {v: _cpu_seconds(pid) for v, (pid, _) in servers.items()}
            urls = {v: url for v, (_, url) in servers.items()}
            outcomes, printed = asyncio.run(_together(model_url, urls, n))
            cpu = {v: (_cpu_seconds(pid) - before[v]) * 1000 / n for v, (pid, _) in servers.items()}
        loop_ms = json.loads(printed.splitlines()[-1])["cpu_ms"]
        wrong = sum(outcome[3] for outcome in outcomes)
        line = ", ".join(f"{v} {cpu[v]:.2f}" for v in variants)
        print(f"side by side, turn {turn + 1}: loop {loop_ms:.2f}, {line} ms/conv ({wrong} wrong)")
        for v in shares:
            shares[v].append((cpu[v] - cpu["bare"]) / loop_ms)
        for v in over_stream:
            over_stream[v].append((cpu[v] - cpu["bare-stream"]) / loop_ms)

    def shown(each: list[float]) -> str:
        turns_ = ", ".join(f"{x:.0%}" for x in each)
        return f"{statistics.median(each):.0%} of the loop's (turns: {turns_})"

    for v, each in shares.items():
        print(f"{v} less bare, side by side, median of {turns} turns: {shown(each)}")
    for v, each in over_stream.items():
        print(f"{v} less bare-stream (the protocol alone): {shown(each)}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="runs of the loop and of each server, in turns; the best (least CPU) of each is "
        "kept (default: 3)",
    )
    parser.add_argument(
        "--peer-python",
        default=os.environ.get("UI_BENCH_PEER_PYTHON"),
        help="a Python with pydantic-ai-slim[ag-ui,openai] (default: $UI_BENCH_PEER_PYTHON; "
        "without one, the pydantic-ai row is left out)",
    )
    parser.add_argument(
        "--only", choices=VARIANTS, action="append", help="measure only these servers"
    )
    parser.add_argument(
        "--side-by-side",
        type=int,
        default=3,
        metavar="TURNS",
        help="turns of the three servers and the loop run at the same time (default: 3; 0: none)",
    )
    parser.add_argument("--serve", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--loop", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model-url", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve, args.model_url, args.port, args.n)
        return
    if args.loop:
        loop_alone(args.model_url, args.n)
        return
    resource.setrlimit(resource.RLIMIT_NOFILE, (8192, 8192))
    model_server, model_url = start_server(faults=False)
    try:
        alone: dict[str, Any] = {}

        def loop_turn() -> None:
            loop = subprocess.run(
                [sys.executable, __file__, "--loop", "--model-url", model_url, "--n", str(args.n)],
                capture_output=True,
                text=True,
                check=True,
                cwd=ROOT,
            )
            measured = json.loads(loop.stdout.splitlines()[-1])
            print(
                f"the loop alone: {measured['cpu_ms']:.2f} ms of CPU per conversation "
                f"({measured['ok']}/{args.n} right)",
                flush=True,
            )
            if not alone or measured["cpu_ms"] < alone["cpu_ms"]:
                alone.update(measured)

        variants = [v for v in VARIANTS if v != "pydantic-ai" or args.peer_python]
        variants = [v for v in variants if v in (args.only or VARIANTS)]
        rows: dict[str, Row] = {}
        for turn in range(args.repeat):
            loop_turn()
            for variant in variants:
                python = args.peer_python if variant == "pydantic-ai" else sys.executable
                row = measure(variant, model_url, args.n, python)
                print(f"turn {turn + 1}: {row.line(None, None)}", file=sys.stderr, flush=True)
                for why, count in sorted(FAILURES.items(), key=lambda item: -item[1])[:3]:
                    print(f"  {count} went wrong: {why}", file=sys.stderr, flush=True)
                FAILURES.clear()
                if variant not in rows or row.cpu_ms < rows[variant].cpu_ms:
                    rows[variant] = row
        if rows:
            print(HEADER)
            for variant in variants:
                print(rows[variant].line(rows.get("bare"), alone["cpu_ms"]))
            if not args.peer_python:
                print("| pydantic-ai | (no --peer-python given) |")
            for variant, spent in alone["translation"].items():
                print(
                    f"{variant}: the protocol's own translation, in process (no server): "
                    f"{spent:.2f} ms per conversation ({spent / alone['cpu_ms']:.0%} of the loop's)"
                )
        if args.side_by_side:
            side_by_side(model_url, args.n, args.side_by_side)
    finally:
        model_server.terminate()
        model_server.wait(10)


if __name__ == "__main__":
    main()
