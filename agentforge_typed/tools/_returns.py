"""What a tool may return beyond a value: content parts for the model (images, documents, …).

Three forms, all typed under mypy: a part (`-> ImageContent`), a list of text and parts
(`-> list[str | ImageContent]`), and `ToolReturn(value, content=[...])`, a typed value for the
program plus parts for the model. Anything else is a value, rendered as text (`_result_text`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, cast, get_args, get_origin

from typing_extensions import TypeVar

from .._content import (
    CONTENT_KINDS,
    CONTENT_TYPES,
    BinaryContent,
    Content,
    ContentKind,
    TextContent,
    has_binary,
)
from ._result_text import ResultConverter

__all__ = [
    "CONTENT_CARRIERS",
    "ToolReturn",
    "as_parts",
    "content_kinds",
    "returned_content",
    "value_annotation",
]

ValueT = TypeVar("ValueT", default=Any)


@dataclass(frozen=True, slots=True)
class ToolReturn(Generic[ValueT]):
    """A tool's typed `value` for the program, plus `content` for the model.

    The model reads the value's text (as if the tool had returned it) followed by the content,
    in order; `ToolExecutionResult.value` is `value`.
    """

    value: ValueT
    content: Sequence[str | Content] = ()
    """Text and parts (images, documents, audio, files) the model reads after the value."""


CONTENT_CARRIERS: frozenset[type] = frozenset({list, tuple, ToolReturn, *CONTENT_TYPES})
"""The classes of the values that may carry content: a cheap first check before
`returned_content`, as a tool's result is built on every call."""


_TEXT_OR_PART = (str, *CONTENT_TYPES)


def returned_content(
    value: Any, convert: ResultConverter
) -> tuple[Any, tuple[Content, ...]] | None:
    """`(value for the program, parts for the model)` of a `ToolReturn` or of a return value
    that carries content beyond text; `None` for any other value.

    Raises:
        TypeError: a `ToolReturn`'s content holds something that is neither text nor a part.
    """
    if isinstance(value, ToolReturn):
        extra = as_parts(value.content)
        if extra is None:
            raise TypeError("ToolReturn.content holds only str and content parts (ImageContent, …)")
        return value.value, (TextContent(text=convert(value.value)), *extra)
    if isinstance(value, CONTENT_TYPES):
        part = cast("Content", value)
        return (part, (part,)) if has_binary((part,)) else None
    if isinstance(value, list | tuple):
        parts = as_parts(value)
        if parts is not None and has_binary(parts):
            return value, parts
    return None


def as_parts(items: Sequence[Any]) -> tuple[Content, ...] | None:
    """`items` as parts (each `str` a `TextContent`), or `None` when one is neither."""
    if not all(isinstance(item, _TEXT_OR_PART) for item in items):
        return None
    return tuple(TextContent(text=item) if isinstance(item, str) else item for item in items)


def value_annotation(annotation: Any) -> Any:
    """The annotation of the value a tool returns: `T` of `ToolReturn[T]`, else `annotation`."""
    if annotation is ToolReturn:
        return Any
    if get_origin(annotation) is ToolReturn:
        return get_args(annotation)[0]
    return annotation


def content_kinds(annotation: Any) -> frozenset[ContentKind]:
    """The kinds of parts beyond text a tool declared to return `annotation` may return: the
    parts it names, inside unions, lists and tuples; every kind for a `ToolReturn`, whose content
    is not typed by kind. What `agentforge-typed check` reads."""
    if annotation is ToolReturn or get_origin(annotation) is ToolReturn:
        return CONTENT_KINDS
    if isinstance(annotation, type) and issubclass(annotation, BinaryContent):
        kind = annotation.model_fields["type"].default
        return frozenset((kind,)) if kind in CONTENT_KINDS else frozenset()
    found: frozenset[ContentKind] = frozenset()
    for argument in get_args(annotation):
        found |= content_kinds(argument)
    return found
