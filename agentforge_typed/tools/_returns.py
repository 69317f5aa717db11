"""What a tool may return beyond a value: content parts for the model (images, documents, …).

Three forms, all typed under mypy: a part (`-> ImageContent`), a list of text and parts
(`-> list[str | ImageContent]`), and `ToolReturn(value, content=[...])`, a typed value for the
program plus parts for the model. Anything else is a value, rendered as text (`_result_text`).
"""

from __future__ import annotations

import typing
from collections import abc
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from types import UnionType
from typing import Annotated, Any, Generic, Union, cast, get_args, get_origin

import typing_extensions
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
    "returns_untyped_content",
    "returned_content",
    "value_annotation",
]

ValueT = TypeVar("ValueT", default=Any)

_ALIASES: tuple[type, ...] = (
    typing_extensions.TypeAliasType,
    *((typing.TypeAliasType,) if hasattr(typing, "TypeAliasType") else ()),  # Python 3.12+
)


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
    """The kinds of parts beyond text a tool declared to return `annotation` may return: a part
    (`-> ImageContent`), a list, tuple or sequence of text and parts, a union of those; every
    kind for a `ToolReturn`, whose content is not typed by kind (`returns_untyped_content`).
    Nothing for any other type (a `dict` of parts, a list of lists: rendered as text). What
    `agentforge-typed check` reads."""
    annotation = _unaliased(annotation)
    origin = get_origin(annotation)
    if annotation is ToolReturn or origin is ToolReturn:
        return CONTENT_KINDS
    if origin in _UNIONS:
        return _union(content_kinds(member) for member in get_args(annotation))
    if origin in _PART_SEQUENCES:
        return _union(_part_kinds(item) for item in get_args(annotation) if item is not ...)
    return _part_kinds(annotation)


def returns_untyped_content(annotation: Any) -> bool:
    """Whether `annotation` is (or has in a union) a `ToolReturn`, whose content parts may be of
    any kind."""
    annotation = _unaliased(annotation)
    origin = get_origin(annotation)
    if annotation is ToolReturn or origin is ToolReturn:
        return True
    return origin in _UNIONS and any(returns_untyped_content(m) for m in get_args(annotation))


_UNIONS: tuple[Any, ...] = (Union, UnionType)
_PART_SEQUENCES: tuple[Any, ...] = (list, tuple, abc.Sequence)
"""What a returned value that holds parts may be (`returned_content` takes lists and tuples)."""


def _part_kinds(annotation: Any) -> frozenset[ContentKind]:
    """The kinds of one part `annotation` may be (a part class, or a union with one)."""
    annotation = _unaliased(annotation)
    if get_origin(annotation) in _UNIONS:
        return _union(_part_kinds(member) for member in get_args(annotation))
    if isinstance(annotation, type) and issubclass(annotation, BinaryContent):
        kind = annotation.model_fields["type"].default
        return frozenset((kind,)) if kind in CONTENT_KINDS else frozenset()
    return frozenset()


def _union(kinds: Iterable[frozenset[ContentKind]]) -> frozenset[ContentKind]:
    return frozenset().union(*kinds)


def _unaliased(annotation: Any) -> Any:
    """`annotation` without `Annotated[...]` and type aliases (`type Parts = ...`) around it."""
    while True:
        if get_origin(annotation) is Annotated:
            annotation = get_args(annotation)[0]
        elif isinstance(annotation, _ALIASES):
            aliased: Any = annotation
            annotation = aliased.__value__
        else:
            return annotation
