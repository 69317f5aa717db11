"""Tool declarations exactly as each provider sends them (`agentforge-typed schema`).

Declarations come from the providers' own wire mappers, so what is shown is what goes over the
wire. The `gemini` entry is what `GeminiChatModel` declares by default: full JSON Schema as
`parametersJsonSchema`. (Its `function_schema="gemini"` option sends the OpenAPI subset that the
`gemini` schema dialect renders; `check` lints that as well.)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .._request import ToolSpecification
from ..providers import _anthropic_wire, _gemini_wire, _openai_wire

__all__ = ["declaration", "declarations"]


def _openai_strict(spec: ToolSpecification) -> dict[str, Any]:
    # What every tool would look like with `strict_schema=True`.
    return _openai_wire.map_tool(spec.model_copy(update={"strict_schema": True}))


def _anthropic_strict(spec: ToolSpecification) -> dict[str, Any]:
    return _anthropic_wire.map_tool(spec.model_copy(update={"strict_schema": True}))


_RENDERERS: dict[str, Callable[[ToolSpecification], dict[str, Any]]] = {
    # As the OpenAI provider sends them: strict only for tools with `strict_schema=True`.
    "openai": _openai_wire.map_tool,
    "openai-strict": _openai_strict,
    "anthropic": _anthropic_wire.map_tool,
    "anthropic-strict": _anthropic_strict,
    "gemini": _gemini_wire.map_tool,
}


def declaration(spec: ToolSpecification, dialect: str) -> dict[str, Any]:
    """One tool's declaration in `dialect`.

    Raises:
        SchemaDialectError: The dialect cannot express the tool's schema.
    """
    return _RENDERERS[dialect](spec)


def declarations(specs: Sequence[ToolSpecification], dialect: str) -> list[dict[str, Any]]:
    """Every tool's declaration in `dialect`, in order."""
    return [declaration(spec, dialect) for spec in specs]
