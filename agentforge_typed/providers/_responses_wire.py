"""OpenAI Responses API wire format, sans-IO: build the payload, parse the answer, aggregate a stream.

The Responses API (`POST /responses`) speaks in typed *items*: the request's `input` is a list of
them (messages, `function_call`s, `function_call_output`s, reasoning, hosted-tool calls) and the
answer's `output` is another. The contract models text, thinking and tool calls; everything else
an answer holds — reasoning items with their `encrypted_content`, hosted-tool items (web search,
file search, code interpreter, remote MCP), annotated or refused text — stays in the `AiMessage`
under `attributes["openai_responses_output"]`: the whole `output` list, unchanged and in order.
Sent back, that list is echoed verbatim while the message's `text`, `thinking` and `tool_calls`
still say what it says; this is how reasoning survives stateless (`store: false`) turns. An edited
message goes back as plain items: the API refuses reasoning and hosted-tool items cut off from the
outputs they led to.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import pydantic_core

from .._content import AudioContent, Content, ContentKind, DocumentContent
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
from ._http import WireBase, error_details
from ._openai_wire import PROVIDER, OpenAIWire, openai_headers
from ._pieces import Pieces
from ._sse import ServerSentEvent

__all__ = [
    "INPUT_ATTRIBUTE",
    "OUTPUT_ATTRIBUTE",
    "PROVIDER",
    "OpenAIResponsesWire",
    "ResponsesStreamAccumulator",
    "build_payload",
    "map_tool",
    "parse_response",
]


OUTPUT_ATTRIBUTE = "openai_responses_output"
"""`AiMessage.attributes` key holding an answer's raw `output` items, echoed back verbatim."""
INPUT_ATTRIBUTE = "openai_responses_input"
"""`CustomMessage.attributes` key holding raw `input` items to send as they are (e.g. an
`mcp_approval_response`)."""

_ENCRYPTED_REASONING = "reasoning.encrypted_content"
_INCOMPLETE_REASONS = {
    "max_output_tokens": FinishReason.LENGTH,
    "content_filter": FinishReason.CONTENT_FILTER,
}
_METADATA_KEYS = ("id", "model", "created_at", "service_tier")
_Item = dict[str, Any]


# -- request ------------------------------------------------------------------------------------


def build_payload(
    messages: Sequence[ChatMessage], parameters: ChatRequestParameters, *, stream: bool
) -> dict[str, Any]:
    """The JSON body of a `POST /responses` request.

    Leading system messages become `instructions`; a system message later in the conversation
    stays in place as a `system` input item. `store` is `false` unless `custom` says otherwise,
    and then the encrypted reasoning is asked for (`include`), so it can be sent back next turn.
    `custom` is spread at the top level last, except `tools` (hosted tools, appended to the
    function tools), `include` (merged), `text` (merged with the response format) and
    `reasoning_effort` (the Chat Completions spelling, sent as `reasoning.effort`).

    Raises:
        ModelError: stop sequences (the Responses API has none), or a `CustomMessage` without
            raw input items.
    """
    if parameters.stop:
        raise ModelError(
            "the OpenAI Responses API has no stop sequences: drop `stop`, or use "
            "OpenAIChatModel (Chat Completions)"
        )
    custom = dict(parameters.custom)
    payload: dict[str, Any] = {"model": parameters.model}
    instructions, items = _map_messages(messages)
    if instructions:
        payload["instructions"] = instructions
    payload["input"] = items
    tools = [map_tool(spec) for spec in parameters.tools or ()] + list(custom.pop("tools", ()))
    if tools:
        payload["tools"] = tools
        if parameters.tool_choice is not None:
            payload["tool_choice"] = _map_tool_choice(parameters.tool_choice)
        if parameters.parallel_tool_calls is not None:
            payload["parallel_tool_calls"] = parameters.parallel_tool_calls
    for name in ("temperature", "top_p"):
        if (value := getattr(parameters, name)) is not None:
            payload[name] = value
    if parameters.max_tokens is not None:
        payload["max_output_tokens"] = parameters.max_tokens
    text = dict(custom.pop("text", None) or {})
    if parameters.response_format is not None:
        text["format"] = _map_response_format(parameters.response_format)
    if text:
        payload["text"] = text
    effort = custom.pop("reasoning_effort", None)
    reasoning = dict(custom.pop("reasoning", None) or {})
    if effort is not None:
        reasoning = {"effort": effort, **reasoning}
    if reasoning:
        payload["reasoning"] = reasoning
    payload["store"] = custom.pop("store", False)
    include = list(custom.pop("include", None) or ())
    if payload["store"] is False and _ENCRYPTED_REASONING not in include:
        include.append(_ENCRYPTED_REASONING)
    if include:
        payload["include"] = include
    payload.update(custom)
    if stream:
        payload["stream"] = True
    return payload


