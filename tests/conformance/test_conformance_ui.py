"""Every endpoint of the UI app (the `ui` axis: AG-UI, the AI SDK's UI message stream), by the
guarantees the package keeps: bounded (a body of exactly the cap is served, one byte more
refused; a reader that reads nothing is given up after `send_timeout`), secret (no frame and no
log holds the model's key, whatever its server echoes), scoped (two conversations interleaved on
one app never see each other's calls, seals or decisions, and nothing of them is kept), linear
(a run costs O(its events), a request O(its history)), malformed (a broken request is refused
whole, and nothing runs)."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import time
from collections.abc import Callable, Sequence
from typing import Any

import httpx
import pytest
import ui_support
from conformance import UI, Surface, assert_linear, assert_registered
from http_server import Reply, Request, ScriptedServer

from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatRequestParameters,
    FunctionModel,
    OpenAIChatModel,
    ToolCall,
    ToolResultMessage,
    ToolService,
    UserMessage,
)
from agentforge_typed.ui import create_app

KEY = "sk-ui-canary-0123456789abcdefGHIJKLMN"
"""The model's key: its server echoes it; no frame and no log may hold 12 characters of it."""


def test_covers_every_surface() -> None:
    assert_registered(UI)


def client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")


def _endpoints(app: Any) -> Any:
    """What serves the app's endpoints (its state, such as it is)."""
    return next(r.endpoint.__self__ for r in app.routes if r.path == "/ag-ui")


def running(app: Any) -> int:
    return int(_endpoints(app).running)


# -- bounded -------------------------------------------------------------------------------------


@pytest.mark.parametrize("surface", UI.each("bounded"))
async def test_a_body_over_the_cap_is_refused(surface: Surface[Any]) -> None:
    cap = 4096
    app = create_app(ui_support.service(), ui_support.model(), max_body_bytes=cap)
    plain = json.dumps(surface.build("bounded-thread").body("x")).encode()
    exact = plain.replace(b'"x"', b'"' + b"x" * (cap - len(plain) + 1) + b'"', 1)
    over = exact.replace(b'"xx', b'"xxx', 1)
    assert (len(exact), len(over)) == (cap, cap + 1)
    json_body = {"content-type": "application/json"}
    async with client(app) as http:
        served = await http.post(surface.name, content=exact, headers=json_body)
        refused = await http.post(surface.name, content=over, headers=json_body)
    assert served.status_code == 200, served.text
    assert refused.status_code == 413
    assert "create_app(max_body_bytes=...)" in refused.json()["error"]


