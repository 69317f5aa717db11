"""Bounds, for what an MCP server (or a tool) sends of its own accord during a call or a session:
notifications it may flood (`tools/list_changed`, on the session or on a `subscriptions/listen`
stream, spaced or not; progress), listen streams it ends at once or never acknowledges, listings
that grow past `max_tools`, progress messages of any size, an HTTP refusal's challenge, the URL
of a page it sends the user to (a URL-mode question, mid-call or failing the call: taken up to
`MAX_URL_CHARS`, given up after `elicitation_timeout`), a task's id (up to `MAX_TASK_ID_CHARS`).
Each is capped or coalesced, never a cost that grows with what the server sends. Real servers: the
SDK's low-level `Server` over memory streams (`test_mcp_list_changed.Changing`),
tests/mcp_fixture_server.py and the scripted tests/mcp_raw_server.py over stdio."""

from __future__ import annotations

import asyncio
import itertools
import logging
import sys
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any, TextIO

import pytest
from http_server import Reply, ScriptedServer

pytest.importorskip("mcp")

import anyio
from mcp.server.lowlevel import Server
from mcp.server.subscriptions import SUBSCRIPTION_ID_META_KEY
from mcp.types import (
    CallToolResult,
    CreateMessageRequest,
    CreateMessageRequestParams,
    ElicitRequest,
    ElicitRequestFormParams,
    InputRequest,
    InputRequiredResult,
    ListToolsResult,
    SubscriptionsListenResult,
    TextContent,
    Tool,
)
from mcp_memory import in_memory
from test_instrument import Telemetry
from test_mcp import FIXTURE_SERVER
from test_mcp import errlog as errlog  # the fixture
from test_mcp_list_changed import Changing, _context, change
from test_mcp_list_changed import revision as revision  # the fixture
from test_mcp_url_and_tasks import RAN, Raw, calls, said
from test_progress import calls_once
from test_progress import otel as otel  # the fixture

from agentforge_typed import (
    ElicitationAnswer,
    MCPAuthorizationError,
    MCPServer,
    ToolCall,
    ToolContext,
    ToolProgressEvent,
    ToolService,
    tool,
)
from agentforge_typed._records import PendingResult
from agentforge_typed.loop._progress import MAX_MESSAGE_CHARS, MAX_PER_CALL, MAX_WAITING
from agentforge_typed.tools._scope import _REGISTRY, MAX_ENTRIES, Scope
from agentforge_typed.tools.mcp import _connection
from agentforge_typed.tools.mcp._questions import (
    MAX_INPUT_REQUESTS,
    MAX_INPUT_ROUNDS,
    MAX_SCHEMA_CHARS,
    MAX_STATE_CHARS,
    MAX_URL_CHARS,
    Desk,
)
from agentforge_typed.tools.mcp._session import Revision
from agentforge_typed.tools.mcp._tasks import MAX_TASK_ID_CHARS

pytestmark = pytest.mark.skipif(
    version("mcp").startswith("1."), reason="SDK 2's low-level `Server`"
)


def test_a_flood_of_notifications_costs_a_listing_or_two(revision: Revision) -> None:
    changing = Changing("old")
    changing.notices = 5000
    with changing.server(revision=revision) as server:
        (change_tool, _) = server.tools()
        listed = changing.listings
        started = time.monotonic()
        result = change_tool.execute(change(["new"]), _context())
        assert result.text == "ran change"
        assert [t.name for t in server.tools()] == ["change", "new"]
        spread = time.monotonic() - started
    # A listing or two, and at most one more per `RELIST_INTERVAL` the flood lasted (on a loaded
    # machine the server takes seconds to send 5,000 notices): never one per notice.
    assert 1 <= changing.listings - listed <= 3 + int(spread / _connection.RELIST_INTERVAL)


