"""Sans-IO core of the Google Gemini provider (`generateContent`): payload, response, stream.

Nothing here does I/O: `GeminiChatModel` drives these functions from its sync and async shells, so
the mapping is written once.

Gemini signs its reasoning: a `thoughtSignature` may sit on any part of an answer (on a function
call, often only the first of several parallel ones; on a text part, sometimes an empty one), and
newer models refuse a replayed turn whose function calls lost theirs. So an `AiMessage` parsed from
an answer holding anything beyond plain text keeps the answer's parts, unchanged and in order, in
`attributes["gemini_parts"]`, and a replayed message sends those parts back verbatim as long as its
`text`, `thinking` and `tool_calls` still say what the parts say. The same parts tell which call ids
Gemini sent itself (those are echoed in `functionResponse.id`) and which were generated here (those
are never sent). A message from another provider carries no parts and so sends no signatures.
"""

from __future__ import annotations

import math
import mimetypes
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal
from urllib.parse import quote

from pydantic_core import from_json, to_json

from .._content import CONTENT_KINDS, Content, ContentKind
from .._exceptions import ModelError
from .._messages import (
    AiMessage,
    ChatMessage,
    CustomMessage,
    SystemMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    shown_name,
)
from .._model import ResponseComplete, StreamEvent, TextDelta, ThinkingDelta, ToolCallDelta
from .._request import ChatRequestParameters, ResponseFormat, ToolChoice, ToolSpecification
from .._response import ChatResponse, FinishReason, TokenUsage
from ._dialects import render_schema
from ._http import WireBase, error_from_body
from ._pieces import Pieces
from ._sse import ServerSentEvent

__all__ = [
    "CONTENT_ATTRIBUTE",
    "DEFAULT_BASE_URL",
    "PARTS_ATTRIBUTE",
    "PROVIDER",
    "FunctionSchema",
    "GeminiStreamAccumulator",
    "GeminiWire",
    "build_payload",
    "error_from_gemini",
    "map_tool",
    "parse_response",
    "request_path",
    "retry_delay",
    "with_gemini_status",
]

PROVIDER = "Gemini"
DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com/v1beta"

PARTS_ATTRIBUTE = "gemini_parts"
"""`AiMessage.attributes` key holding the answer's raw parts, sent back verbatim on replay."""
CONTENT_ATTRIBUTE = "gemini_content"
"""`CustomMessage.attributes` key holding a raw Gemini content (`role` + `parts`) to send as is."""

FunctionSchema = Literal["json-schema", "gemini"]
"""How function parameters are declared: full JSON Schema (`parametersJsonSchema`), or the older
OpenAPI subset (`parameters`, the `gemini` schema dialect) for models and endpoints without it."""

_FINISH_REASONS = {
    "STOP": FinishReason.STOP,
    "MAX_TOKENS": FinishReason.LENGTH,
    "SAFETY": FinishReason.CONTENT_FILTER,
    "RECITATION": FinishReason.CONTENT_FILTER,
    "BLOCKLIST": FinishReason.CONTENT_FILTER,
    "PROHIBITED_CONTENT": FinishReason.CONTENT_FILTER,
    "SPII": FinishReason.CONTENT_FILTER,
    "IMAGE_SAFETY": FinishReason.CONTENT_FILTER,
}
_METADATA_KEYS = (("responseId", "id"), ("modelVersion", "model"))
# Keys of a part that make it plain text; a part with any other key is kept verbatim.
_TEXT_KEYS = frozenset({"text", "thought", "thoughtSignature"})
_DURATION = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)s\s*")
_Part = dict[str, Any]


def request_path(model: str, *, stream: bool) -> str:
    """The path of a `generateContent` (or streaming) call for `model`, relative to the API root.

    The model name is percent-encoded, so it can never add a path segment or a query.
    """
    name = model.removeprefix("models/")
    if not name.strip():
        raise ModelError("Gemini requests need a model name")
    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    return f"models/{quote(name, safe='')}:{method}"


# -- request ------------------------------------------------------------------------------------


