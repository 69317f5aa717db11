"""OpenAI Chat Completions wire format, sans-IO: build the payload, parse the answer, aggregate a stream.

Written against the OpenAI API and the quirks of compatible servers (vLLM, Ollama, DeepSeek,
LiteLLM, Gemini's compatibility endpoint): tool-call `arguments` sent as a JSON object, missing
tool-call ids or `index`, `content` as a list of parts, `finish_reason: "stop"` next to tool calls,
reasoning as `reasoning_content` or `reasoning`, and streams that end without a finish reason.
Only the first choice is read (`n > 1` is not supported).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import pydantic_core

from .._content import AudioContent, BinaryContent, Content, ContentKind, DocumentContent
from .._exceptions import ModelError
from .._messages import (
    AiMessage,
    ChatMessage,
    CustomMessage,
    ImageContent,
    SystemMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from .._model import ResponseComplete, StreamEvent, TextDelta, ThinkingDelta, ToolCallDelta
from .._request import ChatRequestParameters, ResponseFormat, ToolChoice, ToolSpecification
from .._response import ChatResponse, FinishReason, TokenUsage
from ._dialects import render_schema
from ._http import WireBase, error_from_body
from ._pieces import Pieces
from ._sse import ServerSentEvent

__all__ = [
    "PROVIDER",
    "OpenAIWire",
    "StreamAccumulator",
    "build_payload",
    "map_tool",
    "openai_headers",
    "parse_response",
]

PROVIDER = "OpenAI"

_FINISH_REASONS = {
    "stop": FinishReason.STOP,
    "length": FinishReason.LENGTH,
    "tool_calls": FinishReason.TOOL_EXECUTION,
    "function_call": FinishReason.TOOL_EXECUTION,
    "content_filter": FinishReason.CONTENT_FILTER,
}
_METADATA_KEYS = ("id", "model", "created", "system_fingerprint", "timings")
"""Body fields kept in `metadata`; `timings` is llama.cpp's (prompt and generation speeds)."""


# -- request ------------------------------------------------------------------------------------


def build_payload(
    messages: Sequence[ChatMessage],
    parameters: ChatRequestParameters,
    *,
    stream: bool,
    stream_usage: bool = True,
) -> dict[str, Any]:
    """The JSON body of a `POST /chat/completions` request.

    `parameters` are already merged (model defaults under the request's); `parameters.model` must
    be set. `tool_choice` and `parallel_tool_calls` are sent only with tools, since OpenAI rejects
    them otherwise. `custom` is spread at the top level last, so it can set any vendor field.
    A stream asks for token usage (`stream_options`) unless `stream_usage` is false.

    Raises:
        ModelError: a `CustomMessage`, which this provider does not understand.
    """
    payload: dict[str, Any] = {
        "model": parameters.model,
        "messages": [_map_message(message) for message in messages],
    }
    if parameters.tools:
        payload["tools"] = [map_tool(spec) for spec in parameters.tools]
        if parameters.tool_choice is not None:
            payload["tool_choice"] = _map_tool_choice(parameters.tool_choice)
        if parameters.parallel_tool_calls is not None:
            payload["parallel_tool_calls"] = parameters.parallel_tool_calls
    for name in ("temperature", "max_tokens", "top_p"):
        if (value := getattr(parameters, name)) is not None:
            payload[name] = value
    if parameters.stop is not None:
        payload["stop"] = list(parameters.stop)
    if parameters.response_format is not None:
        payload["response_format"] = _map_response_format(parameters.response_format)
    payload.update(parameters.custom)
    if stream:
        payload["stream"] = True
        if stream_usage:
            payload.setdefault("stream_options", {"include_usage": True})
    return payload


def _map_response_format(response_format: ResponseFormat) -> dict[str, Any]:
    schema = response_format.json_schema
    if response_format.strict:
        schema = render_schema(schema, "openai-strict")
    return {
        "type": "json_schema",
        "json_schema": {
            "name": response_format.name,
            "schema": schema,
            "strict": response_format.strict,
        },
    }


