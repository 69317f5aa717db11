"""What a run registers with an MCP server ends with it: a run that is cancelled (task
cancellation under `achat`/`astream`, `KeyboardInterrupt` in `chat`/`stream`) cancels its
requests, the server told so (`notifications/cancelled`); a run that ends without its result
drops the question it paused on; a paused question never answered is forgotten after its TTL;
and none of that piles up on the server: abandoned calls never make later questions declined.

Real servers: tests/mcp_fixture_server.py over stdio (its `hang` tool records its
cancellation), and the SDK's low-level `Server` in this process (`Waiting`)."""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

import pytest

pytest.importorskip("mcp")

import anyio
from mcp.server.lowlevel import Server
from mcp.types import CallToolResult, ListToolsResult, TextContent, Tool
from mcp_memory import in_memory
from test_mcp import FIXTURE_SERVER
from test_mcp import errlog as errlog  # the fixture
from test_mcp_resilience import wait_for

from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatRequestParameters,
    ElicitationAnswer,
    FinalResultEvent,
    FunctionModel,
    MCPServer,
    ToolCall,
    ToolExecution,
    ToolResultEvent,
    ToolResultMessage,
    ToolService,
)
from agentforge_typed.tools._scope import _REGISTRY
from agentforge_typed.tools.mcp._session import Revision

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGALRM")

NAME_SCHEMA: Any = {"type": "object", "properties": {"name": {"type": "string"}}}


