"""Structured output: the final answer validated as an `output_type`.

The default mechanism works on every provider: a final-result tool whose arguments schema is the
output type; the model "calls" it to answer. Object types (pydantic models, dataclasses,
TypedDicts) are the arguments object itself; anything else (`int`, `list[str]`, unions) is
wrapped as `{"result": ...}`, since tool arguments must be an object. `native=True` instead asks
providers for their native JSON-schema response format (`ChatRequestParameters.response_format`)
and validates the answer's text. `prompted=True`, for servers with neither tools nor a JSON-schema
format, puts the schema into the instructions of each request and validates the answer's text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Generic

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError, create_model
from pydantic_core import to_json
from typing_extensions import TypeForm, TypeVar

from .._exceptions import ArgumentProblem, ToolArgumentsError
from .._messages import ChatMessage, SystemMessage, ToolCall
from .._records import ToolExecutionResult
from .._request import ChatRequestParameters, ResponseFormat, ToolSpecification
from ..tools._argument_errors import format_arguments_error
from ..tools._arguments import argument_errors, json_choices
from ..tools._base import ReturnBehavior, ToolContext
from ..tools._signature import ToolJsonSchema

__all__ = ["OutputSpec", "OutputValidationError"]

OutputT = TypeVar("OutputT", default=Any)

_DESCRIPTION = "Give the final answer. Call this exactly once, when you are done."
_ANSWER_IN_JSON = "Answer again with only JSON that matches the schema."
_PROMPTED = (
    "When you give your final answer, answer with JSON only (no other text, no code fence) "
    "that matches this JSON Schema:\n"
)
_FENCE = re.compile(r"\A\s*```(?:json)?[ \t]*\n(.*?)\n?```\s*\Z", re.DOTALL)
"""A whole answer in one Markdown code fence, as models often give JSON despite being asked not to."""


class OutputValidationError(ToolArgumentsError):
    """The model's final output stayed invalid after every retry; `output` is its last attempt
    and `errors` the problems with it (none when the model kept answering in text where a
    final-result call was wanted)."""

    def __init__(
        self,
        tool_name: str,
        errors: Sequence[ArgumentProblem],
        output: str,
        *,
        reason: str | None = None,
    ) -> None:
        super().__init__(tool_name, errors)
        self.output = output
        self.reason = reason
        """What went wrong, when it is not invalid arguments of the final-result tool."""

    def __str__(self) -> str:
        if self.reason is None:
            return super().__str__()
        return f"{self.reason}: {self._problems()}" if self.errors else self.reason


class _Wrapper(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class OutputSpec(Generic[OutputT]):
    """How one run gets its structured output: the final-result tool and the validator.

    Args:
        output_type: The type of `result.output`.
        name: The final-result tool's name.
        max_retries: Invalid final answers sent back to the model before the run fails.
        native: Ask for the provider's native JSON-schema response format instead of a tool.
        prompted: Neither a tool nor a response format: the schema goes into the instructions
            of each request (a system message, never added to the run's history), and the
            answer's text is validated. For servers that have neither.

    Raises:
        ValueError: both `native` and `prompted`.
    """

    def __init__(
        self,
        output_type: TypeForm[OutputT],
        *,
        name: str = "final_result",
        max_retries: int = 2,
        native: bool = False,
        prompted: bool = False,
    ) -> None:
        if native and prompted:
            raise ValueError("an OutputSpec is native or prompted, not both")
        self.name = name
        self.max_retries = max_retries
        self.native = native
        self.prompted = prompted
        self._adapter: TypeAdapter[Any] = TypeAdapter(output_type)
        schema = self._adapter.json_schema(schema_generator=ToolJsonSchema)
        self._wrapped = schema.get("type") != "object"
        if self._wrapped:
            wrapper = create_model(name, __base__=_Wrapper, result=(output_type, ...))
            self._adapter = TypeAdapter(wrapper)
            schema = self._adapter.json_schema(schema_generator=ToolJsonSchema)
        schema.pop("title", None)
        self._choices = json_choices(self._adapter.core_schema)
        self.specification = ToolSpecification(
            name=name, description=_DESCRIPTION, parameters=schema
        )

    # -- ToolLike: the final-result tool ------------------------------------------------------

    return_behavior = ReturnBehavior.TO_LLM
    sequential = False

    @property
    def in_text(self) -> bool:
        """Whether the final answer comes as text (native or prompted), not as a tool call."""
        return self.native or self.prompted

    def validate(self, raw: str | bytes) -> OutputT:
        """The validated output, or `OutputValidationError` listing each problem. In prompted
        mode an answer wrapped whole in a Markdown code fence is read inside it."""
        if self.prompted and isinstance(raw, str) and (fenced := _FENCE.match(raw)):
            raw = fenced.group(1)
        try:
            value = self._adapter.validate_json(raw or "{}", strict=True)
        except ValidationError as error:
            text = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
            errors = argument_errors(error, choices=self._choices)
            raise OutputValidationError(self.name, errors, text) from None
        return value.result if self._wrapped else value  # type: ignore[no-any-return]

    def execute(self, call: ToolCall, context: ToolContext[Any]) -> ToolExecutionResult:
        """Validate the final answer; an invalid one is an arguments error the model can fix."""
        try:
            value = self.validate(call.arguments)
        except OutputValidationError as error:
            text = format_arguments_error(self.name, error.errors)
            return ToolExecutionResult.error(text, "arguments", exception=error)
        return ToolExecutionResult(text="Final result received.", value=value)

    async def aexecute(self, call: ToolCall, context: ToolContext[Any]) -> ToolExecutionResult:
        """Same as `execute`: validation never blocks."""
        return self.execute(call, context)

    # -- native mode --------------------------------------------------------------------------

    def request_parameters(self, parameters: ChatRequestParameters) -> ChatRequestParameters:
        """Ask for the provider's native JSON-schema response format."""
        response_format = ResponseFormat(name=self.name, json_schema=self.specification.parameters)
        return parameters.model_copy(update={"response_format": response_format})

    def with_instructions(self, messages: Sequence[ChatMessage]) -> list[ChatMessage]:
        """Prompted mode: `messages` with the schema instructions as a system message after the
        leading system messages (servers that want one system block at the start get it)."""
        schema = to_json(self.specification.parameters).decode()
        instruction = SystemMessage(text=_PROMPTED + schema)
        at = 0
        while at < len(messages) and isinstance(messages[at], SystemMessage):
            at += 1
        return [*messages[:at], instruction, *messages[at:]]

    def nudge(self, errors: Sequence[ArgumentProblem]) -> str:
        """What the model is told when its final answer was text: in tool mode, to call the
        final-result tool; in native and prompted mode (no tool offered), the problems and to
        answer in JSON."""
        if not self.in_text:
            return f"Give your final answer by calling the `{self.name}` tool."
        # The shared report's problem lines, without its tool-call header and footer.
        problems = format_arguments_error(self.name, errors).split("\n")[1:-1]
        return "\n".join(["Your answer is not valid output:", *problems, _ANSWER_IN_JSON])

    def exhausted(self, errors: Sequence[ArgumentProblem], text: str) -> OutputValidationError:
        """The error ending a run whose text answer came with the retry budget spent."""
        spent = f"and its {self.max_retries} retries are spent"
        if self.in_text:
            reason = f"the model's final answer is not valid output, {spent}"
        else:
            reason = (
                f"no {self.name} call: the model answered in text instead of calling the "
                f"`{self.name}` tool, {spent}"
            )
        return OutputValidationError(self.name, errors, text, reason=reason)
