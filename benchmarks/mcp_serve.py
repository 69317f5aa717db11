"""Serving one typed tool over MCP: calls per second and CPU per call, against its peers.

One function, `place_order(order: Order, priority: int = 0) -> Receipt` (a nested model with a
list of line items), served three ways in the same run, to the same client (the official Python
SDK's `Client`, at 2025-11-25, which all three speak), over stdio and over streamable HTTP:

- `ours`: `ToolServer([tool(place_order)])` (strict validation, structured output checked
  against its schema);
- `fastmcp`: FastMCP (`pip install "agentforge-typed[bench]"`), `FastMCP().tool(place_order)`;
- `sdk`: the MCP SDK's own decorator server, `MCPServer().tool()(place_order)`.

Over HTTP the three ASGI apps run under the same uvicorn configuration. Each server runs in a
process of its own; "server CPU" is that process's user and system time per call (from
`/proc`), "client CPU" this process's. Calls are sequential, after a warm-up. Last, each
server is sent `"priority": "5"` (a string for an `int`) and `"quantity": "2"` nested in the
order: the table says which accepts them (coerces) and which refuses them (strict).

Run: `python benchmarks/mcp_serve.py [--calls N] [--quick]`. A server whose package is missing
(FastMCP outside the `bench` extra) is left out, and the output says so.
"""

from __future__ import annotations

import argparse
import importlib
import os
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run from a checkout: its package first
    sys.path.insert(0, str(ROOT))

SERVERS = ("ours", "fastmcp", "sdk")
TRANSPORTS = ("stdio", "http")


class Address(BaseModel):
    street: str
    city: str
    postcode: str


class LineItem(BaseModel):
    sku: str
    quantity: int
    unit_price: float


class Order(BaseModel):
    customer: str
    items: list[LineItem]
    ship_to: Address


class Receipt(BaseModel):
    customer: str
    lines: int
    total: float
    priority: int


def place_order(order: Order, priority: int = 0) -> Receipt:
    """Place an order and return its receipt.

    Args:
        order: What to order, and where to send it.
        priority: 0 (normal) to 9 (urgent).
    """
    total = sum(item.quantity * item.unit_price for item in order.items)
    return Receipt(customer=order.customer, lines=len(order.items), total=total, priority=priority)


ARGUMENTS: dict[str, Any] = {
    "order": {
        "customer": "Ada Lovelace",
        "items": [{"sku": f"SKU-{n}", "quantity": n + 1, "unit_price": 9.5 + n} for n in range(5)],
        "ship_to": {"street": "12 St James's Square", "city": "London", "postcode": "SW1Y 4JH"},
    },
    "priority": 3,
}


# -- the servers (run with --serve) ------------------------------------------------------------


def _app_or_runner(kind: str) -> Any:
    if kind == "ours":
        from agentforge_typed import tool
        from agentforge_typed.serving import ToolServer

        return ToolServer([tool(place_order)], name="bench")
    if kind == "fastmcp":
        fastmcp: Any = importlib.import_module("fastmcp")
        served = fastmcp.FastMCP("bench")
        served.tool(place_order)
        return served
    from mcp.server.mcpserver import MCPServer

    sdk: Any = MCPServer("bench", log_level="WARNING")
    sdk.tool()(place_order)
    return sdk


def serve(kind: str, transport: str, port: int, pid_file: str) -> None:
    Path(pid_file).write_text(str(os.getpid()))
    served = _app_or_runner(kind)
    if transport == "stdio":
        if kind == "ours":
            served.serve_stdio()
        elif kind == "fastmcp":
            served.run("stdio", show_banner=False)
        else:
            served.run("stdio")
        return
    import uvicorn

    if kind == "ours":
        app = served.http_app()
    elif kind == "fastmcp":
        app = served.http_app(path="/mcp")
    else:
        app = served.streamable_http_app()
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


