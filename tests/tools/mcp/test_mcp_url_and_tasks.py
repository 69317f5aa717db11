"""URL-mode questions and task-only tools (the 2025-11-25 revision), against a scripted raw
JSON-RPC server (tests/mcp_raw_server.py) that sends what an SDK-built server will not: URLs of
any scheme and length, `URLElicitationRequired` errors with any data, tasks in any status.

A URL-mode question pauses the run with its page (`Elicitation.url`); asked mid-call, the answer
(no content) goes to the waiting request; asked by failing the call (-32042), the call is sent
again once the user accepts. A task-only tool is called as a task: created, polled at the
server's interval (held in bounds), its result fetched, cancelled when its call stops waiting.
The reference server's URL-mode and task tools run end to end in test_mcp_everything.py."""

from __future__ import annotations

import hashlib
import json
import logging
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pydantic_core
import pytest

pytest.importorskip("mcp")

from test_mcp import CONTEXT, call

from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatRequestParameters,
    Elicitation,
    ElicitationAnswer,
    FunctionModel,
    MCPServer,
    ToolCall,
    ToolResultMessage,
    ToolService,
)
from agentforge_typed._identity import CallDigests
from agentforge_typed.tools.mcp._tasks import MAX_POLL_INTERVAL, MIN_POLL_INTERVAL, _interval

RAW_SERVER = str(Path(__file__).parents[2] / "mcp_raw_server.py")
URL = "https://auth.example.com/consent?flow=1"
TOOL = {"name": "go", "description": "Go.", "inputSchema": {"type": "object"}}
TOPIC = {"type": "object", "properties": {"topic": {"type": "string"}}}
TASK_TOOL = {"name": "research", "inputSchema": TOPIC, "execution": {"taskSupport": "required"}}
RAN = {"content": [{"type": "text", "text": "ran"}]}


def ask_url(url: str = URL, elicitation_id: Any = "e-1", **more: Any) -> dict[str, Any]:
    params = {"mode": "url", "message": "Sign in", "url": url, **more}
    if elicitation_id is not None:
        params["elicitationId"] = elicitation_id
    return {"ask": params}


def url_required(*elicitations: dict[str, Any]) -> dict[str, Any]:
    data = {"elicitations": list(elicitations)}
    return {"error": {"code": -32042, "message": "URL elicitation required", "data": data}}


def url_question(url: str = URL, elicitation_id: str = "e-2") -> dict[str, Any]:
    return {"mode": "url", "message": "Connect first", "url": url, "elicitationId": elicitation_id}


class Raw:
    """A scripted raw server and the requests it got."""

    def __init__(self, tmp_path: Path, calls: dict[str, Any], **script: Any) -> None:
        self.log = tmp_path / "requests.jsonl"
        tools = script.pop("tools", [TOOL, TASK_TOOL])
        self.script = {"tools": tools, "calls": calls, "log": str(self.log), **script}

    def server(self, **options: Any) -> MCPServer:
        options.setdefault("revision", "handshake")
        return MCPServer.stdio(sys.executable, [RAW_SERVER, json.dumps(self.script)], **options)

    def requests(self, method: str | None = None) -> list[dict[str, Any]]:
        lines = self.log.read_text().splitlines() if self.log.exists() else []
        sent = [json.loads(line) for line in lines]
        return [r for r in sent if method is None or r["method"] == method]