def _map_messages(messages: Sequence[ChatMessage]) -> tuple[str, list[_Item]]:
    instructions: list[str] = []
    items: list[_Item] = []
    for message in messages:
        if isinstance(message, SystemMessage):
            if items:
                items.append({"role": "system", "content": message.text})
            else:
                instructions.append(message.text)
        elif isinstance(message, UserMessage):
            items.append({"role": "user", "content": _map_user_content(message)})
        elif isinstance(message, AiMessage):
            items.extend(_map_assistant(message))
        elif isinstance(message, ToolResultMessage):
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message.tool_call_id,
                    "output": [_map_part(part) for part in message.content]
                    if message.content
                    else message.text,
                }
            )
        elif isinstance(message, CustomMessage):
            items.extend(_map_custom(message))
        else:
            raise TypeError(f"not a chat message: {type(message).__name__}")
    return "\n\n".join(instructions), items


def _map_user_content(message: UserMessage) -> str | list[_Item]:
    if isinstance(message.content, str):
        return message.content
    return [_map_part(part) for part in message.content]


def _map_part(part: Content) -> _Item:
    """An input content item for `part`, in a user message or a `function_call_output`'s
    `output` (which takes the same `input_text`, `input_image` and `input_file` items:
    https://platform.openai.com/docs/api-reference/responses/create, and the file inputs guide
    https://platform.openai.com/docs/guides/pdf-files for `file_data` and `file_url`)."""
    if isinstance(part, TextContent):
        return {"type": "input_text", "text": part.text}
    if isinstance(part, ImageContent):
        return {
            "type": "input_image",
            "image_url": part.data_url(),
            "detail": part.detail or "auto",
        }
    if isinstance(part, AudioContent):
        # `fit_content` leaves it out before the wire: Responses takes no audio input.
        raise ModelError("OpenAI Responses cannot send an audio part")
    name = part.title if isinstance(part, DocumentContent) else part.filename
    item: _Item = {"type": "input_file", "filename": name or part.kind}
    if part.data is None and part.url is not None and not part.url.startswith("data:"):
        return {"type": "input_file", "file_url": part.url}
    item["file_data"] = part.data_url()
    return item


def _map_assistant(message: AiMessage) -> list[_Item]:
    raw = message.attributes.get(OUTPUT_ATTRIBUTE)
    if isinstance(raw, list):
        try:
            text, thinking, calls, _ = _read_output(raw)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ModelError(f"malformed {OUTPUT_ATTRIBUTE!r} attribute: {exc}") from exc
        if (text, thinking, calls) == (message.text, message.thinking, message.tool_calls):
            return [_as_input(item) for item in raw]
    items: list[_Item] = []
    if message.text:
        items.append(
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": message.text, "annotations": []}],
            }
        )
    items.extend(
        {
            "type": "function_call",
            "call_id": call.id,
            "name": call.name,
            "arguments": call.arguments,
        }
        for call in message.tool_calls
    )
    return items


def _as_input(item: _Item) -> _Item:
    if item["type"] == "reasoning" and not isinstance(item.get("summary"), list):
        # The API refuses a reasoning input item without its `summary` list, even an empty one.
        return {**item, "summary": []}
    return item


def _map_custom(message: CustomMessage) -> list[_Item]:
    raw = message.attributes.get(INPUT_ATTRIBUTE)
    if not isinstance(raw, list) or not all(isinstance(item, dict) for item in raw):
        raise ModelError(
            "the OpenAI Responses API only understands a CustomMessage whose attributes hold "
            f"{INPUT_ATTRIBUTE!r}: a list of raw input items"
        )
    return list(raw)


