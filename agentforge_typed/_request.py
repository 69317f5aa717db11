"""What is sent to a model: messages plus provider-neutral parameters."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import Field, field_validator

from ._frozen import FrozenModel, FrozenSeq
from ._messages import ChatMessage

__all__ = [
    "ChatRequest",
    "ChatRequestParameters",
    "ResponseFormat",
    "ToolChoice",
    "ToolSpecification",
]


class ToolChoice(str, enum.Enum):
    """Whether, and which, tools the model must call.

    `ChatRequestParameters.tool_choice` also takes any other string: the name of the one tool the
    model must call.
    """

    AUTO = "auto"
    NONE = "none"
    REQUIRED = "required"

    def __str__(self) -> str:
        return self.value


class ToolSpecification(FrozenModel):
    """A tool as offered to a model: its name, description and JSON Schema of its arguments."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    """Plain JSON Schema (pydantic's dialect); providers render it for their own dialect."""
    strict_schema: bool = False
    """Ask the provider to enforce the schema (OpenAI `strict: true`)."""


class ResponseFormat(FrozenModel):
    """Ask for a final answer whose text is JSON matching `json_schema`, through the provider's
    native structured output (OpenAI `response_format: json_schema`). Providers without one refuse
    it with `ModelError`."""

    name: str
    json_schema: dict[str, Any]
    """Plain JSON Schema (pydantic's dialect); providers render it for their own dialect."""
    strict: bool = True
    """Ask the provider to enforce the schema exactly."""


class ChatRequestParameters(FrozenModel):
    """Provider-neutral request parameters; `None` means "use the model's default"."""

    model: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    stop: FrozenSeq[str] | None = None
    tools: FrozenSeq[ToolSpecification] | None = None
    tool_choice: ToolChoice | str | None = None
    """`ToolChoice`, or the name of the one tool the model must call."""
    parallel_tool_calls: bool | None = None
    response_format: ResponseFormat | None = None
    """Native structured output; see `ResponseFormat`."""
    custom: dict[str, Any] = Field(default_factory=dict)
    """Provider-specific fields, spread into the provider's request body as they are."""

    @field_validator("tool_choice")
    @classmethod
    def _known_choice(cls, value: ToolChoice | str | None) -> ToolChoice | str | None:
        if isinstance(value, str) and not isinstance(value, ToolChoice):
            try:
                return ToolChoice(value)
            except ValueError:
                return value
        return value

    def merge(self, overrides: ChatRequestParameters | None) -> ChatRequestParameters:
        """Return these defaults overlaid with `overrides`; neither input changes.

        Every non-`None` field of `overrides` wins; `custom` is merged key by key, the override's
        keys winning.
        """
        if overrides is None:
            return self
        values = {
            name: value
            for name in type(self).model_fields
            if (value := getattr(overrides, name)) is not None and name != "custom"
        }
        return self.model_copy(update={**values, "custom": {**self.custom, **overrides.custom}})


class ChatRequest(FrozenModel):
    """An immutable request: at least one message and optional parameters."""

    messages: Annotated[FrozenSeq[ChatMessage], Field(min_length=1)]
    parameters: ChatRequestParameters | None = None

    @classmethod
    def of(
        cls, messages: Sequence[ChatMessage], parameters: ChatRequestParameters | None = None
    ) -> ChatRequest:
        """Build a request from already-validated messages without re-validating them."""
        if not messages:
            raise ValueError("ChatRequest needs at least one message")
        return cls.model_construct(messages=tuple(messages), parameters=parameters)
