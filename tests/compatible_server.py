"""A real OpenAI-compatible HTTP server on 127.0.0.1 that mimics the quirks of compatible servers.

It plays a deterministic model: with tools offered (and `tool_choice` not `none`), it calls the
first tool (or the named one) once per city the last user message names ("Paris", "London"),
one call only when `parallel_tool_calls` is false (unless it ignores that); after tool results,
or without tools, it answers in text. A tool without a `city` parameter is called once, each
`enum` parameter set to the value the prompt quotes, or, when the tool is `strict` and the server
enforces it, to the enum's first value (as constrained decoding would). Each quirk switches on one documented misbehaviour. The
server records every request body.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from http_server import Reply, Request, ScriptedServer

QUIRKS = frozenset(
    {
        "no_tools",  # 400 for any request with tools
        "drop_tools",  # tools accepted and left out of the prompt: text answers, same prompt size
        "decline",  # tools reach the model (a larger prompt), which answers in text
        "reject_required",  # 400 for tool_choice "required"
        "ignore_required",  # tool_choice "required" accepted, and a text answer when none fits
        "reject_named",  # 400 for a named tool_choice
        "ignore_named",  # a named tool_choice accepted, and the first tool called instead
        "unavailable_once",  # a 503 to the first request (retried by the client)
        "reject_none",  # 400 for tool_choice "none"
        "reject_parallel",  # 400 for the parallel_tool_calls field
        "ignore_parallel",  # parallel_tool_calls accepted, and ignored
        "single_call",  # never more than one call per answer
        "no_index",  # streamed tool-call pieces without `index`
        "whole_calls",  # streamed tool calls sent whole, in one piece each
        "reasoning_content",  # reasoning in `reasoning_content`
        "reasoning",  # reasoning in `reasoning`
        "refuse_strict",  # 400 for a tool with `strict: true`
        "ignore_strict",  # `strict: true` accepted, and not enforced
        "bad_arguments",  # tool-call arguments that are not JSON
        "reject_stream_options",  # 400 for `stream_options`
        "system_first",  # 400 for a system message after the first message
        "no_system",  # 400 for any system message
        "no_choices",  # a 200 answer without choices
        "overflow_413",  # 413 (not 400) for more tools than `max_tools`
        "overflow_no_choices",  # a 200 answer without choices for more tools than `max_tools`
        "overflow_not_json",  # a 200 answer that is not JSON for more tools than `max_tools`
        "no_images",  # 400 for an image part in a user message
        "images_500",  # 500 for an image part, as llama.cpp without a vision projector answers
    }
)
CITIES = ("Paris", "London")


class CompatibleServer:
    """The server's state: its quirks, refused schema keywords, tool limit, and the requests it
    received."""

    def __init__(
        self, quirks: set[str], refused_keywords: set[str], max_tools: int | None = None
    ) -> None:
        unknown = set(quirks) - QUIRKS
        assert not unknown, unknown
        self.quirks = quirks
        self.refused_keywords = refused_keywords
        self.max_tools = max_tools
        self.requests: list[dict[str, Any]] = []
        self.url = ""

    # -- the model ----------------------------------------------------------------------------

    def refusal(self, body: dict[str, Any]) -> str | None:
        """Why this server answers 400, if it does."""
        q = self.quirks
        tools = body.get("tools") or []
        choice = body.get("tool_choice")
        messages = body.get("messages") or []
        roles = [m.get("role") for m in messages]
        if "no_images" in q and _has_image(messages):
            return "image input is not supported by this model"
        if "no_system" in q and "system" in roles:
            return "system role is not supported"
        if "system_first" in q and "system" in roles[1:]:
            return "System message must be at the beginning."
        if tools and "no_tools" in q:
            return "tools are not supported by this model"
        if self.overflow(body) and not q & {"overflow_no_choices", "overflow_not_json"}:
            return (
                "Invalid 'tools': array too long. Expected an array with maximum length "
                f"{self.max_tools}, but got an array with length {len(tools)} instead."
            )
        if choice == "required" and "reject_required" in q:
            return "tool_choice 'required' is not supported"
        if choice == "none" and "reject_none" in q:
            return "tool_choice 'none' is not supported"
        if isinstance(choice, dict) and "reject_named" in q:
            return "named tool_choice is not supported"
        if "parallel_tool_calls" in body and "reject_parallel" in q:
            return "Unrecognized request argument supplied: parallel_tool_calls"
        if "stream_options" in body and "reject_stream_options" in q:
            return "stream_options is not supported"
        for tool in tools:
            function = tool.get("function", {})
            if function.get("strict") and "refuse_strict" in q:
                return "strict is not supported"
            found = _keywords(function.get("parameters", {})) & self.refused_keywords
            if found:
                return f"Unknown name {sorted(found)[0]!r} in function parameters"
        return None

    def overflow(self, body: dict[str, Any]) -> bool:
        """Whether `body` offers more tools than this server takes."""
        return self.max_tools is not None and len(body.get("tools") or ()) > self.max_tools

    def answer(self, body: dict[str, Any]) -> tuple[str | None, list[tuple[str, str]]]:
        """The text and the tool calls (name, arguments) of the answer."""
        tools = body.get("tools") or []
        choice = body.get("tool_choice")
        messages = body.get("messages") or []
        last = messages[-1] if messages else {}
        # After tool results: the last message is one, or the user message the content of
        # tool results moved to (Chat Completions tool messages carry text only).
        roles = [m.get("role") for m in messages[-2:]]
        if not tools or choice == "none" or roles[-1:] == ["tool"] or roles == ["tool", "user"]:
            return "Done.", []
        if self.quirks & {"drop_tools", "decline"}:
            return "It is sunny.", []
        name = tools[0]["function"]["name"]
        if isinstance(choice, dict) and "ignore_named" not in self.quirks:
            name = choice["function"]["name"]
        text = json.dumps(last.get("content"))
        function = next(t["function"] for t in tools if t["function"]["name"] == name)
        if "city" not in function.get("parameters", {}).get("properties", {}):
            return None, [(name, self.arguments(function, str(last.get("content"))))]
        cities = [city for city in CITIES if city in text]
        forced = choice == "required" and "ignore_required" not in self.quirks
        if not cities and (forced or isinstance(choice, dict)):
            cities = ["Paris"]
        single = "single_call" in self.quirks or (
            body.get("parallel_tool_calls") is False and "ignore_parallel" not in self.quirks
        )
        if single:
            cities = cities[:1]
        return (None if cities else "No tool needed."), [
            (name, self.encode({"city": city})) for city in cities
        ]

    def arguments(self, function: dict[str, Any], prompt: str) -> str:
        """Arguments for a tool without `city`: each enum parameter set as the module says."""
        enforced = function.get("strict") and "ignore_strict" not in self.quirks
        quoted = re.findall(r'"([^"]+)"', prompt)
        arguments = {}
        for key, schema in function["parameters"].get("properties", {}).items():
            allowed = schema.get("enum") or [""]
            arguments[key] = allowed[0] if enforced or not quoted else quoted[0]
        return self.encode(arguments)

    def encode(self, arguments: dict[str, Any]) -> str:
        return '{"broken": ' if "bad_arguments" in self.quirks else json.dumps(arguments)

    def reasoning(self) -> dict[str, str]:
        for field in ("reasoning_content", "reasoning"):
            if field in self.quirks:
                return {field: "Thinking briefly."}
        return {}

    def completion(self, body: dict[str, Any]) -> dict[str, Any]:
        text, calls = self.answer(body)
        offered = 0 if "drop_tools" in self.quirks else len(body.get("tools") or ())
        prompt = 10 + 50 * offered  # each tool's declaration is in the prompt
        message: dict[str, Any] = {"role": "assistant", "content": text, **self.reasoning()}
        if calls:
            message["tool_calls"] = [
                {"id": f"call_{n}", "type": "function", "function": {"name": f, "arguments": a}}
                for n, (f, a) in enumerate(calls)
            ]
        return {
            "id": "chatcmpl-local",
            "object": "chat.completion",
            "model": body.get("model"),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if calls else "stop",
                }
            ],
            "usage": {"prompt_tokens": prompt, "completion_tokens": 5, "total_tokens": prompt + 5},
        }

    def chunks(self, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        text, calls = self.answer(body)
        base = {"id": "chatcmpl-local", "object": "chat.completion.chunk", "model": body["model"]}

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

        yield chunk({"role": "assistant", "content": ""})
        if reasoning := self.reasoning():
            yield chunk(reasoning)
        if text:
            yield chunk({"content": text})
        for n, (name, arguments) in enumerate(calls):
            index = {} if "no_index" in self.quirks else {"index": n}
            head = {**index, "id": f"call_{n}", "type": "function"}
            if "whole_calls" in self.quirks:
                whole = {**head, "function": {"name": name, "arguments": arguments}}
                yield chunk({"tool_calls": [whole]})
                continue
            yield chunk({"tool_calls": [{**head, "function": {"name": name, "arguments": ""}}]})
            middle = len(arguments) // 2
            for piece in (arguments[:middle], arguments[middle:]):
                yield chunk({"tool_calls": [{**index, "function": {"arguments": piece}}]})
        yield chunk({}, "tool_calls" if calls else "stop")
        if (body.get("stream_options") or {}).get("include_usage"):
            usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
            yield {**base, "choices": [], "usage": usage}


def _has_image(messages: list[Any]) -> bool:
    return any(
        isinstance(part, dict) and part.get("type") == "image_url"
        for message in messages
        if isinstance(message.get("content"), list)
        for part in message["content"]
    )


def _keywords(schema: Any) -> set[str]:
    """Every keyword used anywhere in `schema` (property names are not keywords)."""
    if isinstance(schema, list):
        return set().union(*(_keywords(v) for v in schema))
    if not isinstance(schema, dict):
        return set()
    found = set(schema)
    for key, value in schema.items():
        if key in ("properties", "$defs") and isinstance(value, dict):
            found |= set().union(*(_keywords(v) for v in value.values()))
        elif key not in ("enum", "const", "default", "examples"):
            found |= _keywords(value)
    return found


def _answer(state: CompatibleServer, request: Request) -> Reply:
    body = request.json()
    state.requests.append(body)
    if request.path != "/v1/chat/completions":
        return Reply.json({"error": {"message": "not found"}}, 404)
    if "unavailable_once" in state.quirks and len(state.requests) == 1:
        return Reply.json({"error": {"message": "loading the model"}}, 503)
    if "images_500" in state.quirks and _has_image(body.get("messages") or []):
        error = {"message": "image input is not supported - hint: no mmproj"}
        return Reply.json({"error": error}, 500)
    refusal = state.refusal(body)
    overflow = state.overflow(body)
    if refusal is not None:
        error = {"message": refusal, "type": "invalid_request_error"}
        status = 413 if overflow and "overflow_413" in state.quirks else 400
        return Reply.json({"error": error}, status)
    if "no_choices" in state.quirks or (overflow and "overflow_no_choices" in state.quirks):
        return Reply.json({"object": "chat.completion", "choices": []})
    if overflow and "overflow_not_json" in state.quirks:
        return Reply(200, b"<html>Bad Gateway</html>", {"content-type": "application/json"})
    if not body.get("stream"):
        return Reply.json(state.completion(body))
    return Reply.sse(state.chunks(body), done=True)


@contextmanager
def compatible_server(
    *quirks: str,
    refused_keywords: set[str] | None = None,
    max_tools: int | None = None,
) -> Iterator[CompatibleServer]:
    """Serve on 127.0.0.1 (a free port) until the block ends; more tools than `max_tools` in one
    request are refused with a 400 (or a quirk's answer)."""
    state = CompatibleServer(set(quirks), refused_keywords or set(), max_tools)
    with ScriptedServer() as served:
        served.route("*", lambda request: _answer(state, request))
        state.url = f"{served.url}/v1"
        yield state