def map_tool(spec: ToolSpecification) -> dict[str, Any]:
    """One function entry of `tools[]`.

    `strict` is always sent: the Responses API enforces the schema when it is absent.

    Raises:
        SchemaDialectError: The dialect cannot express the tool's schema.
    """
    tool: dict[str, Any] = {"type": "function", "name": spec.name}
    if spec.description:
        tool["description"] = spec.description
    tool["parameters"] = render_schema(
        spec.parameters, "openai-strict" if spec.strict_schema else "openai"
    )
    tool["strict"] = spec.strict_schema
    return tool


def _map_tool_choice(choice: ToolChoice | str) -> str | dict[str, Any]:
    if isinstance(choice, ToolChoice):
        return choice.value
    return {"type": "function", "name": choice}


def _map_response_format(response_format: ResponseFormat) -> dict[str, Any]:
    schema = response_format.json_schema
    if response_format.strict:
        schema = render_schema(schema, "openai-strict")
    return {
        "type": "json_schema",
        "name": response_format.name,
        "schema": schema,
        "strict": response_format.strict,
    }


# -- response -----------------------------------------------------------------------------------


def parse_response(body: Any) -> ChatResponse:
    """Map a `response` object to a `ChatResponse`.

    Raises:
        ModelError: the response failed (its `error` object is the message and `body`), or the
            body is not shaped like a response.
    """
    if not isinstance(body, dict):
        raise ModelError(f"{PROVIDER} returned an unexpected body", body=body)
    if body.get("error") is not None or body.get("status") == "failed":
        raise _failure("response failed", body)
    output = body.get("output")
    if not isinstance(output, list) or not all(isinstance(item, dict) for item in output):
        raise ModelError(f"{PROVIDER} returned a response without an output list", body=body)
    try:
        text, thinking, calls, refusal = _read_output(output)
        opaque = any(_is_opaque(item) for item in output)
        message = AiMessage(
            text=text,
            thinking=thinking,
            tool_calls=calls,
            attributes={OUTPUT_ATTRIBUTE: output} if opaque else {},
        )
        usage, metadata = _map_usage(body.get("usage"))
        metadata.update({key: body[key] for key in _METADATA_KEYS if body.get(key) is not None})
        if refusal:
            metadata["refusal"] = refusal
        return ChatResponse(
            ai_message=message,
            token_usage=usage,
            finish_reason=_map_status(body, bool(calls), metadata),
            metadata=metadata,
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ModelError(f"{PROVIDER} returned a malformed response: {exc}", body=body) from exc


def _failure(what: str, body: Any) -> ModelError:
    message, code = error_details(body)
    return ModelError(f"{PROVIDER} {what}: {message or 'no error message'}", body=body, code=code)


def _read_output(
    items: list[_Item],
) -> tuple[str | None, str | None, tuple[ToolCall, ...], str | None]:
    """Text, thinking, tool calls and refusal of `output` items, in order."""
    texts: list[str] = []
    thoughts: list[str] = []
    refusals: list[str] = []
    calls: list[ToolCall] = []
    for item in items:
        kind = item["type"]
        if kind == "message":
            for part in item["content"]:
                if part["type"] == "output_text":
                    texts.append(_string(part["text"]))
                elif part["type"] == "refusal":
                    refusals.append(_string(part["refusal"]))
        elif kind == "reasoning":
            thoughts.extend(text for text in _reasoning_texts(item) if text)
        elif kind == "function_call":
            calls.append(
                ToolCall(id=item["call_id"], name=item["name"], arguments=_arguments(item))
            )
    return (
        "".join(texts) or None,
        "\n\n".join(thoughts) or None,
        tuple(calls),
        "".join(refusals) or None,
    )


def _reasoning_texts(item: _Item) -> list[str]:
    """A reasoning item's summary parts; else its raw reasoning text (open-weight models)."""
    summary = [_string(part["text"]) for part in item.get("summary") or ()]
    if any(summary):
        return summary
    return [
        _string(part["text"])
        for part in item.get("content") or ()
        if part.get("type") == "reasoning_text"
    ]


def _arguments(item: _Item) -> str:
    """Arguments exactly as sent; a JSON object (from some compatible servers) is serialized."""
    raw = item.get("arguments")
    if raw is None:
        return ""
    if isinstance(raw, str):
        return raw
    if isinstance(raw, dict):
        return pydantic_core.to_json(raw).decode()
    raise TypeError(f"function_call arguments are a {type(raw).__name__}")


def _string(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value


def _is_opaque(item: _Item) -> bool:
    """Whether an item says more than `text` / `tool_calls` can: then the raw output is kept."""
    if item["type"] == "function_call":
        return False
    if item["type"] != "message":
        return True
    return any(part["type"] != "output_text" or part.get("annotations") for part in item["content"])


def _map_status(body: dict[str, Any], has_calls: bool, metadata: dict[str, Any]) -> FinishReason:
    status = body.get("status")
    if status in ("completed", None):
        return FinishReason.TOOL_EXECUTION if has_calls else FinishReason.STOP
    if status == "incomplete":
        details = body.get("incomplete_details")
        metadata["incomplete_details"] = details
        reason = details.get("reason") if isinstance(details, dict) else None
        return _INCOMPLETE_REASONS.get(str(reason), FinishReason.OTHER)
    metadata["status"] = status
    return FinishReason.OTHER


def _map_usage(usage: Any) -> tuple[TokenUsage | None, dict[str, Any]]:
    """Token usage, and the cached and reasoning token counts as metadata."""
    if usage is None:
        return None, {}
    if not isinstance(usage, dict):
        raise TypeError("usage is not an object")
    input_tokens = _count(usage.get("input_tokens"))
    output_tokens = _count(usage.get("output_tokens"))
    total = usage.get("total_tokens")
    metadata: dict[str, Any] = {}
    for details, key in (
        ("input_tokens_details", "cached_tokens"),
        ("output_tokens_details", "reasoning_tokens"),
    ):
        value = (usage.get(details) or {}).get(key)
        if value is not None:
            metadata[key] = _count(value)
    token_usage = TokenUsage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        total_tokens=input_tokens + output_tokens if total is None else _count(total),
    )
    return token_usage, metadata


def _count(value: Any) -> int:
    if value is None:
        return 0
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"a token count is a {type(value).__name__}")
    return value


