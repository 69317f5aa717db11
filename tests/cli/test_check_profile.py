"""`agentforge-typed check --profile NAME`: tools linted against a model profile's limits."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentforge_typed.cli import main
from agentforge_typed.providers._profiles import PROFILES

TOOLS = '''
from typing import Annotated

from pydantic import Field

from agentforge_typed import tool


@tool
def ranked(city: str, top: Annotated[int, Field(multiple_of=5)] = 10) -> str:
    """Rank places in a city.

    Args:
        city: The city.
        top: How many places.
    """
    return city


@tool(strict_schema=True)
def strict_weather(city: str) -> str:
    """The weather.

    Args:
        city: The city.
    """
    return city


@tool
def maybe(city: str | None = None) -> str:
    """Maybe a city.

    Args:
        city: The city, if any.
    """
    return city or ""


tools = [ranked, strict_weather, maybe]
'''


@pytest.fixture
def target(tmp_path: Path) -> str:
    path = tmp_path / "profile_tools.py"
    path.write_text(TOOLS, encoding="utf-8")
    return f"{path}:tools"


def check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], str]:
    status = main(["check", *args, "--dialect", "openai"])
    captured = capsys.readouterr()
    return status, captured.out.splitlines(), captured.err


def test_without_a_profile_the_tools_are_clean(
    capsys: pytest.CaptureFixture[str], target: str
) -> None:
    status, lines, _ = check(capsys, target)
    # A note (not a warning) says what the strict tool gets from the provider checked.
    assert [line.split(": ", 2)[2] for line in lines[:-1]] == [
        "strict_weather: strict schema: openai: provider-enforced (`strict: true`, OpenAI "
        "structured outputs) [strictness]"
    ]
    assert (status, lines[-1]) == (0, "0 errors, 0 warnings")
    assert main(["check", target, "--dialect", "gemini", "--strict"]) == 0
    assert capsys.readouterr().out.splitlines()[:-1] == [
        lines[0].split(": note: ")[0] + ": note: strict_weather: strict schema: gemini: "
        "provider-validated (function calling mode `VALIDATED`, a preview feature) when the model "
        "may choose; with a forced choice (`ANY`), validated locally only [strictness]"
    ]


def test_refused_constraint_keywords_and_strict_are_warnings(
    capsys: pytest.CaptureFixture[str], target: str
) -> None:
    status, lines, _ = check(capsys, target, "--profile", "gemini-openai")
    findings = [line.split(": ", 2)[2] for line in lines[:-1]]
    # `@tool` schemas forbid extra arguments with `additionalProperties`, which Gemini refuses.
    assert findings == [
        "ranked: profile 'gemini-openai': refuses additionalProperties, multipleOf; moved into "
        "descriptions when sent [profile-schema]",
        "strict_weather: profile 'gemini-openai': strict schemas are not supported; sent plain, "
        "validated locally [profile-strict]",
        "strict_weather: profile 'gemini-openai': refuses additionalProperties; moved into "
        "descriptions when sent [profile-schema]",
        "maybe: profile 'gemini-openai': refuses additionalProperties; moved into descriptions "
        "when sent [profile-schema]",
    ]
    assert all(": warning: " in line for line in lines[:-1])
    assert (status, lines[-1]) == (0, "0 errors, 4 warnings")


def test_structural_keywords_and_tool_count_are_errors(
    capsys: pytest.CaptureFixture[str], target: str, tmp_path: Path
) -> None:
    path = tmp_path / "small.json"
    PROFILES["openai"].model_copy(
        update={"name": "small", "max_tools": 2, "refused_schema_keywords": frozenset({"anyOf"})}
    ).dump(path)
    status, lines, _ = check(capsys, target, "--profile", str(path))
    assert status == 1
    assert lines[-1] == "2 errors, 0 warnings"
    assert lines[0].endswith(
        "error: maybe: profile 'small': at most 2 tools per request [profile-max-tools]"
    )
    assert "error: maybe: profile 'small': tool 'maybe' uses 'anyOf'" in lines[1]
    assert lines[1].endswith("[profile-schema]")


def test_no_tools_at_all_is_an_error_per_tool(
    capsys: pytest.CaptureFixture[str], target: str, tmp_path: Path
) -> None:
    path = tmp_path / "chat-only.json"
    PROFILES["ollama"].model_copy(update={"tools": False}).dump(path)
    status, lines, _ = check(capsys, target, "--profile", str(path))
    assert status == 1
    assert lines[-1] == "3 errors, 0 warnings"
    assert all(
        line.endswith("the model does not call tools [profile-tools]") for line in lines[:-1]
    )


def test_unknown_profile_is_a_usage_error(capsys: pytest.CaptureFixture[str], target: str) -> None:
    status, _, err = check(capsys, target, "--profile", "nope")
    assert status == 2
    assert "--profile: unknown profile 'nope'" in err


def test_malformed_profile_file_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], target: str, tmp_path: Path
) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"tool_choice": ["auto", "sometimes"]}', encoding="utf-8")
    status, _, err = check(capsys, target, "--profile", str(path))
    assert status == 2
    assert err.startswith("agentforge-typed: error: --profile: 1 validation error for ModelProfile")
