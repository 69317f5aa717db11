"""A small MCP server for the MCP tests: a slow tool, a tool that kills its own process mid-call,
a structured result, a tool that reads a request header, one that records whether it was
cancelled, an idempotent one that kills its process the first time it runs, one that reports
progress, one that asks the user a question (elicitation) the SDK's way for any revision, one
that asks twice and reports the call's idempotency key (`account`), one that asks mid-call, one
that sends the user to a page mid-call (a URL-mode question, `visit`), and one that adds a tool
(and says so to `subscriptions/listen` streams, the stateless revision's way). Run:
`python tests/mcp_fixture_server.py [stdio | http PORT]`."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import anyio
from mcp.server.elicitation import ElicitationResult
from mcp.server.mcpserver.resolve import Elicit, Resolve
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field, create_model

try:  # SDK 2
    from mcp.server.mcpserver import Context
    from mcp.server.mcpserver import MCPServer as Server
except ImportError:  # pragma: no cover - SDK 1
    from mcp.server.fastmcp import Context  # type: ignore[no-redef,attr-defined]
    from mcp.server.fastmcp import FastMCP as Server  # type: ignore[no-redef,attr-defined]

server = Server("fixture")
IDEMPOTENCY_KEY_META = "example.com/idempotency-key"


@server.tool()
def slow(seconds: float) -> str:
    """Sleep, then answer."""
    time.sleep(seconds)
    return f"slept {seconds}"


@server.tool()
def die() -> str:
    """Exit the server process in the middle of the call."""
    os._exit(1)


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def header(name: str, ctx: Context) -> str:
    """The value of one HTTP request header ("(absent)" when it was not sent or over stdio)."""
    headers = getattr(ctx.request_context.request, "headers", None)
    return headers.get(name, "(absent)") if headers is not None else "(absent)"


@server.tool()
async def hang(marker: str) -> str:
    """Wait a minute, writing to the file `marker` when it starts and when it is cancelled."""
    await anyio.Path(marker).write_text("started")
    try:
        await anyio.sleep(60)
    except anyio.get_cancelled_exc_class():
        # Synchronously: an await in a cancelled task would be cancelled too.
        Path(marker).write_text("cancelled")  # noqa: ASYNC240
        raise
    return "finished"


@server.tool(annotations=ToolAnnotations(idempotent_hint=True, destructive_hint=False))
def flaky(marker: str) -> str:
    """Exit the server process the first time (creating the file `marker`), answer after."""
    if not Path(marker).exists():
        Path(marker).write_text("died once")
        os._exit(1)
    return f"answered by process {os.getpid()}"


@server.tool()
async def count(steps: int, pause: float, ctx: Context) -> str:
    """Count to `steps`, reporting each step as progress, `pause` seconds apart."""
    for step in range(1, steps + 1):
        await anyio.sleep(pause)
        await ctx.report_progress(step, steps, f"step {step}")
    return f"counted to {steps}"


class Name(BaseModel):
    name: str


Big = create_model(  # type: ignore[call-overload]
    "Big", **{f"field_{i}": (str, Field(description="a field " * 10)) for i in range(100)}
)


def _first(big: bool = False) -> Elicit[Any]:
    return Elicit("What is your name?", Big if big else Name)


def _second(
    first: Annotated[ElicitationResult[Name], Resolve(_first)], twice: bool = False
) -> Elicit[Name] | str:
    return Elicit("What is your name?", Name) if twice else ""


def _said(outcome: Any) -> str:
    data = getattr(outcome, "data", None)
    return f"{outcome.action}" + (f" {data.name}" if data is not None else "")


@server.tool()
async def ask(
    first: Annotated[ElicitationResult[Name], Resolve(_first)],
    second: Annotated[ElicitationResult[Name], Resolve(_second)],
    twice: bool = False,
    big: bool = False,
) -> str:
    """Ask the user for their name (elicitation), `twice` or with a `big` form, and say what came
    back. Asked the SDK's way for both kinds of revision: mid-call on a handshake revision, in an
    `input_required` result on the stateless one."""
    return "answer: " + ", ".join([_said(first), *([_said(second)] if twice else [])])


def _name() -> Elicit[Name]:
    return Elicit("What is your name?", Name)


def _again(first: Annotated[ElicitationResult[Name], Resolve(_name)]) -> Elicit[Name]:
    return Elicit("Your name again, to confirm?", Name)


@server.tool()
async def account(
    first: Annotated[ElicitationResult[Name], Resolve(_name)],
    again: Annotated[ElicitationResult[Name], Resolve(_again)],
    ctx: Context,
) -> str:
    """Ask the user's name, then again to confirm, and say both answers with the idempotency key
    the call carries in `_meta` (what the user's account would be looked up by)."""
    meta = ctx.request_context.meta or {}
    key = meta.get(IDEMPOTENCY_KEY_META, "(none)")
    return f"account: {_said(first)}, {_said(again)}; key {key}"


@server.tool()
async def ask_mid_call(ctx: Context) -> str:
    """Ask the user for their name with `ctx.elicit`, which only a handshake revision allows."""
    try:
        answer = await ctx.elicit("What is your name?", Name)
    except Exception as exc:
        return f"not asked: {type(exc).__name__}"
    return f"answer: {_said(answer)}"


@server.tool()
async def visit(ctx: Context, who: str = "you") -> str:
    """Send the user to a page with `ctx.elicit_url` (a URL-mode question, mid-call: a handshake
    revision's), and say how they answered."""
    url = f"https://auth.example.com/consent?who={who}"
    try:
        answer = await ctx.elicit_url(f"Sign in, {who}", url, f"visit-{who}")
    except Exception as exc:
        return f"not asked: {type(exc).__name__}"
    return f"visit: {answer.action}"


def grown() -> str:
    """A tool that `grow` adds."""
    return "grown"


@server.tool()
async def grow(ctx: Context) -> str:
    """Add the tool `grown` and publish the change to the `subscriptions/listen` streams."""
    server.add_tool(grown)
    await ctx.notify_tools_changed()
    return "grew"


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