def build_payload(
    messages: Sequence[ChatMessage],
    parameters: ChatRequestParameters,
    *,
    function_schema: FunctionSchema = "json-schema",
) -> dict[str, Any]:
    """The JSON body of a `generateContent` request (the model name goes in the path).

    `parallel_tool_calls` has no Gemini switch and is not sent. `custom` is merged last at the top
    level; a mapping value for a key the payload already has (`generationConfig`, `toolConfig`)
    is merged into it key by key, so `custom={"generationConfig": {"thinkingConfig": ...}}` keeps
    the temperature, and a `tools` list is appended to the function declarations.

    Raises:
        ModelError: a message this provider cannot send (an image URL it cannot read, a foreign
            `CustomMessage`, tool-call arguments that are not a JSON object).
        SchemaDialectError: a tool's schema the chosen `function_schema` cannot express.
    """
    payload: dict[str, Any] = {}
    system = [{"text": m.text} for m in messages if isinstance(m, SystemMessage)]
    if system:
        payload["systemInstruction"] = {"parts": system}
    payload["contents"] = _map_messages(messages)
    if parameters.tools:
        payload["tools"] = [
            {"functionDeclarations": [map_tool(s, function_schema) for s in parameters.tools]}
        ]
        mode = _map_tool_choice(parameters)
        if mode is not None:
            payload["toolConfig"] = {"functionCallingConfig": mode}
    generation = _generation_config(parameters)
    if generation:
        payload["generationConfig"] = generation
    for key, value in parameters.custom.items():
        current = payload.get(key)
        if isinstance(current, dict) and isinstance(value, Mapping):
            payload[key] = {**current, **value}
        elif key == "tools" and current is not None and isinstance(value, list):
            # Gemini's own tools (`googleSearch`, `codeExecution`, …) join the functions.
            payload[key] = [*current, *value]
        else:
            payload[key] = value
    return payload


def _generation_config(parameters: ChatRequestParameters) -> dict[str, Any]:
    config: dict[str, Any] = {}
    for name, wire in (
        ("temperature", "temperature"),
        ("top_p", "topP"),
        ("max_tokens", "maxOutputTokens"),
    ):
        if (value := getattr(parameters, name)) is not None:
            config[wire] = value
    if parameters.stop:
        config["stopSequences"] = list(parameters.stop)
    if parameters.response_format is not None:
        config.update(_map_response_format(parameters.response_format))
    return config


def _map_response_format(response_format: ResponseFormat) -> dict[str, Any]:
    # `responseJsonSchema` takes JSON Schema as it is.
    return {
        "responseMimeType": "application/json",
        "responseJsonSchema": response_format.json_schema,
    }


def map_tool(spec: ToolSpecification, function_schema: FunctionSchema = "json-schema") -> _Part:
    """One `functionDeclarations` entry, as `GeminiChatModel` sends it.

    Raises:
        SchemaDialectError: the dialect cannot express the tool's schema.
    """
    declaration: _Part = {"name": spec.name}
    if spec.description:
        declaration["description"] = spec.description
    if function_schema == "json-schema":
        # Plain JSON Schema, `$defs` and all: the rendering the anthropic dialect also uses.
        parameters = render_schema(spec.parameters, "anthropic")
        key = "parametersJsonSchema"
    else:
        parameters = render_schema(spec.parameters, "gemini")
        key = "parameters"
    # The OpenAPI subset refuses an object schema without properties, so a tool without
    # parameters declares none (in both forms, alike).
    if parameters.get("properties"):
        declaration[key] = parameters
    return declaration


def _map_tool_choice(parameters: ChatRequestParameters) -> dict[str, Any] | None:
    choice = parameters.tool_choice
    if choice is None or choice == ToolChoice.AUTO:
        # A tool that asks for a provider-enforced schema (`strict_schema`) makes the request
        # `VALIDATED`: calls or text, as AUTO, and the calls adhere to the declared schemas
        # (https://ai.google.dev/gemini-api/docs/function-calling, "Function calling modes").
        if any(spec.strict_schema for spec in parameters.tools or ()):
            return {"mode": "VALIDATED"}
        return None if choice is None else {"mode": "AUTO"}
    if choice == ToolChoice.NONE:
        return {"mode": "NONE"}
    if choice == ToolChoice.REQUIRED:
        return {"mode": "ANY"}
    return {"mode": "ANY", "allowedFunctionNames": [str(choice)]}