def _map_message(message: ChatMessage) -> dict[str, Any]:
    if isinstance(message, SystemMessage):
        return {"role": "system", "content": message.text}
    if isinstance(message, UserMessage):
        user: dict[str, Any] = {"role": "user", "content": _map_user_content(message)}
        if message.name is not None:
            user["name"] = message.name
        return user
    if isinstance(message, AiMessage):
        # Earlier reasoning is not sent back: OpenAI has no input field for it, and DeepSeek
        # rejects `reasoning_content` in requests.
        assistant: dict[str, Any] = {"role": "assistant", "content": message.text}
        if message.tool_calls:
            assistant["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in message.tool_calls
            ]
        elif message.text is None:
            assistant["content"] = ""
        return assistant
    if isinstance(message, ToolResultMessage):
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.text}
    assert isinstance(message, CustomMessage)
    raise ModelError(
        f"{PROVIDER} does not support CustomMessage (attributes: {sorted(message.attributes)})"
    )


def _map_user_content(message: UserMessage) -> str | list[dict[str, Any]]:
    if isinstance(message.content, str):
        return message.content
    return [_map_part(part) for part in message.content]


_AUDIO_FORMATS = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/mpeg": "mp3", "audio/mp3": "mp3"}


def refused_part(part: BinaryContent) -> str | None:
    """Why Chat Completions cannot take `part` (a phrase after "the endpoint"), or `None`."""
    if isinstance(part, ImageContent):
        return None
    inline = part.base64_data()
    if inline is None:
        return f"takes a {part.kind} only as inline data, not by URL"
    if isinstance(part, AudioContent) and inline[0] not in _AUDIO_FORMATS:
        return "takes audio only as wav or mp3"
    return None


def _map_part(part: Content) -> dict[str, Any]:
    """A user message's content part: `text`, `image_url`, `input_audio` (inline wav or mp3) or
    `file` (inline `file_data`), as https://platform.openai.com/docs/api-reference/chat/create
    lists them. Tool messages take text only: `fit_content` moves a tool's other parts into a
    user message after the tool results."""
    if isinstance(part, TextContent):
        return {"type": "text", "text": part.text}
    if isinstance(part, ImageContent):
        image: dict[str, Any] = {"url": part.data_url()}
        if part.detail is not None:
            image["detail"] = part.detail
        return {"type": "image_url", "image_url": image}
    inline = part.base64_data()
    if inline is None:
        raise ModelError(
            f"{PROVIDER} Chat Completions takes a {part.kind} as inline data, not by URL"
        )
    media_type, data = inline
    if isinstance(part, AudioContent):
        audio_format = _AUDIO_FORMATS.get(media_type)
        if audio_format is None:
            raise ModelError(
                f"{PROVIDER} Chat Completions takes audio as wav or mp3, not {media_type}"
            )
        return {"type": "input_audio", "input_audio": {"data": data, "format": audio_format}}
    name = part.title if isinstance(part, DocumentContent) else part.filename
    file = {"filename": name or part.kind, "file_data": f"data:{media_type};base64,{data}"}
    return {"type": "file", "file": file}


def map_tool(spec: ToolSpecification) -> dict[str, Any]:
    """One `tools[]` entry; the schema is rendered strict when `spec.strict_schema` asks.

    Raises:
        SchemaDialectError: The dialect cannot express the tool's schema.
    """
    function: dict[str, Any] = {"name": spec.name}
    if spec.description:
        function["description"] = spec.description
    function["parameters"] = render_schema(
        spec.parameters, "openai-strict" if spec.strict_schema else "openai"
    )
    if spec.strict_schema:
        function["strict"] = True
    return {"type": "function", "function": function}


def _map_tool_choice(choice: ToolChoice | str) -> str | dict[str, Any]:
    if isinstance(choice, ToolChoice):
        return choice.value
    return {"type": "function", "function": {"name": choice}}


# -- response -----------------------------------------------------------------------------------


