"""The results every kind of tool builds: success, invalid arguments, failure, timeout, and a
result that could not be read.

One set of builders, so that the model reads the same texts whatever backs the tool:
``Tool `x` failed: Type: message``, ``Tool `x` timed out after N seconds.``, a `ModelRetry`'s
message as it is, the shared arguments-error format (`format_arguments_error`), and
``Tool `x` ran, but its result could not be read (...)`` for a body that returned a value no text
can be made of: never "failed", which would invite calling a state-changing tool again.

Containment: whatever a tool raises becomes a result — `SystemExit` (argparse on model input
raises it) and every other `BaseException` too — except `KeyboardInterrupt` and the cancellation
of the running task, which are the user's and the loop's, not the tool's (`reraise_uncontained`).
An error's own text (message, `ModelRetry` message, an MCP server's error content) is capped at
`MAX_ERROR_TEXT_CHARS` for the model, cut as a result over its budget is (head and tail around a
marker, `_budget.cut_text`); the full text stays on `result.exception`. A successful result's
text is cut to the tool's result budget (`success_result`'s `limit`)."""

from __future__ import annotations

import dataclasses
import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .._content import Content, TextContent, content_text, has_binary
from .._exceptions import ArgumentProblem, ModelRetry, ToolArgumentsError
from .._messages import cut_text
from .._records import ToolExecutionResult
from ._argument_errors import format_arguments_error
from ._base import DEFAULT_CONTENT_URLS, ContentURLs
from ._budget import (
    DEFAULT_MAX_RESULT_CHARS,
    MAX_CONTENT_PARTS,
    _ContentResult,
    _CutResult,
    content_result,
    cut_result,
    with_content,
)
from ._invoke import HandlerTimeoutError
from ._result_text import ResultConverter, result_text
from ._returns import CONTENT_CARRIERS, returned_content

__all__ = [
    "MAX_ERROR_TEXT_CHARS",
    "ValidatedArguments",
    "alinks_checked",
    "arguments_error_result",
    "asuccess_result",
    "capped_error_text",
    "describe_exception",
    "execution_error_result",
    "failure_result",
    "links_checked",
    "redacted_result",
    "reraise_uncontained",
    "success_result",
    "timeout_result",
    "unreadable_result",
    "with_repairs",
]

if TYPE_CHECKING:
    from .._transport._redaction import Redactor

logger = logging.getLogger("agentforge_typed")

ArgsT = TypeVar("ArgsT")

MAX_ERROR_TEXT_CHARS = 4000
"""The most characters of an error's own text the model reads (marker included); the middle is
cut, and a marker says how many characters were."""


@dataclass(slots=True)
class ValidatedArguments(Generic[ArgsT]):
    """The outcome of decoding and validating one call's arguments, whatever kind of tool.

    Treat it as immutable; a plain slotted dataclass as it is built on every call.
    """

    arguments: ArgsT | None
    """The validated arguments (a dict of fields, a model, or a JSON object, as the validator
    says), or `None` when there are `errors` or a `schema_failure`."""
    errors: tuple[ArgumentProblem, ...] = ()
    """Each problem with the arguments, for the model to correct."""
    repairs: tuple[str, ...] = ()
    """Envelope repairs applied before validation (and dropped extra arguments)."""
    schema_failure: str | None = None
    """Why the tool's own schema could not check the arguments: the tool's fault, which the
    model cannot fix by correcting them."""

    def error_result(self, tool_name: str) -> ToolExecutionResult:
        """The error result of arguments that did not pass (`arguments` is `None`): an
        `"arguments"` error, or an `"execution"` error when the schema itself failed."""
        if self.schema_failure is not None:
            return execution_error_result(tool_name, self.schema_failure, repairs=self.repairs)
        return arguments_error_result(tool_name, self.errors, self.repairs)


class UnreadableValue(Exception):  # noqa: N818 - a carrier, caught by `failure_result`
    """What `success_result` raises when no text can be made of a value the tool returned:
    `failure_result` turns it into `unreadable_result`, so that a tool's `except` around its body
    and its conversion tells the two apart."""

    def __init__(self, value: Any, error: BaseException) -> None:
        super().__init__(value, error)
        self.value = value
        self.error = error


