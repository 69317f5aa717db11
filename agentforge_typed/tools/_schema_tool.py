"""`SchemaTool`: a tool declared by a hand-written JSON Schema plus a handler.

For tools whose shape is only known at run time (loaded from configuration, generated, proxied):
the arguments are validated against the schema itself with `jsonschema`, and the handler receives
the validated arguments as a plain `dict`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeGuard, cast

import pydantic_core

from .._exceptions import ToolArgumentsError
from .._messages import ToolCall
from .._records import ToolExecutionResult
from .._request import ToolSpecification
from ._base import (
    ApprovalPolicy,
    ContentURLs,
    DeclaredTool,
    ExtraArguments,
    ReturnBehavior,
    ToolContext,
    ToolExecutor,
    check_content_urls,
)
from ._budget import DEFAULT_MAX_RESULT_CHARS, apply_budget, check_max_result_chars
from ._invoke import ainvoke, invoke, is_async_callable
from ._outcomes import asuccess_result, failure_result, success_result, with_repairs
from ._result_text import result_text
from ._schema_arguments import DecodedArguments, SchemaArguments

__all__ = ["SchemaHandler", "SchemaTool", "valid_arguments"]

SchemaHandler = Callable[[dict[str, Any]], Any]
"""`handler(arguments)`, sync or async; its return value becomes the result text."""


class SchemaTool(DeclaredTool):
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
            JSON Schema (Draft 2020-12), checked here. The tool's `specification` offers it
            with `"additionalProperties": false` wherever undeclared keys are refused.
        handler: Either a sync or async callable receiving the validated arguments `dict` (its
            return value is converted like a typed tool's: `str` as is, `None` → `"Success"`,
            anything else → JSON), or any `ToolExecutor`, which is handed the call once its
            arguments are valid.
        return_behavior: What the loop does with the result.
        max_retries: How many invalid-arguments attempts the loop tolerates.
        sequential: Never run this tool concurrently with other calls of its round.
        timeout: Seconds before the call becomes a `"timeout"` error result.
        extra_arguments: `"forbid"` (default) reports keys the schema does not declare (unless
            it explicitly allows them); `"ignore"` drops them, each drop recorded in `repairs`.
        requires_approval: Pause a `ToolService` run on its calls until a person decides
            (`True`, or a sync or async `(call, context) -> bool` deciding per call).
        max_result_chars: The most characters of a result's text the model reads (a longer
            one keeps its head and tail around a marker); `None` (default): the service's
            budget, else 100,000. It applies to an executor handler's results too.
        content_urls: Which links the parts a handler returns may carry to the model's
            provider: `"https"` (the default: `https://` to public hosts only), `"http"`, or
            `"any"` (unchecked); a link it does not allow is left out, a note in its place.
        retry_safe: A call interrupted while it ran (its process died) may run again (see
            `ToolOptions.retry_safe`); default `False`.

    Raises:
        ValueError: When `specification.parameters` is not a valid JSON Schema, or
            `max_result_chars` is under 100.
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
        extra_arguments: ExtraArguments = "forbid",
        requires_approval: ApprovalPolicy = False,
        max_result_chars: int | None = None,
        content_urls: ContentURLs = "https",
        retry_safe: bool = False,
    ) -> None:
        self._arguments = SchemaArguments(
            specification.parameters, tool_name=specification.name, extra_arguments=extra_arguments
        )
        enforced = self._arguments.schema
        self._specification = (
            specification
            if enforced == specification.parameters
            else specification.model_copy(update={"parameters": enforced})
        )
        self._executor = handler if _is_executor(handler) else None
        self._function = cast(SchemaHandler, handler)  # used only when there is no executor
        self._is_async = is_async_callable(self._function)
        self._return_behavior = return_behavior
        self._max_retries = max_retries
        self._sequential = sequential
        self.timeout = timeout
        self.requires_approval = requires_approval
        self.max_result_chars = check_max_result_chars(max_result_chars)
        """The tool's own result budget (`None`: the service's, else the default)."""
        self._max_result = (
            DEFAULT_MAX_RESULT_CHARS if max_result_chars is None else max_result_chars
        )
        self.content_urls = check_content_urls(content_urls)
        """Which links the parts a handler returns may carry (see `ContentURLs`)."""
        self.retry_safe = retry_safe
        """Whether a stored run runs a call interrupted by a crash again."""

    def __repr__(self) -> str:
        return f"SchemaTool({self.name!r})"

    def validate_arguments(self, arguments: str | bytes) -> dict[str, Any]:
        """Decode and validate raw JSON arguments.

        Raises:
            ToolArgumentsError: Listing every problem (`path`, `message`, `input`).
        """
        return valid_arguments(self.name, self._arguments.validate(arguments))

    def execute(self, call: ToolCall, context: ToolContext[Any]) -> ToolExecutionResult:
        """Validate, run the handler, and convert; never raises for a failed call."""
        decoded = self._arguments.validate(call.arguments)
        if decoded.arguments is None:
            return decoded.error_result(self.name)
        try:
            if self._executor is not None:
                arguments = (_normalized(call, decoded), context)
                result = invoke(self._executor.execute, arguments, timeout=self.timeout)
                return with_repairs(apply_budget(result, self._max_result), decoded.repairs)
            value = invoke(
                self._function, (decoded.arguments,), timeout=self.timeout, is_async=self._is_async
            )
            return success_result(
                value, decoded.repairs, limit=self._max_result, urls=self.content_urls
            )
        except BaseException as exc:  # all but the uncontained: see `failure_result`
            return failure_result(self.name, exc, decoded.repairs)

    async def aexecute(self, call: ToolCall, context: ToolContext[Any]) -> ToolExecutionResult:
        """Like `execute`, without blocking the event loop (sync handlers run in a thread)."""
        decoded = self._arguments.validate(call.arguments)
        if decoded.arguments is None:
            return decoded.error_result(self.name)
        try:
            if self._executor is not None:
                arguments = (_normalized(call, decoded), context)
                result = await ainvoke(self._executor.aexecute, arguments, timeout=self.timeout)
                return with_repairs(apply_budget(result, self._max_result), decoded.repairs)
            value = await ainvoke(
                self._function, (decoded.arguments,), timeout=self.timeout, is_async=self._is_async
            )
            return await asuccess_result(
                value, decoded.repairs, result_text, self._max_result, self.content_urls
            )
        except BaseException as exc:  # all but the uncontained: see `failure_result`
            return failure_result(self.name, exc, decoded.repairs)


def valid_arguments(tool_name: str, decoded: DecodedArguments) -> dict[str, Any]:
    """The arguments `decoded` holds; raises `ToolArgumentsError` listing its problems."""
    if decoded.arguments is None:
        raise ToolArgumentsError(tool_name, decoded.errors)
    return decoded.arguments


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
