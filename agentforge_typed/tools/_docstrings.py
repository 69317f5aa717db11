"""Tool and parameter descriptions from a function's docstring (Google, NumPy or Sphinx style)."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import docstring_parser

__all__ = ["DocstringInfo", "parse_docstring"]


@dataclass(frozen=True)
class DocstringInfo:
    """What a docstring says about a tool."""

    description: str = ""
    """The summary line, then the long description (a blank line between), without sections."""
    parameters: dict[str, str] = field(default_factory=dict)
    """Parameter name → its description."""


def parse_docstring(function: Callable[..., Any]) -> DocstringInfo:
    """Read `function`'s docstring; the style (Google, NumPy, Sphinx/reST) is detected."""
    text = inspect.getdoc(function)
    if not text:
        return DocstringInfo()
    parsed = docstring_parser.parse(text, _style(text))
    parts = [part.strip() for part in (parsed.short_description, parsed.long_description) if part]
    parameters = {
        param.arg_name: " ".join(param.description.split())
        for param in parsed.params
        if param.description
    }
    return DocstringInfo(description="\n\n".join(parts), parameters=parameters)


_NUMPY_SECTION = re.compile(r"^\s*[A-Za-z ]+\n\s*-{3,}\s*$", re.MULTILINE)


def _style(text: str) -> docstring_parser.DocstringStyle:
    """The docstring's style, from its markers: parsing in every style to pick the best (the
    parser's `AUTO`) costs a tenth of a tool's decoration, for the same answer."""
    if ":param" in text or ":return" in text or ":raises" in text:
        return docstring_parser.DocstringStyle.REST
    if "@param" in text or "@return" in text:
        return docstring_parser.DocstringStyle.EPYDOC
    if _NUMPY_SECTION.search(text):
        return docstring_parser.DocstringStyle.NUMPYDOC
    return docstring_parser.DocstringStyle.GOOGLE