def calls(tool: str = "go", arguments: str = "{}") -> FunctionModel:
    def reply(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        results = [m for m in messages if isinstance(m, ToolResultMessage)]
        if results:
            return AiMessage(text=f"the tool said: {results[-1].text}")
        return AiMessage(tool_calls=[ToolCall(id="c1", name=tool, arguments=arguments)])

    return FunctionModel(reply)


def said(result: Any) -> str:
    text: str = result.final_response.ai_message.text
    return text.removeprefix("the tool said: ")


class Warnings:
    def __init__(self, caplog: pytest.LogCaptureFixture) -> None:
        self._caplog = caplog

    def __iter__(self) -> Iterator[str]:
        return iter(self._caplog.messages)


@pytest.fixture
def warnings(caplog: pytest.LogCaptureFixture) -> Iterator[Warnings]:
    with caplog.at_level(logging.WARNING, logger="agentforge_typed.mcp"):
        yield Warnings(caplog)


# -- URL mode, asked mid-call --------------------------------------------------------------------


@pytest.mark.parametrize("action", ["accept", "decline", "cancel"])
def test_a_url_question_asked_mid_call_pauses_and_its_answer_goes_to_the_server(
    tmp_path: Path, action: str
) -> None:
    raw = Raw(tmp_path, {"go": [ask_url()]})
    with raw.server() as mcp:
        service = ToolService([mcp])
        paused = service.chat(calls(), "go")
        (pending,) = paused.pending
        question = pending.elicitation
        assert question == Elicitation("Sign in", {}, url=URL, elicitation_id="e-1")
        answer = ElicitationAnswer(action=action)  # type: ignore[arg-type]
        done = service.chat(calls(), paused.messages, approvals={"c1": answer})
    assert json.loads(said(done)) == {"action": action}  # no content, ever


def test_an_answer_with_content_to_a_url_question_is_refused_before_anything_runs(
    tmp_path: Path,
) -> None:
    raw = Raw(tmp_path, {"go": [ask_url()]})
    with raw.server() as mcp:
        service = ToolService([mcp])
        paused = service.chat(calls(), "go")
        with pytest.raises(ValueError, match="URL-mode question carries no content"):
            service.chat(calls(), paused.messages, approvals={"c1": ElicitationAnswer({"a": 1})})
        done = service.chat(calls(), paused.messages, approvals={"c1": ElicitationAnswer()})
    assert json.loads(said(done)) == {"action": "accept"}


def test_an_answer_carrying_another_url_is_refused(tmp_path: Path) -> None:
    raw = Raw(tmp_path, {"go": [ask_url()]})
    with raw.server() as mcp:
        service = ToolService([mcp])
        paused = service.chat(calls(), "go")
        forged = Elicitation("Sign in", {}, url="https://evil.example/", elicitation_id="e-1")
        with pytest.raises(ValueError, match="answers another question than the one the call"):
            service.chat(calls(), paused.messages, approvals={"c1": forged.answer()})


@pytest.mark.parametrize(
    ("step", "why"),
    [
        (ask_url("javascript:alert(1)"), "is not an http or https URL"),
        (ask_url("file:///etc/passwd"), "is not an http or https URL"),
        (ask_url("https://"), "is not an http or https URL"),
        (ask_url("https://example.com/a b"), "is not an http or https URL"),
        (ask_url("https://example.com/\x1b[2J"), "is not an http or https URL"),
        (ask_url("https://example.com/" + "a" * 2_100), "over 2048"),
        (ask_url(elicitation_id="x" * 257), "no elicitationId of at most 256"),
        (ask_url(elicitation_id=""), "no elicitationId of at most 256"),
    ],
)
def test_a_url_question_this_client_cannot_show_is_declined_at_once(
    tmp_path: Path, warnings: Warnings, step: dict[str, Any], why: str
) -> None:
    raw = Raw(tmp_path, {"go": [step]})
    with raw.server() as mcp:
        done = ToolService([mcp]).chat(calls(), "go")
    assert done.pending == ()
    assert json.loads(said(done)) == {"action": "decline"}
    assert any("a question declined" in w and why in w for w in warnings), list(warnings)


@pytest.mark.parametrize(
    "step",
    [ask_url(elicitation_id=None), ask_url(elicitation_id=7), {"ask": {"mode": "video"}}],
)
def test_a_question_the_sdk_cannot_read_is_answered_with_its_error(
    tmp_path: Path, step: dict[str, Any]
) -> None:
    raw = Raw(tmp_path, {"go": [step]})
    with raw.server() as mcp:
        done = ToolService([mcp]).chat(calls(), "go")
    assert done.pending == ()
    assert json.loads(said(done))["error"]["code"] == -32602


# -- URL mode, asked by failing the call (-32042) ------------------------------------------------


def test_a_call_failed_for_a_url_question_pauses_and_is_sent_again_once_accepted(
    tmp_path: Path,
) -> None:
    raw = Raw(tmp_path, {"go": [url_required(url_question()), {"result": RAN}]})
    with raw.server() as mcp:
        service = ToolService([mcp])
        paused = service.chat(calls(), "go")
        (pending,) = paused.pending
        assert pending.elicitation == Elicitation(
            "Connect first", {}, url=URL, elicitation_id="e-2"
        )
        assert len(raw.requests("tools/call")) == 1
        done = service.chat(calls(), paused.messages, approvals={"c1": ElicitationAnswer()})
    assert said(done) == "ran"
    first, again = raw.requests("tools/call")
    assert first["params"] == again["params"]  # the same call, with no answer carried
    assert "inputResponses" not in again["params"]


@pytest.mark.parametrize(("action", "done"), [("decline", "declined"), ("cancel", "dismissed")])
def test_a_call_whose_url_question_is_refused_is_not_sent_again(
    tmp_path: Path, action: str, done: str
) -> None:
    raw = Raw(tmp_path, {"go": [url_required(url_question()), {"result": RAN}]})
    with raw.server() as mcp:
        service = ToolService([mcp])
        paused = service.chat(calls(), "go")
        answer = ElicitationAnswer(action=action)  # type: ignore[arg-type]
        result = service.chat(calls(), paused.messages, approvals={"c1": answer})
    assert said(result) == (
        "Tool `go` failed: the call was not sent again: the server required the user to go through a "
        f"page first, and the user {done} it ('Connect first')"
    )
    assert len(raw.requests("tools/call")) == 1


def test_a_url_question_of_a_failed_call_is_remembered_by_the_process_that_asked_only(
    tmp_path: Path,
) -> None:
    raw = Raw(tmp_path, {"go": [url_required(url_question()), {"result": RAN}]})
    with raw.server() as mcp:
        paused = ToolService([mcp]).chat(calls(), "go")
    with raw.server() as again:  # another session: nothing of the question is known there
        answer = paused.pending[0].answer()
        done = ToolService([again]).chat(calls(), paused.messages, approvals={"c1": answer})
    assert "the server's question is no longer open" in said(done)


@pytest.mark.parametrize(
    "data",
    [
        {"elicitations": []},
        {},
        {"elicitations": "no"},
        {"elicitations": [url_question("javascript:alert(1)")]},
        {"elicitations": [{"mode": "form", "message": "?", "requestedSchema": {"type": "object"}}]},
    ],
)
def test_a_failure_for_url_questions_none_of_which_can_be_shown_is_an_error(
    tmp_path: Path, data: dict[str, Any]
) -> None:
    error = {"code": -32042, "message": "URL elicitation required", "data": data}
    raw = Raw(tmp_path, {"go": [{"error": error}]})
    with raw.server() as mcp:
        done = ToolService([mcp]).chat(calls(), "go")
    assert said(done) == (
        "Tool `go` failed: the server requires the user to go through a page first (a URL-mode "
        "question), and sent none this client can show"
    )


async def test_a_call_failed_for_a_url_question_outside_a_run_is_an_error(tmp_path: Path) -> None:
    raw = Raw(tmp_path, {"go": [url_required(url_question())]})
    async with raw.server() as mcp:
        (tool,) = [t for t in mcp.tools() if t.name == "go"]
        result = await tool.aexecute(call("go", {}), CONTEXT)
    assert result.text == (
        "Tool `go` failed: the server requires the user to go through a page first (a URL-mode "
        "question), and the call cannot pause for it (it runs outside a ToolService run, with "
        "no way to pause for the user)"
    )


def test_a_question_s_digest_covers_its_url_and_is_unchanged_for_form_questions() -> None:
    tool_call = ToolCall(id="c1", name="go", arguments="{}")
    form = Elicitation("Name?", {"type": "object"})
    # As digests were before questions had URLs: a pause recorded then still resumes.
    before = ["agentforge-call/1", "elicitation", "conv", "c1", "go", "{}"]
    old_form = {"message": "Name?", "schema": {"type": "object"}, "key": None, "state": None}
    expected = hashlib.sha256(pydantic_core.to_json([*before, old_form])).hexdigest()
    assert CallDigests().of("elicitation", "conv", tool_call, form) == f"sha256:{expected}"
    page = Elicitation("Go", {}, url=URL, elicitation_id="e")
    other = Elicitation("Go", {}, url="https://evil.example/", elicitation_id="e")
    assert CallDigests().of("elicitation", "conv", tool_call, page) != CallDigests().of(
        "elicitation", "conv", tool_call, other
    )


# -- tasks ---------------------------------------------------------------------------------------


def task(status: str = "working", task_id: str = "t-1", **more: Any) -> dict[str, Any]:
    return {"taskId": task_id, "status": status, "ttl": 60_000, "pollInterval": 10, **more}


def test_a_task_only_tool_is_called_as_a_task_polled_and_its_result_fetched(
    tmp_path: Path,
) -> None:
    plan = {"task": task(), "polls": [task(), task(), task("completed")], "result": RAN}
    raw = Raw(tmp_path, {"research": [plan]})
    with raw.server() as mcp:
        (tool,) = [t for t in mcp.tools() if t.name == "research"]
        assert tool.as_task
        done = ToolService([mcp]).chat(calls("research", '{"topic": "x"}'), "go")
    assert said(done) == "ran"
    methods = [r["method"] for r in raw.requests() if r["method"] != "initialize"]
    assert methods == [
        "tools/list",
        "tools/call",
        "tasks/get",
        "tasks/get",
        "tasks/get",
        "tasks/result",
    ]
    (sent,) = raw.requests("tools/call")
    assert sent["params"] == {"name": "research", "arguments": {"topic": "x"}, "task": {}}
    assert [r["params"] for r in raw.requests("tasks/result")] == [{"taskId": "t-1"}]


def test_a_task_that_needs_input_has_its_result_fetched(tmp_path: Path) -> None:
    plan = {"task": task(), "polls": [task("input_required")], "result": RAN}
    raw = Raw(tmp_path, {"research": [plan]})
    with raw.server() as mcp:
        done = ToolService([mcp]).chat(calls("research"), "go")
    assert said(done) == "ran"
    assert len(raw.requests("tasks/result")) == 1


def test_a_task_whose_call_times_out_is_cancelled_on_the_server(tmp_path: Path) -> None:
    raw = Raw(tmp_path, {"research": [{"task": task(), "result": RAN}]})  # working for ever
    with raw.server(timeout=0.5) as mcp:
        started = time.monotonic()
        done = ToolService([mcp]).chat(calls("research"), "go")
        took = time.monotonic() - started
    assert "timed out" in said(done)
    assert took < 5
    assert [r["params"] for r in raw.requests("tasks/cancel")] == [{"taskId": "t-1"}]
    assert raw.requests("tasks/result") == []


@pytest.mark.parametrize(
    ("created", "polls", "why"),
    [
        (task(), [task("cancelled", statusMessage="stopped")], "the task ended cancelled: stopped"),
        (task(), [task("paused")], "a task in an unknown status ('paused')"),
        (task(task_id="t" * 257), [], "without an id of at most 256"),
        ({"status": "working"}, [], "without an id of at most 256"),
        ("a task", [], "a task that is not an object"),
        (task(), [task("completed", task_id="t-2")], "answered a poll of task 't-1' with another"),
    ],
)
def test_a_task_that_ends_without_a_result_or_lies_is_an_error_the_model_reads(
    tmp_path: Path, created: Any, polls: list[Any], why: str
) -> None:
    plan = {"task": created, "polls": polls or [created], "result": RAN}
    raw = Raw(tmp_path, {"research": [plan]})
    with raw.server() as mcp:
        done = ToolService([mcp]).chat(calls("research"), "go")
    assert said(done).startswith("Tool `research` failed: TaskError: ")
    assert why in said(done)
    assert raw.requests("tasks/result") == []


def test_a_failed_task_gives_the_server_s_error(tmp_path: Path) -> None:
    failed = {"content": [{"type": "text", "text": "no sources"}], "isError": True}
    plan = {"task": task(), "polls": [task("failed")], "result": failed}
    raw = Raw(tmp_path, {"research": [plan]})
    with raw.server() as mcp:
        done = ToolService([mcp]).chat(calls("research"), "go")
    assert "no sources" in said(done)


def test_a_task_call_answered_at_once_is_its_result(tmp_path: Path) -> None:
    raw = Raw(tmp_path, {"research": [{"result": RAN}]})
    with raw.server() as mcp:
        done = ToolService([mcp]).chat(calls("research"), "go")
    assert said(done) == "ran"
    assert raw.requests("tasks/get") == []


def test_the_poll_interval_is_the_server_s_held_in_bounds(tmp_path: Path) -> None:
    assert _interval({"pollInterval": 250}) == 0.25
    assert _interval({"pollInterval": 0}) == MIN_POLL_INTERVAL
    assert _interval({"pollInterval": -5}) == MIN_POLL_INTERVAL
    assert _interval({"pollInterval": 10**12}) == MAX_POLL_INTERVAL
    assert _interval({"pollInterval": True}) == _interval({}) == 1.0
    assert _interval({"pollInterval": "fast"}) == 1.0
    # A server asking to be polled without pause is polled at the shortest interval.
    polls = [task(pollInterval=0)] * 4 + [task("completed")]
    plan = {"task": task(pollInterval=0), "polls": polls, "result": RAN}
    raw = Raw(tmp_path, {"research": [plan]})
    with raw.server() as mcp:
        started = time.monotonic()
        ToolService([mcp]).chat(calls("research"), "go")
        took = time.monotonic() - started
    assert len(raw.requests("tasks/get")) == 5
    assert took >= 5 * MIN_POLL_INTERVAL


def test_a_task_only_tool_of_a_server_taking_no_tasks_is_left_out(
    tmp_path: Path, warnings: Warnings
) -> None:
    raw = Raw(tmp_path, {}, capabilities={"tools": {}})
    with raw.server() as mcp:
        assert [t.name for t in mcp.tools()] == ["go"]
    assert any("tool 'research' skipped" in w for w in warnings)


def test_a_change_announced_right_after_the_first_listing_is_listed(tmp_path: Path) -> None:
    # The notification reaches the client while its first session is still being handed over.
    script = {"listings": [[TOOL]], "changed_after_listing": True}
    raw = Raw(tmp_path, {}, tools=[TOOL, {**TOOL, "name": "added"}], **script)
    with raw.server() as mcp:
        for _ in range(200):
            if [t.name for t in mcp.tools()] == ["go", "added"]:
                break
            time.sleep(0.025)
        assert [t.name for t in mcp.tools()] == ["go", "added"]
    assert len(raw.requests("tools/list")) == 2


def test_a_task_only_tool_answering_input_required_is_an_error_not_a_loop(tmp_path: Path) -> None:
    asked = {"resultType": "input_required", "inputRequests": {}, "content": []}
    raw = Raw(tmp_path, {"research": [{"result": asked}]})
    with raw.server() as mcp:
        done = ToolService([mcp]).chat(calls("research"), "go")
    assert said(done) == (
        "Tool `research` failed: TaskError: the server answered a task's call with input_required"
    )
    assert len(raw.requests("tools/call")) == 1


def test_a_task_created_in_an_unknown_status_is_cancelled(tmp_path: Path) -> None:
    raw = Raw(tmp_path, {"research": [{"task": task("paused"), "result": RAN}]})
    with raw.server() as mcp:
        done = ToolService([mcp]).chat(calls("research"), "go")
    assert "a task in an unknown status ('paused')" in said(done)
    assert [r["params"] for r in raw.requests("tasks/cancel")] == [{"taskId": "t-1"}]


def test_a_provider_shared_by_servers_is_left_as_it_is_and_each_hears_its_own_failures() -> None:
    import asyncio

    import httpx2

    from agentforge_typed.tools.mcp._auth import noting_failures
    from agentforge_typed.tools.mcp._session import Refusal

    class Flow(httpx2.Auth):
        async def async_auth_flow(self, request: Any) -> Any:
            raise RuntimeError("refused")
            yield request  # an async generator, as a provider's flow is

    auth = Flow()
    flow = auth.async_auth_flow
    one, two = Refusal(), Refusal()
    first, second = noting_failures(auth, one.failed), noting_failures(auth, two.failed)
    assert auth.async_auth_flow == flow  # the provider is not wrapped, however many servers
    assert noting_failures(("user", "pass"), one.failed) == ("user", "pass")  # not an Auth

    async def run(wrapped: Any) -> None:
        with pytest.raises(RuntimeError, match="refused"):
            await wrapped.async_auth_flow(None).__anext__()

    asyncio.run(run(first))
    assert (one.flow_failures, two.flow_failures) == (1, 0)  # the other server heard nothing
    assert isinstance(one.flow_error, RuntimeError)
    asyncio.run(run(second))
    assert (one.flow_failures, two.flow_failures) == (1, 1)


def test_two_conversations_failed_for_url_questions_on_one_server_keep_their_own(
    tmp_path: Path,
) -> None:
    # The very same call (id, tool, arguments) in two conversations: each pause is its own.
    steps = [url_required(url_question()), url_required(url_question()), {"result": RAN}]
    raw = Raw(tmp_path, {"go": steps})
    with raw.server() as mcp:
        service = ToolService([mcp])
        first = service.chat(calls(), "go", conversation_id="conversation-a")
        second = service.chat(calls(), "go", conversation_id="conversation-b")
        assert [p.reason for p in (*first.pending, *second.pending)] == ["elicitation"] * 2
        accepted = service.chat(calls(), first.messages, approvals={"c1": ElicitationAnswer()})
        declined = service.chat(
            calls(), second.messages, approvals={"c1": ElicitationAnswer(action="decline")}
        )
    assert said(accepted) == "ran"
    assert "the user declined it" in said(declined)
    assert len(raw.requests("tools/call")) == 3  # the two first tries and the accepted one again
