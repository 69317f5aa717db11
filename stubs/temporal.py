"""Static-typing contract of `TemporalToolService`: `chat` types its result like
`ToolService.achat`, and its options are typed."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from pydantic import BaseModel
from temporalio.client import WorkflowHandle
from typing_extensions import assert_type

from agentforge_typed import (
    Approved,
    ChatMessage,
    FakeModel,
    PendingCall,
    ToolChatResult,
    ToolFailed,
    ToolService,
)
from agentforge_typed.loop import FinishedChatResult, PausedChatResult
from agentforge_typed.temporal import (
    DEFAULT_MAX_PAYLOAD_BYTES,
    ActivityOptions,
    AgentForgePlugin,
    Decisions,
    PayloadTooLargeError,
    TemporalToolService,
    installed_binary,
)


class Booking(BaseModel):
    table: int


class Keyed(BaseModel):
    table: int
    token: str


async def unlock(booking: Booking) -> Keyed:
    return Keyed(table=booking.table, token="from the worker")


durable = TemporalToolService(
    ToolService(),
    FakeModel(),
    name="dinner",
    model_options=ActivityOptions(start_to_close_timeout=timedelta(minutes=1)),
    tool_options={"book": ActivityOptions(heartbeat_timeout=timedelta(seconds=10))},
    deps_type=Booking,
)
assert_type(durable.activities, list[Callable[..., Any]])
assert_type(durable.max_payload_bytes, int)
vaulted = TemporalToolService(
    ToolService(),
    FakeModel(),
    name="vault",
    deps_type=Booking,
    resolve_deps=unlock,
    max_payload_bytes=DEFAULT_MAX_PAYLOAD_BYTES // 2,
)
assert_type(installed_binary("temporal"), str | None)
plugin = AgentForgePlugin(passthrough_modules=["dinner"])


async def workflow_code() -> None:
    assert_type(await durable.chat("Book a table"), FinishedChatResult[None] | PausedChatResult[None])
    assert_type(await durable.chat("Book a table", output_type=Booking), FinishedChatResult[Booking] | PausedChatResult[Booking])
    await durable.chat("Book a table", deps=Booking(table=1), conversation_id="c-1")
    await durable.chat(
        "Book a table",
        approvals={"c1": True, "c2": "too dear", "c3": Approved(arguments={"table": 2})},
        external_results={"c4": {"ok": True}, "c5": ToolFailed("offline")},
        approval_timeout=timedelta(hours=1),
    )
    try:
        await durable.chat("Book a table")
    except PayloadTooLargeError as error:
        assert_type(error.carried, str)
        assert_type(error.size, int)
        assert_type(error.limit, int)
        assert_type(error.messages, tuple[ChatMessage, ...])


async def client_code(handle: WorkflowHandle[Any, str]) -> None:
    assert_type(await durable.pending(handle), list[PendingCall])
    assert_type(await durable.decide(handle, approvals={"c1": False}), list[str])
    assert_type(Decisions.of(external_results={"c4": 1}), Decisions)
    await durable.decide(handle, {"c1": True})  # type: ignore[call-arg]
    await durable.chat("Book a table", approval_timeout=60)  # type: ignore[arg-type]


TemporalToolService(ToolService(), FakeModel())  # type: ignore[call-arg]
TemporalToolService(ToolService(), FakeModel(), name="x", max_payload_bytes="2MB")  # type: ignore[arg-type]
ActivityOptions(start_to_close_timeout=60)  # type: ignore[arg-type]
installed_binary("temporalite")  # type: ignore[arg-type]
