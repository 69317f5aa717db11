"""Sans-IO core of the Anthropic Messages provider: request payload, response parsing, streaming.

Nothing here does I/O: `AnthropicChatModel` drives these functions from its sync and async shells,
so the mapping is written once.

An `AiMessage` parsed from a response that holds anything the contract does not model (signed
`thinking`, `redacted_thinking`, server-tool blocks such as `server_tool_use` /
`web_search_tool_result`, text with citations, unknown block types) keeps the response's content
blocks, unchanged and in order, in `attributes["anthropic_content"]`. When that message goes back
to the API those blocks are echoed verbatim, as Anthropic requires for signatures and server-tool
turns, as long as the message's `text`, `thinking` and `tool_calls` still say what the blocks say.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import NonNegativeInt, TypeAdapter
from pydantic_core import from_json, to_json

from .._content import Content, ContentKind, DocumentContent
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
from ._anthropic_cache import CacheTTL, PromptCache, place_breakpoints
from ._dialects import Dialect, render_schema
from ._http import WireBase, error_from_body
from ._pieces import Pieces
from ._sse import ServerSentEvent

__all__ = [
    "CONTENT_ATTRIBUTE",
    "MESSAGE_ATTRIBUTE",
    "AnthropicStreamAccumulator",
    "AnthropicWire",
    "build_payload",
    "map_tool",
    "parse_response",
]

CONTENT_ATTRIBUTE = "anthropic_content"
"""`AiMessage.attributes` key holding the raw content blocks that must be echoed back verbatim."""
MESSAGE_ATTRIBUTE = "anthropic_message"
"""`CustomMessage.attributes` key holding a raw Anthropic message (`role` + `content`) to send as is."""

_FINISH_REASONS = {
    "end_turn": FinishReason.STOP,
    "stop_sequence": FinishReason.STOP,
    "max_tokens": FinishReason.LENGTH,
    "tool_use": FinishReason.TOOL_EXECUTION,
    "refusal": FinishReason.CONTENT_FILTER,
}
# Blocks the contract models directly; anything else makes a message keep its raw blocks.
_MODELLED_BLOCKS = frozenset({"text", "tool_use"})
_USAGE_METADATA = (
    "cache_creation",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "server_tool_use",
    "service_tier",
)
_STREAMED_TEXTS = ("text", "thinking", "signature")
_COUNT: TypeAdapter[int] = TypeAdapter(NonNegativeInt)
_Block = dict[str, Any]


# --------------------------------------------------------------------------- request


def build_payload(
    messages: Sequence[ChatMessage], parameters: ChatRequestParameters, *, stream: bool = False
) -> dict[str, Any]:
    """Map a conversation and merged parameters to a Messages API request body.

    `parameters.model` and `parameters.max_tokens` must be set (the model's defaults provide them).
    """
    if parameters.model is None or parameters.max_tokens is None:
        raise ValueError("Anthropic requests need `model` and `max_tokens`")
    payload: dict[str, Any] = {"model": parameters.model, "max_tokens": parameters.max_tokens}
    system = [m.text for m in messages if isinstance(m, SystemMessage)]
    if system:
        payload["system"] = "\n\n".join(system)
    payload["messages"] = _map_messages(messages)
    if parameters.temperature is not None:
        payload["temperature"] = parameters.temperature
    if parameters.top_p is not None:
        payload["top_p"] = parameters.top_p
    if parameters.stop:
        payload["stop_sequences"] = list(parameters.stop)
    # Server tools (web search, code execution, …) come through `custom["tools"]` and are
    # offered next to the client tools rather than replacing them.
    custom = dict(parameters.custom)
    tools = [map_tool(spec) for spec in parameters.tools or ()] + list(custom.pop("tools", ()))
    if tools:
        payload["tools"] = tools
    tool_choice = _map_tool_choice(parameters)
    if tool_choice is not None:
        payload["tool_choice"] = tool_choice
    if parameters.response_format is not None:
        payload["output_config"] = {"format": _map_response_format(parameters.response_format)}
    if stream:
        payload["stream"] = True
    payload.update(custom)
    return payload


def _map_response_format(response_format: ResponseFormat) -> dict[str, Any]:
    """`output_config.format`: JSON outputs, the schema in the strict dialect
    (https://docs.anthropic.com/en/docs/build-with-claude/structured-outputs)."""
    dialect: Dialect = "anthropic-strict" if response_format.strict else "anthropic"
    return {"type": "json_schema", "schema": render_schema(response_format.json_schema, dialect)}


def _map_messages(messages: Sequence[ChatMessage]) -> list[dict[str, Any]]:
    # The API wants strictly alternating roles, so consecutive turns of one role (several tool
    # results, a user text after tool results, ...) are merged into one message.
    merged: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, SystemMessage):
            continue
        role, content = _map_message(message)
        if merged and merged[-1]["role"] == role:
            previous = merged[-1]
            previous["content"] = _as_blocks(previous["content"]) + _as_blocks(content)
        else:
            merged.append({"role": role, "content": content})
    return merged


def _as_blocks(content: str | list[_Block]) -> list[_Block]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content)