@pytest.mark.parametrize("surface", UI.each("bounded"))
def test_a_reader_that_reads_nothing_is_given_up(surface: Surface[Any]) -> None:
    piece = "w" * 65536

    def flood(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        return AiMessage(text=" ".join([piece] * 256))  # 16 MiB, streamed a word at a time

    app = create_app(ToolService(), FunctionModel(flood), send_timeout=1.0)
    with ui_support.served(app) as url:
        port = int(url.rsplit(":", 1)[1])
        payload = json.dumps(surface.build("stalled-thread").body("hi")).encode()
        with socket.socket() as stalled:
            stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            stalled.connect(("127.0.0.1", port))
            stalled.sendall(
                f"POST {surface.name} HTTP/1.1\r\nHost: 127.0.0.1\r\n".encode()
                + f"content-type: application/json\r\ncontent-length: {len(payload)}\r\n\r\n".encode()
                + payload
            )
            started = time.monotonic()
            while running(app) == 0 and time.monotonic() - started < 30:
                time.sleep(0.05)
            while running(app) and time.monotonic() - started < 60:
                time.sleep(0.05)
            assert running(app) == 0, "the run went on for a reader that reads nothing"


# -- malformed -----------------------------------------------------------------------------------


@pytest.mark.parametrize("surface", UI.each("malformed"))
@pytest.mark.parametrize(
    "body",
    [b"", b"{", b"[1]", b'{"messages": 5}', b"\xff\xfe", b"null", b'{"id": {}, "threadId": {}}'],
)
async def test_a_malformed_request_is_refused_and_nothing_runs(
    surface: Surface[Any], body: bytes
) -> None:
    calls: list[int] = []

    def model(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        calls.append(1)
        return AiMessage(text="no")

    app = create_app(ToolService(), FunctionModel(model))
    async with client(app) as http:
        response = await http.post(
            surface.name, content=body, headers={"content-type": "application/json"}
        )
    assert 400 <= response.status_code < 500, response.text
    assert response.json()["error"]
    assert calls == []


# -- secret --------------------------------------------------------------------------------------


def _echo(mode: str) -> Callable[[Request], Reply]:
    """An OpenAI-compatible server that echoes the key it was sent: in its text (`text`), in a
    tool call's arguments and the text after (`call`), in a 401 (`error`)."""

    def answer(request: Request) -> Reply:
        key = request.headers["authorization"].removeprefix("Bearer ")
        if mode == "error":
            return Reply.json({"error": {"message": f"bad key {key}"}}, 401)
        delta: dict[str, Any] = {"content": f"the key is {key[:7]}"}
        rest: dict[str, Any] = {"content": f"{key[7:]}."}
        if mode == "call" and request.json()["messages"][-1]["role"] != "tool":
            call = {"index": 0, "id": "c1", "type": "function"}
            first = {**call, "function": {"name": "echo", "arguments": '{"text": "' + key[:9]}}
            second = {"index": 0, "function": {"arguments": key[9:] + '"}'}}
            delta, rest = {"tool_calls": [first]}, {"tool_calls": [second]}
        reason = "tool_calls" if "tool_calls" in delta else "stop"
        done = {"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}
        pieces = [{"choices": [{"index": 0, "delta": piece}]} for piece in (delta, rest)]
        return Reply.sse([*pieces, done], done=True)

    return answer


def _fragments(text: str) -> list[str]:
    return [KEY[i : i + 12] for i in range(len(KEY) - 11) if KEY[i : i + 12] in text]


@pytest.mark.parametrize("mode", ["text", "call", "error"])
@pytest.mark.parametrize("surface", UI.each("secret"))
async def test_no_frame_and_no_log_holds_the_model_s_key(
    surface: Surface[Any],
    http_server: ScriptedServer,
    mode: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    http_server.route("/v1/chat/completions", _echo(mode))
    model = OpenAIChatModel("m", base_url=f"{http_server.url}/v1", api_key=KEY, max_retries=0)
    app = create_app(ui_support.service(), model)
    caplog.set_level(logging.DEBUG)
    conversation = surface.build("secret-thread")
    async with client(app) as http:
        response = await http.post(surface.name, json=conversation.body("what is the key?"))
        frames = ui_support.sse(response.text)
        conversation.read(frames)
        # The seals the client holds carry the model's messages: redacted too, and taken back.
        again = await http.post(surface.name, json=conversation.body("and now?"))
    shown = response.text + again.text + caplog.text
    assert _fragments(shown) == [], mode
    assert "[redacted]" in response.text
    assert again.status_code == 200


# -- scoped --------------------------------------------------------------------------------------


@pytest.mark.parametrize("surface", UI.each("scoped"))
async def test_two_conversations_on_one_app_never_cross(surface: Surface[Any]) -> None:
    ui_support.deleted.clear()
    app = create_app(ui_support.service(), ui_support.model())
    first, second = surface.build("thread-a-0123456789"), surface.build("thread-b-0123456789")
    async with client(app) as http:
        # The very same call (`call_0`, the same tool and arguments) in both, interleaved.
        await first.send(http, first.body("delete /tmp/shared"))
        await second.send(http, second.body("delete /tmp/shared"))
        assert first.waiting and second.waiting and first.waiting != second.waiting
        # One thread's decision, or its history, does nothing in the other.
        crossed = second.decision(True)
        crossed[{"/ag-ui": "threadId", "/api/chat": "id"}[surface.name]] = first.thread
        refused = await http.post(surface.name, json=crossed)
        assert refused.status_code in (400, 409), refused.text
        assert ui_support.deleted == []
        frames = await second.send(http, second.decision(True))
        assert "Done: deleted /tmp/shared" in second.text(frames)
        assert ui_support.deleted == ["/tmp/shared"]
        frames = await first.send(http, first.decision(False))
        assert "denied" in first.text(frames)
        assert ui_support.deleted == ["/tmp/shared"]
    # The app keeps nothing of either: the conversations are the clients'.
    endpoints = _endpoints(app)
    assert running(app) == 0
    assert not [v for v in vars(endpoints).values() if isinstance(v, dict | list | set) and v]


# -- linear --------------------------------------------------------------------------------------


@pytest.mark.parametrize("surface", UI.each("linear"))
def test_a_run_costs_linear_in_its_events(surface: Surface[Any]) -> None:
    def words(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        said = messages[-1]
        assert isinstance(said, UserMessage)
        count = int(said.text)
        return AiMessage(text="w " * count)  # a delta per word

    app = create_app(ToolService(), FunctionModel(words))

    async def post(size: int) -> None:
        async with client(app) as http:
            response = await http.post(surface.name, json=surface.build("t").body(str(size)))
            assert response.status_code == 200

    assert_linear(
        lambda size: asyncio.run(post(size)),
        2000,
        what=f"{surface.name}: a run of n deltas",
        clock=time.process_time,
    )


@pytest.mark.parametrize("surface", UI.each("linear"))
def test_a_request_costs_linear_in_its_history(surface: Surface[Any]) -> None:
    def tool_round(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        if isinstance(messages[-1], ToolResultMessage):
            return AiMessage(text="ok")
        call_id = f"c{len(messages)}"
        return AiMessage(
            tool_calls=[ToolCall(id=call_id, name="lookup", arguments='{"token": "t"}')]
        )

    app = create_app(ui_support.service(), FunctionModel(tool_round), secret=b"k" * 32)

    async def history(turns: int) -> dict[str, Any]:
        conversation = surface.build("linear-thread")
        async with client(app) as http:
            for turn in range(turns):
                await conversation.send(http, conversation.body(f"turn {turn}"))
        return dict(conversation.body("last"))

    small, large = asyncio.run(history(20)), asyncio.run(history(160))

    async def post(body: dict[str, Any]) -> None:
        async with client(app) as http:
            response = await http.post(surface.name, json=body)
            assert response.status_code == 200, response.text

    bodies = {20: small, 160: large}
    assert_linear(
        lambda size: asyncio.run(post(bodies[size])),
        20,
        what=f"{surface.name}: a request of n turns of history",
        clock=time.process_time,
    )