def _map_messages(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    contents: list[dict[str, Any]] = []
    # Gemini's id of each call, by our id: `None` for ids generated here, never sent back.
    wire_ids: dict[str, str | None] = {}
    # The user turn gathering the results of one round, while results keep coming.
    results: list[_Part] | None = None
    for message in messages:
        if isinstance(message, SystemMessage):
            continue
        if isinstance(message, ToolResultMessage):
            mapped = _map_tool_result(message, wire_ids.get(message.tool_call_id))
            if results is None:
                results = []
                contents.append({"role": "user", "parts": results})
            results += mapped
            continue
        results = None
        if isinstance(message, UserMessage):
            contents.append({"role": "user", "parts": _map_user(message)})
        elif isinstance(message, AiMessage):
            parts = _map_model(message)
            calls = [part["functionCall"] for part in parts if "functionCall" in part]
            if len(calls) == len(message.tool_calls):
                for call, sent in zip(message.tool_calls, calls, strict=True):
                    wire_ids[call.id] = sent.get("id")
            contents.append({"role": "model", "parts": parts})
        else:
            assert isinstance(message, CustomMessage)
            contents.append(_map_custom(message))
    return contents


def _map_tool_result(message: ToolResultMessage, wire_id: str | None) -> list[_Part]:
    """The `functionResponse` part of a result, then parts by URL it returned.

    Inline parts travel inside the `functionResponse` as its `parts` (`inlineData`), as
    https://ai.google.dev/gemini-api/docs/function-calling#multimodal-function-responses
    documents; a `FunctionResponsePart`'s `fileData` "is not supported in Gemini API"
    (https://googleapis.github.io/kotlin-genai/, `FunctionResponsePart`), so parts by URL follow
    the `functionResponse` as `fileData` parts of the same content.
    """
    response: _Part = {
        "name": message.tool_name,
        "response": {("error" if message.is_error else "output"): message.text},
    }
    if wire_id is not None:
        response["id"] = wire_id
    inline: list[_Part] = []
    by_url: list[_Part] = []
    for part in message.content:
        if isinstance(part, TextContent):
            continue  # in `text` already, with a stand-in for each other part
        mapped = _map_part(part)
        (inline if "inlineData" in mapped else by_url).append(mapped)
    if inline:
        response["parts"] = inline
    return [{"functionResponse": response}, *by_url]


def _map_user(message: UserMessage) -> list[_Part]:
    if isinstance(message.content, str):
        return [{"text": message.content}]
    return [_map_part(part) for part in message.content]


def _map_part(part: Content) -> _Part:
    """A `text`, `inlineData` or `fileData` part (https://ai.google.dev/api/caching#Part)."""
    if isinstance(part, TextContent):
        return {"text": part.text}
    inline = part.base64_data()
    if inline is not None:
        return {"inlineData": {"mimeType": inline[0], "data": inline[1]}}
    assert part.url is not None
    if part.url.startswith("data:"):
        raise ModelError(
            f"Gemini needs {part.kind} data: URLs of the form data:<media type>;base64,<data>"
        )
    media_type = part.media_type or mimetypes.guess_type(part.url)[0]
    if media_type is None:
        return {"fileData": {"fileUri": part.url}}
    return {"fileData": {"mimeType": media_type, "fileUri": part.url}}


def _map_custom(message: CustomMessage) -> dict[str, Any]:
    raw = message.attributes.get(CONTENT_ATTRIBUTE)
    if (
        not isinstance(raw, dict)
        or raw.get("role") not in ("user", "model")
        or not isinstance(raw.get("parts"), list)
    ):
        raise ModelError(
            f"Gemini only understands a CustomMessage whose attributes hold {CONTENT_ATTRIBUTE!r}: "
            "a raw content with a 'user' or 'model' role and a list of parts"
        )
    return {"role": raw["role"], "parts": raw["parts"]}


def _map_model(message: AiMessage) -> list[_Part]:
    raw = message.attributes.get(PARTS_ATTRIBUTE)
    raw_calls: list[_Part] = []
    if isinstance(raw, list):
        try:
            text, thinking, calls = _read_parts(raw)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ModelError(f"malformed {PARTS_ATTRIBUTE!r} attribute: {exc}") from exc
        if (text, thinking) == (message.text, message.thinking) and _same_calls(
            calls, message.tool_calls
        ):
            return list(raw)
        # The message was edited: its fields win. A call that is still what Gemini sent keeps
        # its part (id and signature); nothing is moved onto a part it was not sent with.
        raw_calls = [part for part in raw if "functionCall" in part]
    # Thinking cannot be sent without the signature Gemini gave it, so it is left out.
    parts: list[_Part] = [{"text": message.text}] if message.text else []
    for position, call in enumerate(message.tool_calls):
        arguments = _arguments_object(call)
        kept = raw_calls[position] if position < len(raw_calls) else None
        if (
            kept is not None
            and kept["functionCall"].get("name") == call.name
            and (kept["functionCall"].get("args") or {}) == arguments
        ):
            parts.append(kept)
        else:
            parts.append({"functionCall": {"name": call.name, "args": arguments}})
    return parts or [{"text": ""}]


def _same_calls(raw: list[tuple[str | None, str, str]], calls: Sequence[ToolCall]) -> bool:
    return len(raw) == len(calls) and all(
        (wire_id is None or wire_id == call.id) and (name, arguments) == (call.name, call.arguments)
        for (wire_id, name, arguments), call in zip(raw, calls, strict=True)
    )


def _arguments_object(call: ToolCall) -> dict[str, Any]:
    if not call.arguments.strip():
        return {}
    try:
        value = from_json(call.arguments)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise ModelError(
            f"tool call {call.id!r} ({shown_name(call.name)}) has arguments that are not a JSON "
            "object; Gemini needs an object as functionCall args"
        )
    return value


# -- response -----------------------------------------------------------------------------------


def parse_response(body: Any, *, call_id_prefix: str | None = None) -> ChatResponse:
    """Map a `GenerateContentResponse` body (parsed JSON) to a `ChatResponse`.

    Only the first candidate is read. A function call without an id gets
    `"<call_id_prefix>_<position>"`; the prefix defaults to `call_<responseId>` (unique per answer),
    or a random one when the answer has no id.

    Raises:
        ModelError: the body is an error object, not shaped like a `GenerateContentResponse`, or
            its finish reason is `MALFORMED_FUNCTION_CALL` (Gemini failed to write a call).
    """
    if not isinstance(body, dict):
        raise ModelError(f"{PROVIDER} returned an unexpected body", body=body)
    if body.get("error") is not None:
        raise error_from_gemini(body)
    candidates = body.get("candidates")
    if not candidates and not _blocked(body):
        raise ModelError(f"{PROVIDER} returned no candidates", body=body)
    try:
        candidate = (candidates or [{}])[0]
        if candidate.get("finishReason") == "MALFORMED_FUNCTION_CALL":
            raise _malformed_call(candidate, body)
        parts = (candidate.get("content") or {}).get("parts") or []
        if not isinstance(parts, list):
            raise TypeError("content parts are not a list")
        text, thinking, raw_calls = _read_parts(parts)
        prefix = call_id_prefix or _call_id_prefix(body)
        tool_calls = [
            ToolCall(id=wire_id or f"{prefix}_{position}", name=name, arguments=arguments)
            for position, (wire_id, name, arguments) in enumerate(raw_calls)
        ]
        keep = any(set(part) - {"text"} for part in parts)
        message = AiMessage(
            text=text,
            thinking=thinking,
            tool_calls=tool_calls,
            attributes={PARTS_ATTRIBUTE: parts} if keep else {},
        )
        metadata = {ours: body[key] for key, ours in _METADATA_KEYS if body.get(key) is not None}
        usage = _map_usage(body.get("usageMetadata"))
        if usage is not None:
            metadata["usage_metadata"] = body["usageMetadata"]
        reason = _map_finish_reason(candidate, body, bool(tool_calls), metadata)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise ModelError(f"malformed {PROVIDER} response: {exc}", body=body) from exc
    return ChatResponse(
        ai_message=message, token_usage=usage, finish_reason=reason, metadata=metadata
    )


def _malformed_call(candidate: Mapping[str, Any], body: Any) -> ModelError:
    # Gemini tried to call a function and could not write the call: there is nothing to run
    # and no answer, so saying so beats an empty answer that would end a tool loop quietly.
    detail = candidate.get("finishMessage") or "no details"
    return ModelError(
        f"{PROVIDER} produced a malformed function call: {detail}",
        body=body,
        code="MALFORMED_FUNCTION_CALL",
    )


def _call_id_prefix(body: Mapping[str, Any]) -> str:
    response_id = body.get("responseId")
    if isinstance(response_id, str) and response_id:
        return f"call_{response_id}"
    return f"call_{uuid.uuid4().hex[:16]}"


def _read_parts(
    parts: list[_Part],
) -> tuple[str | None, str | None, list[tuple[str | None, str, str]]]:
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[tuple[str | None, str, str]] = []
    for part in parts:
        if not isinstance(part, dict):
            raise TypeError(f"a part is not an object: {part!r}")
        if "functionCall" in part:
            call = part["functionCall"]
            name, args, wire_id = call["name"], call.get("args") or {}, call.get("id")
            if not isinstance(name, str) or not isinstance(args, dict):
                raise TypeError(f"malformed functionCall: {call!r}")
            if wire_id is not None and not isinstance(wire_id, str):
                raise TypeError(f"functionCall id is not a string: {wire_id!r}")
            calls.append((wire_id or None, name, to_json(args).decode()))
        elif "text" in part:
            text = part["text"]
            if not isinstance(text, str):
                raise TypeError(f"text part is not a string: {text!r}")
            (thoughts if part.get("thought") is True else texts).append(text)
    text = "".join(texts)
    thinking = "".join(thoughts)
    return text or None, thinking or None, calls


def _map_finish_reason(
    candidate: Mapping[str, Any],
    body: Mapping[str, Any],
    has_calls: bool,
    metadata: dict[str, Any],
) -> FinishReason | None:
    raw = candidate.get("finishReason")
    if candidate.get("finishMessage") is not None:
        metadata["finish_message"] = candidate["finishMessage"]
    if raw is None:
        if _blocked(body):
            # The prompt itself was blocked: there is no candidate at all.
            metadata["block_reason"] = body["promptFeedback"]["blockReason"]
            return FinishReason.CONTENT_FILTER
        return FinishReason.TOOL_EXECUTION if has_calls else None
    if has_calls and raw == "STOP":
        # Gemini says STOP next to function calls; what the model asked for decides.
        return FinishReason.TOOL_EXECUTION
    reason = _FINISH_REASONS.get(raw, FinishReason.OTHER)
    if reason is not FinishReason.STOP:
        metadata["finish_reason"] = raw
    return reason


def _blocked(body: Mapping[str, Any]) -> bool:
    """Whether the prompt was blocked (`promptFeedback.blockReason`), so no candidate came."""
    feedback = body.get("promptFeedback")
    return isinstance(feedback, dict) and feedback.get("blockReason") is not None


def _map_usage(usage: Any) -> TokenUsage | None:
    if not isinstance(usage, dict):
        return None

    def count(key: str) -> int:
        value = usage.get(key) or 0
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"usageMetadata.{key} is not an integer: {value!r}")
        return value

    # Thinking is billed as output; tool-use prompt tokens as input.
    input_tokens = count("promptTokenCount") + count("toolUsePromptTokenCount")
    output_tokens = count("candidatesTokenCount") + count("thoughtsTokenCount")
    return TokenUsage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        total_tokens=count("totalTokenCount") or input_tokens + output_tokens,
    )


