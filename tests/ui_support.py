"""The UI's tests' app and server: tools a person approves, a scripted model, and the app served
by uvicorn on a thread of its own (a free port of 127.0.0.1)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import threading
import zlib
from collections.abc import Iterator, Sequence
from typing import Any

import httpx

from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatRequest,
    ChatRequestParameters,
    ChatResponse,
    FunctionModel,
    ImageContent,
    StreamEvent,
    ToolCall,
    ToolResultMessage,
    ToolService,
    UserMessage,
    tool,
)

STARTUP_SECONDS = 30.0
EVIL = "<img src=x onerror=\"document.title='pwned'\">"
"""What the `echo` tool returns to a page that must show it as text."""

deleted: list[str] = []


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file (a person approves it first)."""
    deleted.append(path)
    return f"deleted {path}"


@tool
def lookup(token: str) -> str:
    """Look a token up."""
    return f"value-of-{token}"


@tool
def echo(text: str) -> str:
    """Say the text back."""
    return text


def _png() -> bytes:
    """A 2x2 red PNG."""
    raw = b"".join(b"\x00" + b"\xff\x00\x00" * 2 for _ in range(2))

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return len(data).to_bytes(4, "big") + body + zlib.crc32(body).to_bytes(4, "big")

    header = (2).to_bytes(4, "big") * 2 + bytes([8, 2, 0, 0, 0])
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


PNG = _png()


@tool
def photo() -> ImageContent:
    """Take a photo."""
    return ImageContent(data=PNG, media_type="image/png")


def _said(messages: Sequence[ChatMessage]) -> str:
    for message in reversed(messages):
        if isinstance(message, UserMessage):
            return message.text
    return ""


