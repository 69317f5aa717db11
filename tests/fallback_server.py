"""A real local HTTP server speaking OpenAI Chat Completions and Anthropic Messages, with faults
injected per request: what each endpoint does is scripted in order, and every request body is
recorded.

Bodies are shaped as the vendors document them:
- OpenAI: https://platform.openai.com/docs/api-reference/chat/object (and `/chat/streaming` for
  the chunks); errors as in https://platform.openai.com/docs/guides/error-codes.
- Anthropic: https://docs.anthropic.com/en/api/messages (and `/messages-streaming` for the
  events); errors as in https://docs.anthropic.com/en/api/errors (529 `overloaded_error`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from http_server import Reply, Request, ScriptedServer

OPENAI = "openai"
ANTHROPIC = "anthropic"

OPENAI_ERRORS = {
    429: {
        "message": "Rate limit reached for gpt-4o-mini in organization org-x on requests per min "
        "(RPM): Limit 3, Used 3, Requested 1.",
        "type": "requests",
        "param": None,
        "code": "rate_limit_exceeded",
    },
    500: {
        "message": "The server had an error while processing your request. Sorry about that!",
        "type": "server_error",
        "param": None,
        "code": None,
    },
    400: {
        "message": "Invalid value for 'temperature': must be between 0 and 2.",
        "type": "invalid_request_error",
        "param": "temperature",
        "code": "invalid_value",
    },
}
ANTHROPIC_ERRORS = {
    529: {"type": "overloaded_error", "message": "Overloaded"},
    500: {"type": "api_error", "message": "Internal server error"},
    429: {
        "type": "rate_limit_error",
        "message": "Number of request tokens has exceeded your rate limit.",
    },
}


def openai_completion(text: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
        "object": "chat.completion",
        "created": 1741569952,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": text,
                    "refusal": None,
                    "annotations": [],
                },
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 19, "completion_tokens": 10, "total_tokens": 29},
        "service_tier": "default",
        "system_fingerprint": "fp_06737a9306",
    }


def openai_chunks(text: str) -> list[dict[str, Any]]:
    base = {
        "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
        "object": "chat.completion.chunk",
        "created": 1741569952,
        "model": "gpt-4o-mini-2024-07-18",
        "system_fingerprint": "fp_06737a9306",
    }
    words = text.split(" ")
    deltas = [{"role": "assistant", "content": "", "refusal": None}]
    deltas += [{"content": (" " if i else "") + word} for i, word in enumerate(words)]
    chunks = [
        {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}]}
        for delta in deltas
    ]
    chunks.append(
        {**base, "choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}]}
    )
    return chunks


def anthropic_message(text: str) -> dict[str, Any]:
    return {
        "id": "msg_013Zva2CMHLNnXjNJJKqJ2EF",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 25, "output_tokens": 12},
    }


def anthropic_events(text: str) -> list[tuple[str, dict[str, Any]]]:
    message = {**anthropic_message(""), "content": [], "stop_reason": None}
    message["usage"] = {"input_tokens": 25, "output_tokens": 1}
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": message}),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        ("ping", {"type": "ping"}),
    ]
    for i, word in enumerate(text.split(" ")):
        delta = {"type": "text_delta", "text": (" " if i else "") + word}
        events.append(
            ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta})
        )
    events += [
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 12},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return events


class FaultServer:
    """What each endpoint does next, and what it was sent.

    A step is `"ok"` (answer `text`), an HTTP status (answer with the vendor's error body),
    `"reset"` (drop the connection before answering, with a TCP reset), or `"cut"` (a stream
    whose first event is sent, then the connection dropped).
    """

    def __init__(self, text: str = "Sunny in Paris.") -> None:
        self.text = text
        self.steps: dict[str, list[str | int]] = {OPENAI: [], ANTHROPIC: []}
        self.bodies: dict[str, list[dict[str, Any]]] = {OPENAI: [], ANTHROPIC: []}
        self.keys: list[str] = []
        self.url = ""

    def script(self, openai: list[str | int], anthropic: list[str | int]) -> FaultServer:
        self.steps = {OPENAI: list(openai), ANTHROPIC: list(anthropic)}
        return self


def _answer(state: FaultServer, request: Request) -> Reply:
    body = request.json()
    vendor = OPENAI if request.path.endswith("/chat/completions") else ANTHROPIC
    state.bodies[vendor].append(body)
    state.keys.append(
        request.headers.get("authorization", "") + request.headers.get("x-api-key", "")
    )
    step = state.steps[vendor].pop(0)
    if step == "reset":
        return Reply(body=[], raw=True, reset=True)
    if isinstance(step, int):
        error = OPENAI_ERRORS[step] if vendor == OPENAI else ANTHROPIC_ERRORS[step]
        return Reply.json(
            {"error": error} if vendor == OPENAI else {"type": "error", "error": error}, step
        )
    if not body.get("stream"):
        answer = (
            openai_completion(state.text) if vendor == OPENAI else anthropic_message(state.text)
        )
        return Reply.json(answer)
    if vendor == OPENAI:
        frames = [f"data: {json.dumps(c)}\n\n" for c in openai_chunks(state.text)]
        frames.append("data: [DONE]\n\n")
    else:
        frames = [
            f"event: {name}\ndata: {json.dumps(data)}\n\n"
            for name, data in anthropic_events(state.text)
        ]
    sent = [frame.encode() for frame in frames]
    headers = {"content-type": "text/event-stream"}
    if step == "cut":  # the first frames, then the connection dropped
        return Reply(200, sent[:2], headers, reset=True)
    return Reply(200, sent, headers)


@contextmanager
def fault_server(text: str = "Sunny in Paris.") -> Iterator[FaultServer]:
    """A `FaultServer` listening on 127.0.0.1 for the block."""
    state = FaultServer(text)
    with ScriptedServer() as served:
        served.route("*", lambda request: _answer(state, request))
        state.url = served.url
        yield state