def _map_message(message: ChatMessage) -> tuple[str, str | list[_Block]]:
    if isinstance(message, UserMessage):
        if isinstance(message.content, str):
            return "user", message.content
        return "user", [_map_part(part) for part in message.content]
    if isinstance(message, ToolResultMessage):
        block: _Block = {
            "type": "tool_result",
            "tool_use_id": message.tool_call_id,
            "content": [_map_part(part) for part in message.content]
            if message.content
            else message.text,
        }
        if message.is_error:
            block["is_error"] = True
        return "user", [block]
    if isinstance(message, AiMessage):
        return "assistant", _map_assistant(message)
    if isinstance(message, CustomMessage):
        return _map_custom(message)
    raise ModelError(f"Anthropic cannot send a {type(message).__name__}")  # pragma: no cover


def _map_part(part: Content) -> _Block:
    """A content block for `part`, in a user message or a `tool_result`'s content; shapes from
    https://docs.anthropic.com/en/docs/build-with-claude/vision (image sources `base64`, `url`),
    https://docs.anthropic.com/en/docs/build-with-claude/pdf-support (document sources `base64`,
    `text`, `url`) and https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/implement-tool-use
    (a `tool_result`'s content: text, image and document blocks)."""
    if isinstance(part, TextContent):
        return {"type": "text", "text": part.text}
    if not isinstance(part, ImageContent | DocumentContent):
        # `fit_content` leaves these out before the wire: the API has no block for them.
        raise ModelError(f"Anthropic cannot send a {part.kind} part")
    block: _Block = {"type": part.type, "source": _source(part)}
    if isinstance(part, DocumentContent) and part.title is not None:
        block["title"] = part.title
    return block


def _source(part: ImageContent | DocumentContent) -> _Block:
    if (
        isinstance(part, DocumentContent)
        and part.data is not None
        and part.media_type == "text/plain"
    ):
        return {
            "type": "text",
            "media_type": "text/plain",
            "data": part.data.decode("utf-8", "replace"),
        }
    inline = part.base64_data()
    if inline is not None:
        return {"type": "base64", "media_type": inline[0], "data": inline[1]}
    assert part.url is not None
    if part.url.startswith("data:"):
        raise ModelError(
            f"Anthropic needs {part.type} data: URLs of the form data:<media type>;base64,<data>"
        )
    return {"type": "url", "url": part.url}


def _map_custom(message: CustomMessage) -> tuple[str, str | list[_Block]]:
    raw = message.attributes.get(MESSAGE_ATTRIBUTE)
    if (
        not isinstance(raw, dict)
        or raw.get("role") not in ("user", "assistant")
        or not isinstance(raw.get("content"), str | list)
    ):
        raise ModelError(
            "Anthropic only understands a CustomMessage whose attributes hold "
            f"{MESSAGE_ATTRIBUTE!r}: a raw message with a 'user' or 'assistant' role and content"
        )
    return raw["role"], raw["content"]