def parse_response(body: Any) -> ChatResponse:
    """Map a `chat.completion` body to a `ChatResponse`.

    Raises:
        ModelError: the body is an error object, or has no usable choice.
    """
    if not isinstance(body, dict):
        raise ModelError(f"{PROVIDER} returned an unexpected body", body=body)
    if body.get("error") is not None:
        raise error_from_body(PROVIDER, body)
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ModelError(f"{PROVIDER} returned no choices", body=body)
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        raise ModelError(f"{PROVIDER} returned a choice without a message", body=body)
    try:
        text, thinking = _map_content(message.get("content"))
        thinking = _reasoning(message) or thinking
        raw_calls = message.get("tool_calls") or []
        calls = [
            (call.get("id"), function.get("name"), _arguments(function.get("arguments")))
            for call in raw_calls
            for function in [call.get("function") or {}]
        ]
    except (AttributeError, TypeError) as exc:
        raise ModelError(f"{PROVIDER} returned a malformed message: {exc}", body=body) from exc
    return _response(
        text=text,
        thinking=thinking,
        calls=calls,
        finish_reason=choice.get("finish_reason"),
        usage=body.get("usage"),
        metadata={key: body[key] for key in _METADATA_KEYS if body.get(key) is not None},
        refusal=message.get("refusal"),
        body=body,
    )


