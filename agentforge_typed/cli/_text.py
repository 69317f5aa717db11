"""Text the CLI prints that a server, a tool, a model or a module wrote: the one function that
makes it safe for a terminal, and its JSON counterpart."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["printable", "printable_json"]


def printable(text: str, *, lines: bool = False) -> str:
    """`text` as the CLI may print it: no control character reaches the terminal — no escape
    sequence (a title change, a cleared screen), no bell, no carriage return or backspace to
    overwrite a line, no bidirectional override — so what a server sends can neither change the
    terminal nor forge a line of the CLI's own.

    One line (the default): every run of whitespace and unprintable characters becomes one space.
    `lines=True`: line breaks are kept, every other unprintable character becomes a space.
    """
    if lines:
        if text.isprintable():
            return text
        return "".join(c if c.isprintable() or c == "\n" else " " for c in text)
    return " ".join("".join(c if c.isprintable() else " " for c in text).split())


def printable_json(value: Any) -> str:
    """`value` as indented JSON the terminal shows as it is: every unprintable character in a
    string escaped (`\\u001b`), non-ASCII text kept readable."""
    text = json.dumps(value, indent=2, ensure_ascii=False)
    return "\n".join(
        line if line.isprintable() else "".join(_escaped(c) for c in line)
        for line in text.split("\n")
    )


def _escaped(char: str) -> str:
    # Outside strings, JSON indented this way has only spaces: an unprintable one is in a string.
    return char if char.isprintable() else json.dumps(char)[1:-1]
