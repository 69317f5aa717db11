"""`agentforge-typed probe`: measure what a model behind an OpenAI-compatible endpoint supports.

A small bounded set of live requests, each with a tiny prompt and a `max_tokens` limit, one per
feature of a `ModelProfile`: tool calling, each `tool_choice` mode, the `parallel_tool_calls`
parameter and actual parallel calls, whether strict schemas are enforced, refused schema
keywords, streamed tool-call deltas and their `index`, usage in streams, system-message
placement, and the reasoning field (read off every answer); then `max_tools`, by a bisection of
at most `MAX_TOOLS_REQUESTS` requests. A 400 or 422 answer means "refused"; any other failure (a
wrong key, a wrong URL) stops the probe.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Set
from dataclasses import dataclass, field
from typing import Any, Literal

import pydantic_core

from .._exceptions import ModelError
from ..providers._http import HttpShell
from ..providers._openai_wire import openai_headers
from ..providers._profiles import PROFILES, ModelProfile, ToolChoiceMode
from ..providers._retry import RetryPolicy

__all__ = [
    "BASE_REQUESTS",
    "KEYWORD_REQUESTS",
    "MAX_TOOLS_REQUESTS",
    "MAX_TOOLS_TRIED",
    "Probe",
    "ProbeResult",
    "max_requests",
    "plan",
    "probe",
]

MAX_TOKENS = 200
"""Each probe's `max_tokens`: enough for a tool call or two, even with brief reasoning first."""

_PATH = "chat/completions"
_ONE_CITY = "What is the weather in Paris? Use the get_weather tool."
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

