"""What is sent to a model: messages plus provider-neutral parameters."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import Field, field_validator

from ._content import FrozenModel, FrozenSeq
from ._messages import ChatMessage

__all__ = [
    "ChatRequest",
    "ChatRequestParameters",
    "ResponseFormat",
    "ToolAnnotations",
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


class ToolAnnotations(FrozenModel):
    """What a tool says about its own behaviour (MCP's tool annotations): hints, not guarantees.

    `None` means the tool does not say; the MCP specification's defaults then apply (not
    read-only, possibly destructive, not idempotent, open world). Nothing acts on these unless the
    tool's source is trusted (`MCPServer(..., trusted=True)`); `prepare_tools` hooks and filters
    may read them either way.
    """

    title: str | None = None
    """A human-readable name for the tool."""
    read_only: bool | None = None
    """The tool does not modify its environment (MCP `readOnlyHint`)."""
    destructive: bool | None = None
    """The tool may delete or overwrite, not only add (MCP `destructiveHint`; meaningful only
    for a tool that is not read-only)."""
    idempotent: bool | None = None
    """Calling it again with the same arguments has no further effect (MCP `idempotentHint`)."""
    open_world: bool | None = None
    """The tool reaches entities outside a closed domain, e.g. the web (MCP `openWorldHint`)."""

    def contradictions(self) -> tuple[str, ...]:
        """Each pair of hints that cannot both hold, in words (empty when they agree)."""
        found: list[str] = []
        if self.read_only and self.destructive:
            found.append("readOnlyHint and destructiveHint are both true")
        if self.read_only and self.idempotent is False:
            found.append("readOnlyHint is true but idempotentHint is false")
        return tuple(found)


class ToolSpecification(FrozenModel):
    """A tool as offered to a model: its name, description and JSON Schema of its arguments."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    """Plain JSON Schema (pydantic's dialect); providers render it for their own dialect."""
    strict_schema: bool = False
    """Ask the provider to enforce the schema (OpenAI `strict: true`)."""
    annotations: ToolAnnotations | None = None
    """What the tool says about its behaviour (an MCP server's tool annotations); never sent to
    the model."""


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
