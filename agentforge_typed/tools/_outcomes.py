"""The results every kind of tool builds: success, invalid arguments, failure, timeout.

One set of builders, so that the model reads the same texts whatever backs the tool:
``Tool `x` failed: Type: message``, ``Tool `x` timed out after N seconds.``, a `ModelRetry`'s
message as it is, and the shared arguments-error format (`format_arguments_error`).

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
from .._exceptions import ArgumentError, ModelRetry, ToolArgumentsError
from ._argument_errors import format_arguments_error
from ._base import ToolExecutionResult
from ._budget import (
    DEFAULT_MAX_RESULT_CHARS,
    _ContentResult,
    _CutResult,
    content_result,
    cut_result,
    cut_text,
)
from ._invoke import HandlerTimeoutError
from ._result_text import ResultConverter, result_text
from ._returns import CONTENT_CARRIERS, returned_content

__all__ = [
    "MAX_ERROR_TEXT_CHARS",
    "ValidatedArguments",
    "arguments_error_result",
    "capped_error_text",
    "describe_exception",
    "execution_error_result",
    "failure_result",
    "redacted_result",
    "reraise_uncontained",
    "success_result",
    "timeout_result",
    "with_repairs",
]

if TYPE_CHECKING:
    from .._redaction import Redactor

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
    errors: tuple[ArgumentError, ...] = ()
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


def success_result(
    value: Any,
    repairs: tuple[str, ...] = (),
    convert: ResultConverter = result_text,
    limit: int = DEFAULT_MAX_RESULT_CHARS,
) -> ToolExecutionResult:
    """A successful result carrying `value` and its text (`convert(value)`), cut to `limit`
    characters (the whole text kept on `full_text`); a value that carries content (images,
    documents, …, see `_returns`) gives a result with that content, within the budget."""
    if value.__class__ in CONTENT_CARRIERS:
        found = returned_content(value, convert)
        if found is not None:
            value, parts = found
            if has_binary(parts):
                return content_result(parts, limit, value, repairs)
            text = content_text(parts)
        else:
            text = convert(value)
    else:
        text = convert(value)
    if len(text) > limit:
        return cut_result(text, limit, value, repairs)
    return ToolExecutionResult(text, value, False, None, repairs)


def arguments_error_result(
    tool_name: str, errors: Sequence[ArgumentError], repairs: tuple[str, ...] = ()
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

    Raises:
        BaseException: `exc` itself, when it is not the tool's to contain (`reraise_uncontained`).
    """
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