BASE_REQUESTS = 12
"""Requests a probe makes at most, besides the keyword ones (fewer when tools or system messages
are refused outright)."""
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

    def __post_init__(self) -> None:
        self._shell = HttpShell(
            provider="probe",
            base_url=self.base_url,
            headers=openai_headers(self.api_key, None, None),
            secrets=[self.api_key],
            retry=RetryPolicy(max_retries=1),
        )
        self._requests = 0
        self._reasoning: set[str] = set()
        self.found: dict[str, Any] = {}
        self.evidence: dict[str, str] = {}

    # -- requests -----------------------------------------------------------------------------

    def _body(self, messages: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
        return {"model": self.model, "messages": messages, "max_tokens": MAX_TOKENS, **fields}

    def _post(
        self, name: str, body: dict[str, Any], refusals: Set[int] = _REFUSALS
    ) -> tuple[Outcome, Any]:
        """The answer's JSON, or `"refused"` with the error text for a status in `refusals`."""
        self.on_request(name)
        self._requests += 1
        try:
            return "ok", self._shell.post_json(_PATH, body)
        except ModelError as error:
            if error.status_code in refusals:
                return "refused", error.message
            raise

    def _send(self, name: str, body: dict[str, Any]) -> tuple[Outcome, Any]:
        """The answer's message, or `"refused"` with the error text for a 400/422."""
        outcome, answer = self._post(name, body)
        if outcome == "refused":
            return outcome, answer
        message = _message(answer)
        if message is None:
            raise ModelError(f"probe {name}: unexpected answer", body=answer)
        self._note_reasoning(message)
        return "ok", message

    def _stream(self, name: str, body: dict[str, Any]) -> tuple[Outcome, Any]:
        """The streamed chunks, or `"refused"` with the error text for a 400/422."""
        self.on_request(name)
        self._requests += 1
        chunks: list[dict[str, Any]] = []
        try:
            for event in self._shell.stream_sse(_PATH, {**body, "stream": True}):
                if event.data == "[DONE]":
                    break
                try:
                    chunk = event.json()
                except ValueError as exc:
                    raise ModelError(f"probe {name}: malformed stream chunk: {exc}") from exc
                if isinstance(chunk, dict):
                    chunks.append(chunk)
                    for delta in _deltas(chunk):
                        self._note_reasoning(delta)
        except ModelError as error:
            if error.status_code in _REFUSALS:
                return "refused", error.message
            raise
        return "ok", chunks

    def _note_reasoning(self, message: Any) -> None:
        if isinstance(message, dict):
            for key in ("reasoning_content", "reasoning"):
                if isinstance(message.get(key), str) and message[key]:
                    self._reasoning.add(key)

    def _set(self, feature: str, value: Any, evidence: str) -> None:
        self.found[feature] = value
        self.evidence[feature] = evidence

    # -- the probes ---------------------------------------------------------------------------

    def run(self) -> ProbeResult:
        """Make the probe requests and return what they found."""
        try:
            if self._tools():
                self._tool_choice()
                self._parallel()
                self._strict()
                self._keywords()
                self._stream_tools()
                self._max_tools()
            self._stream_usage()
            self._system()
        finally:
            self._shell.close()
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
        return ProbeResult(profile, self.evidence, self._requests)

    def _tools(self) -> bool:
        outcome, answer = self._send("tools", self._body([_user(_ONE_CITY)], tools=[_WEATHER]))
        calls = _calls(answer) if outcome == "ok" else []
        if outcome == "refused":
            self._set("tools", False, f"refused: {answer}")
        elif not calls:
            self._set("tools", False, "accepted, but the model answered without a tool call")
        else:
            self._set("tools", True, "the model called the tool")
        return bool(calls)

    def _tool_choice(self) -> None:
        modes: set[ToolChoiceMode] = {"auto"}
        notes = ["auto: ok"]
        choices: list[tuple[ToolChoiceMode, Any]] = [
            ("required", "required"),
            ("named", {"type": "function", "function": {"name": "get_weather"}}),
            ("none", "none"),
        ]
        for mode, choice in choices:
            outcome, answer = self._send(
                f"tool_choice={mode}",
                self._body([_user(_ONE_CITY)], tools=[_WEATHER], tool_choice=choice),
            )
            if outcome == "refused":
                notes.append(f"{mode}: refused")
            elif mode == "none" and _calls(answer):
                notes.append("none: ignored (the model still called the tool)")
            elif mode != "none" and not _calls(answer):
                notes.append(f"{mode}: ignored (no tool call)")
            else:
                modes.add(mode)
                notes.append(f"{mode}: ok")
        self._set("tool_choice", sorted(modes), "; ".join(notes))

    def _parallel(self) -> None:
        body = self._body([_user(_TWO_CITIES)], tools=[_WEATHER])
        outcome, answer = self._send("parallel calls", body)
        calls = len(_calls(answer)) if outcome == "ok" else 0
        self._set("parallel_tool_calls", calls > 1, f"{calls} call(s) for two cities")
        outcome, answer = self._send(
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

    def _strict(self) -> None:
        # Asked for a value outside the enum, a model the endpoint does not constrain tends to
        # echo it: arguments off the schema prove `strict` is not enforced. The allowed value is
        # evidence, not proof (the model may have picked it by itself).
        modes = self.found.get("tool_choice", ())
        forced: dict[str, Any] = {}
        if "named" in modes:
            forced["tool_choice"] = {"type": "function", "function": {"name": "set_unit"}}
        elif "required" in modes:
            forced["tool_choice"] = "required"
        outcome, answer = self._send(
            "strict", self._body([_user(_KELVIN)], tools=[_STRICT_UNIT], **forced)
        )
        if outcome == "refused":
            self._set("strict_schema", False, f"refused: {answer}")
            return
        calls = _calls(answer)
        if not calls:
            self._set("strict_schema", False, "accepted, but no tool call: enforcement not seen")
            return
        function = calls[0].get("function") if isinstance(calls[0], dict) else None
        raw = function.get("arguments") if isinstance(function, dict) else None
        if _parsed(raw) == _STRICT_CONFORMING:
            evidence = 'accepted; asked for "kelvin", the model sent the one allowed "celsius"'
            self._set("strict_schema", True, evidence)
        else:
            shown = _shorten(repr(raw))
            self._set(
                "strict_schema", False, f"accepted, not enforced: off-schema arguments {shown}"
            )

    def _keywords(self) -> None:
        every = list(_KEYWORD_SCHEMAS)
        outcome, _ = self._send(
            "schema keywords", self._body([_user(_ONE_CITY)], tools=[_keyword_tool(every)])
        )
        if outcome == "ok":
            self._set("refused_schema_keywords", [], f"accepted: {', '.join(every)}")
            return
        refused = []
        for keyword in every:
            outcome, _ = self._send(
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

    def _stream_tools(self) -> None:
        outcome, chunks = self._stream(
            "stream with tools", self._body([_user(_TWO_CITIES)], tools=[_WEATHER])
        )
        if outcome == "refused":
            self._set("stream_tool_deltas", False, f"refused: {chunks}")
            self._set("stream_tool_index", False, "streaming with tools refused")
            return
        pieces = [piece for chunk in chunks for piece in _tool_pieces(chunk)]
        if not pieces:
            self._set("stream_tool_deltas", False, "no tool call in the stream")
            self._set("stream_tool_index", False, "no tool call in the stream")
            return
        indexed = all(isinstance(piece.get("index"), int) for piece in pieces)
        calls = sum(1 for piece in pieces if piece.get("id"))
        deltas = len(pieces) > max(calls, 1)
        self._set(
            "stream_tool_deltas",
            deltas,
            f"{len(pieces)} piece(s) for {calls} call(s)"
            + ("" if deltas else ": whole calls, no argument deltas"),
        )
        self._set(
            "stream_tool_index",
            indexed,
            "every piece has an index" if indexed else "pieces without index",
        )

    def _max_tools(self) -> None:
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
            outcome, answer = self._post(f"max_tools {count}", body, _MAX_TOOLS_REFUSALS)
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
        evidence = f"{accepted} tools accepted, {refused} refused: {_shorten(why)}"
        self._set("max_tools", accepted, evidence)

    def _stream_usage(self) -> None:
        body = self._body([_user("Say hi.")], stream_options={"include_usage": True})
        outcome, chunks = self._stream("stream usage", body)
        if outcome == "refused":
            self._set("stream_usage", False, f"stream_options refused: {chunks}")
            return
        usage = any(isinstance(chunk.get("usage"), dict) for chunk in chunks)
        self._set(
            "stream_usage",
            usage,
            "usage in the stream" if usage else "stream_options accepted, no usage sent",
        )

    def _system(self) -> None:
        outcome, answer = self._send(
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
        outcome, answer = self._send("system later", self._body(later))
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
) -> ProbeResult:
    """Probe `model` at `base_url` and return the profile it measured; `max_tools=False` skips
    the `max_tools` measurement (keeping `base`'s value).

    Raises:
        ModelError: a failure other than a refusal (400/422): a wrong key, URL, or model.
    """
    session = Probe(model, base_url, api_key, base or PROFILES["openai"], on_request, max_tools)
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


def _deltas(chunk: dict[str, Any]) -> Iterator[Any]:
    for choice in chunk.get("choices") or ():
        if isinstance(choice, dict):
            yield choice.get("delta")


def _tool_pieces(chunk: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for delta in _deltas(chunk):
        if isinstance(delta, dict):
            for piece in delta.get("tool_calls") or ():
                if isinstance(piece, dict):
                    yield piece
