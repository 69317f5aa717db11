"""The result budget: how much of a tool's text the model reads, the same for every tool kind.

A text over its budget keeps its head and its tail, and a marker in the middle says how many
characters were cut: ``<head>… [8123456 characters cut] …<tail>``, at most `limit` characters
in all. The value itself is never cut: it stays on `ToolExecutionResult.value` for the program,
and a cut text's whole stays on `ToolExecutionResult.full_text`.

Where the budget comes from: the tool's own `max_result_chars`, else its `ToolService`'s, else
`DEFAULT_MAX_RESULT_CHARS`. A tool cuts its own results (to its own budget or the default), so
calling it directly is bounded too; a service re-cuts, from the whole text, the results of tools
without a budget of their own when it has one (`within_budget`). Error texts have their own cap
(`MAX_ERROR_TEXT_CHARS`), cut the same way (`cut_text`).

A result with content beyond text (`ToolResultMessage.content`: images, documents, audio, files)
spends the same budget on its text parts, in order, and `MAX_CONTENT_BYTES` on the bytes its other
parts hold inline: a part over what is left of it is left out, and a text part in its place says
what and why (`budget_content`). Its whole content stays on `ToolExecutionResult.value`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from .._content import BinaryContent, Content, TextContent, content_text
from ._base import ToolExecutionResult

__all__ = [
    "DEFAULT_MAX_RESULT_CHARS",
    "MAX_CONTENT_BYTES",
    "MIN_RESULT_CHARS",
    "apply_budget",
    "budget_content",
    "content_result",
    "check_max_result_chars",
    "cut_result",
    "cut_text",
    "within_budget",
]

DEFAULT_MAX_RESULT_CHARS = 100_000
"""The characters of a tool's result the model reads when neither the tool nor the service says
otherwise: about 25,000 tokens, so that one oversized output cannot fill a context window and
ride along in every later request."""

MIN_RESULT_CHARS = 100
"""The smallest budget: room for the marker and some of the text around it."""

MAX_CONTENT_BYTES = 5 * 1024 * 1024
"""The most bytes a tool result's images, documents, audio and files may hold inline together
(5 MiB: Anthropic's limit for one image, a quarter of Gemini's for a whole request). Parts by
URL cost nothing here."""


def check_max_result_chars(value: int | None) -> int | None:
    """`value`, or `ValueError` when it is not `None` or an integer of at least `MIN_RESULT_CHARS`."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < MIN_RESULT_CHARS:
        raise ValueError(
            f"max_result_chars must be an integer of at least {MIN_RESULT_CHARS}, got {value!r}"
        )
    return value


def cut_text(text: str, limit: int) -> str:
    """`text`, or its head and tail around a marker counting the characters cut, at most `limit`
    characters in all (the marker's own length counted with the digits of `len(text)`)."""
    size = len(text)
    if size <= limit:
        return text
    room = max(limit - len(_marker(size)), 0)
    head = room - room // 2
    tail = room // 2
    return f"{text[:head]}{_marker(size - head - tail)}{text[size - tail :]}"


def _marker(cut: int) -> str:
    return f"… [{cut} characters cut] …"


@dataclass(slots=True)
class _CutResult(ToolExecutionResult):
    """A result whose text was cut to its budget: the whole text kept beside it."""

    full_text: str | None = field(default=None, repr=False, compare=False)


def cut_result(
    text: str, limit: int, value: object, repairs: tuple[str, ...] = ()
) -> ToolExecutionResult:
    """The successful result of `value` whose text is over `limit`: cut, the whole kept."""
    return _CutResult(cut_text(text, limit), value, False, None, repairs, None, text)


@dataclass(slots=True)
class _ContentResult(_CutResult):
    """A result with content beyond text: its parts within the budget, and the whole of them."""

    content: tuple[Content, ...] = ()
    whole: tuple[Content, ...] = field(default=(), repr=False, compare=False)


def budget_content(
    parts: Iterable[Content], limit: int, max_bytes: int = MAX_CONTENT_BYTES
) -> tuple[Content, ...]:
    """`parts` within the budget: text parts cut to the `limit` characters left (once it is
    spent, one marker stands for the rest), and a part whose inline bytes are over the
    `max_bytes` left replaced by a text part that says so."""
    kept: list[Content] = []
    chars = size = dropped = 0
    for part in parts:
        if isinstance(part, TextContent):
            room = limit - chars
            if room < MIN_RESULT_CHARS and len(part.text) > max(room, 0):
                dropped += len(part.text)
                continue
            text = cut_text(part.text, room)
            chars += len(text)
            kept.append(part if text is part.text else TextContent(text=text))
        elif size + part.size > max_bytes:
            kept.append(TextContent(text=_left_out(part, max_bytes)))
        else:
            size += part.size
            kept.append(part)
    if dropped:
        kept.append(TextContent(text=_marker(dropped)))
    return tuple(kept)


def _left_out(part: BinaryContent, max_bytes: int) -> str:
    return (
        f"[{part.kind}: {part.media_type}, {part.size:,} bytes: left out, over the "
        f"{max_bytes:,}-byte limit of a tool result's inline content]"
    )


def content_result(
    parts: tuple[Content, ...], limit: int, value: object, repairs: tuple[str, ...] = ()
) -> ToolExecutionResult:
    """The successful result of `value`, whose content is `parts`: within the budget
    (`budget_content`), its text their text (`content_text`)."""
    kept = budget_content(parts, limit)
    text = content_text(kept)
    if kept == parts:
        return _ContentResult(text, value, False, None, repairs, None, None, kept, parts)
    return _ContentResult(text, value, False, None, repairs, None, content_text(parts), kept, parts)


def apply_budget(result: ToolExecutionResult, limit: int) -> ToolExecutionResult:
    """`result` with its text cut to `limit` characters, from its whole text (`full_text`, when
    an earlier budget cut it); errors are left alone (they have their own cap)."""
    if result.is_error:
        return result
    if isinstance(result, _ContentResult):
        again = content_result(result.whole, limit, result.value, result.repairs)
        return result if again.content == result.content else again
    whole = result.full_text
    if whole is None:
        if len(result.text) <= limit:
            return result
        whole = result.text
    text = cut_text(whole, limit)
    if text == result.text:
        return result
    fields = (result.value, False, result.error_kind, result.repairs, result.exception)
    if text is whole:  # the whole text fits this budget: no longer cut
        return ToolExecutionResult(text, *fields)
    return _CutResult(text, *fields, whole)


def within_budget(
    result: ToolExecutionResult, own: int | None, service: int | None
) -> ToolExecutionResult:
    """`result` as a `ToolService` passes it on: a tool with a budget of its own (`own`) has
    applied it; any other result is cut to the service's budget (`service`), else the default."""
    if own is not None:
        return result
    return apply_budget(result, DEFAULT_MAX_RESULT_CHARS if service is None else service)