def test_spaced_notifications_cost_a_listing_a_second_at_most(
    revision: Revision, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_connection, "RELIST_INTERVAL", 0.4)
    changing = Changing("old")
    with changing.server(revision=revision) as server:
        (change_tool, _) = server.tools()
        for names in (["a"], ["b"], ["c"]):  # each call waits for the listing it set off
            assert change_tool.execute(change(names), _context()).text == "ran change"
        assert [t.name for t in server.tools()] == ["change", "c"]
    relisted = changing.listed_at[1:]
    assert len(relisted) == 3
    # Seen by the server: each request's way there varies by some milliseconds under load.
    assert min(b - a for a, b in itertools.pairwise(relisted)) >= 0.4 - 0.05


def test_a_server_that_ends_every_subscription_is_listened_to_less_and_less(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_connection, "RECONNECT_FIRST_DELAY", 0.1)
    monkeypatch.setattr(_connection, "RECONNECT_MAX_DELAY", 0.4)
    changing = Changing("old")
    served = changing.listen
    streams: list[float] = []  # when each was asked for

    async def close_at_once(context: Any, params: Any) -> Any:
        streams.append(time.monotonic())
        with anyio.move_on_after(0.01):  # acknowledged, then closed gracefully
            await served(context, params)
        return SubscriptionsListenResult(_meta={SUBSCRIPTION_ID_META_KEY: context.request_id})

    changing.listen = close_at_once
    with caplog.at_level(logging.WARNING, logger="agentforge_typed.mcp"):
        with changing.server() as server:
            time.sleep(1.5)
            (change_tool, _) = server.tools()
            assert change_tool.execute(change(["new"]), _context()).text == "ran change"
    # 0.1, 0.2, 0.4, 0.4, ... seconds after the last one ended: a stream and a listing each.
    gaps = [later - earlier for earlier, later in itertools.pairwise(streams)]
    assert len(gaps) >= 3
    backoff = [min(0.1 * 2**step, 0.4) for step in range(len(gaps))]
    assert all(gap >= least for gap, least in zip(gaps, backoff, strict=True)), gaps
    assert changing.listings <= len(streams) + 1
    said = [r.getMessage() for r in caplog.records if r.name == "agentforge_typed.mcp"]
    assert [message.rsplit(" in ", 1)[1] for message in said][:4] == ["0.1 s", "0.2 s"] + [
        "0.4 s"
    ] * 2
    assert said[0] == (
        "MCP server changing: the subscription to its tool changes ended (the server closed "
        "it); listening again in 0.1 s"
    )


def test_a_subscription_never_acknowledged_is_bounded_by_connect_timeout() -> None:
    changing = Changing("old")

    async def never_acknowledge(context: Any, params: Any) -> Any:
        await anyio.sleep_forever()

    changing.listen = never_acknowledge
    started = time.monotonic()
    with pytest.raises(TimeoutError) as raised, changing.server(connect_timeout=0.5):
        pass
    assert time.monotonic() - started < 5
    assert str(raised.value) == (
        "MCP server 'changing' did not initialize and list its tools within 0.5 seconds "
        "(connect_timeout)"
    )


def test_a_changed_list_over_max_tools_keeps_the_old_one(
    caplog: pytest.LogCaptureFixture, revision: Revision
) -> None:
    changing = Changing("old")
    with caplog.at_level(logging.WARNING, logger="agentforge_typed.mcp"):
        with changing.server(max_tools=3, revision=revision) as server:
            (change_tool, _) = server.tools()
            change_tool.execute(change(["a", "b", "c"]), _context())
            assert [t.name for t in server.tools()] == ["change", "old"]
            assert server.tools_version == 1
    assert caplog.messages == [
        "MCP server changing: listing its changed tools failed; keeping the old list: "
        "ValueError: MCP server 'changing' lists more than max_tools=3 tools; pass a larger "
        "max_tools= to MCPServer to accept them"
    ]


@tool
def chatty(ctx: ToolContext[None], reports: int) -> str:
    """Report progress without end, each with a huge message."""
    huge = "x" * 1_000_000
    for step in range(reports):
        ctx.report_progress(step, None, huge)
    return "done"


