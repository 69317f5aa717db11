"""`agentforge-typed probe`: measure what a model behind an OpenAI-compatible endpoint supports.

A small bounded set of live requests, each with a tiny prompt and a `max_tokens` limit, one per
feature of a `ModelProfile`: tool calling, each `tool_choice` mode, the `parallel_tool_calls`
parameter and actual parallel calls, whether strict schemas are enforced, refused schema
keywords, streamed tool-call deltas and their `index`, usage in streams, system-message
placement, image parts in user messages, and the reasoning field (read off every answer); then
`max_tools`, by a bisection of
at most `MAX_TOOLS_REQUESTS` requests. A 400 or 422 answer means "refused"; any other failure (a
wrong key, a wrong URL) stops the probe.

No answer is trusted: each request ends within `timeout` seconds whatever the server does (it may
drip a byte a second, headers included: the requests run on an event loop, under one deadline),
the probe reads at most `MAX_ANSWER_BYTES` of one answer and keeps counts of a stream, not its
chunks, an answer of the wrong shape stops it with a `ModelError` naming the part, and what it
quotes of a server is scrubbed of the key.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator, Set
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import httpx
import pydantic_core

from .._exceptions import ModelError
from .._sync import run_sync
from .._transport._exchange import capped
from ..providers._http import HttpShell
from ..providers._openai_wire import openai_headers
from ..providers._profiles import PROFILES, ModelProfile, ToolChoiceMode
from ..providers._retry import RetryPolicy
from ._text import printable

__all__ = [
    "BASE_REQUESTS",
    "DEFAULT_TIMEOUT",
    "EVIDENCE_CHARS",
    "KEYWORD_REQUESTS",
    "MAX_ANSWER_BYTES",
    "MAX_TOOLS_REQUESTS",
    "MAX_TOOLS_TRIED",
    "Probe",
    "ProbeResult",
    "max_requests",
    "plan",
    "probe",
]

T = TypeVar("T")
ValueT = TypeVar("ValueT")

MAX_TOKENS = 200
"""Each probe's `max_tokens`: enough for a tool call or two, even with brief reasoning first."""
DEFAULT_TIMEOUT = 120.0
"""Seconds one request may take, from sending it to the last byte of its answer, retries
included (`--timeout`): room for a slow local model to read 1024 tools and answer."""
MAX_ANSWER_BYTES = 1024 * 1024
"""Bytes the probe reads of one answer (a body, a whole stream, an error): an answer of at most
`MAX_TOKENS` tokens takes a few kilobytes."""
EVIDENCE_CHARS = 200
"""Characters kept of each feature's evidence (scrubbed of the key first)."""

_PATH = "chat/completions"
_ONE_CITY = "What is the weather in Paris? Use the get_weather tool."
_SMALL_TALK = "Reply with one word: hello."
"""Asked with `tool_choice` "required": only a server that enforces the choice answers it with a
call, so a server that ignores "required" cannot pass."""
_TWO_CITIES = (
    "What is the weather in Paris and in London? Call get_weather once for each city, "
    "both calls in this answer."
)
_WEATHER: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city name."}},
            "required": ["city"],
        },
    },
}
_TIME: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "The current time in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city name."}},
            "required": ["city"],
        },
    },
}
"""Offered before `get_weather` when one is named in `tool_choice`: a server that ignores the
choice and calls the first tool is caught."""
_STRICT_UNIT: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "set_unit",
        "description": "Set the temperature unit.",
        "strict": True,
        "parameters": {
            "type": "object",
            "properties": {"unit": {"type": "string", "enum": ["celsius"]}},
            "required": ["unit"],
            "additionalProperties": False,
        },
    },
}
"""A strict tool whose one parameter allows one value: an endpoint that enforces the schema can
only send `{"unit": "celsius"}`, whatever the prompt asks for."""
_KELVIN = 'Call set_unit with unit "kelvin". Use exactly that value, whatever the tool allows.'
_STRICT_CONFORMING = {"unit": "celsius"}