def calls(*made: tuple[str, str, str]) -> FunctionModel:
    """A model that makes the calls `made` (id, tool, arguments) in one round, then says what
    the last result was."""

    def reply(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        results = [m for m in messages if isinstance(m, ToolResultMessage)]
        if results:
            return AiMessage(text=f"the tool said: {results[-1].text}")
        return AiMessage(tool_calls=[ToolCall(id=i, name=n, arguments=a) for i, n, a in made])

    return FunctionModel(reply)


def kept(conversation_id: str | None) -> int:
    assert conversation_id is not None
    """How many entries `conversation_id` keeps (after the registry dropped the expired)."""
    dropped: list[Callable[[], object]] = []
    with _REGISTRY.lock:
        _REGISTRY.expire(time.monotonic(), dropped)
        entries = _REGISTRY.conversations.get(conversation_id)
    for drop in dropped:
        drop()
    return 0 if entries is None else len(entries)


def fixture(errlog: TextIO, revision: Revision = "handshake", **options: Any) -> MCPServer:
    return MCPServer.stdio(
        sys.executable, [FIXTURE_SERVER], errlog=errlog, revision=revision, **options
    )


def hang(marker: Path) -> FunctionModel:
    return calls(("c1", "hang", f'{{"marker": "{marker}"}}'))


# -- a cancelled run cancels its requests ------------------------------------------------------


@pytest.mark.parametrize("driver", ["achat", "astream"])
@pytest.mark.parametrize(
    ("entered", "revision"),
    [("with", "handshake"), ("async with", "handshake"), ("with", "newest")],
)
async def test_cancelling_an_async_run_cancels_its_requests(
    errlog: TextIO, tmp_path: Path, driver: str, entered: str, revision: Revision
) -> None:
    # Before, the server's tool ran its full minute: the request went on without the run.
    marker = tmp_path / "hang"
    server = fixture(errlog, revision)

    async def run(service: ToolService[None]) -> Any:
        if driver == "achat":
            return await service.achat(hang(marker), "go")
        return [event async for event in service.astream(hang(marker), "go")]

    async def cancelled() -> None:
        service = ToolService([server])
        task = asyncio.ensure_future(run(service))
        await asyncio.to_thread(wait_for, marker, "started")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.to_thread(wait_for, marker, "cancelled")

    if entered == "with":
        with server:
            await cancelled()
    else:
        async with server:
            await cancelled()


@pytest.mark.parametrize("driver", ["chat", "stream"])
def test_a_keyboard_interrupt_in_a_blocking_run_cancels_its_requests(
    errlog: TextIO, tmp_path: Path, driver: str
) -> None:
    marker = tmp_path / "hang"

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        with fixture(errlog) as server:
            service = ToolService([server])
            signal.setitimer(signal.ITIMER_REAL, 1.5)  # the call is in flight by then
            with pytest.raises(KeyboardInterrupt):
                if driver == "chat":
                    service.chat(hang(marker), "go")
                else:
                    list(service.stream(hang(marker), "go"))
            wait_for(marker, "cancelled")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# -- nothing piles up --------------------------------------------------------------------------


class Waiting:
    """A server of a handshake revision: `wait` sleeps `seconds` (counting the calls that start
    and those cancelled), `ask` asks the user's name mid-call."""

    def __init__(self) -> None:
        self.started = self.cancelled = 0

    async def list_tools(self, context: Any, params: Any) -> ListToolsResult:
        seconds = {"type": "object", "properties": {"seconds": {"type": "number"}}}
        return ListToolsResult(
            tools=[
                Tool(name="wait", input_schema=seconds),
                Tool(name="ask", input_schema={"type": "object"}),
            ]
        )

    async def call_tool(self, context: Any, params: Any) -> CallToolResult:
        if params.name == "wait":
            self.started += 1
            try:
                await anyio.sleep((params.arguments or {})["seconds"])
            except anyio.get_cancelled_exc_class():
                self.cancelled += 1
                raise
            return CallToolResult(content=[TextContent(type="text", text="waited")])
        answer = await context.session.elicit_form(
            "Name?", NAME_SCHEMA, related_request_id=context.request_id
        )
        return CallToolResult(content=[TextContent(type="text", text=f"answer: {answer.action}")])

    def server(self, **options: Any) -> MCPServer:
        served = Server("waiting", on_list_tools=self.list_tools, on_call_tool=self.call_tool)
        return in_memory(served, label="waiting", revision="handshake", **options)


async def until(condition: Any, within: float = 30.0) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def test_a_hundred_cancelled_runs_leave_nothing_that_declines_later_questions() -> None:
    # Before, a cancelled run's call went on, and stayed among the server's open calls once it
    # ended: past 100 of them, every later question of the server was declined.
    waiting = Waiting()
    async with waiting.server() as server:
        service = ToolService([server])
        # Long enough that no call ends before it is cancelled, however slowly the 101 start.
        runs = [
            asyncio.ensure_future(service.achat(calls((f"c{i}", "wait", '{"seconds": 60}')), "go"))
            for i in range(101)
        ]
        await until(lambda: waiting.started == 101)
        for run in runs:
            run.cancel()
        await asyncio.gather(*runs, return_exceptions=True)
        await until(lambda: waiting.cancelled == 101)  # the server was told, each time
        paused = await service.achat(calls(("c1", "ask", "{}")), "who am I?")
        assert [p.reason for p in paused.pending] == ["elicitation"]
        answer = ElicitationAnswer({"name": "Ada"})
        done = await service.achat(calls(), paused.messages, approvals={"c1": answer})
    assert done.text == "the tool said: answer: accept"
    assert kept(paused.conversation_id) == 0


async def test_a_paused_question_never_answered_is_forgotten_after_its_ttl() -> None:
    # Mid-call, the question waits `elicitation_timeout`, the call then has its `timeout` to end
    # (a late answer reads how), and a second later nothing of it is left.
    waiting = Waiting()
    async with waiting.server(elicitation_timeout=0.3, timeout=0.5) as server:
        service = ToolService([server])
        paused = await service.achat(calls(("c1", "ask", "{}")), "who am I?")
        counts = [kept(paused.conversation_id)]
        await asyncio.sleep(0.6)  # past elicitation_timeout: the server is told `cancel`
        counts.append(kept(paused.conversation_id))
        await asyncio.sleep(1.5)  # past elicitation_timeout + timeout + 1 s
        counts.append(kept(paused.conversation_id))
        late = ElicitationAnswer({"name": "Late"})
        done = await service.achat(calls(), paused.messages, approvals={"c1": late})
    assert done.tool_executions[0].result.text.startswith(
        "Tool `ask` failed: the server's question is no longer open"
    )
    assert counts == [1, 1, 0]


@pytest.mark.parametrize("revision", ["newest", "handshake"])
def test_a_stream_closed_before_its_result_drops_the_question_it_paused_on(
    errlog: TextIO, revision: Revision
) -> None:
    # Two calls in a round: the first pauses on a question, the reader stops at its result.
    with fixture(errlog, revision) as server:
        service = ToolService([server])
        model = calls(("c1", "ask", "{}"), ("c2", "add", '{"a": 1, "b": 2}'))
        events = service.stream(model, "go", conversation_id="closed")
        for event in events:
            if isinstance(event, ToolResultEvent):
                break
        assert kept("closed") == 1
        events.close()
        assert kept("closed") == 0
        # A run that ends with its result leaves the question it paused on.
        paused = list(service.stream(model, "go", conversation_id="finished"))[-1]
        assert isinstance(paused, FinalResultEvent)
        assert [p.call.id for p in paused.result.pending] == ["c1"]
        assert kept("finished") == 1


@pytest.mark.parametrize("revision", ["newest", "handshake"])
async def test_a_run_that_fails_after_pausing_drops_the_question(
    errlog: TextIO, revision: Revision
) -> None:
    # A hook raises on the paused call's execution: the run fails with its history, and the
    # question its call paused on is not left waiting on the server.
    def audit(execution: ToolExecution) -> None:
        raise RuntimeError(f"audit failed on {execution.call.id}")

    with fixture(errlog, revision) as server:
        service = ToolService([server], after_tool_call=audit)
        with pytest.raises(RuntimeError, match="audit failed on c1"):
            await service.achat(calls(("c1", "ask", "{}")), "go", conversation_id="failed")
        assert kept("failed") == 0


@pytest.fixture(autouse=True)
def _forget() -> Iterator[None]:
    yield
    for drop in _REGISTRY.clear():
        drop()