def _map_assistant(message: AiMessage) -> list[_Block]:
    raw = message.attributes.get(CONTENT_ATTRIBUTE)
    kept: list[_Block] = []
    if isinstance(raw, list):
        try:
            text, thinking, tool_calls = _read_blocks(raw)
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelError(f"malformed {CONTENT_ATTRIBUTE!r} attribute: {exc}") from exc
        if (text, thinking) == (message.text, message.thinking) and _same_calls(
            tool_calls, message.tool_calls
        ):
            return raw
        # The message was edited: its fields win. Opaque blocks survive; a signed thinking block
        # only while the thinking text it signs is unchanged.
        kept = [
            block
            for block in raw
            if block["type"] not in _MODELLED_BLOCKS
            and (block["type"] != "thinking" or thinking == message.thinking)
        ]
    # Unsigned thinking (from another provider, or written by hand) cannot be sent: the API
    # rejects thinking blocks without a valid signature, so it is left out.
    blocks = kept
    if message.text:
        blocks.append({"type": "text", "text": message.text})
    for call in message.tool_calls:
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": _input(call)})
    return blocks


def _input(call: ToolCall) -> dict[str, Any]:
    return _input_object(call.arguments)


def _input_object(arguments: str) -> dict[str, Any]:
    """A `tool_use` input for `arguments`: the JSON object they hold, `{}` when blank.

    Arguments that are not a JSON object (a model's malformed stream, answered with an arguments
    error) go back as `{"INVALID_JSON": <the text>}`: the API needs an object, and the model
    should see what it sent.
    """
    if not arguments.strip():
        return {}
    try:
        value = from_json(arguments)
    except ValueError:
        value = None
    return value if isinstance(value, dict) else {"INVALID_JSON": arguments}


def _same_calls(stored: Sequence[ToolCall], calls: Sequence[ToolCall]) -> bool:
    """Whether `calls` say what the stored blocks say: arguments compare as the inputs they
    send, since a streamed call keeps the model's own text (spacing, key order)."""
    return len(stored) == len(calls) and all(
        (a.id, a.name) == (b.id, b.name) and (a.arguments == b.arguments or _input(a) == _input(b))
        for a, b in zip(stored, calls, strict=True)
    )


def map_tool(spec: ToolSpecification) -> dict[str, Any]:
    """One `tools[]` entry (a client tool), its schema in the Anthropic dialect.

    Raises:
        SchemaDialectError: The dialect cannot express the tool's schema.
    """
    tool: dict[str, Any] = {"name": spec.name}
    if spec.description:
        tool["description"] = spec.description
    if spec.strict_schema:
        # Strict tool use: the input is decoded against the schema (the strict dialect).
        tool["input_schema"] = render_schema(spec.parameters, "anthropic-strict")
        tool["strict"] = True
    else:
        tool["input_schema"] = render_schema(spec.parameters, "anthropic")
    return tool


def _map_tool_choice(parameters: ChatRequestParameters) -> dict[str, Any] | None:
    choice = parameters.tool_choice
    if choice is None:
        if parameters.parallel_tool_calls is False and parameters.tools:
            return {"type": "auto", "disable_parallel_tool_use": True}
        return None
    if choice == ToolChoice.NONE:
        # `none` forbids tool use altogether, so there is nothing parallel to disable.
        return {"type": "none"}
    mapped: dict[str, Any]
    if choice == ToolChoice.AUTO:
        mapped = {"type": "auto"}
    elif choice == ToolChoice.REQUIRED:
        mapped = {"type": "any"}
    else:
        mapped = {"type": "tool", "name": str(choice)}
    if parameters.parallel_tool_calls is False:
        mapped["disable_parallel_tool_use"] = True
    return mapped


# --------------------------------------------------------------------------- response


