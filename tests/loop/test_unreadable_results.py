"""A tool whose body ran but whose return value no text can be made of: the model is told that it
ran and that its result could not be read (never that it "failed", which invites calling a
state-changing tool again), the record says so (`error_kind == "unreadable_result"`), the value
stays for the program, and nothing runs the body again."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from loop_drivers import DRIVERS, drive

from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatRequestParameters,
    FunctionModel,
    SchemaTool,
    ToolCall,
    ToolContext,
    ToolResultMessage,
    ToolService,
    ToolSpecification,
    tool,
)

TAIL = "Its effects, if any, took place: do not call it again to get the result."

ledger: list[str] = []


def _receipt(amount: int) -> dict[str, Any]:
    """What the bodies return: a receipt that refers to itself, so no JSON can be made of it."""
    ledger.append(f"transfer {amount}")
    receipt: dict[str, Any] = {"amount": amount}
    receipt["self"] = receipt
    return receipt


@tool
def transfer(amount: int) -> dict[str, Any]:
    """Move money (a plain sync function: the fast path)."""
    return _receipt(amount)


@tool(name="transfer")
def transfer_with_context(amount: int, ctx: ToolContext[None]) -> dict[str, Any]:
    """Move money (a sync function with a context)."""
    return _receipt(amount)


@tool(name="transfer")
async def transfer_async(amount: int) -> dict[str, Any]:
    """Move money (an async function)."""
    return _receipt(amount)


def _refuse(value: Any) -> str:
    raise ValueError("no text for this")


@tool(name="transfer", result_converter=_refuse)
def transfer_converted(amount: int) -> dict[str, str]:
    """Move money (its own converter raises)."""
    _receipt(amount)
    return {"amount": str(amount)}


SPEC = ToolSpecification(
    name="transfer",
    description="Move money.",
    parameters={"type": "object", "properties": {"amount": {"type": "integer"}}},
)
transfer_declared = SchemaTool(SPEC, lambda arguments: _receipt(arguments["amount"]))

KINDS = {
    "sync": transfer,
    "context": transfer_with_context,
    "async": transfer_async,
    "converter": transfer_converted,
    "schema": transfer_declared,
}


def _once(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
    """Calls `transfer` once; then answers with what it read."""
    last = messages[-1]
    if isinstance(last, ToolResultMessage):
        return AiMessage(text=last.text)
    return AiMessage(tool_calls=[ToolCall(id="c1", name="transfer", arguments='{"amount": 5}')])


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("kind", list(KINDS))
def test_the_model_reads_that_the_tool_ran_and_its_result_could_not_be_read(
    kind: str, driver: str
) -> None:
    ledger.clear()
    handled: list[BaseException] = []

    def handler(error: BaseException, context: ToolContext[Any]) -> str:
        handled.append(error)
        return "the tool failed"

    service = ToolService([KINDS[kind]], execution_error_handler=handler)
    result = drive(driver, service, FunctionModel(_once), "pay bob 5")
    (execution,) = result.tool_executions
    assert ledger == ["transfer 5"]  # the body ran once
    assert (execution.failed, execution.result.error_kind) == (True, "unreadable_result")
    text = execution.result.text
    assert text.startswith("Tool `transfer` ran, but its result could not be read (")
    assert text.endswith(TAIL)
    assert "failed" not in text
    # What the model reads: the same text, marked as an error.
    (answer,) = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert (answer.text, answer.is_error) == (text, True)
    assert result.text == text
    # The tool raised nothing: the execution-error handler is not asked to word a failure.
    assert handled == []
    # The value stays for the program (a converter's failure keeps the returned value too).
    assert execution.result.value is not None
    assert execution.result.exception is not None


def test_an_external_result_that_cannot_be_read_says_the_call_ran() -> None:
    @tool(external=True)
    def open_page(url: str) -> str:
        """Opened by the client."""
        raise AssertionError("never runs here")

    def asks(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        if isinstance(messages[-1], ToolResultMessage):
            return AiMessage(text="done")
        return AiMessage(tool_calls=[ToolCall(id="c1", name="open_page", arguments='{"url": "x"}')])

    service = ToolService([open_page])
    paused = service.chat(FunctionModel(asks), "open x")
    opaque = object()
    resumed = service.chat(FunctionModel(asks), paused.messages, external_results={"c1": opaque})
    (execution,) = resumed.tool_executions
    assert execution.result.error_kind == "unreadable_result"
    assert execution.result.value is opaque
    assert execution.result.text.startswith(
        "Tool `open_page` ran, but its result could not be read (PydanticSerializationError: "
    )


def test_a_durable_result_over_the_payload_limit_says_the_tool_ran() -> None:
    temporal = pytest.importorskip("agentforge_typed.temporal")
    over = temporal.ToolActivityResult(text="x" * 100).bounded("dump", 50)
    assert (over.is_error, over.error_kind) == (True, "unreadable_result")
    assert over.text.startswith("Tool `dump` ran, but its result (")
