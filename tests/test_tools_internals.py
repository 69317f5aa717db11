"""Tool internals: options declared once, one validated-arguments shape, one event-loop policy."""

from __future__ import annotations

import inspect
import typing

import pytest

from agentforge_typed import ReturnBehavior, Tool, ToolCall, tool
from agentforge_typed.tools._function import ToolOptions


def call(name: str, arguments: str = "{}", id: str = "call_1") -> ToolCall:
    return ToolCall(id=id, name=name, arguments=arguments)


# --- options ----------------------------------------------------------------------------------------


def test_tool_options_are_declared_once_and_shared_by_tool_and_the_decorator() -> None:
    # Neither the decorator nor `Tool` repeats the option list: both take `**ToolOptions`.
    for function in (tool, Tool.__init__):
        kinds = {p.kind for p in inspect.signature(function).parameters.values()}
        assert inspect.Parameter.VAR_KEYWORD in kinds
    assert set(typing.get_type_hints(ToolOptions)) == {
        "name",
        "description",
        "strict",
        "strict_schema",
        "return_behavior",
        "max_retries",
        "timeout",
        "sequential",
        "result_converter",
        "extra_arguments",
    }


def test_tool_options_reach_the_tool_alike_through_the_decorator_and_the_class() -> None:
    def lookup(key: str) -> str:
        return key

    options: ToolOptions = {
        "name": "find",
        "description": "Find a key.",
        "strict": False,
        "return_behavior": ReturnBehavior.IMMEDIATE,
        "max_retries": 5,
        "timeout": 3.0,
        "sequential": True,
        "result_converter": lambda value: f"<{value}>",
        "extra_arguments": "ignore",
    }
    for built in (tool(**options)(lookup), Tool(lookup, **options)):
        assert (built.name, built.description, built.strict) == ("find", "Find a key.", False)
        assert built.return_behavior is ReturnBehavior.IMMEDIATE
        assert (built.max_retries, built.timeout, built.sequential) == (5, 3.0, True)
        assert built.extra_arguments == "ignore"
        result = built.execute(call("find", '{"key": "k", "other": 1}'))
        assert result.text == "<k>"
        assert result.repairs == ("dropped unknown argument `other`",)


def test_tool_option_defaults() -> None:
    def lookup(key: str) -> str:
        return key

    built = Tool(lookup)
    assert (built.name, built.strict, built.max_retries, built.timeout) == ("lookup", True, 2, None)
    assert built.return_behavior is ReturnBehavior.TO_LLM
    assert (built.sequential, built.extra_arguments) == (False, "forbid")
    assert built.specification.strict_schema is False


def test_unknown_tool_option_is_refused() -> None:
    with pytest.raises(TypeError):
        tool(retries=3)  # type: ignore[call-overload]


def test_mcp_server_options_are_declared_once() -> None:
    from agentforge_typed.tools._mcp import MCPServer, MCPServerOptions

    options: MCPServerOptions = {
        "timeout": 5.0,
        "connect_timeout": 7.0,
        "tool_prefix": "fs_",
        "return_behavior": ReturnBehavior.IMMEDIATE,
        "max_retries": 4,
        "sequential": True,
    }
    for server in (
        MCPServer.stdio("server-cmd", ["--flag"], **options),
        MCPServer.http("http://127.0.0.1:1/mcp", **options),
    ):
        assert (server.timeout, server.connect_timeout, server.tool_prefix) == (5.0, 7.0, "fs_")
        assert server.return_behavior is ReturnBehavior.IMMEDIATE
        assert (server.max_retries, server.sequential) == (4, True)
    defaults = MCPServer.http("http://127.0.0.1:1/mcp")
    assert (defaults.timeout, defaults.connect_timeout, defaults.max_retries) == (30.0, 30.0, 2)
    with pytest.raises(TypeError, match="unknown MCPServer option"):
        MCPServer.stdio("server-cmd", retries=1)  # type: ignore[call-arg]