def parse_response(body: Any) -> ChatResponse:
    """Map a Messages API response body (parsed JSON) to a `ChatResponse`.

    Raises:
        ModelError: the body is an error object, or not shaped like a Messages API response.
    """
    if isinstance(body, dict) and body.get("type") == "error":
        raise error_from_body("Anthropic", body)
    try:
        if not isinstance(body, dict) or not isinstance(body["content"], list):
            raise TypeError("no content list")
        text, thinking, tool_calls = _read_blocks(body["content"])
        extras = any(_is_opaque(block) for block in body["content"])
        message = AiMessage(
            text=text,
            thinking=thinking,
            tool_calls=tool_calls,
            attributes={CONTENT_ATTRIBUTE: body["content"]} if extras else {},
        )
        usage, usage_metadata = _map_usage(body.get("usage"))
        metadata = {key: body[key] for key in ("id", "model", "type") if key in body}
        for key in ("stop_reason", "stop_sequence"):
            if body.get(key) is not None:
                metadata[key] = body[key]
        stop_reason = body.get("stop_reason")
        return ChatResponse(
            ai_message=message,
            token_usage=usage,
            finish_reason=None
            if stop_reason is None
            else _FINISH_REASONS.get(stop_reason, FinishReason.OTHER),
            metadata={**metadata, **usage_metadata},
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ModelError(f"malformed Anthropic response: {exc}", body=body) from exc


def _is_opaque(block: _Block) -> bool:
    return block["type"] not in _MODELLED_BLOCKS or bool(block.get("citations"))


def _read_blocks(blocks: list[_Block]) -> tuple[str | None, str | None, tuple[ToolCall, ...]]:
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[ToolCall] = []
    for block in blocks:
        kind = block["type"]
        if kind == "text":
            texts.append(block["text"])
        elif kind == "thinking":
            thoughts.append(block["thinking"])
        elif kind == "tool_use":
            if not isinstance(block["input"], dict):
                raise TypeError(f"tool_use input is not an object: {block['input']!r}")
            arguments = to_json(block["input"]).decode()
            calls.append(ToolCall(id=block["id"], name=block["name"], arguments=arguments))
    return (
        "".join(texts) if texts else None,
        "".join(thoughts) if thoughts else None,
        tuple(calls),
    )


def _map_usage(usage: Any) -> tuple[TokenUsage | None, dict[str, Any]]:
    if usage is None:
        return None, {}
    # Strict: a count sent as a string or a float is a malformed body, not something to coerce.
    input_tokens, read, written, output_tokens = (
        _COUNT.validate_python(usage.get(key) or 0, strict=True)
        for key in (
            "input_tokens",
            "cache_read_input_tokens",
            "cache_creation_input_tokens",
            "output_tokens",
        )
    )
    # Anthropic's `input_tokens` leaves out what the prompt cache read or wrote; the contract's
    # counts every token the model read, as OpenAI's and Gemini's do (usage limits see them all).
    input_tokens += read + written
    token_usage = TokenUsage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        total_tokens=input_tokens + output_tokens,
    )
    return token_usage, {k: usage[k] for k in _USAGE_METADATA if usage.get(k) is not None}


# --------------------------------------------------------------------------- streaming


