"""Content parts: text, images, documents, audio and files, in user messages and tool results;
and the frozen base every contract type is built on (`FrozenModel`, `FrozenSeq`).

One definition for every surface: `UserMessage.content`, `ToolResultMessage.content`, what a tool
returns, MCP content blocks, and each provider's wire mapping. A binary part holds either inline
`data` (bytes, with its `media_type`) or a `url` (`https://…`, a `data:` URL, or a provider's
file reference such as `gs://…`). In JSON (a saved history, a durable run) bytes are base64, and
a base64 string is read back as the bytes it encodes, so a history round-trips exactly.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Sequence
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    model_validator,
)
from pydantic_core import to_json

__all__ = [
    "CONTENT_KINDS",
    "CONTENT_TYPES",
    "AudioContent",
    "Base64Data",
    "BinaryContent",
    "Content",
    "ContentKind",
    "DocumentContent",
    "FileContent",
    "FrozenModel",
    "FrozenSeq",
    "ImageContent",
    "TextContent",
    "base64_size",
    "content_text",
    "has_binary",
    "json_size",
]

T = TypeVar("T")

FrozenSeq = Annotated[Sequence[T], AfterValidator(tuple)]
"""Accepts any sequence (a list is fine for callers and mypy) and stores an immutable tuple."""


class FrozenModel(BaseModel):
    """Base of every contract type: immutable, unknown fields rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


ContentKind = Literal["image", "document", "audio", "file"]
"""The kinds of parts beyond text, as `BinaryContent.kind` names them."""

CONTENT_KINDS: frozenset[ContentKind] = frozenset(("image", "document", "audio", "file"))
"""Every `ContentKind`: what a wire or a profile that takes every kind of part accepts."""