# -- errors -------------------------------------------------------------------------------------


def error_from_gemini(body: Any, *, streaming: bool = False) -> ModelError:
    """A `ModelError` for a Gemini error body `{"error": {"code", "message", "status"}}` sent
    in a successful answer or inside a stream; see `with_gemini_status`."""
    return with_gemini_status(error_from_body(PROVIDER, body, streaming=streaming))


def with_gemini_status(error: ModelError) -> ModelError:
    """`error` with Gemini's `status` (`RESOURCE_EXHAUSTED`, `INVALID_ARGUMENT`, …) as its `code`,
    when its body has one: more telling than the HTTP status repeated in `error.code`."""
    status = _error_field(error.body, "status")
    if isinstance(status, str) and status:
        error.code = status
    return error


def retry_delay(body: Any) -> float | None:
    """The wait a Gemini error body asks for, in seconds: `RetryInfo.retryDelay` (`"37s"`)."""
    details = _error_field(body, "details")
    if not isinstance(details, list):
        return None
    for detail in details:
        if isinstance(detail, dict) and str(detail.get("@type", "")).endswith(".RetryInfo"):
            delay = detail.get("retryDelay")
            match = _DURATION.fullmatch(delay) if isinstance(delay, str) else None
            seconds = float(match.group(1)) if match is not None else math.inf
            if math.isfinite(seconds):
                return seconds
    return None


