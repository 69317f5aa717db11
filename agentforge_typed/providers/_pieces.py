"""`Pieces`: text that a stream sends in pieces, kept in a list and joined once.

Every wire core accumulates its streamed fields (text, thinking, signatures, tool-call names and
arguments) here rather than with `+=`, which copies everything received so far on each piece and
makes a stream of n pieces cost O(n²). Comparing a complete value a server sends again (a
Responses `*.done` event, a repeated tool-call name) joins only when the lengths allow a match,
so that each comparison costs at most the length of the value compared.
"""

from __future__ import annotations

__all__ = ["Pieces"]


class Pieces:
    """A text received in pieces; `text()` joins them, once until the next piece arrives."""

    __slots__ = ("_length", "_pieces")

    def __init__(self, first: str = "") -> None:
        self._pieces: list[str] = []
        self._length = 0
        self.append(first)

    def __len__(self) -> int:
        return self._length

    def append(self, piece: str) -> None:
        """Add the next piece.

        Raises:
            TypeError: `piece` is not a string (a malformed stream).
        """
        if not isinstance(piece, str):
            raise TypeError(f"expected a string piece, got {type(piece).__name__}")
        if piece:
            self._pieces.append(piece)
            self._length += len(piece)

    def text(self) -> str:
        """The pieces so far, joined (and kept joined, so reading again costs nothing)."""
        pieces = self._pieces
        if len(pieces) > 1:
            pieces[:] = ["".join(pieces)]
        return pieces[0] if pieces else ""

    def equals(self, text: str) -> bool:
        """Whether the pieces so far spell `text`."""
        return len(text) == self._length and self.text() == text

    def rest_of(self, text: str) -> str | None:
        """What `text` adds to the pieces so far, when it begins with them; else `None`."""
        if len(text) < self._length:
            return None
        joined = self.text()
        return text[self._length :] if text.startswith(joined) else None
