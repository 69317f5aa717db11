"""MCP tool annotations: kept on the tool and its specification (for `prepare_tools`, filters and
`check`); a trusted server's annotations set approval, ordering and retry policy, an untrusted
server's change nothing. Servers are the SDK's low-level `Server` over memory streams."""

from __future__ import annotations

import types
from collections.abc import Sequence
from importlib.metadata import version
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp.types import Tool
from mcp.types import ToolAnnotations as Hints
from test_mcp import listing_server

from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatRequestParameters,
    FunctionModel,
    MCPToolFilter,
    PrepareContext,
    ToolAnnotations,
    ToolCall,
    ToolService,
    ToolSpecification,
)
from agentforge_typed.cli._check import check_target
from agentforge_typed.cli._target import Target

pytestmark = pytest.mark.skipif(
    version("mcp").startswith("1."), reason="SDK 2's low-level `Server`"
)

OBJECT = {"type": "object"}
TOOLS = (
    Tool(
        name="read",
        title="Read a file",
        input_schema=OBJECT,
        annotations=Hints(read_only_hint=True),
    ),
    Tool(name="append", input_schema=OBJECT, annotations=Hints(destructive_hint=False)),
    Tool(name="delete", input_schema=OBJECT, annotations=Hints(destructive_hint=True)),
    Tool(
        name="put",
        input_schema=OBJECT,
        annotations=Hints(idempotent_hint=True, destructive_hint=False),
    ),
    Tool(name="plain", input_schema=OBJECT),
    Tool(
        name="liar",
        input_schema=OBJECT,
        annotations=Hints(read_only_hint=True, destructive_hint=True, open_world_hint=False),
    ),
)


def policies(trusted: bool, **options: Any) -> dict[str, tuple[bool, bool, bool]]:
    """Each tool's (requires_approval, sequential, retry_safe)."""
    with listing_server(*TOOLS, trusted=trusted, **options) as server:
        return {
            t.name: (t.requires_approval is True, t.sequential, t.retry_safe)
            for t in server.tools()
        }


def test_annotations_are_kept_on_the_tool_and_its_specification() -> None:
    with listing_server(*TOOLS) as server:
        tools = {t.name: t for t in server.tools()}
    assert tools["read"].annotations == ToolAnnotations(title="Read a file", read_only=True)
    assert tools["read"].specification.annotations == tools["read"].annotations
    assert tools["liar"].annotations == ToolAnnotations(
        read_only=True, destructive=True, open_world=False
    )
    assert tools["plain"].annotations is None
    # Never sent to a model: the providers render name, description and parameters only.
    assert "annotations" not in str(tools["read"].specification.parameters)


def test_an_untrusted_servers_annotations_change_nothing() -> None:
    assert set(policies(trusted=False).values()) == {(False, False, False)}


def test_a_trusted_servers_annotations_set_policy() -> None:
    assert policies(trusted=True) == {
        "read": (False, False, True),  # read-only: parallel, no approval, retried
        "append": (False, False, False),  # additive only
        "delete": (True, True, False),  # destructive: approval, alone
        "put": (False, False, True),  # idempotent: retried after a reconnection
        "plain": (True, True, False),  # says nothing: the specification's defaults
        "liar": (True, True, False),  # contradictory: read as the worst case
    }


def test_what_the_user_says_wins_over_a_trusted_servers_annotations() -> None:
    named = policies(trusted=True, requires_approval={"delete": False}, idempotent=["plain"])
    assert named["delete"] == (False, True, False)
    assert named["plain"] == (True, True, True)
    assert named["liar"] == (True, True, False)  # not named: the annotations decide
    everything = policies(trusted=True, requires_approval=True, sequential=False)
    assert set(everything.values()) == {(True, False, True), (True, False, False)}
    keyed = policies(trusted=False, idempotency_key_meta="example.com/idempotency-key")
    assert {safe for _, _, safe in keyed.values()} == {True}


def test_idempotent_must_be_names_not_a_string() -> None:
    with pytest.raises(TypeError, match="collection of tool names, not a str"):
        listing_server(idempotent="put")


def test_a_trusted_destructive_tool_pauses_the_run_for_approval() -> None:
    calls = [ToolCall(id="c1", name="read", arguments="{}")]
    calls.append(ToolCall(id="c2", name="delete", arguments="{}"))

    def model(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        return AiMessage(tool_calls=calls)

    with listing_server(*TOOLS, trusted=True) as server:
        result = ToolService([server]).chat(FunctionModel(model), "tidy up")
    assert [(p.call.name, p.reason) for p in result.pending] == [("delete", "approval")]


def test_annotations_reach_prepare_tools_and_filters() -> None:
    seen: dict[str, ToolAnnotations | None] = {}

    def read_only(
        ctx: PrepareContext[None], specifications: Sequence[ToolSpecification]
    ) -> list[ToolSpecification]:
        seen.update({s.name: s.annotations for s in specifications})
        return [s for s in specifications if s.annotations and s.annotations.read_only]

    offered: list[str] = []

    def model(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        offered.extend(spec.name for spec in parameters.tools or ())
        return AiMessage(text="done")

    no_writes = MCPToolFilter(where=lambda t: t.annotations is not None)
    with listing_server(*TOOLS, tool_filter=no_writes) as server:
        ToolService([server], prepare_tools=read_only).chat(FunctionModel(model), "look")
    assert set(seen) == {"read", "append", "delete", "put", "liar"}  # `plain` filtered out
    assert offered == ["read", "liar"]


def test_check_reports_contradictory_annotations() -> None:
    with listing_server(*TOOLS) as server:
        service = ToolService([server])
        target = Target("tools:service", types.ModuleType("tools"), service)
        findings = [f for f in check_target(target) if f.code == "contradictory-annotations"]
    assert [(f.tool, f.level, f.message) for f in findings] == [
        (
            "liar",
            "warning",
            "annotations contradict: readOnlyHint and destructiveHint are both true",
        )
    ]
    assert ToolAnnotations(read_only=True, idempotent=False).contradictions() == (
        "readOnlyHint is true but idempotentHint is false",
    )
