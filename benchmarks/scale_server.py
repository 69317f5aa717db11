"""The OpenAI-compatible server `scale.py` runs its conversations against (under uvicorn).

A plain ASGI app, no framework, so that the server's own CPU stays small next to the client's on a
shared machine. Each answer takes 50-200 ms. A conversation is two rounds: the first answer calls
`lookup` with the token of the user's message, the second repeats the tool's result as the final
answer, so a conversation that received another's answer is caught. `SCALE_FAULTS=1` injects, each
on 5% of the requests: 429 with `Retry-After`, 500, 503, a connection reset mid-body, a slow first
byte, and (streams) a stream cut off mid-way.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

FAULTS = os.environ.get("SCALE_FAULTS") == "1"
KINDS = ("429", "500", "503", "reset", "slow", "cut")
_random = random.Random(7)


def _answer(body: dict[str, Any]) -> dict[str, Any]:
    """The assistant message for a request: a `lookup` call in round one, the result after."""
    messages = body["messages"]
    last = messages[-1]
    if last["role"] == "tool":
        return {"role": "assistant", "content": f"The answer is {last['content']}."}
    token = last["content"].split()[-1]
    call = {
        "id": "call_0",  # as some local servers do: the same id in every answer
        "type": "function",
        "function": {"name": "lookup", "arguments": json.dumps({"token": token})},
    }
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def _completion(message: dict[str, Any]) -> bytes:
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    return json.dumps(
        {
            "id": "chatcmpl-scale",
            "object": "chat.completion",
            "created": 1,
            "model": "scale",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25},
        }
    ).encode()


def _chunks(message: dict[str, Any]) -> list[bytes]:
    def chunk(**fields: Any) -> bytes:
        head = {"id": "chatcmpl-scale", "object": "chat.completion.chunk", "created": 1}
        return b"data: " + json.dumps({**head, "model": "scale", **fields}).encode() + b"\n\n"

    finish = "tool_calls" if message.get("tool_calls") else "stop"
    if message.get("tool_calls"):
        call = message["tool_calls"][0]
        arguments = call["function"]["arguments"]
        half = len(arguments) // 2
        deltas = [
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "index": 0,
                        **call,
                        "function": {"name": "lookup", "arguments": arguments[:half]},
                    }
                ],
            },
            {"tool_calls": [{"index": 0, "function": {"arguments": arguments[half:]}}]},
        ]
    else:
        words = message["content"].split(" ")
        deltas = [{"role": "assistant", "content": ""}]
        deltas += [{"content": word + " "} for word in words]
    pieces = [chunk(choices=[{"index": 0, "delta": d, "finish_reason": None}]) for d in deltas]
    pieces.append(chunk(choices=[{"index": 0, "delta": {}, "finish_reason": finish}]))
    pieces.append(
        chunk(choices=[], usage={"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25})
    )
    pieces.append(b"data: [DONE]\n\n")
    return pieces


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    """The ASGI application: `POST /v1/chat/completions`, blocking or streamed."""
    if scope["type"] != "http":
        return
    raw = b""
    while True:
        event = await receive()
        raw += event.get("body", b"")
        if not event.get("more_body"):
            break
    body = json.loads(raw)
    fault = _random.choice(KINDS) if FAULTS and _random.random() < 0.05 * len(KINDS) else None
    if fault == "slow":
        await asyncio.sleep(2.0)
    await asyncio.sleep(_random.uniform(0.05, 0.2))
    if fault in ("429", "500", "503"):
        headers = [(b"content-type", b"application/json")]
        if fault == "429":
            headers.append((b"retry-after", b"1"))
        error = json.dumps({"error": {"message": f"injected {fault}", "type": "server_error"}})
        await send({"type": "http.response.start", "status": int(fault), "headers": headers})
        await send({"type": "http.response.body", "body": error.encode()})
        return
    message = _answer(body)
    if not body.get("stream"):
        payload = _completion(message)
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(payload)).encode()),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        if fault == "reset":
            await send(
                {
                    "type": "http.response.body",
                    "body": payload[: len(payload) // 2],
                    "more_body": True,
                }
            )
            raise ConnectionResetError("injected reset mid-body")
        await send({"type": "http.response.body", "body": payload})
        return
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/event-stream")],
        }
    )
    pieces = _chunks(message)
    for position, piece in enumerate(pieces):
        if fault in ("reset", "cut") and position == len(pieces) // 2:
            raise ConnectionResetError("injected cut mid-stream")
        await send({"type": "http.response.body", "body": piece, "more_body": True})
    await send({"type": "http.response.body", "body": b""})
