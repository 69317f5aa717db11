"""Progress of calls in flight: `ToolContext.report_progress` and an MCP server's
`notifications/progress` become `ToolProgressEvent`s in `stream`/`astream` (between the call's
`ToolCallEvent` and its `ToolResultEvent`; live under `astream`) and `agentforge.tool.progress`
span events when instrumented. The MCP server is tests/mcp_fixture_server.py over stdio."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any, TextIO

import pytest

pytest.importorskip("mcp")

from test_instrument import Telemetry
from test_mcp import FIXTURE_SERVER
from test_mcp import errlog as errlog  # the fixture

import agentforge_typed as af
from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatRequestParameters,
    FunctionModel,
    MCPServer,
    ToolCall,
    ToolCallEvent,
    ToolContext,
    ToolProgressEvent,
    ToolResultEvent,
    ToolService,
    tool,
)
from agentforge_typed.tools.mcp._session import Revision

COUNT = ToolCall(id="c1", name="count", arguments='{"steps": 3, "pause": 0.3}')


def calls_once(*calls: ToolCall) -> FunctionModel:
    def reply(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        if any(m.role == "tool" for m in messages):
            return AiMessage(text="done")
        return AiMessage(tool_calls=list(calls))

    return FunctionModel(reply)


def tool_events(events: Sequence[Any]) -> list[tuple[str, Any]]:
    shown: list[tuple[str, Any]] = []
    for event in events:
        if isinstance(event, ToolCallEvent):
            shown.append(("call", event.call.name))
        elif isinstance(event, ToolProgressEvent):
            shown.append(("progress", (event.call.id, event.progress, event.total, event.message)))
        elif isinstance(event, ToolResultEvent):
            shown.append(("result", event.execution.result.text))
    return shown


EXPECTED = [
    ("call", "count"),
    ("progress", ("c1", 1.0, 3.0, "step 1")),
    ("progress", ("c1", 2.0, 3.0, "step 2")),
    ("progress", ("c1", 3.0, 3.0, "step 3")),
    ("result", "counted to 3"),
]


@pytest.mark.parametrize("revision", ["newest", "handshake"])
def test_an_mcp_servers_progress_appears_in_stream(errlog: TextIO, revision: Revision) -> None:
    server = MCPServer.stdio(sys.executable, [FIXTURE_SERVER], errlog=errlog, revision=revision)
    with server:
        events = list(ToolService([server]).stream(calls_once(COUNT), "count"))
    assert tool_events(events) == EXPECTED


async def test_an_mcp_servers_progress_appears_in_astream_as_it_comes(errlog: TextIO) -> None:
    arrived: list[tuple[float, Any]] = []
    async with MCPServer.stdio(sys.executable, [FIXTURE_SERVER], errlog=errlog) as server:
        async for event in ToolService([server]).astream(calls_once(COUNT), "count"):
            arrived.append((time.monotonic(), event))
    assert tool_events([event for _, event in arrived]) == EXPECTED
    first = next(at for at, event in arrived if isinstance(event, ToolProgressEvent))
    result = next(at for at, event in arrived if isinstance(event, ToolResultEvent))
    assert result - first > 0.4  # two pauses later: yielded live, not when the call ended


@tool
async def convert(ctx: ToolContext[None], files: int) -> str:
    """Convert files, reporting each."""
    for done in range(1, files + 1):
        ctx.report_progress(done, files, f"converted file {done}")
        await asyncio.sleep(0)
    return "converted"


async def test_a_tool_reports_its_own_progress() -> None:
    call = ToolCall(id="c1", name="convert", arguments='{"files": 2}')
    events = [e async for e in ToolService([convert]).astream(calls_once(call), "go")]
    assert tool_events(events) == [
        ("call", "convert"),
        ("progress", ("c1", 1, 2, "converted file 1")),
        ("progress", ("c1", 2, 2, "converted file 2")),
        ("result", "converted"),
    ]
    # Without anyone watching, reporting does nothing.
    result = await ToolService([convert]).achat(calls_once(call), "go")
    assert result.tool_executions[0].result.text == "converted"


@pytest.fixture
def otel() -> Iterator[Telemetry]:
    telemetry = Telemetry()
    with af.instrument(telemetry.tracer_provider, meter_provider=telemetry.meter_provider):
        yield telemetry


def test_progress_becomes_span_events_when_instrumented(errlog: TextIO, otel: Telemetry) -> None:
    with MCPServer.stdio(sys.executable, [FIXTURE_SERVER], errlog=errlog) as server:
        ToolService([server]).chat(calls_once(COUNT), "count")
    (span,) = otel.named("execute_tool")
    events = [(e.name, dict(e.attributes or {})) for e in span.events]
    assert events == [
        (
            "agentforge.tool.progress",
            {"agentforge.tool.progress": p, "agentforge.tool.progress.total": 3.0},
        )
        for p in (1.0, 2.0, 3.0)
    ]
    times = [e.timestamp for e in span.events]
    assert span.start_time is not None and span.end_time is not None
    assert span.start_time <= times[0] < times[1] < times[2] <= span.end_time
