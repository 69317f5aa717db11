"""Static-typing contract of tool groups, per-run selection, `prepare_tools` and tool search."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import httpx2
from mcp.client.auth import TokenStorage
from mcp.shared.auth import OAuthToken
from typing_extensions import assert_type

from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatRequestParameters,
    FunctionModel,
    MCPServer,
    ToolChatResult,
    ToolContext,
    ToolService,
    tool,
)
from agentforge_typed.loop import (
    FinishedChatResult,
    PausedChatResult,
    PrepareContext,
    PrepareTools,
    ToolSearch,
    ToolSelection,
)
from agentforge_typed.tools import (
    LocalRedirect,
    MCPAuthorizationError,
    MCPTool,
    MCPToolFilter,
    MemoryTokens,
    StoreTokens,
    ToolAnnotations,
    ToolSpecification,
)
from agentforge_typed.stores import MemoryStore


def reply(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
    return AiMessage(text="ok")


@tool
def charge(ctx: ToolContext[None], customer: str, cents: int) -> str:
    """Charge a customer."""
    assert_type(ctx.idempotency_key, str)
    return "charged"


class User:
    admin: bool = False


def permitted(
    ctx: PrepareContext[User], specifications: Sequence[ToolSpecification]
) -> list[ToolSpecification]:
    assert_type(ctx.deps, User)
    assert_type(ctx.round_trip, int)
    return [s for s in specifications if ctx.deps.admin or s.name != "charge"]


def usage() -> None:
    model = FunctionModel(reply)
    hook: PrepareTools = permitted
    service = ToolService(groups={"billing": [charge]}, prepare_tools=hook, deps_type=User)
    service.register(charge, group=["billing", "payments"])
    assert_type(service.groups, Mapping[str, Sequence[str]])
    selection: ToolSelection = ["group:billing"]
    assert_type(service.chat(model, "hi", deps=User(), tools=selection), FinishedChatResult[None] | PausedChatResult[None])
    search = ToolSearch(core=["charge"], max_results=3)
    assert_type(service.chat(model, "hi", deps=User(), tools=search), FinishedChatResult[None] | PausedChatResult[None])
    ToolService(tool_search=search)
    deny = MCPToolFilter(deny=["delete_repository"])
    MCPServer.http("http://localhost/mcp", tool_filter=deny, tool_prefix="github_")
    # Values never to show, beside the secrets found in the URL and the headers.
    MCPServer.http("http://localhost/mcp/k", headers={"X-Key": "k"}, secrets=["k"])
    # An OAuth flow (any `httpx2.Auth`: the MCP SDK's providers); a refusal names the server.
    MCPServer.http("http://localhost/mcp", auth=httpx2.BasicAuth("u", "p"))
    MCPServer.http("http://localhost/mcp", auth={"token": "t"})  # type: ignore[arg-type]
    refused = MCPAuthorizationError("refused", server="http://localhost/mcp", status=401)
    assert_type(refused.status, int)
    assert_type(refused.server, str)
    assert isinstance(refused, PermissionError)
    redirect = LocalRedirect(port=8765, show=print, timeout=60)
    assert_type(redirect.redirect_uri, str)
    LocalRedirect(show="firefox")  # type: ignore[arg-type]

    # Where the flow keeps its tokens: an `mcp.client.auth.TokenStorage` either way.
    def keeps(storage: TokenStorage) -> None: ...

    keeps(MemoryTokens())
    keeps(StoreTokens(MemoryStore(), "notes:alice"))
    assert_type(StoreTokens(MemoryStore(), "n").name, str)
    StoreTokens(MemoryStore(), 7)  # type: ignore[arg-type]

    async def signed_out(tokens: StoreTokens | MemoryTokens) -> OAuthToken | None:
        await tokens.clear()
        return await tokens.get_tokens()

    def readonly(tool: MCPTool) -> bool:
        assert_type(tool.annotations, ToolAnnotations | None)
        assert_type(tool.retry_safe, bool)
        return tool.remote_name.startswith("get_")

    MCPServer.stdio("server", tool_filter=readonly)
    MCPServer.stdio("server", max_tools=5000, max_result_chars=20_000)
    MCPServer.stdio("server", max_tools="many")  # type: ignore[arg-type]
    MCPServer.stdio("server", trusted=True, required=False, reconnect=True, idempotent=["put"])
    MCPServer.stdio("server", idempotency_key_meta="example.com/idempotency-key")
    MCPServer.stdio("server", trusted="yes")  # type: ignore[arg-type]


def misuse() -> None:
    model = FunctionModel(reply)
    service = ToolService()
    service.chat(model, "hi", tools=[charge])  # type: ignore[list-item]
    service.chat(model, "hi", tools=42)  # type: ignore[call-overload]
    service.register(charge, group=7)  # type: ignore[arg-type]
    ToolSearch(core=[1])  # type: ignore[list-item]
    ToolService(prepare_tools=lambda ctx: [])  # type: ignore[arg-type, misc]
    MCPServer.stdio("server", tool_filter=["get_time"])  # type: ignore[arg-type]
    MCPToolFilter(allow=[1])  # type: ignore[list-item]
