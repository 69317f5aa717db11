"""Docstrings: style detection (the same descriptions as parsing in every style, `AUTO`), and
the fallbacks that keep a docstring from ever failing decoration."""

from __future__ import annotations

import logging

import docstring_parser
import pytest

from agentforge_typed import tool
from agentforge_typed.tools._docstrings import DocstringInfo, _style, parse_docstring

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


# Each occurs in real third-party code; the detected style's parser raises on every one.
UNREADABLE = [
    "Get the weather.\n\nArgs:\n",
    "Get the weather.\n\nArgs:\n\nReturns:\n    A forecast.",
    "Get the weather.\n\nArgs:\n    None",
    "Get the weather.\n\nArgs:\n    None\n\nReturns:\n    A forecast.",
    "Get the weather.\n\nArguments:\n    city: The city.\n\nRaises:\n    None",
    "Get the weather.\n\n:param:\n:returns: A forecast.",
    "Get the weather.\n\n:param city: The city.\n:param",
    "Get the weather.\n\n:param city name of it: The city.",
    "Get the weather.\n\n@param\n@return: A forecast.",
]


@pytest.mark.parametrize("text", UNREADABLE)
def test_a_docstring_the_detected_style_cannot_read_never_fails_decoration(
    text: str, caplog: pytest.LogCaptureFixture
) -> None:
    with pytest.raises(docstring_parser.ParseError):
        docstring_parser.parse(text, _style(text))

    def weather(city: str) -> str:
        return city

    weather.__doc__ = text
    with caplog.at_level(logging.DEBUG, "agentforge_typed.tools"):
        decorated = tool(weather)
    assert decorated.description.startswith("Get the weather.")
    assert decorated.specification.parameters["properties"]["city"]["type"] == "string"
    assert f"The docstring of {weather.__qualname__} is not valid" in caplog.text


@pytest.mark.parametrize(
    ("text", "parameters", "outcome"),
    [
        ("Get the weather.\n\nArgs:\n", {}, "without its sections that list nothing"),
        (
            "Get the weather.\n\nArgs:\n    None\n\nReturns:\n    A forecast.",
            {},
            "without its sections that list nothing",
        ),
        (
            "Get the weather.\n\nArgs:\n    city: The city.\n\nRaises:\n    None",
            {"city": "The city."},
            "without its sections that list nothing",
        ),
        (
            "Get the weather.\n\nArgs:\n    N/A\n\nRaises:\n\nReturns:\n    A forecast.",
            {},
            "without its sections that list nothing",
        ),
        (
            "Get the weather.\n\n:param city: The city.\n:param",
            {},
            "in the style detected",
        ),
    ],
)
def test_what_a_docstring_the_detected_style_cannot_read_gives(
    text: str, parameters: dict[str, str], outcome: str, caplog: pytest.LogCaptureFixture
) -> None:
    def weather(city: str) -> str:
        return city

    weather.__doc__ = text
    with caplog.at_level(logging.DEBUG, "agentforge_typed.tools"):
        info = parse_docstring(weather)
    assert info.parameters == parameters
    if outcome.startswith("without"):
        assert info.description == "Get the weather."
    else:  # as the first style that reads it has it: the sections are part of the text
        assert info.description == text
    assert outcome in caplog.text


@pytest.mark.parametrize(
    "text",
    [
        "Get the weather.\n\nParameters\n----------\nNone\n\nReturns\n-------\nstr",
        "Get the weather.\n\nParameters\n----------\n\nReturns\n-------\nstr",
    ],
)
def test_numpy_sections_without_entries_read_as_no_parameters(text: str) -> None:
    def weather() -> str:
        return "sunny"

    weather.__doc__ = text
    assert parse_docstring(weather) == DocstringInfo(description="Get the weather.")


def test_a_docstring_no_style_reads_gives_no_descriptions(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def unreadable(text: str, style: docstring_parser.DocstringStyle) -> None:
        raise (docstring_parser.ParseError if style.name == "GOOGLE" else IndexError)("broken")

    monkeypatch.setattr(docstring_parser, "parse", unreadable)

    def weather(city: str) -> str:
        """Get the weather.

        Args:
            city: The city.
        """
        return city

    with caplog.at_level(logging.DEBUG, "agentforge_typed.tools"):
        decorated = tool(weather)
    assert decorated.description == ""
    assert "description" not in decorated.specification.parameters["properties"]["city"]
    assert "no descriptions are taken from it" in caplog.text
