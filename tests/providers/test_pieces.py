"""`Pieces`, the streamed-text accumulator every wire core uses."""

from __future__ import annotations

import pytest

from agentforge_typed.providers._pieces import Pieces


def test_pieces_join_once_and_compare_with_a_complete_value() -> None:
    pieces = Pieces("ab")
    pieces.append("")
    pieces.append("cd")
    assert (len(pieces), pieces.text(), pieces.text()) == (4, "abcd", "abcd")
    assert pieces.equals("abcd") and not pieces.equals("abce") and not pieces.equals("abc")
    # What a complete value adds: only when it starts with the pieces so far.
    assert pieces.rest_of("abcdef") == "ef"
    assert pieces.rest_of("abcd") == ""
    assert pieces.rest_of("abc") is None
    assert pieces.rest_of("xbcdef") is None
    pieces.append("ef")
    assert pieces.text() == "abcdef" and Pieces().text() == ""


@pytest.mark.parametrize("piece", [None, 5, ["a"]])
def test_a_piece_that_is_not_text_is_a_type_error(piece: object) -> None:
    with pytest.raises(TypeError, match="expected a string piece"):
        Pieces(piece)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="expected a string piece"):
        Pieces().append(piece)  # type: ignore[arg-type]
