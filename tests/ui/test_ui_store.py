"""The UI with a conversation store: the thread id is the conversation id, a client sends only
its new message or its answers, a page finds its conversation again after a reload, and an
approval given after a restart (another app, another process's secret, the same store) resumes
the run.

These run once the loop keeps conversations in a store (`ToolService(..., store=...)`, the seam
of docs/design/stores.md); until then they are expected to fail, and say why.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import test_ui_browser
import ui_support
from ui_support import agui_input, agui_run, sse

from agentforge_typed import (
    AiMessage,
    ChatRequest,
    ChatResponse,
    ConversationConflictError,
    FinishReason,
    ResponseComplete,
    StreamEvent,
    TextDelta,
    ToolService,
)
from agentforge_typed.stores import MemoryStore
from agentforge_typed.ui import create_app

THREAD = "stored-thread-0123456789"

browser = test_ui_browser.browser


def stored_app(store: MemoryStore, model: Any = None, **options: Any) -> Any:
    service = ToolService(
        [ui_support.delete_file, ui_support.lookup],
        store=store,  # type: ignore[call-arg,unused-ignore]
    )
    return create_app(service, model or ui_support.model(), store, **options)


def client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")


@pytest.fixture(autouse=True)
def _forget() -> Iterator[None]:
    ui_support.deleted.clear()
    yield


async def test_an_approval_after_a_restart_resumes_the_run() -> None:
    store = MemoryStore()
    async with client(stored_app(store)) as http:
        messages = [{"id": "u1", "role": "user", "content": "delete /tmp/x"}]
        events = await agui_run(http, THREAD, messages)
        [interrupt] = events[-1]["outcome"]["interrupts"]
    assert not any(e["type"] == "REASONING_ENCRYPTED_VALUE" for e in events)  # no seals
    # Another app on the same store: another process, its own random secret.
    async with client(stored_app(store)) as http:
        thread = (await http.get(f"/ag-ui/threads/{THREAD}")).json()
        assert [m["role"] for m in thread["messages"]] == ["user", "assistant"]
        assert [i["id"] for i in thread["interrupts"]] == [interrupt["id"]]
        # The client sends only the answer; the store has the rest.
        resume = [
            {"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": True}}
        ]
        events = await agui_run(http, THREAD, [], resume)
        assert events[-1]["outcome"] == {"type": "success"}
        assert ui_support.deleted == ["/tmp/x"]
        # A new message goes after the stored conversation.
        more = [{"id": "u2", "role": "user", "content": "lookup abc"}]
        events = await agui_run(http, THREAD, more)
    texts = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert "Done: value-of-abc" in texts
    stored = await store.aload(THREAD)
    assert stored is not None and len(stored.messages) == 8


async def test_an_approval_over_the_ai_sdk_stream_after_a_restart() -> None:
    store = MemoryStore()
    user = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "delete /tmp/y"}]}
    async with client(stored_app(store)) as http:
        chunks = sse((await http.post("/api/chat", json={"id": THREAD, "messages": [user]})).text)
    request = next(c for c in chunks if c["type"] == "tool-approval-request")
    assistant = {
        "id": chunks[0]["messageId"],
        "role": "assistant",
        "parts": [
            {
                "type": "tool-delete_file",
                "toolCallId": request["toolCallId"],
                "state": "approval-responded",
                "input": {"path": "/tmp/y"},
                "approval": {"id": request["approvalId"], "approved": True},
            }
        ],
    }
    async with client(stored_app(store)) as http:
        answer = await http.post("/api/chat", json={"id": THREAD, "messages": [user, assistant]})
    assert sse(answer.text)[-1] == {"type": "finish", "finishReason": "stop"}
    assert ui_support.deleted == ["/tmp/y"]


async def test_a_stale_approval_is_refused_by_the_loop() -> None:
    store = MemoryStore()
    async with client(stored_app(store)) as http:
        await agui_run(http, THREAD, [{"id": "u1", "role": "user", "content": "delete /tmp/x"}])
        refused = await http.post(
            "/ag-ui",
            json=agui_input(
                THREAD,
                [],
                [{"interruptId": "sha256:0", "status": "resolved", "payload": {"approved": True}}],
            ),
        )
    assert refused.status_code == 409
    assert ui_support.deleted == []


def test_the_page_finds_its_conversation_after_a_reload(browser: Any) -> None:
    store = MemoryStore()
    with ui_support.served(stored_app(store)) as url:
        page = test_ui_browser.Page(browser, url)
        page.ask("delete /tmp/report.txt")
        page.tool("delete_file").locator('[data-action="approve"]').wait_for()
        page.page.evaluate(
            "localStorage.setItem('agentforge-ui', JSON.stringify({threadId: JSON.parse(localStorage.getItem('agentforge-ui')).threadId, messages: [], interrupts: []}))"
        )
        page.page.reload()  # the page's own copy is gone: the server's is shown
        approve = page.tool("delete_file").locator('[data-action="approve"]')
        approve.wait_for()
        approve.click()
        page.assistant_says("Done: deleted /tmp/report.txt")
        assert page.problems == []
        page.close()


class _Stalls(ui_support.StreamOnly):
    """A model that starts its answer, then waits until its run is ended."""

    async def astream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        yield TextDelta(text="thinking ")
        await asyncio.sleep(3600)
        message = AiMessage(text="thinking ")
        yield ResponseComplete(
            response=ChatResponse(ai_message=message, finish_reason=FinishReason.STOP)
        )


def test_a_client_that_leaves_mid_stream_gives_the_conversation_back() -> None:
    # The claim would hold for an hour: only the run's end can give it back.
    store = MemoryStore(claim_ttl=3600)
    with ui_support.served(stored_app(store, _Stalls())) as url:

        async def leave_mid_stream() -> None:
            async with httpx.AsyncClient(base_url=url, timeout=30) as http:
                body = agui_input(THREAD, [{"id": "u1", "role": "user", "content": "hello"}])
                async with http.stream("POST", "/ag-ui", json=body) as response:
                    async for line in response.aiter_lines():
                        if '"TEXT_MESSAGE_CONTENT"' in line:
                            break
                    with pytest.raises(ConversationConflictError):
                        store.claim(THREAD)  # the run holds it while it streams

        # On a thread of its own: the module's browser (Playwright's sync API) may hold this
        # thread's event loop.
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pool.submit(asyncio.run, leave_mid_stream()).result()
        deadline = time.monotonic() + 30
        while True:
            try:
                claim = store.claim(THREAD)
                break
            except ConversationConflictError:
                assert time.monotonic() < deadline, "the run left its conversation claimed"
                time.sleep(0.05)
        store.release(claim)
