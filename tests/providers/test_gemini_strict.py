"""Gemini and `strict_schema` tools: a request offering one, where the model may choose, asks for
the `VALIDATED` function-calling mode (https://ai.google.dev/gemini-api/docs/function-calling,
"Function calling modes": calls or text, and the calls adhere to their schemas); a forced choice
keeps its own mode, and a request without strict tools sends no `toolConfig`."""

from __future__ import annotations

from typing import Any

import pytest

from agentforge_typed import ChatRequestParameters, ToolChoice, UserMessage, tool
from agentforge_typed.providers._gemini_wire import build_payload


@tool(strict_schema=True)
def refund(order_id: str, cents: int) -> str:
    """Refund an order."""
    return "ok"


@tool
def lookup(order_id: str) -> str:
    """Look an order up."""
    return "ok"


def _tool_config(*tools: Any, choice: ToolChoice | str | None = None) -> Any:
    parameters = ChatRequestParameters(
        model="gemini-2.5-flash",
        tools=[t.specification for t in tools],
        tool_choice=choice,
    )
    return build_payload([UserMessage(content="refund 7")], parameters).get("toolConfig")


@pytest.mark.parametrize("choice", [None, ToolChoice.AUTO])
def test_a_strict_tool_makes_a_free_choice_validated(choice: ToolChoice | None) -> None:
    assert _tool_config(lookup, refund, choice=choice) == {
        "functionCallingConfig": {"mode": "VALIDATED"}
    }


def test_without_a_strict_tool_nothing_changes() -> None:
    assert _tool_config(lookup) is None
    assert _tool_config(lookup, choice=ToolChoice.AUTO) == {
        "functionCallingConfig": {"mode": "AUTO"}
    }


def test_a_forced_or_refused_choice_keeps_its_mode() -> None:
    assert _tool_config(refund, choice=ToolChoice.REQUIRED) == {
        "functionCallingConfig": {"mode": "ANY"}
    }
    assert _tool_config(refund, choice="refund") == {
        "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["refund"]}
    }
    assert _tool_config(refund, choice=ToolChoice.NONE) == {
        "functionCallingConfig": {"mode": "NONE"}
    }