def test_a_flood_of_progress_keeps_the_latest_events_with_cut_messages() -> None:
    call = ToolCall(id="c1", name="chatty", arguments='{"reports": 20000}')
    events = list(ToolService([chatty]).stream(calls_once(call), "go"))
    progress = [e for e in events if isinstance(e, ToolProgressEvent)]
    assert len(progress) == MAX_WAITING
    assert [e.progress for e in progress[:2]] == [20000 - MAX_WAITING, 20001 - MAX_WAITING]
    assert {len(e.message or "") for e in progress} == {MAX_MESSAGE_CHARS}
    assert progress[0].message is not None and progress[0].message.endswith("x…")


def test_a_flood_of_progress_keeps_the_latest_span_events(otel: Telemetry) -> None:
    call = ToolCall(id="c1", name="chatty", arguments='{"reports": 5000}')
    ToolService([chatty]).chat(calls_once(call), "go")
    (span,) = otel.named("execute_tool")
    assert len(span.events) == MAX_PER_CALL
    assert span.events[-1].attributes == {"agentforge.tool.progress": 4999}


async def test_a_server_flooding_a_slow_consumer_with_progress_is_bounded(errlog: TextIO) -> None:
    call = ToolCall(id="c1", name="count", arguments='{"steps": 3000, "pause": 0}')
    progress: list[ToolProgressEvent] = []
    async with MCPServer.stdio(sys.executable, [FIXTURE_SERVER], errlog=errlog) as server:
        async for event in ToolService([server]).astream(calls_once(call), "count"):
            if isinstance(event, ToolProgressEvent):
                progress.append(event)
                if len(progress) == 1:
                    # The server goes on (3,000 steps take it well under 10 seconds, even on a
                    # loaded machine); what waits for us meanwhile is capped.
                    await asyncio.sleep(10)
    assert len(progress) <= MAX_WAITING + 10  # the first few, taken before the pause
    assert progress[-1].progress == 3000


@pytest.mark.parametrize("revision", ["newest", "handshake"])
def test_a_question_with_a_schema_over_the_cap_is_declined(
    errlog: TextIO, caplog: pytest.LogCaptureFixture, revision: Revision
) -> None:
    ask = ToolCall(id="c1", name="ask", arguments='{"big": true}')
    server = MCPServer.stdio(sys.executable, [FIXTURE_SERVER], errlog=errlog, revision=revision)
    with caplog.at_level(logging.WARNING, logger="agentforge_typed.mcp"), server:
        result = ToolService([server]).chat(calls_once(ask), "go")
    assert result.pending == ()
    assert result.tool_executions[0].result.text == "answer: decline"
    (declined,) = [m for m in caplog.messages if "declined" in m]
    assert declined.endswith(f", over {MAX_SCHEMA_CHARS}")


@pytest.mark.parametrize(
    ("revision", "said"),
    [
        # Mid-call, the request waits: the server is told `cancel`, and its call ends.
        ("handshake", "answer: cancel"),
        # In a result, nothing waits: the question is forgotten.
        ("newest", "Tool `ask` failed: the server's question is no longer open"),
    ],
)
def test_an_unanswered_question_is_given_up_after_elicitation_timeout(
    errlog: TextIO, revision: Revision, said: str
) -> None:
    ask = ToolCall(id="c1", name="ask", arguments="{}")
    server = MCPServer.stdio(
        sys.executable,
        [FIXTURE_SERVER],
        errlog=errlog,
        elicitation_timeout=0.5,
        revision=revision,
    )
    with server:
        service = ToolService([server])
        paused = service.chat(calls_once(ask), "go")
        assert [p.reason for p in paused.pending] == ["elicitation"]
        time.sleep(1.0)
        late = ElicitationAnswer({"name": "Late"})
        done = service.chat(calls_once(ask), paused.messages, approvals={"c1": late})
    assert done.tool_executions[0].result.text.startswith(said)