def _error_field(body: Any, key: str) -> Any:
    error = body.get("error") if isinstance(body, dict) else None
    return error.get(key) if isinstance(error, dict) else None


# -- stream -------------------------------------------------------------------------------------


class GeminiStreamAccumulator:
    """Aggregates `streamGenerateContent?alt=sse` chunks into deltas and one final `ChatResponse`.

    Each chunk is a whole `GenerateContentResponse`: text and thinking arrive as deltas, function
    calls whole, and the last chunk carries the finish reason and the final usage. Consecutive
    unsigned text parts of one kind are joined; a signed part stays a part of its own, as sent. The
    final response is `parse_response` of the reassembled answer, so a stream and a blocking call
    returning the same parts agree exactly.
    """

    def __init__(self, *, call_id_prefix: str | None = None) -> None:
        self._prefix = call_id_prefix
        self._top: dict[str, Any] = {}
        self._candidate: dict[str, Any] = {}
        self._parts: list[_Part] = []
        self._texts: dict[int, Pieces] = {}
        self._open: int | None = None
        self._calls = 0

    @property
    def done(self) -> bool:
        """Always `False`: a Gemini stream has no end marker; it ends when the bytes stop."""
        return False

    def take(self, event: ServerSentEvent) -> list[StreamEvent]:
        """Take one server-sent event and return the deltas it carries.

        Raises:
            ModelError: the event is an error, or not a valid chunk.
        """
        try:
            chunk = from_json(event.data)
        except ValueError as exc:
            raise ModelError(
                f"{PROVIDER} sent a malformed stream chunk: {exc}", body=event.data
            ) from exc
        if not isinstance(chunk, dict):
            raise ModelError(f"{PROVIDER} sent an unexpected stream chunk", body=chunk)
        if chunk.get("error") is not None:
            raise error_from_gemini(chunk, streaming=True)
        try:
            return self._chunk(chunk)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            raise ModelError(
                f"{PROVIDER} sent a malformed stream chunk: {exc}", body=chunk
            ) from exc

    def end(self) -> list[StreamEvent]:
        """The final `ResponseComplete`.

        Raises:
            ModelError: the stream ended before a chunk with a finish reason (it was cut off).
        """
        if not self._top:
            raise ModelError(
                f"{PROVIDER} stream ended before a finish reason: no event arrived at all "
                "(the answer was not a server-sent event stream, or was empty)"
            )
        if self._candidate.get("finishReason") is None and not _blocked(self._top):
            raise ModelError(f"{PROVIDER} stream ended before a finish reason (cut off)")
        for index, texts in self._texts.items():
            self._parts[index]["text"] = texts.text()
        self._texts = {}
        body = {
            **self._top,
            "candidates": [{**self._candidate, "content": {"role": "model", "parts": self._parts}}],
        }
        return [ResponseComplete(response=parse_response(body, call_id_prefix=self._prefix))]

    def _chunk(self, chunk: dict[str, Any]) -> list[StreamEvent]:
        # Usage and prompt counts change in the last chunk: the last word wins. (`candidates`
        # and `content` are taken along here and replaced by the reassembled ones at the end.)
        self._top.update(chunk)
        candidates = chunk.get("candidates") or ()
        events: list[StreamEvent] = []
        for candidate in candidates[:1]:
            self._candidate.update(candidate)
            for part in (candidate.get("content") or {}).get("parts") or ():
                events.extend(self._part(part, chunk))
        return events

    def _part(self, part: _Part, chunk: Mapping[str, Any]) -> list[StreamEvent]:
        text = part.get("text")
        if text is None or not _TEXT_KEYS.issuperset(part):
            self._open = None
            self._parts.append(part)
            return (
                self._function_call(part["functionCall"], chunk) if "functionCall" in part else []
            )
        if not isinstance(text, str):
            raise TypeError(f"text part is not a string: {text!r}")
        thought = part.get("thought") is True
        open_part = None if self._open is None else self._parts[self._open]
        if (
            open_part is not None
            and "thoughtSignature" not in part
            and (open_part.get("thought") is True) == thought
        ):
            self._texts[self._open].append(text)  # type: ignore[index]
        else:
            # A copy: its text is replaced by the joined text at the end.
            self._parts.append(dict(part))
            index = len(self._parts) - 1
            self._texts[index] = Pieces(text)
            # A signed part is kept as sent: nothing is joined to it.
            self._open = None if "thoughtSignature" in part else index
        if not text:
            return []
        return [ThinkingDelta(text=text) if thought else TextDelta(text=text)]

    def _function_call(self, call: Any, chunk: Mapping[str, Any]) -> list[StreamEvent]:
        args = call.get("args") or {}
        wire_id = call.get("id")
        if not isinstance(call["name"], str) or not isinstance(args, dict):
            raise TypeError(f"malformed functionCall: {call!r}")
        if wire_id is not None and not isinstance(wire_id, str):
            raise TypeError(f"functionCall id is not a string: {wire_id!r}")
        if self._prefix is None:
            self._prefix = _call_id_prefix(chunk)
        position = self._calls
        self._calls += 1
        return [
            ToolCallDelta(
                index=position,
                id=wire_id or f"{self._prefix}_{position}",
                name=call["name"],
                arguments_delta=to_json(args).decode(),
            )
        ]