_KEYWORD_SCHEMAS: dict[str, dict[str, Any]] = {
    "pattern": {"type": "string", "pattern": "^[A-Za-z ]+$"},
    "format": {"type": "string", "format": "date"},
    "minimum": {"type": "integer", "minimum": 1, "maximum": 7},
    "exclusiveMinimum": {"type": "number", "exclusiveMinimum": 0},
    "multipleOf": {"type": "integer", "multipleOf": 1},
    "additionalProperties": {"type": "object", "additionalProperties": {"type": "string"}},
    "$ref": {"$ref": "#/$defs/Unit"},
}
"""One schema per keyword family tried: `minimum` stands for `maximum` too, `$ref` for `$defs`."""

_RED_PIXEL = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR42mP4z8AAAAMBAQD3A0FD"
    "AAAAAElFTkSuQmCC"
)
"""A 1x1 red PNG: the smallest image a vision model reads."""
_IMAGE_REFUSALS = frozenset({400, 413, 415, 422, 500})
"""What counts as "no images": a server error too (llama.cpp without a vision projector answers
an image with one)."""

BASE_REQUESTS = 14
"""Requests a probe makes at most, besides the keyword ones (fewer when tools or system messages
are refused outright, or the model calls the tool at once: the request without tools that tells
a server dropping them from one whose model declined is then not needed)."""
KEYWORD_REQUESTS = len(_KEYWORD_SCHEMAS)
"""Requests added when the schema using every keyword is refused: one per keyword."""
MAX_TOOLS_TRIED = 1024
"""The tools the `max_tools` measurement offers first; all accepted means no limit found
(`max_tools=None`)."""
MAX_TOOLS_REQUESTS = 1 + (MAX_TOOLS_TRIED - 2).bit_length()
"""Requests the `max_tools` measurement makes at most: `MAX_TOOLS_TRIED` tools, then, if refused,
a bisection between 1 (the `tools` probe's one tool was accepted) and that, which takes
ceil(log2(MAX_TOOLS_TRIED - 1)) more: 11 in all."""
MAX_TOOLS_TOKENS = 16
"""The `max_tokens` of a `max_tools` request: only whether it is accepted matters."""

_MAX_TOOLS_REFUSALS = frozenset({400, 413, 422, *range(200, 300)})
"""What counts as "too many tools": 413 (payload too large) too, and a 2xx answer too malformed
to read (some gateways answer an overflow with a 200 and garbage)."""


def max_requests(*, max_tools: bool = True) -> int:
    """The most requests a probe makes: the base ones, one per keyword when the schema using all
    of them is refused, and the `max_tools` measurement unless it is turned off."""
    return BASE_REQUESTS + KEYWORD_REQUESTS + (MAX_TOOLS_REQUESTS if max_tools else 0)


def plan(*, max_tools: bool = True) -> str:
    """What a probe will send, as the CLI states it before sending anything."""
    parts = [str(BASE_REQUESTS), f"up to {KEYWORD_REQUESTS} more if a schema keyword is refused"]
    if max_tools:
        parts.append(
            f"up to {MAX_TOOLS_REQUESTS} more measuring max_tools "
            f"({MAX_TOOLS_TRIED} tiny tools first)"
        )
    total = max_requests(max_tools=max_tools)
    return f"at most {total} requests: {', '.join(parts)}; max_tokens={MAX_TOKENS} or less each"


def _keyword_tool(keywords: list[str]) -> dict[str, Any]:
    properties = {"city": {"type": "string", "description": "The city name."}}
    properties.update({f"p_{n}": _KEYWORD_SCHEMAS[k] for n, k in enumerate(keywords)})
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "required": ["city"],
    }
    if "$ref" in keywords:
        parameters["$defs"] = {"Unit": {"type": "string", "enum": ["C", "F"]}}
    return {"type": "function", "function": {**_WEATHER["function"], "parameters": parameters}}


