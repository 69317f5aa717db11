"""JSON Schema dialects (placeholder: the schema-dialects work replaces this module)."""

from __future__ import annotations

import copy
from typing import Any, Literal

__all__ = ["Dialect", "render_schema"]

Dialect = Literal["openai", "openai-strict", "anthropic", "gemini"]


def render_schema(parameters: dict[str, Any], dialect: Dialect) -> dict[str, Any]:
    """Render pydantic's JSON Schema for `dialect`."""
    return copy.deepcopy(parameters)