@dataclass(frozen=True)
class GeminiWire(WireBase):
    """The Gemini API wire format, as `GeminiChatModel` composes it with the HTTP shell.

    Its endpoint depends on the request (the model is part of it, and a stream has its own), and
    its error bodies carry a status name and the wait before a retry.
    """

    function_schema: FunctionSchema = "json-schema"
    """How function parameters are declared; see `FunctionSchema`."""

    provider: ClassVar[str] = PROVIDER
    user_content: ClassVar[frozenset[ContentKind]] = CONTENT_KINDS
    tool_result_content: ClassVar[frozenset[ContentKind]] = CONTENT_KINDS
    default_base_url: ClassVar[str] = DEFAULT_BASE_URL
    api_key_env: ClassVar[str] = "GEMINI_API_KEY"
    base_url_env: ClassVar[str] = "GOOGLE_GEMINI_BASE_URL"
    parse_response = staticmethod(parse_response)
    stream_parser = GeminiStreamAccumulator

    def request_path(self, model: str, *, stream: bool) -> str:
        """`models/{model}:generateContent`, or `:streamGenerateContent?alt=sse` for a stream."""
        return request_path(model, stream=stream)

    def retry_hint(self, body: Any) -> float | None:
        """`RetryInfo.retryDelay` of the error body."""
        return retry_delay(body)

    def refine_error(self, error: ModelError) -> ModelError:
        """Gemini's `status` (`RESOURCE_EXHAUSTED`, …) as the code."""
        return with_gemini_status(error)

    def headers(self, api_key: str | None) -> dict[str, str]:
        """`x-goog-api-key`, when there is a key: never a `key=` query, which URLs leak to logs."""
        return {"x-goog-api-key": api_key} if api_key else {}

    def build_payload(
        self, messages: Sequence[ChatMessage], parameters: ChatRequestParameters, *, stream: bool
    ) -> dict[str, Any]:
        """`build_payload` with this wire's `function_schema` (a stream has the same body)."""
        return build_payload(messages, parameters, function_schema=self.function_schema)