@dataclass
class ProbeResult:
    """What the probe found: a profile, and for each feature the evidence in a few words."""

    profile: ModelProfile
    evidence: dict[str, str]
    requests: int

    def table(self) -> str:
        """The capability table, one feature a line."""
        values = self.profile.model_dump(mode="json", exclude={"name", "policy"})
        width = max(map(len, values))
        lines = [f"{'feature':<{width}}  {'value':<24}  evidence"]
        for name, value in values.items():
            shown = ", ".join(sorted(value)) if isinstance(value, list) else str(value)
            lines.append(f"{name:<{width}}  {shown or '-':<24}  {self.evidence.get(name, '')}")
        return "\n".join(lines)

    def as_json(self) -> dict[str, Any]:
        """The result as JSON: the profile, the evidence and the number of requests made."""
        return {
            "profile": self.profile.model_dump(mode="json"),
            "evidence": self.evidence,
            "requests": self.requests,
        }


Outcome = Literal["ok", "refused"]
_REFUSALS = frozenset({400, 422})
"""The statuses that mean "refused" (any other failure stops the probe)."""


@dataclass
class Probe:
    """One probing session against one endpoint."""

    model: str
    base_url: str
    api_key: str | None = None
    base: ModelProfile = field(default_factory=lambda: PROFILES["openai"])
    """Where the values the probe does not measure (`policy`, and `max_tools` when
    `measure_max_tools` is off) come from."""
    on_request: Callable[[str], None] = lambda name: None
    """Called before each request with its name (the CLI shows progress with it)."""
    measure_max_tools: bool = True
    """Whether to measure `max_tools` (up to `MAX_TOOLS_REQUESTS` requests, the first offering
    `MAX_TOOLS_TRIED` tools)."""
    timeout: float = DEFAULT_TIMEOUT
    """Seconds each request may take, from sending it to the last byte of its answer (retries
    included)."""
    max_answer_bytes: int = MAX_ANSWER_BYTES
    """Bytes of one answer (a body, a stream, an error) the probe reads before it stops."""

    def __post_init__(self) -> None:
        self._open()
        self._reasoning: set[str] = set()
        self.found: dict[str, Any] = {}
        self.evidence: dict[str, str] = {}

    def _open(self) -> None:
        """A shell on a fresh client and capped transport."""
        self._transport = _CappedTransport(self.max_answer_bytes)
        self._shell = HttpShell(
            provider="probe",
            base_url=self.base_url,
            # No compression: the cap counts the bytes the probe decodes.
            headers={**openai_headers(self.api_key, None, None), "accept-encoding": "identity"},
            secrets=[self.api_key],
            async_http_client=httpx.AsyncClient(transport=self._transport, timeout=self.timeout),
            retry=RetryPolicy(max_retries=1),
        )

    # -- requests -----------------------------------------------------------------------------

    def _body(self, messages: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
        # Temperature 0: one sampled answer must not decide a feature (a second run disagreed).
        return {
            "model": self.model,
            "messages": messages,
            "max_tokens": MAX_TOKENS,
            "temperature": 0,
            **fields,
        }

    async def _exchange(
        self, name: str, refusals: Set[int], read: Callable[[], Awaitable[T]]
    ) -> tuple[Outcome, T | str]:
        """`read()`'s result within `timeout`, or `"refused"` with the error text for a status in
        `refusals`; any other failure raises `ModelError`."""
        self.on_request(name)
        self._transport.request = name
        try:
            return "ok", await asyncio.wait_for(read(), self.timeout)
        except asyncio.TimeoutError:
            raise ModelError(
                f"probe {name}: no complete answer within {self.timeout:g}s (--timeout)"
            ) from None
        except ModelError as error:
            if error.status_code in refusals:
                return "refused", error.message
            raise

    async def _post(
        self, name: str, body: dict[str, Any], refusals: Set[int] = _REFUSALS
    ) -> tuple[Outcome, Any]:
        """The answer's JSON, or `"refused"` with the error text for a status in `refusals`."""
        return await self._exchange(name, refusals, lambda: self._shell.apost_json(_PATH, body))

    async def _send(self, name: str, body: dict[str, Any]) -> tuple[Outcome, Any]:
        """The answer's message, or `"refused"` with the error text for a 400/422."""
        outcome, answer = await self._post(name, body)
        if outcome == "refused":
            return outcome, answer
        message = _checked_message(name, answer)
        self._note_reasoning(message)
        return "ok", message

    async def _stream(self, name: str, body: dict[str, Any]) -> tuple[Outcome, _Streamed | str]:
        """What the stream showed (nothing of it is kept), or `"refused"` with the error text
        for a 400/422."""

        async def read() -> _Streamed:
            seen = _Streamed()
            events = self._shell.astream_sse(_PATH, {**body, "stream": True})
            async with aclosing(events):
                async for event in events:
                    if event.data == "[DONE]":
                        break
                    try:
                        chunk = pydantic_core.from_json(event.data)
                    except ValueError as exc:
                        raise ModelError(f"probe {name}: malformed stream chunk: {exc}") from None
                    seen.chunks += 1
                    for delta in _checked_deltas(name, seen.chunks, chunk):
                        self._note_reasoning(delta)
                        seen.take(delta)
                    if isinstance(chunk.get("usage"), dict):
                        seen.usage = True
            return seen

        return await self._exchange(name, _REFUSALS, read)

    def _note_reasoning(self, message: Any) -> None:
        if isinstance(message, dict):
            for key in ("reasoning_content", "reasoning"):
                if isinstance(message.get(key), str) and message[key]:
                    self._reasoning.add(key)

    def _set(self, feature: str, value: Any, evidence: str) -> None:
        self.found[feature] = value
        self.evidence[feature] = self._quote(evidence, EVIDENCE_CHARS)

    def _quote(self, text: str, limit: int = 60) -> str:
        """`text` as the probe may print it: the key scrubbed, one line, at most `limit`
        characters (cut after scrubbing, so no part of a key survives the cut)."""
        return _shorten(printable(self._shell.scrub(text)), limit)

    # -- the probes ---------------------------------------------------------------------------

    def run(self) -> ProbeResult:
        """Make the probe requests and return what they found.

        Raises:
            ModelError: a failure other than a refusal, a malformed answer, an answer over
                `max_answer_bytes`, or a request past `timeout`; its text holds no key.
        """
        return run_sync(self.arun)

    async def arun(self) -> ProbeResult:
        """Async `run`."""
        if self._shell.async_client.is_closed:  # run before
            self._open()
        try:
            with self._shell.redacting():
                if await self._tools():
                    await self._tool_choice()
                    await self._parallel()
                    await self._strict()
                    await self._keywords()
                    await self._stream_tools()
                    await self._max_tools()
                await self._stream_usage()
                await self._system()
                await self._images()
        finally:
            await self._shell.async_client.aclose()
        reasoning = next(
            (key for key in ("reasoning_content", "reasoning") if key in self._reasoning), None
        )
        self._set(
            "reasoning_field",
            reasoning,
            f"seen in answers: {reasoning}" if reasoning else "no reasoning field in any answer",
        )
        measured = {**self.base.model_dump(), "name": self.model, **self.found}
        profile = ModelProfile.model_validate(measured)
        # What the server received: a retried request counts again.
        return ProbeResult(profile, self.evidence, self._transport.sent)

    async def _tools(self) -> bool:
        body = self._body([_user(_ONE_CITY)], tools=[_WEATHER])
        outcome, answer = await self._post("tools", body)
        if outcome == "refused":
            self._set("tools", False, f"refused: {answer}")
            return False
        message = _checked_message("tools", answer)
        self._note_reasoning(message)
        if _calls(message):
            self._set("tools", True, "the model called the tool")
            return True
        # No call: a server that drops the tools prompts as many tokens with them as without; a
        # model that saw them and declined is no reason to write `tools: false`.
        plain_outcome, plain = await self._post(
            "tools: the same without them", self._body(body["messages"])
        )
        with_tools = _prompt_tokens(answer)
        without = _prompt_tokens(plain) if plain_outcome == "ok" else None
        if with_tools is not None and without is not None and with_tools <= without:
            self._set(
                "tools",
                False,
                f"dropped: the prompt is {with_tools} tokens with the tool and {without} without",
            )
        else:
            counts = (
                ""
                if with_tools is None or without is None
                else f" ({with_tools} > {without} prompt tokens)"
            )
            self._set(
                "tools",
                True,
                f"accepted: the tool reached the model{counts}, which answered without calling it",
            )
        return False

    async def _tool_choice(self) -> None:
        modes: set[ToolChoiceMode] = {"auto"}
        notes = ["auto: ok"]
        choices: list[tuple[ToolChoiceMode, Any]] = [
            ("required", "required"),
            ("named", {"type": "function", "function": {"name": "get_weather"}}),
            ("none", "none"),
        ]
        for mode, choice in choices:
            # Two tools when one is named: an ignored choice calling the first one cannot pass.
            tools = [_TIME, _WEATHER] if mode == "named" else [_WEATHER]
            prompt = _SMALL_TALK if mode == "required" else _ONE_CITY
            outcome, answer = await self._send(
                f"tool_choice={mode}",
                self._body([_user(prompt)], tools=tools, tool_choice=choice),
            )
            called = {_name(call) for call in _calls(answer)} if outcome == "ok" else set()
            if outcome == "refused":
                notes.append(f"{mode}: refused")
            elif mode == "none" and called:
                notes.append("none: ignored (the model still called the tool)")
            elif mode != "none" and not called:
                notes.append(f"{mode}: ignored (no tool call)")
            elif mode == "named" and called != {"get_weather"}:
                notes.append(f"named: ignored (called {', '.join(sorted(called))})")
            else:
                modes.add(mode)
                notes.append(f"{mode}: ok")
        self._set("tool_choice", sorted(modes), "; ".join(notes))

    async def _parallel(self) -> None:
        body = self._body([_user(_TWO_CITIES)], tools=[_WEATHER])
        outcome, answer = await self._send("parallel calls", body)
        calls = len(_calls(answer)) if outcome == "ok" else 0
        self._set("parallel_tool_calls", calls > 1, f"{calls} call(s) for two cities")
        outcome, answer = await self._send(
            "parallel_tool_calls=false", {**body, "parallel_tool_calls": False}
        )
        calls_off = len(_calls(answer)) if outcome == "ok" else 0
        if outcome == "refused":
            self._set("parallel_tool_calls_parameter", False, f"refused: {answer}")
        elif calls_off > 1:
            self._set(
                "parallel_tool_calls_parameter",
                False,
                f"ignored: {calls_off} calls with parallel_tool_calls false",
            )
        else:
            honoured = "honoured: one call with it false" if calls > 1 else "accepted"
            self._set("parallel_tool_calls_parameter", True, honoured)

    async def _strict(self) -> None:
        # Asked for a value outside the enum, a model the endpoint does not constrain tends to
        # echo it: arguments off the schema prove `strict` is not enforced. The allowed value is
        # evidence, not proof (the model may have picked it by itself).
        modes = self.found.get("tool_choice", ())
        forced: dict[str, Any] = {}
        if "named" in modes:
            forced["tool_choice"] = {"type": "function", "function": {"name": "set_unit"}}
        elif "required" in modes:
            forced["tool_choice"] = "required"
        outcome, answer = await self._send(
            "strict", self._body([_user(_KELVIN)], tools=[_STRICT_UNIT], **forced)
        )
        if outcome == "refused":
            self._set("strict_schema", False, f"refused: {answer}")
            return
        calls = _calls(answer)
        if not calls:
            self._set("strict_schema", False, "accepted, but no tool call: enforcement not seen")
            return
        function = calls[0].get("function") or {}
        raw = function.get("arguments")
        if _parsed(raw) == _STRICT_CONFORMING:
            evidence = 'accepted; asked for "kelvin", the model sent the one allowed "celsius"'
            self._set("strict_schema", True, evidence)
        else:
            shown = self._quote(repr(raw))
            self._set(
                "strict_schema", False, f"accepted, not enforced: off-schema arguments {shown}"
            )

    async def _keywords(self) -> None:
        every = list(_KEYWORD_SCHEMAS)
        outcome, _ = await self._send(
            "schema keywords", self._body([_user(_ONE_CITY)], tools=[_keyword_tool(every)])
        )
        if outcome == "ok":
            self._set("refused_schema_keywords", [], f"accepted: {', '.join(every)}")
            return
        refused = []
        for keyword in every:
            outcome, _ = await self._send(
                f"schema keyword {keyword}",
                self._body([_user(_ONE_CITY)], tools=[_keyword_tool([keyword])]),
            )
            if outcome == "refused":
                refused.append(keyword)
                if keyword == "$ref":
                    refused.append("$defs")
                if keyword == "minimum":
                    refused.append("maximum")
        self._set("refused_schema_keywords", refused, "each keyword tried alone")

    async def _stream_tools(self) -> None:
        _, seen = await self._stream(
            "stream with tools", self._body([_user(_TWO_CITIES)], tools=[_WEATHER])
        )
        if not isinstance(seen, _Streamed):
            self._set("stream_tool_deltas", False, f"refused: {seen}")
            self._set("stream_tool_index", False, "streaming with tools refused")
            return
        if not seen.pieces:
            self._set("stream_tool_deltas", False, "no tool call in the stream")
            self._set("stream_tool_index", False, "no tool call in the stream")
            return
        indexed = seen.unindexed == 0
        deltas = seen.pieces > max(seen.calls, 1)
        self._set(
            "stream_tool_deltas",
            deltas,
            f"{seen.pieces} piece(s) for {seen.calls} call(s)"
            + ("" if deltas else ": whole calls, no argument deltas"),
        )
        self._set(
            "stream_tool_index",
            indexed,
            "every piece has an index" if indexed else "pieces without index",
        )

    async def _max_tools(self) -> None:
        if not self.measure_max_tools:
            self.evidence["max_tools"] = f"not measured: from the {self.base.name} profile"
            return
        # Only acceptance matters: tiny tools, and no call wanted when "none" is supported.
        choice = {"tool_choice": "none"} if "none" in self.found["tool_choice"] else {}
        accepted, refused = 1, MAX_TOOLS_TRIED
        count, why = MAX_TOOLS_TRIED, ""
        for _ in range(MAX_TOOLS_REQUESTS):
            tools = [_tiny_tool(n) for n in range(count)]
            body = self._body(
                [_user("Say hi.")], tools=tools, max_tokens=MAX_TOOLS_TOKENS, **choice
            )
            outcome, answer = await self._post(f"max_tools {count}", body, _MAX_TOOLS_REFUSALS)
            message = _message(answer) if outcome == "ok" else None
            if message is not None:
                self._note_reasoning(message)
                if count == MAX_TOOLS_TRIED:
                    evidence = f"{count} tools accepted: no limit up to that"
                    self._set("max_tools", None, evidence)
                    return
                accepted = count
            else:
                refused = count
                why = answer if outcome == "refused" else "an answer without a message"
            if refused - accepted <= 1:
                break
            count = (accepted + refused) // 2
        evidence = f"{accepted} tools accepted, {refused} refused: {self._quote(why)}"
        self._set("max_tools", accepted, evidence)

    async def _stream_usage(self) -> None:
        body = self._body([_user("Say hi.")], stream_options={"include_usage": True})
        _, seen = await self._stream("stream usage", body)
        if not isinstance(seen, _Streamed):
            self._set("stream_usage", False, f"stream_options refused: {seen}")
            return
        usage = seen.usage
        self._set(
            "stream_usage",
            usage,
            "usage in the stream" if usage else "stream_options accepted, no usage sent",
        )

    async def _images(self) -> None:
        # Acceptance only: a text model behind a lenient server may take the image unseen.
        parts = [
            {"type": "text", "text": "What color is this image? Answer in one word."},
            {"type": "image_url", "image_url": {"url": _RED_PIXEL}},
        ]
        body = self._body([{"role": "user", "content": parts}])
        outcome, answer = await self._post("image in a user message", body, _IMAGE_REFUSALS)
        if outcome == "refused":
            kinds = sorted(self.base.user_content - {"image"})
            self._set("user_content", kinds, f"an image part is refused: {answer}")
            return
        message = _checked_message("image in a user message", answer)
        self._note_reasoning(message)
        said = message.get("content")
        evidence = "an image part is accepted"
        if isinstance(said, str) and said.strip():
            evidence += f"; the model answered {self._quote(said.strip(), 30)}"
        self._set("user_content", sorted(self.base.user_content), evidence)

    async def _system(self) -> None:
        outcome, answer = await self._send(
            "system first",
            self._body([{"role": "system", "content": "Be brief."}, _user("Say hi.")]),
        )
        if outcome == "refused":
            self._set("system_message", "none", f"a system message is refused: {answer}")
            return
        later = [
            _user("Say hi."),
            {"role": "assistant", "content": "Hi."},
            {"role": "system", "content": "Be brief."},
            _user("Say hi again."),
        ]
        outcome, answer = await self._send("system later", self._body(later))
        if outcome == "refused":
            self._set("system_message", "first", f"a later system message is refused: {answer}")
        else:
            self._set("system_message", "any", "a later system message is accepted")


def probe(
    model: str,
    base_url: str,
    api_key: str | None = None,
    *,
    base: ModelProfile | None = None,
    on_request: Callable[[str], None] = lambda name: None,
    max_tools: bool = True,
    timeout: float = DEFAULT_TIMEOUT,
) -> ProbeResult:
    """Probe `model` at `base_url` and return the profile it measured; `max_tools=False` skips
    the `max_tools` measurement (keeping `base`'s value); each request may take `timeout`
    seconds.

    Raises:
        ModelError: a failure other than a refusal (400/422): a wrong key, URL, or model; an
            answer that is malformed, over `MAX_ANSWER_BYTES`, or not complete within `timeout`.
            Its text holds no key.
    """
    session = Probe(
        model, base_url, api_key, base or PROFILES["openai"], on_request, max_tools, timeout
    )
    return session.run()


def _tiny_tool(n: int) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": f"t{n}", "parameters": {"type": "object", "properties": {}}},
    }


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def _message(answer: Any) -> dict[str, Any] | None:
    """The first choice's message of a completion, `None` when it has none."""
    try:
        message = answer["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        return None
    return message if isinstance(message, dict) else None


def _checked_message(name: str, answer: Any) -> dict[str, Any]:
    """The first choice's message, with its tool calls checked; raises `ModelError` naming the
    first part of the wrong shape."""
    choices = _get(name, answer, "the answer", "choices", list)
    if not choices:
        raise _unexpected(name, "no choices")
    message = _get(name, choices[0], "choices[0]", "message", dict)
    if message is None:
        raise _unexpected(name, "no choices[0].message")
    for n, call in enumerate(_get(name, message, "message", "tool_calls", list) or ()):
        _get(name, call, f"message.tool_calls[{n}]", "function", dict)
    return message


def _checked_deltas(name: str, number: int, chunk: Any) -> Iterator[dict[str, Any]]:
    """The deltas of stream chunk `number`, their tool-call pieces checked; raises `ModelError`
    naming the first part of the wrong shape."""
    where = f"chunk {number}"
    for n, choice in enumerate(_get(name, chunk, where, "choices", list) or ()):
        delta = _get(name, choice, f"{where}: choices[{n}]", "delta", dict)
        if delta is None:
            continue
        pieces = _get(name, delta, f"{where}: choices[{n}].delta", "tool_calls", list) or ()
        for m, piece in enumerate(pieces):
            if not isinstance(piece, dict):
                what = f"{where}: choices[{n}].delta.tool_calls[{m}]"
                raise _unexpected(name, f"{what} is {_kind(piece)}, not an object")
        yield delta


_KIND_NAMES: dict[type, str] = {dict: "an object", list: "an array"}


def _get(name: str, container: Any, where: str, key: str, kind: type[ValueT]) -> ValueT | None:
    """`container[key]` when it is a `kind` (`None` when absent or null); raises `ModelError`
    when `container` is not an object or the value is of another kind."""
    if not isinstance(container, dict):
        raise _unexpected(name, f"{where} is {_kind(container)}, not an object")
    value = container.get(key)
    if value is None or isinstance(value, kind):
        return value
    raise _unexpected(name, f"{where}.{key} is {_kind(value)}, not {_KIND_NAMES[kind]}")


def _kind(value: Any) -> str:
    """The JSON kind of `value`, in words."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return _KIND_NAMES.get(type(value), "a value")


def _unexpected(name: str, what: str) -> ModelError:
    return ModelError(f"probe {name}: unexpected answer: {what}")


@dataclass
class _Streamed:
    """What the probe keeps of a stream: counts, not chunks (a stream may never end)."""

    chunks: int = 0
    pieces: int = 0
    """Tool-call pieces."""
    calls: int = 0
    """Pieces with an `id` (each starts a call)."""
    unindexed: int = 0
    """Pieces without an integer `index`."""
    usage: bool = False

    def take(self, delta: dict[str, Any]) -> None:
        for piece in delta.get("tool_calls") or ():
            self.pieces += 1
            self.calls += bool(piece.get("id"))
            index = piece.get("index")
            self.unindexed += not isinstance(index, int) or isinstance(index, bool)


def _prompt_tokens(answer: Any) -> int | None:
    """The prompt's token count an answer reports, when it reports a whole number."""
    usage = answer.get("usage") if isinstance(answer, dict) else None
    count = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    return count if isinstance(count, int) and not isinstance(count, bool) else None


def _name(call: Any) -> str:
    function = call.get("function") if isinstance(call, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    return name if isinstance(name, str) else ""


def _calls(message: Any) -> list[Any]:
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    return calls if isinstance(calls, list) else []


def _parsed(arguments: Any) -> Any:
    """Tool-call arguments as JSON data: decoded from a string, or as sent (some servers send an
    object); `None` when they are not JSON."""
    if not isinstance(arguments, str):
        return arguments
    try:
        return pydantic_core.from_json(arguments)
    except ValueError:
        return None


def _shorten(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _CappedTransport(httpx.AsyncBaseTransport):
    """The probe's transport: an answer whose body passes `cap` bytes fails, and so does a
    compressed one (the probe asks for none: compressed, a few bytes counted could decode to
    gigabytes)."""

    def __init__(self, cap: int) -> None:
        self._transport = httpx.AsyncHTTPTransport()
        self.cap = cap
        self.request = ""
        """The name of the request under way, for the errors."""
        self.sent = 0
        """Requests sent, each retry counted: what the server received."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.sent += 1
        response = await self._transport.handle_async_request(request)
        encoding = response.headers.get("content-encoding", "").strip().lower()
        length = response.headers.get("content-length", "")
        if encoding not in ("", "identity"):
            await response.aclose()
            raise ModelError(
                f"probe {self.request}: the answer is compressed ({printable(encoding[:40])}), "
                "although the probe asked for no compression"
            )
        if length.isdigit() and int(length) > self.cap:
            await response.aclose()
            raise self.over()
        return capped(response, self.cap, self.over)

    def over(self) -> ModelError:
        return ModelError(
            f"probe {self.request}: the answer is longer than {self.cap} bytes, the most the "
            "probe reads of one answer"
        )

    async def aclose(self) -> None:
        await self._transport.aclose()