def _from_base64(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ValueError(f"data given as text must be base64: {exc}") from None
    return value


Base64Data = Annotated[
    bytes,
    BeforeValidator(_from_base64),
    PlainSerializer(lambda data: base64.b64encode(data).decode("ascii"), when_used="json"),
]
"""Bytes in Python, base64 text in JSON; text given in Python is read as base64 too."""


class TextContent(FrozenModel):
    """A text part."""

    type: Literal["text"] = "text"
    text: str


class BinaryContent(FrozenModel):
    """What the non-text parts share: inline `data` with its `media_type`, or a `url`."""

    url: str | None = None
    """Where the content is: `https://…`, a `data:` URL, or a provider's file reference."""
    data: Base64Data | None = Field(default=None, repr=False)
    """The content itself (base64 in JSON; left out of `repr`)."""
    media_type: str | None = None
    """The IANA media type (`image/png`, `application/pdf`, …); required with `data`."""

    @model_validator(mode="after")
    def _one_source(self) -> BinaryContent:
        if (self.url is None) == (self.data is None):
            raise ValueError(f"{type(self).__name__} takes exactly one of url= and data=")
        if self.data is not None and not self.media_type:
            raise ValueError(f"{type(self).__name__}(data=...) needs its media_type=")
        return self

    @property
    def kind(self) -> ContentKind:
        """The part's kind: `image`, `document`, `audio` or `file`."""
        kind: ContentKind = getattr(self, "type", "file")
        return kind

    @property
    def size(self) -> int:
        """The bytes held inline (0 for a part by URL)."""
        return 0 if self.data is None else len(self.data)

    @property
    def wire_size(self) -> int:
        """The bytes this part adds to a request, as the API that sends the most for it sends
        it: the one measure of a part's size (the result budget's `MAX_CONTENT_BYTES`).

        Inline data is sent as base64 (4 bytes for every 3; a plain-text document as its
        JSON-escaped text where that is more: Anthropic sends it as text); a URL as its
        JSON-escaped text, so a `data:` URL costs its bytes (one that is not base64, the base64
        of what it holds where that is more: it is sent so). The JSON around the part (its
        keys, media type and name) is not counted.
        """
        if self.data is not None:
            size = base64_size(len(self.data))
            if self.media_type == "text/plain" and self.kind == "document":
                size = max(size, json_size(self.data.decode("utf-8", "replace")))
            return size
        assert self.url is not None
        size = json_size(self.url)
        if self.url.startswith("data:") and self.base64_data() is None:
            size = max(size, base64_size(len(self.url_bytes())))
        return size

    def url_bytes(self) -> bytes:
        """What a `data:` URL that is not base64 holds, percent-decoded (RFC 2397)."""
        from urllib.parse import unquote_to_bytes  # on first use: `import` stays cheap

        assert self.url is not None
        return unquote_to_bytes(self.url.partition(",")[2])

    def data_url(self) -> str:
        """The part as a URL: its `url`, or its data as a `data:<media type>;base64,` URL."""
        if self.data is None:
            assert self.url is not None
            return self.url
        return f"data:{self.media_type};base64,{base64.b64encode(self.data).decode('ascii')}"

    def base64_data(self) -> tuple[str, str] | None:
        """`(media type, base64 data)` of inline data, or of a base64 `data:` URL; else `None`."""
        if self.data is not None:
            assert self.media_type is not None
            return self.media_type, base64.b64encode(self.data).decode("ascii")
        assert self.url is not None
        if not self.url.startswith("data:"):
            return None
        header, _, data = self.url[len("data:") :].partition(",")
        media_type, _, encoding = header.partition(";")
        if encoding != "base64" or not media_type or not data:
            return None
        return media_type, data

    def describe(self) -> str:
        """A one-line stand-in for the part where only text can go (no URL: it may be long or
        signed): ``[image: image/png, 1,024 bytes]``, ``[document by URL]``."""
        if self.data is not None:
            return f"[{self.kind}: {self.media_type}, {len(self.data):,} bytes]"
        return f"[{self.kind} by URL]"


class ImageContent(BinaryContent):
    """An image: `ImageContent(data=png, media_type="image/png")` or `ImageContent(url=...)`."""

    type: Literal["image"] = "image"
    detail: Literal["auto", "low", "high"] | None = None
    """Resolution hint for providers that support one (OpenAI)."""


class DocumentContent(BinaryContent):
    """A document for the model to read: PDF (`application/pdf`) or plain text (`text/plain`)."""

    type: Literal["document"] = "document"
    title: str | None = None
    """A title or file name, for providers that take one."""


class AudioContent(BinaryContent):
    """An audio clip (`audio/wav`, `audio/mpeg`, …)."""

    type: Literal["audio"] = "audio"


class FileContent(BinaryContent):
    """Any other file, by media type; providers that cannot take it degrade or refuse it."""

    type: Literal["file"] = "file"
    filename: str | None = None


Content = Annotated[
    TextContent | ImageContent | DocumentContent | AudioContent | FileContent,
    Field(discriminator="type"),
]
"""Any part of a user message or a tool result, discriminated on `type`."""

CONTENT_TYPES: tuple[type[TextContent | BinaryContent], ...] = (
    TextContent,
    ImageContent,
    DocumentContent,
    AudioContent,
    FileContent,
)
"""The classes of `Content`, for `isinstance`."""


def base64_size(size: int) -> int:
    """The length of the base64 text of `size` bytes."""
    return (size + 2) // 3 * 4


def json_size(text: str) -> int:
    """The bytes `text` takes inside a JSON string (UTF-8, escapes included, quotes not)."""
    return len(to_json(text)) - 2


def content_text(parts: Iterable[TextContent | BinaryContent]) -> str:
    """The text of `parts` for a reader of text alone: each text as is, each other part as its
    one-line stand-in (`BinaryContent.describe`), one per line."""
    return "\n".join(
        part.text if isinstance(part, TextContent) else part.describe() for part in parts
    )


def has_binary(parts: Sequence[TextContent | BinaryContent]) -> bool:
    """Whether any of `parts` is not text."""
    return any(not isinstance(part, TextContent) for part in parts)