class AnthropicStreamAccumulator:
    """Turns decoded Messages API stream events into `StreamEvent`s.

    Feed every SSE event in order; `message_stop` yields the final `ResponseComplete`, whose
    response is built by `parse_response` from the reassembled message, so a streamed answer
    equals the blocking one. Call `finish()` when the byte stream ends: it raises if the
    stream stopped before `message_stop`.
    """

    def __init__(self) -> None:
        self._message: dict[str, Any] | None = None
        self._blocks: dict[int, _Block] = {}
        self._texts: dict[tuple[int, str], Pieces] = {}
        """The streamed `text`, `thinking` and `signature` of each block; set on it at the end."""
        self._partial_json: dict[int, Pieces] = {}
        """The `input_json_delta` pieces of each block still open; joined once, when it stops."""
        self._arguments: dict[int, str] = {}
        """A stopped tool_use block's arguments, exactly as streamed."""
        self._tool_indexes: dict[int, int] = {}
        self._response: ChatResponse | None = None

    @property
    def response(self) -> ChatResponse | None:
        """The aggregated response, once `message_stop` arrived."""
        return self._response

    def feed(self, event: str | None, data: Any) -> list[StreamEvent]:
        """Process one SSE event, its `event:` name and parsed JSON `data`; return what it produced.

        Raises:
            ModelError: an `error` event, or an event that does not fit the stream so far.
        """
        kind = data.get("type", event) if isinstance(data, dict) else event
        if kind == "error":
            raise error_from_body("Anthropic", data, streaming=True)
        if kind in (None, "ping") or self._response is not None:
            return []
        try:
            return list(self._apply(kind, data))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ModelError(
                f"malformed Anthropic stream event {kind!r}: {exc}", body=data
            ) from exc

    @property
    def done(self) -> bool:
        """Whether `message_stop` arrived."""
        return self._response is not None

    def take(self, event: ServerSentEvent) -> list[StreamEvent]:
        """`feed` for a decoded server-sent event."""
        try:
            data = event.json()
        except ValueError as exc:
            raise ModelError(
                f"Anthropic sent malformed SSE data in a {event.event!r} event: {exc}",
                body=event.data,
            ) from exc
        return self.feed(event.event, data)

    def end(self) -> list[StreamEvent]:
        """Nothing more to give (`message_stop` gave `ResponseComplete`); raises when the stream
        stopped before it."""
        self.finish()
        return []

    def finish(self) -> ChatResponse:
        """The aggregated response.

        Raises:
            ModelError: the stream ended before `message_stop`.
        """
        if self._response is None:
            raise ModelError("Anthropic stream ended before message_stop")
        return self._response

    def _apply(self, kind: str, data: dict[str, Any]) -> Iterator[StreamEvent]:
        if kind == "message_start":
            self._message = dict(data["message"])
            self._message["usage"] = dict(self._message.get("usage") or {})
            return
        message = self._started(kind)
        if kind == "content_block_start":
            yield from self._start_block(data["index"], dict(data["content_block"]))
        elif kind == "content_block_delta":
            yield from self._delta(data["index"], data["delta"])
        elif kind == "content_block_stop":
            self._stop_block(data["index"])
        elif kind == "message_delta":
            message.update(data.get("delta") or {})
            # Output usage is cumulative; input usage came with message_start.
            usage = data.get("usage") or {}
            message["usage"].update({k: v for k, v in usage.items() if v is not None})
        elif kind == "message_stop":
            for (index, field), pieces in self._texts.items():
                self._blocks[index][field] = pieces.text()
            message["content"] = [self._blocks[i] for i in sorted(self._blocks)]
            self._response = self._streamed_arguments(parse_response(message))
            yield ResponseComplete(response=self._response)
        # Other event types are new additions to the API: ignored, as Anthropic asks.

    def _started(self, kind: str) -> dict[str, Any]:
        if self._message is None:
            raise ModelError(f"Anthropic stream sent {kind!r} before message_start")
        return self._message

    def _start_block(self, index: int, block: _Block) -> Iterator[StreamEvent]:
        self._blocks[index] = block
        for field in _STREAMED_TEXTS:
            self._texts.pop((index, field), None)
        kind = block["type"]
        if kind == "text" and block["text"]:
            yield TextDelta(text=block["text"])
        elif kind == "thinking" and block["thinking"]:
            yield ThinkingDelta(text=block["thinking"])
        elif kind == "tool_use":
            position = self._tool_indexes[index] = len(self._tool_indexes)
            yield ToolCallDelta(index=position, id=block["id"], name=block["name"])

    def _delta(self, index: int, delta: dict[str, Any]) -> Iterator[StreamEvent]:
        block = self._blocks[index]
        kind = delta["type"]
        if kind == "text_delta":
            self._text(index, "text").append(delta["text"])
            yield TextDelta(text=delta["text"])
        elif kind == "thinking_delta":
            self._text(index, "thinking").append(delta["thinking"])
            yield ThinkingDelta(text=delta["thinking"])
        elif kind == "signature_delta":
            self._text(index, "signature").append(delta["signature"])
        elif kind == "input_json_delta":
            partial = self._partial_json.get(index)
            if partial is None:
                partial = self._partial_json[index] = Pieces()
            partial.append(delta["partial_json"])
            if index in self._tool_indexes:
                yield ToolCallDelta(
                    index=self._tool_indexes[index], arguments_delta=delta["partial_json"]
                )
        elif kind == "citations_delta":
            citations = block.get("citations")
            if citations is None:
                citations = block["citations"] = []
            citations.append(delta["citation"])

    def _text(self, index: int, field: str) -> Pieces:
        """The pieces of a block's streamed `field`, starting from what its start event held."""
        pieces = self._texts.get((index, field))
        if pieces is None:
            block = self._blocks[index]
            # A block that has no `text` (or `thinking`) field cannot take such deltas.
            first = block.get(field, "") if field == "signature" else block[field]
            pieces = self._texts[index, field] = Pieces(first)
        return pieces

    def _stop_block(self, index: int) -> None:
        block = self._blocks[index]
        pieces = self._partial_json.pop(index, None)
        partial = "" if pieces is None else pieces.text()
        if not partial.strip():
            if block["type"] in ("tool_use", "server_tool_use"):
                block.setdefault("input", {})
        elif block["type"] == "tool_use":
            # The model's own text is the call's arguments: invalid JSON included, so that the
            # tool answers with an arguments error the model can correct.
            self._arguments[index] = partial
            block["input"] = _input_object(partial)
        else:
            block["input"] = from_json(partial)

    def _streamed_arguments(self, response: ChatResponse) -> ChatResponse:
        if not self._arguments:
            return response
        tool_blocks = [i for i in sorted(self._blocks) if self._blocks[i]["type"] == "tool_use"]
        calls = tuple(
            call.model_copy(update={"arguments": self._arguments[index]})
            if index in self._arguments
            else call
            for index, call in zip(tool_blocks, response.ai_message.tool_calls, strict=True)
        )
        message = response.ai_message.model_copy(update={"tool_calls": calls})
        return response.model_copy(update={"ai_message": message})


