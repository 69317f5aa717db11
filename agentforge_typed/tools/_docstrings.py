"""Tool and parameter descriptions from a function's docstring (Google, NumPy or Sphinx style)."""

from __future__ import annotations

import inspect
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import docstring_parser

__all__ = ["DocstringInfo", "parse_docstring"]

logger = logging.getLogger("agentforge_typed.tools")


@dataclass(frozen=True)
class DocstringInfo:
    """What a docstring says about a tool."""

    description: str = ""
    """The summary line, then the long description (a blank line between), without sections."""
    parameters: dict[str, str] = field(default_factory=dict)
    """Parameter name → its description."""


def parse_docstring(function: Callable[..., Any]) -> DocstringInfo:
    """Read `function`'s docstring; the style (Google, NumPy, Sphinx/reST) is detected.

    Never raises: a docstring its detected style cannot read (an empty `Args:` section, or
    `Args: None`, both common in real code) is read without the Google sections that list
    nothing, else in whichever style the parser finds best (its `AUTO`), and one that no style
    reads gives no descriptions; each fallback is logged at debug level.
    """
    text = inspect.getdoc(function)
    if not text:
        return DocstringInfo()
    parsed = _parse(text, function)
    if parsed is None:
        return DocstringInfo()
    parts = [part.strip() for part in (parsed.short_description, parsed.long_description) if part]
    parameters = {
        param.arg_name: " ".join(param.description.split())
        for param in parsed.params
        if param.description
    }
    return DocstringInfo(description="\n\n".join(parts), parameters=parameters)


def _parse(text: str, function: Callable[..., Any]) -> docstring_parser.Docstring | None:
    import docstring_parser  # loaded by the first docstring read, not with the package

    style = _style(text)
    try:
        return docstring_parser.parse(text, style)
    # Not only `ParseError`: a parser bug on odd input must not fail the decoration either.
    except Exception as exc:
        error = exc
    attempts: list[tuple[str, docstring_parser.DocstringStyle, str]] = []
    if style is docstring_parser.DocstringStyle.GOOGLE:
        listed = _EMPTY_GOOGLE_LIST.sub(lambda m: m[0] if ":" in m[1] else "", text)
        if listed != text:
            attempts.append((listed, style, "read without its sections that list nothing"))
    attempts.append((text, docstring_parser.DocstringStyle.AUTO, "read in the style detected"))
    for source, how, outcome in attempts:
        try:
            parsed = docstring_parser.parse(source, how)
        except Exception as exc:
            last = exc
            continue
        logger.debug(
            "The docstring of %s is not valid %s style (%s): %s",
            _name(function),
            style.name,
            error,
            outcome,
        )
        return parsed
    logger.debug(
        "The docstring of %s cannot be parsed (%s style: %s; any style: %s): "
        "no descriptions are taken from it",
        _name(function),
        style.name,
        error,
        last,
    )
    return None


def _name(function: Callable[..., Any]) -> str:
    # Not `repr`: a callable object's own may be costly, or raise.
    name = getattr(function, "__qualname__", None)
    return name if isinstance(name, str) else type(function).__qualname__


# A Google section that lists entries (`name: description`) and the indented lines under it: the
# parser refuses one that is empty or says `None` (`N/A`, `No arguments.`), so the whole docstring,
# its other sections' parameter descriptions included, would be lost for a line that lists nothing.
_EMPTY_GOOGLE_LIST = re.compile(
    r"^(?:Arguments|Args|Parameters|Params|Raises|Exceptions|Except|Attributes):[ \t]*(?:\n|\Z)"
    r"((?:[ \t]*\n|[ \t]+\S[^\n]*(?:\n|\Z))*)",
    re.MULTILINE,
)


_NUMPY_SECTION = re.compile(r"^\s*[A-Za-z ]+\n\s*-{3,}\s*$", re.MULTILINE)


def _style(text: str) -> docstring_parser.DocstringStyle:
    """The docstring's style, from its markers: parsing in every style to pick the best (the
    parser's `AUTO`) costs a tenth of a tool's decoration, for the same answer."""
    import docstring_parser

    if ":param" in text or ":return" in text or ":raises" in text:
        return docstring_parser.DocstringStyle.REST
    if "@param" in text or "@return" in text:
        return docstring_parser.DocstringStyle.EPYDOC
    if _NUMPY_SECTION.search(text):
        return docstring_parser.DocstringStyle.NUMPYDOC
    return docstring_parser.DocstringStyle.GOOGLE