# -- the client --------------------------------------------------------------------------------


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def measure(kind: str, transport: str, calls: int) -> dict[str, Any]:
    """One row: `kind` served over `transport` in a process of its own, `calls` timed calls."""
    import subprocess

    import anyio
    from mcp import StdioServerParameters

    pid_file = tempfile.NamedTemporaryFile(delete=False).name
    port = _free_port()
    command = [sys.executable, __file__, "--serve", kind, transport, str(port), pid_file]
    # FastMCP logs its start at INFO on stderr: kept quiet, as the others are.
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "FASTMCP_LOG_LEVEL": "WARNING"}
    process = None
    if transport == "stdio":
        target: Any = StdioServerParameters(command=command[0], args=command[1:], env=environment)
    else:
        process = subprocess.Popen(command, env=environment, stderr=subprocess.DEVNULL)
        target = f"http://127.0.0.1:{port}/mcp"
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.05)
    try:
        return anyio.run(_timed, target, pid_file, calls)
    finally:
        if process is not None:
            process.terminate()
            process.wait()
        os.unlink(pid_file)


async def _timed(target: Any, pid_file: str, calls: int) -> dict[str, Any]:
    import anyio
    import mcp_types
    from mcp import Client

    async with Client(target, mode="legacy") as client:
        pid = int(await anyio.Path(pid_file).read_text())
        for _ in range(max(calls // 10, 20)):
            await client.call_tool("place_order", ARGUMENTS)
        server_before, client_before = _cpu_seconds(pid), time.process_time()
        started = time.perf_counter()
        for _ in range(calls):
            result = await client.call_tool("place_order", ARGUMENTS)
        wall = time.perf_counter() - started
        server_cpu = _cpu_seconds(pid) - server_before
        client_cpu = time.process_time() - client_before
        assert not result.is_error, result
        lax = dict(ARGUMENTS, priority="5")
        nested = {**ARGUMENTS, "order": {**ARGUMENTS["order"]}}
        nested["order"]["items"] = [dict(ARGUMENTS["order"]["items"][0], quantity="2")]
        strict = []
        for arguments in (lax, nested):
            answer: mcp_types.CallToolResult = await client.call_tool("place_order", arguments)
            strict.append("refuses" if answer.is_error else "accepts")
    return {
        "calls/s": calls / wall,
        "server CPU ms/call": server_cpu / calls * 1e3,
        "client CPU ms/call": client_cpu / calls * 1e3,
        '"5" for an int': strict[0],
        'nested "2"': strict[1],
    }


def _available(kind: str) -> bool:
    if kind != "fastmcp":
        return True
    try:
        importlib.import_module("fastmcp")
    except ImportError:
        return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000, help="timed calls per row")
    parser.add_argument("--quick", action="store_true", help="200 calls per row")
    parser.add_argument("--transport", choices=TRANSPORTS, action="append", help="only these")
    parser.add_argument("--server", choices=SERVERS, action="append", help="only these")
    parser.add_argument("--serve", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        kind, transport, port, pid_file = args.serve
        serve(kind, transport, int(port), pid_file)
        return
    calls = 200 if args.quick else args.calls
    versions = {"mcp": _version("mcp"), "fastmcp": _version("fastmcp")}
    print(f"{calls} sequential calls per row; Python {sys.version.split()[0]}; {versions}")
    header = ("transport", "server", "calls/s", "server CPU ms/call", "client CPU ms/call")
    extra = ('"5" for an int', 'nested "2"')
    print(" | ".join((*header, *extra)))
    for transport in args.transport or TRANSPORTS:
        for kind in args.server or SERVERS:
            if not _available(kind):
                print(
                    f"{transport} | {kind} | not installed: pip install 'agentforge-typed[bench]'"
                )
                continue
            row = measure(kind, transport, calls)
            cells = [f"{row[h]:.1f}" if h == "calls/s" else f"{row[h]:.3f}" for h in header[2:]]
            print(" | ".join((transport, kind, *cells, row[extra[0]], row[extra[1]])))


def _version(package: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return "missing"


if __name__ == "__main__":
    main()
