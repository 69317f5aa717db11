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
keeps at most `MAX_CONTENT_PARTS` parts, spends the same budget on its text parts, in order, and
`MAX_CONTENT_BYTES` on what its other parts take in a request (`BinaryContent.wire_size`, the one
measure of a part's size: inline bytes as base64, a URL as its text, a `data:` URL included): a
part over what is left of it is left out, and a text part in its place says what and why
(`budget_content`); each note is also recorded (`ToolExecutionResult.content_notes`). Its whole
content stays on `ToolExecutionResult.value`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .._content import BinaryContent, Content, TextContent, content_text
from .._messages import cut_marker, cut_text
from .._records import ToolExecutionResult

__all__ = [
    "DEFAULT_MAX_RESULT_CHARS",
    "MAX_CONTENT_BYTES",
    "MAX_CONTENT_PARTS",
    "MIN_RESULT_CHARS",
    "ContentFit",
    "apply_budget",
    "budget_content",
    "check_max_result_chars",
    "content_result",
    "cut_result",
    "fit_result",
    "with_content",
    "within_budget",
]

DEFAULT_MAX_RESULT_CHARS = 100_000
"""The characters of a tool's result the model reads when neither the tool nor the service says
otherwise: about 25,000 tokens, so that one oversized output cannot fill a context window and
ride along in every later request."""

MIN_RESULT_CHARS = 100
"""The smallest budget: room for the marker and some of the text around it."""

MAX_CONTENT_BYTES = 5 * 1024 * 1024
"""The most bytes a tool result's images, documents, audio and files may take in a request
together, measured as sent (`BinaryContent.wire_size`): inline data as base64 (so about 3.75 MiB
of raw bytes), a URL as its text, a `data:` URL included. 5 MiB: Anthropic's limit for one
image, a quarter of Gemini's for a whole request."""

MAX_CONTENT_PARTS = 100
"""The most parts (text parts included) a tool result's content keeps; the rest are left out,
one marker saying how many. Anthropic takes at most 100 images in a whole request."""


def check_max_result_chars(value: int | None) -> int | None:
    """`value`, or `ValueError` when it is not `None` or an integer of at least `MIN_RESULT_CHARS`."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < MIN_RESULT_CHARS:
        raise ValueError(
            f"max_result_chars must be an integer of at least {MIN_RESULT_CHARS}, got {value!r}"
        )
    return value


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
    content_notes: tuple[str, ...] = ()
    checked: tuple[str, ...] = field(default=(), repr=False, compare=False)
    """The notes of the checks before the budget (links, the model's fit), kept when re-cut."""


def budget_content(
    parts: Sequence[Content],
    limit: int,
    max_bytes: int = MAX_CONTENT_BYTES,
    max_parts: int = MAX_CONTENT_PARTS,
) -> tuple[tuple[Content, ...], tuple[str, ...]]:
    """`parts` within the budget, and a note per part left out: the first `max_parts` parts (one
    marker for the rest), text parts cut to the `limit` characters left (once it is spent, one
    marker stands for the rest), and a part that takes more than the `max_bytes` left in a
    request (`BinaryContent.wire_size`) replaced by a text part that says so."""
    kept: list[Content] = []
    notes: list[str] = []
    chars = size = dropped = 0
    for part in parts[:max_parts]:
        if isinstance(part, TextContent):
            room = limit - chars
            if room < MIN_RESULT_CHARS and len(part.text) > max(room, 0):
                dropped += len(part.text)
                continue
            text = cut_text(part.text, room)
            chars += len(text)
            kept.append(part if text is part.text else TextContent(text=text))
            continue
        cost = part.wire_size
        if size + cost > max_bytes:
            notes.append(_left_out(part, cost, max_bytes))
            kept.append(TextContent(text=notes[-1]))
        else:
            size += cost
            kept.append(part)
    if dropped:
        kept.append(TextContent(text=cut_marker(dropped)))
    if len(parts) > max_parts:
        notes.append(
            f"[{len(parts) - max_parts:,} more parts left out: a tool result keeps at most "
            f"{max_parts:,}]"
        )
        kept.append(TextContent(text=notes[-1]))
    return tuple(kept), tuple(notes)


def _left_out(part: BinaryContent, cost: int, max_bytes: int) -> str:
    return (
        f"[{part.describe()[1:-1]}: left out, {cost:,} bytes as sent, over the {max_bytes:,}-byte "
        "limit of a tool result's content]"
    )


def content_result(
    parts: tuple[Content, ...],
    limit: int,
    value: object,
    repairs: tuple[str, ...] = (),
    notes: tuple[str, ...] = (),
) -> ToolExecutionResult:
    """The successful result of `value`, whose content is `parts`: within the budget
    (`budget_content`), its text their text (`content_text`); `notes` says what the checks
    before (`_content_urls`) left out."""
    kept, cut = budget_content(parts, limit)
    text = content_text(kept)
    whole = None if kept == parts else content_text(parts)
    return _ContentResult(
        text, value, False, None, repairs, None, whole, kept, parts, (*notes, *cut), notes
    )


ContentFit = Callable[[Sequence[Content]], tuple[tuple[Content, ...], tuple[str, ...]]]
"""A model's `fit_tool_content`: a tool result's parts as the model takes them, and a note per
part it left out."""


def fit_result(result: ToolExecutionResult, fit: ContentFit) -> ToolExecutionResult:
    """`result` with its content as `fit` leaves it (the model's own rules: the kinds and sources
    it takes), each note recorded; the same `result` when nothing changed."""
    if not isinstance(result, _ContentResult):
        return result
    return with_content(result, *fit(result.content))


def with_content(
    result: ToolExecutionResult, parts: tuple[Content, ...], notes: tuple[str, ...]
) -> ToolExecutionResult:
    """`result` (a result with content) whose parts a check after the budget changed to `parts`,
    noting `notes`: final, as it is (a later budget cuts from these parts, not the whole)."""
    assert isinstance(result, _ContentResult)
    if parts == result.content:
        return result
    return _ContentResult(
        content_text(parts),
        result.value,
        False,
        None,
        result.repairs,
        None,
        result.full_text,
        parts,
        parts,
        (*result.content_notes, *notes),
        (*result.checked, *notes),
    )


def apply_budget(result: ToolExecutionResult, limit: int) -> ToolExecutionResult:
    """`result` with its text cut to `limit` characters, from its whole text (`full_text`, when
    an earlier budget cut it); errors are left alone (they have their own cap)."""
    if result.is_error:
        return result
    if isinstance(result, _ContentResult):
        again = content_result(result.whole, limit, result.value, result.repairs, result.checked)
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
