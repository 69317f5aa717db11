"""The results every kind of tool builds: success, invalid arguments, failure, timeout.

One set of builders, so that the model reads the same texts whatever backs the tool:
``Tool `x` failed: Type: message``, ``Tool `x` timed out after N seconds.``, a `ModelRetry`'s
message as it is, and the shared arguments-error format (`format_arguments_error`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from .._exceptions import ArgumentError, ModelRetry, ToolArgumentsError
from ._argument_errors import format_arguments_error
from ._base import ToolExecutionResult
from ._invoke import HandlerTimeoutError
from ._result_text import ResultConverter, result_text

__all__ = [
    "ValidatedArguments",
    "arguments_error_result",
    "execution_error_result",
    "failure_result",
    "success_result",
    "timeout_result",
    "with_repairs",
]

logger = logging.getLogger("agentforge_typed")

ArgsT = TypeVar("ArgsT")


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
    value: Any, repairs: tuple[str, ...] = (), convert: ResultConverter = result_text
) -> ToolExecutionResult:
    """A successful result carrying `value` and its text (`convert(value)`)."""
    return ToolExecutionResult(convert(value), value, False, None, repairs)


def arguments_error_result(
    tool_name: str, errors: Sequence[ArgumentError], repairs: tuple[str, ...] = ()
) -> ToolExecutionResult:
    """The `"arguments"` error result for arguments that failed decoding or validation."""
    text = format_arguments_error(tool_name, errors)
    error = ToolArgumentsError(tool_name, errors)
    return ToolExecutionResult(text, None, True, "arguments", repairs, error)


def failure_result(
    tool_name: str, exc: Exception, repairs: tuple[str, ...] = ()
) -> ToolExecutionResult:
    """Map what a handler raised to an error result: `ModelRetry` → `"retry"` (its message as
    is), `HandlerTimeoutError` → `"timeout"`, anything else → `"execution"` (type and message, no
    traceback). A timed-out handler left running on its thread is logged as a warning."""
    if isinstance(exc, ModelRetry):
        return ToolExecutionResult.error(exc.message, "retry", exception=exc, repairs=repairs)
    if isinstance(exc, HandlerTimeoutError):
        if exc.abandoned:
            logger.warning(
                "tool %r timed out after %gs; its worker thread is abandoned and keeps running",
                tool_name,
                exc.timeout,
            )
        return timeout_result(tool_name, exc.timeout, exception=exc, repairs=repairs)
    return execution_error_result(
        tool_name, f"{type(exc).__name__}: {exc}", exception=exc, repairs=repairs
    )


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
