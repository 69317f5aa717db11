"""`SchemaTool`: a tool declared by a hand-written JSON Schema plus a handler.

For tools whose shape is only known at run time (loaded from configuration, generated, proxied):
the arguments are validated against the schema itself with `jsonschema`, and the handler receives
the validated arguments as a plain `dict`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeGuard, cast

import pydantic_core

from ._argument_errors import format_arguments_error
from ._exceptions import ModelRetry, ToolArgumentsError
from ._execution import ReturnBehavior, ToolContext, ToolExecutionResult, ToolExecutor
from ._invoke import HandlerTimeoutError, ainvoke, invoke
from ._messages import ToolCall
from ._request import ToolSpecification
from ._result_text import result_text_converter
from ._schema_arguments import DecodedArguments, SchemaArguments

__all__ = ["SchemaHandler", "SchemaTool"]

SchemaHandler = Callable[[dict[str, Any]], Any]
"""`handler(arguments)`, sync or async; its return value becomes the result text."""


class SchemaTool:
    """A tool whose arguments are validated against `specification.parameters` with `jsonschema`.

    ```python
    spec = ToolSpecification(
        name="add",
        description="Add two integers.",
        parameters={
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
            "additionalProperties": False,
        },
    )
    add = SchemaTool(spec, lambda args: args["a"] + args["b"])
    ```

    Args:
        specification: The declaration offered to the model; `parameters` must be a valid
            JSON Schema (Draft 2020-12), checked here.
        handler: Either a sync or async callable receiving the validated arguments `dict` (its
            return value is converted like a typed tool's: `str` as is, `None` → `"Success"`,
            anything else → JSON), or any `ToolExecutor`, which is handed the call once its
            arguments are valid.
        return_behavior: What the loop does with the result.
        max_retries: How many invalid-arguments attempts the loop tolerates.
        sequential: Never run this tool concurrently with other calls of its round.
        timeout: Seconds before the call becomes a `"timeout"` error result.

    Raises:
        ValueError: When `specification.parameters` is not a valid JSON Schema.
    """

    def __init__(
        self,
        specification: ToolSpecification,
        handler: SchemaHandler | ToolExecutor,
        *,
        return_behavior: ReturnBehavior = ReturnBehavior.TO_LLM,
        max_retries: int = 2,
        sequential: bool = False,
        timeout: float | None = None,
    ) -> None:
        self._specification = specification
        self._arguments = SchemaArguments(specification.parameters, tool_name=specification.name)
        self._executor = handler if _is_executor(handler) else None
        self._function = cast(SchemaHandler, handler)  # used only when there is no executor
        self._return_behavior = return_behavior
        self._max_retries = max_retries
        self._sequential = sequential
        self.timeout = timeout

    def __repr__(self) -> str:
        return f"SchemaTool({self.name!r})"

    @property
    def name(self) -> str:
        """The tool's name, as the model calls it."""
        return self._specification.name

    @property
    def description(self) -> str:
        """The tool's description, as offered to the model."""
        return self._specification.description

    @property
    def specification(self) -> ToolSpecification:
        """The declaration offered to the model."""
        return self._specification

    @property
    def return_behavior(self) -> ReturnBehavior:
        """What the loop does with this tool's result."""
        return self._return_behavior

    @property
    def max_retries(self) -> int:
        """How many invalid-arguments attempts the loop tolerates before raising."""
        return self._max_retries

    @property
    def sequential(self) -> bool:
        """Whether this tool must not run concurrently with the other calls of its round."""
        return self._sequential

    def validate_arguments(self, arguments: str | bytes) -> dict[str, Any]:
        """Decode and validate raw JSON arguments.

        Raises:
            ToolArgumentsError: Listing every problem (`path`, `message`, `input`).
        """
        decoded = self._arguments.validate(arguments)
        if decoded.arguments is None:
            raise ToolArgumentsError(self.name, decoded.errors)
        return decoded.arguments

    def execute(self, call: ToolCall, context: ToolContext[Any]) -> ToolExecutionResult:
        """Validate, run the handler, and convert; never raises for a failed call."""
        decoded = self._arguments.validate(call.arguments)
        if decoded.arguments is None:
            return arguments_error_result(self.name, decoded)
        try:
            if self._executor is not None:
                executed = self._executor.execute
                result = invoke(executed, _normalized(call, decoded), context, timeout=self.timeout)
                return with_repairs(result, decoded.repairs)
            value = invoke(self._function, decoded.arguments, timeout=self.timeout)
        except Exception as exc:
            return failure_result(self.name, exc, decoded.repairs)
        return success_result(value, decoded.repairs)

    async def aexecute(self, call: ToolCall, context: ToolContext[Any]) -> ToolExecutionResult:
        """Like `execute`, without blocking the event loop (sync handlers run in a thread)."""
        decoded = self._arguments.validate(call.arguments)
        if decoded.arguments is None:
            return arguments_error_result(self.name, decoded)
        try:
            if self._executor is not None:
                executed = self._executor.aexecute
                normalized = _normalized(call, decoded)
                result = await ainvoke(executed, normalized, context, timeout=self.timeout)
                return with_repairs(result, decoded.repairs)
            value = await ainvoke(self._function, decoded.arguments, timeout=self.timeout)
        except Exception as exc:
            return failure_result(self.name, exc, decoded.repairs)
        return success_result(value, decoded.repairs)


