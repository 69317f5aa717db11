"""What a security review of the MCP client found: the secrets a server's redactor knows never
reach a person through a URL-mode question (refused) or a form question (redacted); a provider
shared by several servers teaches its tokens to each of them; a task is never left running on
the server for no one (a late answer to the call that created it, a connection lost while it
was polled)."""

from __future__ import annotations

import gc
import json
import logging
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from test_mcp import CONTEXT, by_name, call
from test_mcp_oauth import Notes, never_shown, notes, provider
from test_mcp_url_and_tasks import (
    RAN,
    URL,
    Raw,
    ask_url,
    calls,
    said,
    task,
    url_question,
    url_required,
)

from agentforge_typed import (
    MCPServer,
    ToolCall,
    ToolExecutionResult,
    ToolService,
)
from agentforge_typed._transport._redaction import Redactor
from agentforge_typed.stores import MemoryStore
from agentforge_typed.tools import StoreTokens
from agentforge_typed.tools._scope import Scope
from agentforge_typed.tools.mcp._questions import Desk

__all__ = ["notes"]  # the fixture, imported

SECRET = "sk-live-5f0c2a9e41b7d3c8"
"""A key the server's redactor knows (a token its flow obtained, a header's value)."""
REFUSED = "holds a secret this client keeps for the server"


def secret_keeping(raw: Raw, **options: Any) -> MCPServer:
    server = raw.server(**options)
    server._more_secrets([SECRET])  # as a flow's token storage teaches it
    return server


def replies(raw: Raw) -> list[dict[str, Any]]:
    path = Path(raw.script["replies"])
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


# -- questions holding a secret -----------------------------------------------------------------


@pytest.mark.parametrize(
    "question",
    [
        {"url": f"{URL}&token={SECRET}"},
        {"message": f"Paste {SECRET} on the page"},
        {"elicitation_id": f"e-{SECRET}"},
    ],
    ids=["url", "message", "id"],
)
@pytest.mark.parametrize("way", ["run", "direct"])
def test_a_url_question_asked_mid_call_holding_a_secret_is_refused_and_ends_the_call(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, question: dict[str, Any], way: str
) -> None:
    raw = Raw(tmp_path, {"go": [ask_url(**question)]}, replies=str(tmp_path / "replies.jsonl"))
    with caplog.at_level(logging.DEBUG), secret_keeping(raw) as mcp:
        if way == "run":
            done = ToolService([mcp]).chat(calls(), "go")
            assert not done.pending  # no one is shown it
            text = said(done)
        else:  # outside a run: it could not pause anyway, and still ends the call
            text = by_name(mcp)["go"].execute(call("go", {}), CONTEXT).text
    assert REFUSED in text and "the question was refused and the call ended" in text
    assert SECRET not in text and SECRET[:12] not in caplog.text
    assert replies(raw) == [{"action": "decline"}]  # the server was told


def test_a_call_failed_for_a_url_question_holding_a_secret_ends_unsent_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    leaking = url_question(url=f"{URL}&token={SECRET}")
    raw = Raw(tmp_path, {"go": [url_required(leaking), {"result": RAN}]})
    with caplog.at_level(logging.DEBUG), secret_keeping(raw) as mcp:
        done = ToolService([mcp]).chat(calls(), "go")
    assert not done.pending
    assert REFUSED in said(done) and SECRET not in said(done)
    assert SECRET[:12] not in caplog.text
    assert len(raw.requests("tools/call")) == 1


def test_a_url_question_in_an_input_required_result_holding_a_secret_ends_the_call() -> None:
    desk = Desk("raw", 5.0, 5.0, redactor=lambda: Redactor([SECRET]))
    question = {"mode": "url", "message": "Go", "url": f"{URL}#{SECRET}", "elicitationId": "e"}
    required = {"inputRequests": {"a": {"method": "elicitation/create", "params": question}}}
    step = desk.settle(
        ToolCall(id="c1", name="go", arguments="{}"),
        "go",
        required,
        may_pause=True,
        scope=Scope("conversation"),
    )
    assert isinstance(step, ToolExecutionResult) and step.is_error
    assert REFUSED in step.text and SECRET not in step.text