def success_result(
    value: Any,
    repairs: tuple[str, ...] = (),
    convert: ResultConverter = result_text,
    limit: int = DEFAULT_MAX_RESULT_CHARS,
    urls: ContentURLs = DEFAULT_CONTENT_URLS,
) -> ToolExecutionResult:
    """A successful result carrying `value` and its text (`convert(value)`), cut to `limit`
    characters (the whole text kept on `full_text`); a value that carries content (images,
    documents, …, see `_returns`) gives a result with that content, its links as `urls` allows
    (resolving names here, blocking: async code uses `asuccess_result`), within the budget.

    Raises:
        UnreadableValue: `convert` (or the content's own conversion) raised.
    """
    try:
        if value.__class__ in CONTENT_CARRIERS:
            found = returned_content(value, convert)
            if found is not None:
                value, parts = found
                if has_binary(parts):
                    from ._content_urls import guard_content  # the links check loads here

                    checked, notes = guard_content(parts, urls, MAX_CONTENT_PARTS)
                    return content_result(checked, limit, value, repairs, notes)
                text = content_text(parts)
            else:
                text = convert(value)
        else:
            text = convert(value)
    except BaseException as exc:  # all but the uncontained: see `failure_result`
        reraise_uncontained(exc)
        raise UnreadableValue(value, exc) from exc
    if len(text) > limit:
        return cut_result(text, limit, value, repairs)
    return ToolExecutionResult(text, value, False, None, repairs)


async def asuccess_result(
    value: Any,
    repairs: tuple[str, ...],
    convert: ResultConverter,
    limit: int,
    urls: ContentURLs,
) -> ToolExecutionResult:
    """`success_result` for async code: the names of links are resolved off the event loop."""
    if value.__class__ in CONTENT_CARRIERS:
        try:
            found = returned_content(value, convert)
        except BaseException as exc:  # as in `success_result`
            reraise_uncontained(exc)
            raise UnreadableValue(value, exc) from exc
        if found is not None and has_binary(found[1]):
            from ._content_urls import aguard_content

            checked, notes = await aguard_content(found[1], urls, MAX_CONTENT_PARTS)
            return content_result(checked, limit, found[0], repairs, notes)
    return success_result(value, repairs, convert, limit, urls)


def links_checked(result: ToolExecutionResult, urls: ContentURLs) -> ToolExecutionResult:
    """`result`, built before its links could be checked (an external call's, decided before the
    loop runs), with them checked as `urls` allows (names resolved here, blocking)."""
    if not result.content:
        return result
    from ._content_urls import guard_content

    return with_content(result, *guard_content(result.content, urls))


async def alinks_checked(result: ToolExecutionResult, urls: ContentURLs) -> ToolExecutionResult:
    """`links_checked` for async code: the names of links are resolved off the event loop."""
    if not result.content:
        return result
    from ._content_urls import aguard_content

    return with_content(result, *(await aguard_content(result.content, urls)))


def arguments_error_result(
    tool_name: str, errors: Sequence[ArgumentProblem], repairs: tuple[str, ...] = ()
) -> ToolExecutionResult:
    """The `"arguments"` error result for arguments that failed decoding or validation."""
    text = format_arguments_error(tool_name, errors)
    error = ToolArgumentsError(tool_name, errors)
    return ToolExecutionResult(text, None, True, "arguments", repairs, error)


def failure_result(
    tool_name: str, exc: BaseException, repairs: tuple[str, ...] = ()
) -> ToolExecutionResult:
    """Map what a handler raised to an error result: `ModelRetry` → `"retry"` (its message as
    is, capped), `HandlerTimeoutError` → `"timeout"`, anything else → `"execution"` (type and
    message, capped, no traceback). A timed-out handler left running is logged as a warning.

    An `UnreadableValue` (the body ran; its value could not be read) gives `unreadable_result`.

    Raises:
        BaseException: `exc` itself, when it is not the tool's to contain (`reraise_uncontained`).
    """
    if isinstance(exc, UnreadableValue):
        return unreadable_result(tool_name, exc.error, exc.value, repairs)
    if isinstance(exc, ModelRetry):
        message = exc.message
        # A message that is not text (`ModelRetry(None)` gets past an untyped caller): its `str`.
        text = capped_error_text(message if isinstance(message, str) else _text_of(message))
        return ToolExecutionResult.error(text, "retry", exception=exc, repairs=repairs)
    if isinstance(exc, HandlerTimeoutError):
        if exc.abandoned:
            logger.warning(
                "tool %r timed out after %gs; %s",
                tool_name,
                exc.timeout,
                "its worker thread is abandoned and keeps running"
                if exc.left_running == "thread"
                else "it ignored its cancellation, so its task is abandoned and keeps running",
            )
        return timeout_result(tool_name, exc.timeout, exception=exc, repairs=repairs)
    reraise_uncontained(exc)
    return execution_error_result(
        tool_name, describe_exception(exc), exception=exc, repairs=repairs
    )