result_text = result_text_converter(Any)
"""The text the model reads for an undeclared return value: `str` as is, `None` → `"Success"`,
anything else → compact JSON (pydantic serializes models, dataclasses, datetimes, …)."""


def success_result(value: Any, repairs: tuple[str, ...] = ()) -> ToolExecutionResult:
    """A successful result carrying `value` and its text."""
    return ToolExecutionResult(text=result_text(value), value=value, repairs=repairs)


def arguments_error_result(tool_name: str, decoded: DecodedArguments) -> ToolExecutionResult:
    """The `"arguments"` error result for arguments that failed decoding or validation."""
    error = ToolArgumentsError(tool_name, decoded.errors)
    text = format_arguments_error(tool_name, decoded.errors)
    return ToolExecutionResult.error(text, "arguments", exception=error, repairs=decoded.repairs)


def failure_result(
    tool_name: str, exc: Exception, repairs: tuple[str, ...] = ()
) -> ToolExecutionResult:
    """Map what a handler raised to an error result: `ModelRetry` → `"retry"` (its message as
    is), `HandlerTimeoutError` → `"timeout"`, anything else → `"execution"` (type and message, no
    traceback)."""
    if isinstance(exc, ModelRetry):
        return ToolExecutionResult.error(exc.message, "retry", exception=exc, repairs=repairs)
    if isinstance(exc, HandlerTimeoutError):
        text = f"Tool `{tool_name}` {exc}."
        return ToolExecutionResult.error(text, "timeout", exception=exc, repairs=repairs)
    text = f"Tool `{tool_name}` failed: {type(exc).__name__}: {exc}"
    return ToolExecutionResult.error(text, "execution", exception=exc, repairs=repairs)


def _is_executor(handler: object) -> TypeGuard[ToolExecutor]:
    return callable(getattr(handler, "execute", None)) and callable(
        getattr(handler, "aexecute", None)
    )


def _normalized(call: ToolCall, decoded: DecodedArguments) -> ToolCall:
    # An executor re-reads `call.arguments`; after a repair it must see the repaired object.
    if not decoded.repairs:
        return call
    arguments = pydantic_core.to_json(decoded.arguments).decode()
    return call.model_copy(update={"arguments": arguments})


def with_repairs(result: ToolExecutionResult, repairs: tuple[str, ...]) -> ToolExecutionResult:
    """`result` with the envelope `repairs` of its arguments recorded first."""
    if not repairs:
        return result
    return dataclasses.replace(result, repairs=(*repairs, *result.repairs))
