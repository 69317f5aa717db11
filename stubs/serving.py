"""Static-typing contract of serving: a `ToolServer` of a `ToolService[X]` is a `ToolServer[X]`,
its options are checked, and the questions a served tool asks its client are typed. (A deps
factory making something else than `X` is refused at run time, when it makes it: a second
overload takes any collection of tools, so the type cannot tell.)"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from typing_extensions import assert_type

from agentforge_typed import ElicitationAnswer, ToolContext, ToolService, tool
from agentforge_typed.serving import (
    DepsScope,
    HttpOptions,
    ToolServer,
    ToolServerOptions,
    ask_client,
    ask_client_model,
    serve_mcp,
)


@dataclass
class Db:
    url: str


@tool
def lookup(key: str, context: ToolContext[Db]) -> str:
    """Look a key up."""
    return context.deps.url + key


def make_db() -> Db:
    return Db("sqlite://")


async def make_db_async() -> Db:
    return Db("sqlite://")


service: ToolService[Db] = ToolService([lookup], deps_type=Db)
assert_type(ToolServer(service, deps=make_db), ToolServer[Db])
assert_type(ToolServer(service, deps=make_db_async), ToolServer[Db])
ToolServer([lookup], deps=make_db, deps_scope="call", max_concurrent_calls=8, call_timeout=None)
ToolServer([lookup], deps_scope="forever")  # type: ignore[call-overload]
ToolServer([lookup], colour="blue")  # type: ignore[call-overload]

server = ToolServer([lookup], deps=make_db)
assert_type(server.http_app(token="secret", allowed_hosts=["tools.example.com:*"]), Starlette)
server.http_app(port=80)  # accepted by the type (`HttpOptions`), refused at run time
server.serve_http(host="127.0.0.1", port=8765, token=None)
assert_type(server.declarations(), list[dict[str, Any]])
serve_mcp([lookup], deps=make_db, http=True, port=9000)

scope: DepsScope = "session"
options: ToolServerOptions = {"select": ["lookup"], "approval_timeout": 60.0}
http: HttpOptions = {"host": "0.0.0.0", "token": "secret"}


async def asking() -> None:
    answer = await ask_client("Your name?", {"type": "object", "properties": {}})
    assert_type(answer, ElicitationAnswer)
    assert_type(await ask_client_model("Summarize this."), str)
    await ask_client("Your name?")  # type: ignore[call-arg]