def script(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
    """The model: `delete PATH` deletes it (after approval), `photo` takes one, `echo TEXT`
    says it back through the tool, `think` thinks first, `lookup TOKEN` looks it up; after a
    tool's result, it says what the result was."""
    last = messages[-1]
    if isinstance(last, ToolResultMessage):
        return AiMessage(text=f"Done: {last.text}")
    said = _said(messages)
    word, _, rest = said.partition(" ")
    calls = {
        "delete": ("delete_file", {"path": rest}),
        "photo": ("photo", {}),
        "echo": ("echo", {"text": rest}),
        "lookup": ("lookup", {"token": rest}),
    }
    if word in calls:
        name, arguments = calls[word]
        call = ToolCall(id="call_0", name=name, arguments=json.dumps(arguments))
        return AiMessage(text=f"Calling {name}.", tool_calls=[call])
    if word == "think":
        return AiMessage(thinking="Let me think about it.", text="I thought about it.")
    return AiMessage(text=f"You said: {said}")


class StreamOnly:
    """A model for the UI's runs, which only stream: a subclass gives `astream`."""

    def chat(self, request: ChatRequest) -> ChatResponse:
        raise NotImplementedError

    async def achat(self, request: ChatRequest) -> ChatResponse:
        raise NotImplementedError

    def stream(self, request: ChatRequest) -> Iterator[StreamEvent]:
        raise NotImplementedError


def service(**options: Any) -> ToolService[None]:
    return ToolService([delete_file, lookup, echo, photo], **options)


def model() -> FunctionModel:
    return FunctionModel(script)


@contextlib.contextmanager
def served(app: Any) -> Iterator[str]:
    """`app` under uvicorn on 127.0.0.1 (a free port), on a thread of its own; yields its URL."""
    import uvicorn

    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, log_level="warning", lifespan="off", server_header=False
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()
    try:
        for _ in range(int(STARTUP_SECONDS * 100)):
            if server.started:
                break
            threading.Event().wait(0.01)
        assert server.started, "the UI server did not start"
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def sse(text: str) -> list[Any]:
    """The JSON of each `data:` frame of an SSE body (`[DONE]` left out)."""
    frames = []
    for frame in text.split("\n\n"):
        data = "\n".join(
            line[5:].lstrip() for line in frame.split("\n") if line.startswith("data:")
        )
        if data and data != "[DONE]":
            frames.append(json.loads(data))
    return frames


def agui_messages(events: Sequence[dict[str, Any]], messages: list[dict[str, Any]]) -> None:
    """Apply a run's AG-UI events to `messages` as the official client does (text, calls,
    results after their call's message, seals)."""
    for event in events:
        kind = event["type"]
        if kind == "TEXT_MESSAGE_START":
            messages.append({"id": event["messageId"], "role": "assistant", "content": ""})
        elif kind == "TEXT_MESSAGE_CONTENT":
            next(m for m in messages if m["id"] == event["messageId"])["content"] += event["delta"]
        elif kind == "TOOL_CALL_START":
            owner = next(m for m in messages if m["id"] == event["parentMessageId"])
            call = {"id": event["toolCallId"], "type": "function"}
            call["function"] = {"name": event["toolCallName"], "arguments": ""}
            owner.setdefault("toolCalls", []).append(call)
        elif kind == "TOOL_CALL_ARGS":
            for m in messages:
                for call in m.get("toolCalls", ()):
                    if call["id"] == event["toolCallId"]:
                        call["function"]["arguments"] += event["delta"]
        elif kind == "TOOL_CALL_RESULT":
            owners = [
                i
                for i, m in enumerate(messages)
                if any(c["id"] == event["toolCallId"] for c in m.get("toolCalls", ()))
            ]
            at = owners[0] + 1 if owners else len(messages)
            while at < len(messages) and messages[at]["role"] == "tool":
                at += 1
            tool_message = {"id": event["messageId"], "role": "tool", "content": event["content"]}
            messages.insert(at, {**tool_message, "toolCallId": event["toolCallId"]})
        elif kind == "REASONING_ENCRYPTED_VALUE":
            for m in messages:
                if m["id"] == event["entityId"]:
                    m["encryptedValue"] = event["encryptedValue"]


def agui_input(
    thread: str, messages: list[dict[str, Any]], resume: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "threadId": thread,
        "runId": f"run-{len(messages)}",
        "messages": messages,
    }
    if resume is not None:
        body["resume"] = resume
    return body


async def agui_run(
    client: httpx.AsyncClient,
    thread: str,
    messages: list[dict[str, Any]],
    resume: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """One AG-UI run: posts `messages` (and `resume`), applies the answer to `messages`."""
    response = await client.post("/ag-ui", json=agui_input(thread, messages, resume))
    assert response.status_code == 200, response.text
    events = sse(response.text)
    agui_messages(events, messages)
    return events


def image_b64() -> str:
    return base64.b64encode(PNG).decode()


class Conversation:
    """One conversation with a UI endpoint, the way its protocol's client holds it: what it sends
    (the history it keeps, the answers to what waits) and what it reads back."""

    path = ""

    def __init__(self, thread: str) -> None:
        self.thread = thread
        self.waiting: list[str] = []
        """The ids of what the thread waits on (interrupts, approvals), from the last answer."""

    def body(self, text: str) -> dict[str, Any]:
        """The request that adds the user's `text`."""
        raise NotImplementedError

    def decision(self, approved: bool) -> dict[str, Any]:
        """The request that decides every call the thread waits on."""
        raise NotImplementedError

    def read(self, frames: list[Any]) -> None:
        """Take in an answer's frames."""
        raise NotImplementedError

    def text(self, frames: Sequence[Any]) -> str:
        """The answer's text, as streamed."""
        raise NotImplementedError

    async def send(self, client: httpx.AsyncClient, body: dict[str, Any]) -> list[Any]:
        response = await client.post(self.path, json=body)
        assert response.status_code == 200, response.text
        frames = sse(response.text)
        self.read(frames)
        return frames


class AGUIConversation(Conversation):
    path = "/ag-ui"

    def __init__(self, thread: str) -> None:
        super().__init__(thread)
        self.messages: list[dict[str, Any]] = []

    def body(self, text: str) -> dict[str, Any]:
        self.messages.append({"id": f"u{len(self.messages)}", "role": "user", "content": text})
        return agui_input(self.thread, self.messages)

    def decision(self, approved: bool) -> dict[str, Any]:
        resume = [
            {"interruptId": i, "status": "resolved", "payload": {"approved": approved}}
            for i in self.waiting
        ]
        return agui_input(self.thread, self.messages, resume)

    def read(self, frames: list[Any]) -> None:
        agui_messages(frames, self.messages)
        outcome = frames[-1].get("outcome") or {}
        self.waiting = [i["id"] for i in outcome.get("interrupts", ())]

    def text(self, frames: Sequence[Any]) -> str:
        return "".join(f["delta"] for f in frames if f["type"] == "TEXT_MESSAGE_CONTENT")


class UIStreamConversation(Conversation):
    path = "/api/chat"

    def __init__(self, thread: str) -> None:
        super().__init__(thread)
        self.messages: list[dict[str, Any]] = []

    def body(self, text: str) -> dict[str, Any]:
        part = {"type": "text", "text": text}
        self.messages.append({"id": f"u{len(self.messages)}", "role": "user", "parts": [part]})
        return {"id": self.thread, "messages": self.messages, "trigger": "submit-message"}

    def decision(self, approved: bool) -> dict[str, Any]:
        for part in self.messages[-1]["parts"]:
            if part.get("state") == "approval-requested":
                part["state"] = "approval-responded"
                part["approval"] = {**part["approval"], "approved": approved}
        return {"id": self.thread, "messages": self.messages, "trigger": "submit-message"}

    def read(self, frames: list[Any]) -> None:
        message_id = frames[0]["messageId"]
        if self.messages[-1]["id"] != message_id:
            self.messages.append({"id": message_id, "role": "assistant", "parts": []})
        message = self.messages[-1]
        self.waiting = []
        for frame in frames:
            kind = frame["type"]
            if kind == "tool-input-available":
                part = {"type": f"tool-{frame['toolName']}", "toolCallId": frame["toolCallId"]}
                message["parts"].append(
                    {**part, "state": "input-available", "input": frame["input"]}
                )
            elif kind == "tool-approval-request":
                part = next(
                    p for p in message["parts"] if p.get("toolCallId") == frame["toolCallId"]
                )
                part.update(state="approval-requested", approval={"id": frame["approvalId"]})
                self.waiting.append(frame["approvalId"])
            elif kind in ("tool-output-available", "tool-output-error", "tool-output-denied"):
                part = next(
                    p for p in message["parts"] if p.get("toolCallId") == frame["toolCallId"]
                )
                part["state"] = "output-available"
            elif kind == "message-metadata":
                message["metadata"] = {**message.get("metadata", {}), **frame["messageMetadata"]}

    def text(self, frames: Sequence[Any]) -> str:
        return "".join(f["delta"] for f in frames if f["type"] == "text-delta")


PROTOCOLS: dict[str, type[Conversation]] = {
    AGUIConversation.path: AGUIConversation,
    UIStreamConversation.path: UIStreamConversation,
}
"""Each UI endpoint's conversation, by path."""
