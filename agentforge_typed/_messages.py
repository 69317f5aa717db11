"""Chat messages: the provider-neutral conversation history.

Every message is a frozen pydantic model tagged by `role`, so a whole history dumps to JSON and
loads back with one `TypeAdapter(list[ChatMessage])`.

Also how any text quotes a tool name a model sent (`shown_name`, at most `MAX_NAME_CHARS`
characters) and the one way a text is cut to a limit (`cut_text`: its head and tail around a
marker), which results, errors, spans and the CLI share.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any, Literal, overload

from pydantic import Field, TypeAdapter, model_validator

from ._content import (
    AudioContent,
    Content,
    DocumentContent,
    FileContent,
    FrozenModel,
    FrozenSeq,
    ImageContent,
    TextContent,
    content_text,
)

__all__ = [
    "MAX_NAME_CHARS",
    "AiMessage",
    "AudioContent",
    "ChatMessage",
    "Content",
    "CustomMessage",
    "DocumentContent",
    "FileContent",
    "ImageContent",
    "SystemMessage",
    "TextContent",
    "ToolCall",
    "ToolResultMessage",
    "UserMessage",
    "cut_marker",
    "cut_text",
    "shown_name",
]


class SystemMessage(FrozenModel):
    """Instructions for the model."""

    role: Literal["system"] = "system"
    text: str


class UserMessage(FrozenModel):
    """User input: text (`UserMessage(text="hi")`, the keyword every message kind takes), or
    parts (text, images, documents, audio, files: `UserMessage(content=[...])`)."""

    role: Literal["user"] = "user"
    content: str | Annotated[FrozenSeq[Content], Field(min_length=1)]
    """The message text, or its parts (at least one)."""
    name: str | None = None
    """Optional participant name; providers may ignore it."""

    if TYPE_CHECKING:  # the two spellings a type checker accepts; pydantic validates either

        @overload
        def __init__(
            self, *, text: str, name: str | None = None, role: Literal["user"] = "user"
        ) -> None: ...

        @overload
        def __init__(
            self,
            *,
            content: str | Sequence[Content],
            name: str | None = None,
            role: Literal["user"] = "user",
        ) -> None: ...

        def __init__(self, **data: Any) -> None: ...

    @model_validator(mode="before")
    @classmethod
    def _text_is_content(cls, data: Any) -> Any:
        # `text=` is the one text keyword of every message kind; stored as `content` (a string),
        # so histories dump and load as before.
        if isinstance(data, dict) and "text" in data:
            if "content" in data:
                raise ValueError("UserMessage takes text= or content=, not both")
            data = {**data}
            data["content"] = data.pop("text")
            if not isinstance(data["content"], str):
                raise ValueError("UserMessage(text=...) takes a string; pass parts as content=")
        return data

    @property
    def has_single_text(self) -> bool:
        """Whether the message is exactly one piece of text."""
        if isinstance(self.content, str):
            return True
        return len(self.content) == 1 and isinstance(self.content[0], TextContent)

    @property
    def text(self) -> str:
        """The text of a single-text message.

        Raises:
            ValueError: the message has several parts or a non-text part; read `content` instead.
        """
        if isinstance(self.content, str):
            return self.content
        if self.has_single_text:
            part = self.content[0]
            assert isinstance(part, TextContent)
            return part.text
        raise ValueError("UserMessage has several or non-text parts; read `.content` instead")


class ToolCall(FrozenModel):
    """One tool call requested by the model."""

    id: str
    """Pairs the call with its `ToolResultMessage.tool_call_id`."""
    name: str
    arguments: str = "{}"
    """The arguments exactly as the model sent them: a raw JSON string, validated only at execution."""


class AiMessage(FrozenModel):
    """What the model said: text, reasoning and/or tool calls."""

    role: Literal["assistant"] = "assistant"
    text: str | None = None
    thinking: str | None = None
    """Reasoning text, for models that expose it."""
    tool_calls: FrozenSeq[ToolCall] = ()
    attributes: dict[str, Any] = Field(default_factory=dict)
    """Provider extras that must travel with the message (e.g. thinking signatures)."""

    @property
    def has_tool_calls(self) -> bool:
        """Whether the model asked for at least one tool call."""
        return bool(self.tool_calls)


class ToolResultMessage(FrozenModel):
    """The result of one tool call, sent back to the model.

    A result of text alone has `text`. A result with images, documents, audio or files has its
    parts in order in `content`, and `text` is their text (each non-text part as a one-line
    stand-in): what a provider that takes only text sends. Given `content=` alone, `text` is
    derived from it.
    """

    role: Literal["tool"] = "tool"
    tool_call_id: str
    tool_name: str
    text: str = ""
    """What the model reads where a result can only be text."""
    content: FrozenSeq[Content] = ()
    """The result's parts in order, when it has more than text; empty otherwise."""
    is_error: bool = False

    @model_validator(mode="before")
    @classmethod
    def _text_of_content(cls, data: Any) -> Any:
        if isinstance(data, dict) and "text" not in data and data.get("content"):
            content = _content_adapter().validate_python(data["content"])
            return {**data, "text": content_text(content), "content": content}
        return data


@functools.cache
def _content_adapter() -> TypeAdapter[list[Content]]:
    # Built at first use: nothing at import may build a validator (see `FrozenModel`).
    return TypeAdapter(list[Content])


class CustomMessage(FrozenModel):
    """A provider-specific message the contract cannot predefine.

    A provider that does not understand it raises `ModelError` rather than degrading it.
    """

    role: Literal["custom"] = "custom"
    attributes: dict[str, Any] = Field(default_factory=dict)


ChatMessage = Annotated[
    SystemMessage | UserMessage | AiMessage | ToolResultMessage | CustomMessage,
    Field(discriminator="role"),
]
"""Any message of a conversation, discriminated on `role`."""


@functools.cache
def history_adapter() -> TypeAdapter[list[ChatMessage]]:
    """The one adapter of a whole history (`list[ChatMessage]`), built at first use: what the
    stores, the seals, the records of paused sub-runs and the traces read and write."""
    return TypeAdapter(list[ChatMessage])


MAX_NAME_CHARS = 200
"""The most characters of a tool name sent by a model (or listed by an MCP server) that any text
quotes: an error, a result the model reads, a log line, a span, the CLI's display. A longer one
keeps its head and tail around a marker (`shown_name`); the name itself is kept whole where a
program reads it (`ToolCall.name`, `UnknownToolError.tool_name`)."""


def shown_name(name: str) -> str:
    """`name` as a text quotes it: at most `MAX_NAME_CHARS` characters (`cut_text`)."""
    return name if len(name) <= MAX_NAME_CHARS else cut_text(name, MAX_NAME_CHARS)


def cut_text(text: str, limit: int) -> str:
    """`text`, or its head and tail around a marker counting the characters cut, at most `limit`
    characters in all (the marker's own length counted with the digits of `len(text)`)."""
    size = len(text)
    if size <= limit:
        return text
    room = max(limit - len(cut_marker(size)), 0)
    head = room - room // 2
    tail = room // 2
    return f"{text[:head]}{cut_marker(size - head - tail)}{text[size - tail :]}"


def cut_marker(cut: int) -> str:
    """What stands where `cut` characters were cut."""
    return f"… [{cut} characters cut] …"
