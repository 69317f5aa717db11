"""Docstring style detection: the same descriptions as parsing in every style (`AUTO`)."""

from __future__ import annotations

import docstring_parser
import pytest

from agentforge_typed.tools._docstrings import _style

DOCSTRINGS = [
    "Just a summary.",
    "Summary.\n\nA longer description\nover two lines.",
    "Get the weather.\n\nArgs:\n    city: The city.\n    days (int): How many days.\n\nReturns:\n    A forecast.",
    "Get the weather.\n\nArguments:\n    city: The city.",
    "Get the weather.\n\nParameters\n----------\ncity : str\n    The city.\ndays : int\n    How many.",
    "Get the weather.\n\n:param city: The city.\n:param days: How many.\n:returns: A forecast.",
    "Get the weather.\n\n:param str city: The city.\n:raises ValueError: Never.",
    "Get the weather.\n\n@param city: The city.\n@return: A forecast.",
    "Mentions a dash line\n\nNotes\n-----\nSomething.",
]


@pytest.mark.parametrize("text", DOCSTRINGS)
def test_the_detected_style_reads_what_auto_reads(text: str) -> None:
    chosen = docstring_parser.parse(text, _style(text))
    auto = docstring_parser.parse(text)
    assert chosen.short_description == auto.short_description
    assert chosen.long_description == auto.long_description
    assert [(p.arg_name, p.description) for p in chosen.params] == [
        (p.arg_name, p.description) for p in auto.params
    ]