def _response(
    *,
    text: str | None,
    thinking: str | None,
    calls: Sequence[tuple[str | None, str | None, str]],
    finish_reason: Any,
    usage: Any,
    metadata: dict[str, Any],
    refusal: Any = None,
    body: Any = None,
) -> ChatResponse:
    """Assemble the response: shared by the blocking parse and the stream, so both agree exactly.

    Raises:
        ModelError: a field of the wrong type (a list as `finish_reason`, a number as a tool
            call's id or name, a string or float as a token count).
    """
    response_id = metadata.get("id")
    try:
        tool_calls = [
            ToolCall(
                id=call_id or (f"call_{response_id}_{n}" if response_id else f"call_{n}"),
                name=name or "",
                arguments=arguments,
            )
            for n, (call_id, name, arguments) in enumerate(calls)
        ]
        reason = _map_finish_reason(finish_reason, bool(tool_calls))
        token_usage = _map_usage(usage)
    except (TypeError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
        raise ModelError(f"{PROVIDER} returned a malformed response: {exc}", body=body) from exc
    if reason is FinishReason.OTHER:
        metadata["finish_reason"] = finish_reason
    if isinstance(usage, dict):
        # As the Responses API's are: cached prompt tokens (OpenAI, llama.cpp, vLLM), reasoning.
        for details, key in (
            ("prompt_tokens_details", "cached_tokens"),
            ("completion_tokens_details", "reasoning_tokens"),
        ):
            value = (usage.get(details) or {}).get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                metadata[key] = value
    if isinstance(refusal, str) and refusal:
        metadata["refusal"] = refusal
    return ChatResponse(
        ai_message=AiMessage(text=text or None, thinking=thinking or None, tool_calls=tool_calls),
        token_usage=token_usage,
        finish_reason=reason,
        metadata=metadata,
    )


def _map_finish_reason(raw: Any, has_tool_calls: bool) -> FinishReason:
    # Some compatible servers say "stop" next to tool calls, or never send a reason at all:
    # what the model asked for decides.
    if raw is None or raw == "stop":
        return FinishReason.TOOL_EXECUTION if has_tool_calls else FinishReason.STOP
    if not isinstance(raw, str):
        raise TypeError(f"finish_reason is not a string: {raw!r}")
    return _FINISH_REASONS.get(raw, FinishReason.OTHER)


def _map_usage(usage: Any) -> TokenUsage | None:
    if not isinstance(usage, dict):
        return None
    input_tokens = usage.get("prompt_tokens") or 0
    output_tokens = usage.get("completion_tokens") or 0
    total = usage.get("total_tokens")
    # Strict: a count sent as a string or a float is a malformed body, not something to coerce.
    return TokenUsage.model_validate(
        {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "total_tokens": total or input_tokens + output_tokens,
        },
        strict=True,
    )


def _map_content(content: Any) -> tuple[str | None, str | None]:
    """Text and thinking of a `content` field: a string, `null`, or a list of parts."""
    if content is None or isinstance(content, str):
        return content, None
    text: list[str] = []
    thinking: list[str] = []
    for part in content:
        kind = part.get("type")
        if kind == "text":
            text.append(part.get("text") or "")
        elif kind == "thinking":  # Mistral's reasoning parts: {"thinking": [{"type": "text", ...}]}
            inner = part.get("thinking")
            thinking.append(inner if isinstance(inner, str) else _map_content(inner)[0] or "")
    return "".join(text), "".join(thinking)


def _reasoning(message: Mapping[str, Any]) -> str | None:
    """DeepSeek and vLLM send `reasoning_content`; OpenRouter, Ollama and newer vLLM `reasoning`."""
    value = message.get("reasoning_content")
    if value is None:
        value = message.get("reasoning")
    return value if isinstance(value, str) else None


def _arguments(raw: Any) -> str:
    """Arguments verbatim; a JSON object (sent by some compatible servers) is serialized."""
    if raw is None:
        return ""
    if isinstance(raw, str):
        return raw
    return pydantic_core.to_json(raw).decode()


# -- stream -------------------------------------------------------------------------------------


class _ToolCallBucket:
    __slots__ = ("arguments", "first_arguments", "id", "name")

    def __init__(self) -> None:
        self.id: str | None = None
        self.name = Pieces()
        self.arguments = Pieces()
        self.first_arguments: str | None = None


class StreamAccumulator:
    """Aggregates `chat.completion.chunk` events into deltas and one final `ChatResponse`.

    Feed every server-sent event to `feed()` until `done`, then call `finish()`. Tool-call pieces
    are bucketed by `index`; without an `index`, a new `id` opens the next call.
    """

    def __init__(self) -> None:
        self.done = False
        """Whether `[DONE]` arrived; later events are ignored."""
        self._text = Pieces()
        self._thinking = Pieces()
        self._buckets: dict[int, _ToolCallBucket] = {}
        self._last_index: int | None = None
        self._next_index = 0
        """The index a call without one opens: past every index seen."""
        self._finish_reason: Any = None
        self._usage: Any = None
        self._refusal = Pieces()
        self._metadata: dict[str, Any] = {}

    def take(self, event: ServerSentEvent) -> list[StreamEvent]:
        """`feed`, under the name `HttpChatModel` uses."""
        return self.feed(event)

    def end(self) -> list[StreamEvent]:
        """The final `ResponseComplete` (raises when the stream was cut off)."""
        return [ResponseComplete(response=self.finish())]

    def feed(self, event: ServerSentEvent) -> list[StreamEvent]:
        """Take one event and return the deltas it carries.

        Raises:
            ModelError: the event is an error, or not a valid chunk.
        """
        if self.done:
            return []
        data = event.data
        if data == "[DONE]":
            self.done = True
            return []
        if event.event == "error":
            try:
                body: Any = pydantic_core.from_json(data)
            except ValueError:
                body = data
            raise error_from_body(PROVIDER, body, streaming=True)
        if event.event != "message":
            return []
        try:
            chunk = pydantic_core.from_json(data)
        except ValueError as exc:
            raise ModelError(f"{PROVIDER} sent a malformed stream chunk: {exc}", body=data) from exc
        if not isinstance(chunk, dict):
            raise ModelError(f"{PROVIDER} sent an unexpected stream chunk", body=chunk)
        if chunk.get("error") is not None:
            raise error_from_body(PROVIDER, chunk, streaming=True)
        try:
            return self._chunk(chunk)
        except (AttributeError, TypeError, ValueError) as exc:
            raise ModelError(
                f"{PROVIDER} sent a malformed stream chunk: {exc}", body=chunk
            ) from exc

    def _chunk(self, chunk: dict[str, Any]) -> list[StreamEvent]:
        for key in _METADATA_KEYS:
            # The first chunk says who answered; the last one's timings cover the whole answer.
            if (key not in self._metadata or key == "timings") and chunk.get(key) is not None:
                self._metadata[key] = chunk[key]
        if chunk.get("usage") is not None:
            self._usage = chunk["usage"]
        events: list[StreamEvent] = []
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            thinking = _reasoning(delta)
            content = delta.get("content")
            if content is not None and not isinstance(content, str):
                content, part_thinking = _map_content(content)
                thinking = thinking or part_thinking
            if thinking:
                self._thinking.append(thinking)
                events.append(ThinkingDelta(text=thinking))
            if content:
                self._text.append(content)
                events.append(TextDelta(text=content))
            refusal = delta.get("refusal")
            if isinstance(refusal, str):
                self._refusal.append(refusal)
            for piece in delta.get("tool_calls") or ():
                tool_event = self._tool_call(piece)
                if tool_event is not None:
                    events.append(tool_event)
            if choice.get("finish_reason") is not None:
                self._finish_reason = choice["finish_reason"]
        return events

    def _tool_call(self, piece: dict[str, Any]) -> ToolCallDelta | None:
        call_id = piece.get("id") or None
        function = piece.get("function") or {}
        name = function.get("name") or None
        arguments = _arguments(function.get("arguments"))
        raw_index = piece.get("index")
        if isinstance(raw_index, int):
            index = raw_index
        else:
            # Gemini's endpoint omits `index`: a new id starts the next call.
            last = self._last_index
            if last is None or (call_id is not None and call_id != self._buckets[last].id):
                index = self._next_index
            else:
                index = last
        self._last_index = index
        bucket = self._buckets.get(index)
        if bucket is None:
            bucket = self._buckets[index] = _ToolCallBucket()
            bucket.first_arguments = arguments
            self._next_index = max(self._next_index, index + 1)
        elif (
            call_id is not None
            and call_id == bucket.id
            and name is not None
            and bucket.name.equals(name)
        ):
            # vLLM/Kimi may repeat the first entry of a call verbatim: it adds nothing.
            if arguments == bucket.first_arguments:
                return None
            call_id = name = None
        new_id = call_id if call_id is not None and bucket.id is None else None
        if new_id is not None:
            bucket.id = new_id
        if name is not None and not bucket.name.equals(name):
            bucket.name.append(name)
        else:
            name = None
        if arguments:
            bucket.arguments.append(arguments)
        if new_id is None and name is None and not arguments:
            return None
        return ToolCallDelta(index=index, id=new_id, name=name, arguments_delta=arguments)

    def finish(self) -> ChatResponse:
        """The aggregated response, once the stream has ended.

        Raises:
            ModelError: the stream ended before `[DONE]` and before any finish reason (cut off).
        """
        if not self.done and self._finish_reason is None:
            raise ModelError(f"{PROVIDER} stream ended before the response was complete")
        calls = [
            (bucket.id, bucket.name.text(), bucket.arguments.text())
            for _, bucket in sorted(self._buckets.items())
        ]
        return _response(
            text=self._text.text(),
            thinking=self._thinking.text(),
            calls=calls,
            finish_reason=self._finish_reason,
            usage=self._usage,
            metadata=dict(self._metadata),
            refusal=self._refusal.text(),
        )


@dataclass(frozen=True)
class OpenAIWire(WireBase):
    """The Chat Completions wire format, as `HttpChatModel` composes it with the HTTP shell."""

    organization: str | None = None
    """Sent as `OpenAI-Organization`."""
    project: str | None = None
    """Sent as `OpenAI-Project`."""
    stream_usage: bool = True
    """Whether streams ask for token usage (`stream_options`); some servers refuse the field."""

    provider: ClassVar[str] = PROVIDER
    path: ClassVar[str] = "chat/completions"
    user_content: ClassVar[frozenset[ContentKind]] = frozenset(
        {"image", "audio", "document", "file"}
    )
    default_base_url: ClassVar[str] = "https://api.openai.com/v1"
    api_key_env: ClassVar[str] = "OPENAI_API_KEY"
    base_url_env: ClassVar[str] = "OPENAI_BASE_URL"
    parse_response = staticmethod(parse_response)
    stream_parser = StreamAccumulator

    def headers(self, api_key: str | None) -> dict[str, str]:
        """`Authorization: Bearer` (when there is a key), organization and project."""
        return openai_headers(api_key, self.organization, self.project)

    def refuse_part(self, part: BinaryContent) -> str | None:
        """Chat Completions takes images by any source, but audio (wav or mp3), documents and
        files only as inline data (see `_map_part`)."""
        return refused_part(part)

    def build_payload(
        self, messages: Sequence[ChatMessage], parameters: ChatRequestParameters, *, stream: bool
    ) -> dict[str, Any]:
        """The JSON body of a request (see the module's `build_payload`)."""
        return build_payload(messages, parameters, stream=stream, stream_usage=self.stream_usage)


def openai_headers(
    api_key: str | None, organization: str | None, project: str | None
) -> dict[str, str]:
    """The headers of every OpenAI API (Chat Completions and Responses alike)."""
    headers: dict[str, str] = {}
    if api_key:
        headers["authorization"] = f"Bearer {api_key}"
    if organization:
        headers["openai-organization"] = organization
    if project:
        headers["openai-project"] = project
    return headers