@dataclass(frozen=True)
class AnthropicWire(WireBase):
    """The Messages API wire format, as `HttpChatModel` composes it with the HTTP shell."""

    anthropic_version: str = "2023-06-01"
    """The `anthropic-version` header."""
    prompt_cache: PromptCache = "auto"
    """Where `cache_control` breakpoints go (`_anthropic_cache.place_breakpoints`)."""
    cache_ttl: CacheTTL = "5m"
    """How long a cached prefix lives: `"5m"` or `"1h"`."""

    provider: ClassVar[str] = "Anthropic"
    path: ClassVar[str] = "/v1/messages"
    user_content: ClassVar[frozenset[ContentKind]] = frozenset({"image", "document"})
    tool_result_content: ClassVar[frozenset[ContentKind]] = frozenset({"image", "document"})
    default_base_url: ClassVar[str] = "https://api.anthropic.com"
    api_key_env: ClassVar[str] = "ANTHROPIC_API_KEY"
    base_url_env: ClassVar[str] = "ANTHROPIC_BASE_URL"
    parse_response = staticmethod(parse_response)
    stream_parser = AnthropicStreamAccumulator

    def build_payload(
        self, messages: Sequence[ChatMessage], parameters: ChatRequestParameters, *, stream: bool
    ) -> dict[str, Any]:
        """The Messages API body, with its prompt-cache breakpoints."""
        payload = build_payload(messages, parameters, stream=stream)
        return place_breakpoints(payload, self.prompt_cache, self.cache_ttl)

    def headers(self, api_key: str | None) -> dict[str, str]:
        """`x-api-key` (when there is a key) and `anthropic-version`."""
        headers = {"anthropic-version": self.anthropic_version}
        if api_key:
            headers["x-api-key"] = api_key
        return headers