class Asking:
    """A server of the stateless revision whose `ask` tool answers `input_required` as `mode`
    says: a state over the cap, questions without end, too many at once, a sampling request, or
    its state alone `rounds` times before a result. It counts the calls it gets."""

    def __init__(self, mode: str, rounds: int = 0) -> None:
        self.mode, self.rounds, self.calls = mode, rounds, 0

    async def list_tools(self, context: Any, params: Any) -> ListToolsResult:
        return ListToolsResult(tools=[Tool(name="ask", input_schema={"type": "object"})])

    async def call_tool(self, context: Any, params: Any) -> CallToolResult | InputRequiredResult:
        self.calls += 1
        question = ElicitRequest(
            params=ElicitRequestFormParams(message="Name?", requested_schema=NAME_SCHEMA)
        )
        if self.mode == "huge-state":
            return InputRequiredResult(request_state="s" * (MAX_STATE_CHARS + 1))
        if self.mode == "forever":
            return InputRequiredResult(input_requests={"q": question}, request_state="s")
        if self.mode == "many":
            many: dict[str, InputRequest] = {
                f"q{i}": question for i in range(MAX_INPUT_REQUESTS + 1)
            }
            return InputRequiredResult(input_requests=many, request_state="s")
        if self.mode == "sampling":
            sampling = CreateMessageRequest(
                params=CreateMessageRequestParams(messages=[], max_tokens=5)
            )
            return InputRequiredResult(input_requests={"s": sampling})
        if self.calls <= self.rounds:  # "state-only"
            return InputRequiredResult(request_state=f"round {self.calls}")
        text = f"done with {params.request_state}"
        return CallToolResult(content=[TextContent(type="text", text=text)])

    def server(self) -> MCPServer:
        served = Server("asking", on_list_tools=self.list_tools, on_call_tool=self.call_tool)
        return in_memory(served, label="asking")


NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}}


@pytest.mark.parametrize(
    ("mode", "calls", "said"),
    [
        ("huge-state", 1, f"the server's request state is over {MAX_STATE_CHARS:,} characters"),
        ("forever", 1 + MAX_INPUT_ROUNDS, "the server answered input_required more than 10 times"),
        ("many", 1, "the server asked more than 32 questions at once"),
        ("sampling", 1, "the server asked for 'sampling/createMessage', which this client does "),
    ],
)
async def test_what_a_stateless_server_asks_for_is_bounded(
    mode: str, calls: int, said: str
) -> None:
    asking = Asking(mode)
    async with asking.server() as server:
        assert server.protocol_version == "2026-07-28"
        (ask,) = server.tools()
        result = await ask.aexecute(ToolCall(id="c1", name="ask", arguments="{}"), _context())
    assert result.is_error and said in result.text
    assert asking.calls == calls


async def test_a_server_that_only_wants_its_state_back_gets_it_after_a_short_backoff() -> None:
    asking = Asking("state-only", rounds=4)
    async with asking.server() as server:
        (ask,) = server.tools()
        started = time.monotonic()
        result = await ask.aexecute(ToolCall(id="c1", name="ask", arguments="{}"), _context())
    assert result.text == "done with round 4"
    assert 0.05 + 0.1 + 0.2 + 0.25 <= time.monotonic() - started < 3


def test_keyed_questions_past_the_cap_still_pause_and_the_oldest_is_forgotten() -> None:
    # The cap is a conversation's: another conversation's questions are not forgotten for it.
    desk = Desk("asking", timeout=5, answer_timeout=600)
    question = {
        "method": "elicitation/create",
        "params": {"message": "Name?", "requestedSchema": NAME_SCHEMA},
    }
    other = ToolCall(id="c0", name="ask", arguments="{}")
    required = {"inputRequests": {"q": question}, "requestState": "other"}
    desk.settle(other, "ask", required, may_pause=True, scope=Scope("other"))
    calls = [ToolCall(id=f"c{i}", name="ask", arguments="{}") for i in range(MAX_ENTRIES + 1)]
    try:
        for call in calls:
            required = {"inputRequests": {"q": question}, "requestState": call.id}
            paused = desk.settle(call, "ask", required, may_pause=True, scope=Scope("many"))
            assert isinstance(paused, PendingResult) and paused.pending is not None
        held = _REGISTRY.conversations["many"]
        assert len(held) == MAX_ENTRIES
        assert (desk, "asked", "c0", "ask", "{}") not in held
        assert (desk, "asked", "c100", "ask", "{}") in held
        assert (desk, "asked", "c0", "ask", "{}") in _REGISTRY.conversations["other"]
    finally:
        _REGISTRY.clear()