def test_a_form_question_s_message_and_schema_are_shown_redacted(tmp_path: Path) -> None:
    schema = {
        "type": "object",
        "properties": {"ok": {"type": "boolean", "description": f"Sent with {SECRET}"}},
    }
    asked = {"ask": {"message": f"Use the key {SECRET}?", "requestedSchema": schema}}
    raw = Raw(tmp_path, {"go": [asked]})
    with secret_keeping(raw) as mcp:
        service = ToolService([mcp])
        paused = service.chat(calls(), "go")
        (pending,) = paused.pending
        question = pending.elicitation
        assert question is not None
        assert question.message == "Use the key [redacted]?"
        assert question.schema["properties"]["ok"]["description"] == "Sent with [redacted]"
        answer = question.answer({"ok": True})  # carrying the question as it was shown
        done = service.chat(calls(), paused.messages, approvals={"c1": answer})
    assert json.loads(said(done)) == {"action": "accept", "content": {"ok": True}}


# -- a provider shared by several servers --------------------------------------------------------


async def test_a_provider_shared_by_two_servers_teaches_its_tokens_to_both(notes: Notes) -> None:
    shared = provider(notes, StoreTokens(MemoryStore(), "notes:alice"))
    first = MCPServer.http(notes.url, auth=shared)
    second = MCPServer.http(notes.url, auth=shared)  # built before any token was obtained
    async with first:  # authorizes: the tokens pass through the storage
        one = await by_name(first)["read"].aexecute(call("read", {}), CONTEXT)
    async with second:  # uses the tokens the flow holds, loading nothing
        two = await by_name(second)["read"].aexecute(call("read", {}), CONTEXT)
    assert (one.text, two.text) == ("read done with Bearer [redacted]",) * 2
    never_shown(notes.books, one.text, two.text, repr(first), repr(second))
    assert len(notes.books.authorizations) == 1

    # A server built once the flow holds tokens learns them at once, and the storage is
    # wrapped once, however many servers use it: no chain grows.
    third = MCPServer.http(notes.url, auth=shared)
    issued = notes.books.issued()
    assert all(third._redactor.replace(secret) == "[redacted]" for secret in notes.books.access)
    assert issued
    storage: Any = shared.context.storage
    assert type(storage._storage) is StoreTokens
    for _ in range(50):
        MCPServer.http(notes.url, auth=shared)
    del third
    gc.collect()
    storage.listen(first._more_secrets)  # given again: still once, and the servers gone dropped
    assert [ref() for ref in storage._listeners] == [second._more_secrets, first._more_secrets]


# -- tasks left running --------------------------------------------------------------------------


def test_a_task_named_after_its_call_timed_out_is_cancelled_when_the_answer_comes(
    tmp_path: Path,
) -> None:
    # The server names the task only after the call stopped waiting (it ignores the
    # cancellation of its request, as the tasks extension lets it).
    raw = Raw(tmp_path, {"research": [{"task": task(), "delay": 1.5, "result": RAN}]})
    with raw.server(timeout=0.5) as mcp:
        started = time.monotonic()
        done = ToolService([mcp]).chat(calls("research"), "go")
        took = time.monotonic() - started
    assert "timed out" in said(done)
    assert took < 5  # waited for the late answer, bounded
    assert [r["params"] for r in raw.requests("tasks/cancel")] == [{"taskId": "t-1"}]
    assert raw.requests("tasks/get") == []


def test_a_task_never_named_is_given_up_after_a_bounded_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentforge_typed.tools.mcp import _tasks

    monkeypatch.setattr(_tasks, "_CANCEL_WAIT", 1.0)
    raw = Raw(tmp_path, {"research": [{"task": task(), "delay": 30, "result": RAN}]})
    with raw.server(timeout=0.3) as mcp:
        started = time.monotonic()
        done = by_name(mcp)["research"].execute(call("research", {"topic": "x"}), CONTEXT)
        took = time.monotonic() - started
    assert "timed out" in done.text
    assert 1.3 <= took < 0.3 + 1.0 + 2  # the call's timeout, then the wait for the task's name
    assert raw.requests("tasks/cancel") == []  # nothing was named to cancel


def test_a_retry_safe_task_call_whose_connection_is_lost_is_not_sent_again(
    tmp_path: Path,
) -> None:
    steps = [{"task": task(), "exit_after_polls": 1, "result": RAN}]
    raw = Raw(tmp_path, {"research": steps})
    with raw.server(idempotent=True) as mcp:
        tool = by_name(mcp)["research"]
        assert tool.retry_safe and tool.as_task
        done = ToolService([mcp]).chat(calls("research"), "go")
    text = said(done)
    assert "connection to the MCP server was lost" in text
    assert "not sent again, as its task may still run on the server" in text
    assert len(raw.requests("tools/call")) == 1  # no second task beside the first
