"""Text the CLI prints that a server, a tool or a model wrote."""

from __future__ import annotations

__all__ = ["one_line"]


def one_line(text: str) -> str:
    """`text` on one line of printable characters: what a server sends can neither forge output
    lines nor reach the terminal as control sequences."""
    return " ".join("".join(c if c.isprintable() else " " for c in text).split())
