"""docs/reference/options.md lists every key of every options TypedDict, under its own heading."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from agentforge_typed import RunOptions
from agentforge_typed.providers import HttpModelOptions, OpenAIOptions, ParameterDefaults
from agentforge_typed.serving import HttpOptions, ToolServerOptions
from agentforge_typed.tools import MCPServerOptions, ToolOptions

PAGE = Path(__file__).parents[2] / "docs" / "reference" / "options.md"
OPTIONS: list[Any] = [
    ToolOptions,
    RunOptions,
    ParameterDefaults,
    HttpModelOptions,
    OpenAIOptions,
    MCPServerOptions,
    ToolServerOptions,
    HttpOptions,
]

PARENTS: dict[Any, Any] = {HttpModelOptions: ParameterDefaults, OpenAIOptions: HttpModelOptions}


def _sections() -> dict[str, str]:
    parts = re.split(r"^## `(\w+)`$", PAGE.read_text(encoding="utf-8"), flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: o.__name__)
def test_every_key_is_listed_under_its_typed_dict(options: Any) -> None:
    section = _sections()[options.__name__]
    listed = re.findall(r"^- \*\*`(\w+)`\*\*", section, flags=re.MULTILINE)
    # Inherited keys are listed under the TypedDict that declares them.
    parent = PARENTS.get(options)
    inherited = set() if parent is None else set(parent.__annotations__)
    assert listed == [key for key in options.__annotations__ if key not in inherited]
    assert not options.__total__


def test_the_page_has_no_section_for_a_typed_dict_that_is_gone() -> None:
    assert sorted(_sections()) == sorted(o.__name__ for o in OPTIONS)
