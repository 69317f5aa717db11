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
    FakeModel,
    PendingCall,
    ToolChatResult,
    ToolFailed,
    ToolService,
)
from agentforge_typed.temporal import (
    ActivityOptions,
    AgentForgePlugin,
    Decisions,
    TemporalToolService,
    installed_binary,
)


class Booking(BaseModel):
    table: int


durable = TemporalToolService(
    ToolService(),
    FakeModel(),
    name="dinner",
    model_options=ActivityOptions(start_to_close_timeout=timedelta(minutes=1)),
    tool_options={"book": ActivityOptions(heartbeat_timeout=timedelta(seconds=10))},
    deps_type=Booking,
)
assert_type(durable.activities, list[Callable[..., Any]])
assert_type(installed_binary("temporal"), str | None)
plugin = AgentForgePlugin(passthrough_modules=["dinner"])


async def workflow_code() -> None:
    assert_type(await durable.chat("Book a table"), ToolChatResult[None])
    assert_type(await durable.chat("Book a table", output_type=Booking), ToolChatResult[Booking])
    await durable.chat("Book a table", deps=Booking(table=1), conversation_id="c-1")
    await durable.chat(
        "Book a table",
        approvals={"c1": True, "c2": "too dear", "c3": Approved(arguments={"table": 2})},
        external_results={"c4": {"ok": True}, "c5": ToolFailed("offline")},
        approval_timeout=timedelta(hours=1),
    )


async def client_code(handle: WorkflowHandle[Any, str]) -> None:
    assert_type(await durable.pending(handle), list[PendingCall])
    assert_type(await durable.decide(handle, approvals={"c1": False}), list[str])
    assert_type(Decisions.of(external_results={"c4": 1}), Decisions)
    await durable.decide(handle, {"c1": True})  # type: ignore[call-arg]
    await durable.chat("Book a table", approval_timeout=60)  # type: ignore[arg-type]


TemporalToolService(ToolService(), FakeModel())  # type: ignore[call-arg]
ActivityOptions(start_to_close_timeout=60)  # type: ignore[arg-type]
installed_binary("temporalite")  # type: ignore[arg-type]