# -- stream -------------------------------------------------------------------------------------


class ResponsesStreamAccumulator:
    """Turns the Responses event stream into `StreamEvent`s and one final `ChatResponse`.

    Deltas are aggregated by `output_index` (by `item_id` where a server leaves the index out).
    The final response is `parse_response` of the `response` that `response.completed` (or
    `response.incomplete`) carries, so a streamed answer equals the blocking one; the items seen
    in `response.output_item.done` stand in only when that response comes without its output.
    """

    def __init__(self) -> None:
        self._response: ChatResponse | None = None
        self._items: dict[int, _Item] = {}
        self._indexes: dict[str, int] = {}
        self._tool_positions: dict[int, int] = {}
        self._arguments: dict[int, Pieces] = {}
        self._thinking_parts: set[tuple[int, int]] = set()

    @property
    def done(self) -> bool:
        """Whether the final event (`response.completed` or `response.incomplete`) arrived."""
        return self._response is not None

    def take(self, event: ServerSentEvent) -> list[StreamEvent]:
        """The deltas one server-sent event carries; the final event also gives `ResponseComplete`.

        Raises:
            ModelError: an `error` or `response.failed` event, or an event that is not valid.
        """
        if self._response is not None or event.data == "[DONE]":
            return []
        try:
            data = event.json()
        except ValueError as exc:
            raise ModelError(
                f"{PROVIDER} sent malformed SSE data in a {event.event!r} event: {exc}",
                body=event.data,
            ) from exc
        if not isinstance(data, dict):
            raise ModelError(f"{PROVIDER} sent an unexpected stream event", body=data)
        kind = data.get("type", event.event)
        if kind == "error":
            raise _failure("stream error", data)
        if kind == "response.failed":
            raise _failure("response failed", data.get("response"))
        try:
            return list(self._apply(kind, data))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ModelError(
                f"{PROVIDER} sent a malformed {kind!r} stream event: {exc!r}", body=data
            ) from exc

    def end(self) -> list[StreamEvent]:
        """Nothing more to give (the final event gave `ResponseComplete`); raises when the stream
        stopped before it."""
        self.finish()
        return []

    def finish(self) -> ChatResponse:
        """The aggregated response.

        Raises:
            ModelError: the stream ended before `response.completed`.
        """
        if self._response is None:
            raise ModelError(f"{PROVIDER} stream ended before response.completed")
        return self._response

    def _apply(self, kind: str, data: dict[str, Any]) -> Iterator[StreamEvent]:
        if kind == "response.output_text.delta":
            if delta := _string(data["delta"]):
                yield TextDelta(text=delta)
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            yield from self._thinking(data)
        elif kind == "response.function_call_arguments.delta":
            index = self._index(data)
            delta = _string(data["delta"])
            self._arguments[index].append(delta)
            yield ToolCallDelta(index=self._tool_positions[index], arguments_delta=delta)
        elif kind == "response.function_call_arguments.done":
            yield from self._arguments_done(self._index(data), _string(data["arguments"]))
        elif kind == "response.output_item.added":
            yield from self._item_added(data["output_index"], data["item"])
        elif kind == "response.output_item.done":
            index, item = data["output_index"], data["item"]
            self._items[index] = item
            if index in self._tool_positions:
                yield from self._arguments_done(index, _arguments(item))
        elif kind in ("response.completed", "response.incomplete"):
            response = data["response"]
            if not response.get("output") and self._items:
                response = {**response, "output": [self._items[i] for i in sorted(self._items)]}
            self._response = parse_response(response)
            yield ResponseComplete(response=self._response)
        # Other events (created, in_progress, content parts, hosted-tool progress, …) add nothing
        # the final response does not carry.

    def _index(self, data: dict[str, Any]) -> int:
        index = data.get("output_index")
        return index if isinstance(index, int) else self._indexes[data["item_id"]]

    def _item_added(self, index: int, item: _Item) -> Iterator[StreamEvent]:
        if isinstance(item.get("id"), str):
            self._indexes[item["id"]] = index
        if item["type"] != "function_call":
            return
        position = self._tool_positions[index] = len(self._tool_positions)
        arguments = _arguments(item)
        self._arguments[index] = Pieces(arguments)
        yield ToolCallDelta(
            index=position, id=item["call_id"], name=item["name"], arguments_delta=arguments
        )

    def _arguments_done(self, index: int, arguments: str) -> Iterator[StreamEvent]:
        # Some servers send the arguments only with the finished call, or only their end: give
        # what the deltas have not.
        rest = self._arguments[index].rest_of(arguments)
        if rest:
            self._arguments[index].append(rest)
            yield ToolCallDelta(index=self._tool_positions[index], arguments_delta=rest)

    def _thinking(self, data: dict[str, Any]) -> Iterator[StreamEvent]:
        delta = _string(data["delta"])
        if not delta:
            return
        part = (self._index(data), data.get("summary_index", data.get("content_index", 0)))
        if part not in self._thinking_parts:
            # Summary parts are paragraphs: joined as the blocking answer joins them.
            if self._thinking_parts:
                delta = "\n\n" + delta
            self._thinking_parts.add(part)
        yield ThinkingDelta(text=delta)


