"""Golden dialect renderings of real tools' `specification.parameters`, and enforcement of what a
dialect can only describe.

Every signature in `test_tools_schema.CASES` is rendered for every dialect; the golden files in
`tests/fixtures/tool_dialects/` hold, per function, the exact output of each dialect (or the
refusal). Regenerate them after a deliberate change with
`UPDATE_GOLDEN=1 pytest tests/tools/test_tools_dialect_goldens.py` and review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import Field
from test_schema_dialects import _render
from test_tools_schema import CASES

from agentforge_typed import ToolCall, tool
from agentforge_typed.providers import render_schema
from agentforge_typed.providers._dialects import DIALECTS, Dialect

GOLDEN = Path(__file__).parents[1] / "fixtures" / "tool_dialects"
FUNCTIONS: dict[str, Any] = {case[0].__name__: case[0] for case in CASES}


def _renderings(name: str) -> dict[str, Any]:
    parameters = tool(FUNCTIONS[name]).specification.parameters
    return {dialect: _render(parameters, dialect) for dialect in DIALECTS}


def _golden_path(name: str) -> Path:
    return GOLDEN / f"{name}.json"


if os.environ.get("UPDATE_GOLDEN"):  # pragma: no cover - maintenance switch
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for _name in FUNCTIONS:
        _golden_path(_name).write_text(
            json.dumps(_renderings(_name), indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )


def test_every_signature_has_a_golden_file() -> None:
    assert len(FUNCTIONS) >= 30
    assert sorted(p.stem for p in GOLDEN.glob("*.json")) == sorted(FUNCTIONS)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_golden_renderings(name: str) -> None:
    golden = json.loads(_golden_path(name).read_text(encoding="utf-8"))
    assert _renderings(name) == golden


# -- a keyword a dialect can only describe is still enforced -----------------------------------


@tool
def lookup_zip(
    zip_code: Annotated[str, Field(pattern=r"^\d{5}$", min_length=5)],
    rank: Annotated[int, Field(ge=1, le=10)],
    step: Annotated[float, Field(gt=0, multiple_of=0.5)] = 1.0,
) -> str:
    return f"{zip_code}#{rank}/{step}"


RANK = {"maximum": 10, "minimum": 1, "type": "integer"}


@pytest.mark.parametrize(
    ("dialect", "zip_code", "step"),
    [
        (
            "openai-strict",
            {"pattern": r"^\d{5}$", "type": "string", "description": "minLength: 5"},
            {
                "exclusiveMinimum": 0,
                "multipleOf": 0.5,
                "type": ["number", "null"],
                "description": "default: 1.0",
            },
        ),
        (
            "gemini",
            {"type": "string", "description": r"minLength: 5, pattern: ^\d{5}$"},
            {
                "type": "number",
                "description": "default: 1.0, exclusiveMinimum: 0, multipleOf: 0.5",
            },
        ),
    ],
)
def test_unsupported_keywords_move_into_the_description(
    dialect: Dialect, zip_code: dict[str, Any], step: dict[str, Any]
) -> None:
    properties = render_schema(lookup_zip.specification.parameters, dialect)["properties"]
    assert properties == {"zip_code": zip_code, "rank": RANK, "step": step}


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        (
            '{"zip_code": "1234a", "rank": 3}',
            "$.zip_code: String should match pattern '^\\d{5}$' (input: \"1234a\")",
        ),
        (
            '{"zip_code": "1234", "rank": 3}',
            '$.zip_code: String should have at least 5 characters (input: "1234")',
        ),
        (
            '{"zip_code": "12345", "rank": 11}',
            "$.rank: Input should be less than or equal to 10 (input: 11)",
        ),
        (
            '{"zip_code": "12345", "rank": 1, "step": 0}',
            "$.step: Input should be greater than 0 (input: 0)",
        ),
        (
            '{"zip_code": "12345", "rank": 1, "step": 0.7}',
            "$.step: Input should be a multiple of 0.5 (input: 0.7)",
        ),
    ],
)
def test_described_keywords_are_still_enforced(arguments: str, error: str) -> None:
    result = lookup_zip.execute(ToolCall(id="call_1", name="lookup_zip", arguments=arguments))
    assert result.error_kind == "arguments"
    assert result.text == (
        f"Invalid arguments for tool `lookup_zip`:\n- {error}\n"
        "Correct the arguments and call `lookup_zip` again."
    )


def test_a_conforming_call_succeeds() -> None:
    arguments = '{"zip_code": "12345", "rank": 10, "step": 1.5}'
    result = lookup_zip.execute(ToolCall(id="call_1", name="lookup_zip", arguments=arguments))
    assert (result.error_kind, result.text) == (None, "12345#10/1.5")