async def test_a_refusal_s_challenge_is_quoted_cut_short(http_server: ScriptedServer) -> None:
    """A server's 403 challenge is quoted in `MCPAuthorizationError`, each part cut to 200
    characters: a 100,000-character challenge makes a message of a few hundred."""
    scope = "s" * 50_000
    challenge = {"www-authenticate": f'Bearer error="{scope}", scope="{scope}"'}
    http_server.route("*", Reply(403, headers=challenge))  # every request refused
    url = f"{http_server.url}/mcp"
    with pytest.raises(MCPAuthorizationError) as refused:
        async with MCPServer.http(url, revision="handshake", connect_timeout=10):
            pass
    cut = "s" * 200
    assert str(refused.value) == (
        f"MCP server {url!r} answered HTTP 403 Forbidden (error={cut!r}, scope={cut!r}): the "
        "credentials do not allow this request"
    )


# -- URL-mode questions and task-only tools ------------------------------------------------------

_PAGE = "https://auth.example.com/consent?pad="


def _page(length: int) -> str:
    return _PAGE + "a" * (length - len(_PAGE))


@pytest.mark.parametrize("asked", ["mid-call", "failing the call"])
@pytest.mark.parametrize("over", [0, 1])
def test_a_url_question_s_url_is_taken_up_to_its_cap(tmp_path: Path, asked: str, over: int) -> None:
    url = _page(MAX_URL_CHARS + over)
    question = {"mode": "url", "message": "Sign in", "url": url, "elicitationId": "e-1"}
    if asked == "mid-call":
        steps: list[dict[str, Any]] = [{"ask": question}]
    else:
        data = {"elicitations": [question]}
        failed = {"code": -32042, "message": "URL elicitation required", "data": data}
        steps = [{"error": failed}, {"result": RAN}]
    raw = Raw(tmp_path, {"go": steps})
    with raw.server() as mcp:
        service = ToolService([mcp])
        paused = service.chat(calls(), "go")
        if over:  # declined at once: the server hears it, or the call ends saying so
            assert paused.pending == ()
            shown = said(paused)
            assert shown == '{"action": "decline"}' or "sent none this client can show" in shown
            return
        (pending,) = paused.pending
        assert pending.elicitation is not None and pending.elicitation.url == url
        done = service.chat(calls(), paused.messages, approvals={"c1": ElicitationAnswer()})
    assert said(done) in ('{"action": "accept"}', "ran")


def test_an_unanswered_url_question_is_given_up_after_elicitation_timeout(
    errlog: TextIO,
) -> None:
    visit = ToolCall(id="c1", name="visit", arguments="{}")
    server = MCPServer.stdio(
        sys.executable,
        [FIXTURE_SERVER],
        errlog=errlog,
        elicitation_timeout=0.5,
        revision="handshake",
    )
    with server:
        service = ToolService([server])
        paused = service.chat(calls_once(visit), "go")
        (pending,) = paused.pending
        assert pending.elicitation is not None and pending.elicitation.url is not None
        time.sleep(1.0)
        done = service.chat(calls_once(visit), paused.messages, approvals={"c1": pending.answer()})
    # The server was told `cancel` when the wait ended; the late answer finds its call over.
    assert done.tool_executions[0].result.text == "visit: cancel"


@pytest.mark.parametrize("over", [0, 1])
def test_a_task_id_is_taken_up_to_its_cap(tmp_path: Path, over: int) -> None:
    task_id = "t" * (MAX_TASK_ID_CHARS + over)
    created = {"taskId": task_id, "status": "working", "ttl": 60_000, "pollInterval": 10}
    done_task = {**created, "status": "completed"}
    step = {"task": created, "polls": [done_task], "result": RAN}
    raw = Raw(tmp_path, {"research": [step]})
    with raw.server() as mcp:
        done = ToolService([mcp]).chat(calls("research", '{"topic": "x"}'), "go")
    if over:
        assert f"a task without an id of at most {MAX_TASK_ID_CHARS}" in said(done)
    else:
        assert said(done) == "ran"