# -- wire object --------------------------------------------------------------------------------


@dataclass(frozen=True)
class OpenAIResponsesWire(WireBase):
    """The Responses wire format, as `HttpChatModel` composes it with the HTTP shell: the endpoint
    root and authentication of Chat Completions, its own path and mapping."""

    organization: str | None = None
    """Sent as `OpenAI-Organization`."""
    project: str | None = None
    """Sent as `OpenAI-Project`."""

    provider: ClassVar[str] = PROVIDER
    path: ClassVar[str] = "responses"
    user_content: ClassVar[frozenset[ContentKind]] = frozenset({"image", "document", "file"})
    tool_result_content: ClassVar[frozenset[ContentKind]] = frozenset({"image", "document", "file"})
    default_base_url: ClassVar[str] = OpenAIWire.default_base_url
    api_key_env: ClassVar[str] = OpenAIWire.api_key_env
    base_url_env: ClassVar[str] = OpenAIWire.base_url_env
    build_payload = staticmethod(build_payload)
    parse_response = staticmethod(parse_response)
    stream_parser = ResponsesStreamAccumulator

    def headers(self, api_key: str | None) -> dict[str, str]:
        """`Authorization: Bearer` (when there is a key), organization and project."""
        return openai_headers(api_key, self.organization, self.project)
