"""Static-typing contract of the UI: `create_app` takes a service, a model, an optional store and
the checked options of `UIOptions`, and gives a Starlette app; `serve` runs it."""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from typing_extensions import assert_type

from agentforge_typed import FakeModel, ToolService, tool
from agentforge_typed.stores import MemoryStore
from agentforge_typed.ui import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_RUNS,
    DEFAULT_SEND_TIMEOUT,
    MIN_SECRET_BYTES,
    UIOptions,
    create_app,
    serve,
)


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return key


def signed_in(request: Request) -> str:
    return request.headers.get("x-user", "anonymous")


service = ToolService([lookup])
assert_type(create_app(service, FakeModel()), Starlette)
create_app(
    service,
    FakeModel(),
    instructions="Be brief.",
    secret=b"0" * 32,
    deps=signed_in,
    token="t0ken",
    host="0.0.0.0",
    allowed_hosts=["chat.example.com:*"],
    max_body_bytes=1 << 20,
    max_runs=100,
    send_timeout=10.0,
    title="Support",
)
create_app(service, FakeModel(), MemoryStore())
create_app(service, FakeModel(), colour="blue")  # type: ignore[call-arg]
create_app(service, FakeModel(), max_runs="many")  # type: ignore[arg-type]
create_app(service)  # type: ignore[call-arg]

options: UIOptions = {"max_body_bytes": DEFAULT_MAX_BODY_BYTES, "max_runs": DEFAULT_MAX_RUNS}
assert_type(DEFAULT_SEND_TIMEOUT, float)
assert_type(DEFAULT_MAX_CONNECTIONS, int)
assert_type(MIN_SECRET_BYTES, int)


async def main(app: Any) -> None:
    await serve(create_app(service, FakeModel()), host="127.0.0.1", port=0, on_ready=print)