def reraise_uncontained(exc: BaseException) -> None:
    """Re-raise `exc` when no tool result may stand for it: `KeyboardInterrupt` (the user's), or a
    `CancelledError` while the running task is being cancelled (the loop's own cancellation)."""
    if isinstance(exc, KeyboardInterrupt):
        raise exc
    # Without asyncio loaded (a blocking program), `exc` cannot be its `CancelledError`.
    asyncio = sys.modules.get("asyncio")
    if asyncio is not None and isinstance(exc, asyncio.CancelledError):
        try:
            task = asyncio.current_task()
        except RuntimeError:  # no loop here: a tool raised it on its own
            return
        # Without `Task.cancelling` (Python 3.10) every cancellation is taken as the loop's own.
        cancelling = getattr(task, "cancelling", None)
        if task is not None and (cancelling is None or cancelling()):
            raise exc


def describe_exception(exc: BaseException) -> str:
    """`Type: message`, capped (`capped_error_text`); never raises, even when the exception's
    `__str__` does."""
    return capped_error_text(f"{type(exc).__name__}: {_text_of(exc)}")


def _text_of(value: object) -> str:
    try:
        return str(value)
    except KeyboardInterrupt:
        raise
    except BaseException as error:
        return f"<unprintable: its __str__ raised {type(error).__name__}>"


def capped_error_text(text: str) -> str:
    """`text`, or its head and tail around a marker counting the characters cut, at most
    `MAX_ERROR_TEXT_CHARS` in all (`cut_text`)."""
    return cut_text(text, MAX_ERROR_TEXT_CHARS)


def execution_error_result(
    tool_name: str,
    reason: str,
    *,
    exception: BaseException | None = None,
    repairs: tuple[str, ...] = (),
) -> ToolExecutionResult:
    """The `"execution"` error result ``Tool `x` failed: <reason>``."""
    text = f"Tool `{tool_name}` failed: {reason}"
    return ToolExecutionResult.error(text, "execution", exception=exception, repairs=repairs)


def unreadable_result(
    tool_name: str, error: BaseException | str, value: Any = None, repairs: tuple[str, ...] = ()
) -> ToolExecutionResult:
    """The `"unreadable_result"` error result of a tool that ran (its effects took place) but
    whose return value could not be turned into the text the model reads: `error` is why (what
    the conversion raised, or words). Worded so that the model does not call the tool again to
    get the result; the value stays on `value` for the program.

    Raises:
        BaseException: `error` itself, when it is not the tool's to contain.
    """
    if isinstance(error, BaseException):
        reraise_uncontained(error)
        reason, exception = describe_exception(error), error
    else:
        reason, exception = capped_error_text(error), None
    text = (
        f"Tool `{tool_name}` ran, but its result could not be read ({reason}). Its effects, if "
        "any, took place: do not call it again to get the result."
    )
    return ToolExecutionResult(text, value, True, "unreadable_result", repairs, exception)


def timeout_result(
    tool_name: str,
    timeout: float,
    *,
    exception: BaseException | None = None,
    repairs: tuple[str, ...] = (),
) -> ToolExecutionResult:
    """The `"timeout"` error result of a call that ran past `timeout` seconds."""
    text = f"Tool `{tool_name}` timed out after {timeout:g} seconds."
    return ToolExecutionResult.error(text, "timeout", exception=exception, repairs=repairs)


def with_repairs(result: ToolExecutionResult, repairs: tuple[str, ...]) -> ToolExecutionResult:
    """`result` with the envelope `repairs` of its arguments recorded first."""
    if not repairs:
        return result
    return dataclasses.replace(result, repairs=(*repairs, *result.repairs))


def redacted_result(result: ToolExecutionResult, redactor: Redactor) -> ToolExecutionResult:
    """`result` with `redactor`'s secrets replaced wherever the model or the program reads it:
    its text (and whole text, which a later budget cuts from), its text parts, its value, and
    its exception (in place, its chain dropped when it holds one)."""
    if not redactor:
        return result
    if result.exception is not None:
        redactor.clean(result.exception)
    changes: dict[str, Any] = {
        "text": redactor.replace(result.text),
        "value": redactor.redact(result.value),
    }
    if isinstance(result, _CutResult) and result.full_text is not None:
        changes["full_text"] = redactor.replace(result.full_text)
    if isinstance(result, _ContentResult):
        for name in ("content", "whole"):
            changes[name] = tuple(_redacted_part(part, redactor) for part in getattr(result, name))
    return dataclasses.replace(result, **changes)


def _redacted_part(part: Content, redactor: Redactor) -> Content:
    if isinstance(part, TextContent):
        return TextContent(text=redactor.replace(part.text))
    if part.url is not None and (url := redactor.replace(part.url)) != part.url:
        return part.model_copy(update={"url": url})
    return part
