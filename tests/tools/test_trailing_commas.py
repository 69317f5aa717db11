"""Trailing commas in the arguments JSON are repaired and recorded; nothing else is guessed."""

from __future__ import annotations

import time
from typing import Any

import pytest

from agentforge_typed import (
    SchemaTool,
    ToolArgumentsError,
    ToolCall,
    ToolContext,
    ToolExecutionResult,
    ToolSpecification,
    tool,
)

REPAIR = "trailing commas removed"


@tool
def tag(note: str, ids: list[int], meta: dict[str, int] | None = None) -> dict[str, Any]:
    """Tag a note."""
    return {"note": note, "ids": ids, "meta": meta}


SPEC = ToolSpecification(
    name="tag",
    description="Tag a note.",
    parameters={
        "type": "object",
        "properties": {
            "note": {"type": "string"},
            "ids": {"type": "array", "items": {"type": "integer"}},
            "meta": {"type": "object", "additionalProperties": {"type": "integer"}},
        },
        "required": ["note", "ids"],
        "additionalProperties": False,
    },
)


def schema_tag(arguments: dict[str, Any]) -> dict[str, Any]:
    return {"meta": None, **arguments}


def typed(raw: str | bytes) -> ToolExecutionResult:
    return tag.execute(ToolCall(id="1", name="tag", arguments=raw))  # type: ignore[arg-type]


def declared(raw: str) -> ToolExecutionResult:
    context: ToolContext[None] = ToolContext(deps=None, tool_call_id="1", tool_name="tag")
    return SchemaTool(SPEC, schema_tag).execute(
        ToolCall(id="1", name="tag", arguments=raw), context
    )


RUN = [typed, declared]


@pytest.mark.parametrize("run", RUN)
@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ('{"note": "n", "ids": [1, 2,],}', {"note": "n", "ids": [1, 2], "meta": None}),
        ('{"note": "n", "ids": [1,\n  2 ,\n ]\n,\n}', {"note": "n", "ids": [1, 2], "meta": None}),
        (
            '{"note": "n", "ids": [], "meta": {"a": 1,},}',
            {"note": "n", "ids": [], "meta": {"a": 1}},
        ),
        # A comma in a string value is text, not syntax, even next to a bracket or an escape.
        (
            '{"note": "a,} b,] \\",}", "ids": [3,],}',
            {"note": 'a,} b,] ",}', "ids": [3], "meta": None},
        ),
    ],
)
def test_trailing_commas_are_removed_and_recorded(
    run: Any, raw: str, value: dict[str, Any]
) -> None:
    result = run(raw)
    assert not result.is_error, result.text
    assert result.value == value
    assert result.repairs == (REPAIR,)


@pytest.mark.parametrize("run", RUN)
@pytest.mark.parametrize(
    "raw",
    [
        '{"note": "n", "ids": [1,, 2]}',  # a doubled comma is a missing value, not a typo
        '{"note": "n", "ids": [,]}',
        '{,"note": "n", "ids": []}',
        '{"note": "n", "ids": [1, 2,]',  # and a missing bracket is not added
        '{"note": "n,}", "ids": [1 2,]}',
    ],
)
def test_nothing_else_is_guessed(run: Any, raw: str) -> None:
    result = run(raw)
    assert result.is_error and result.error_kind == "arguments"
    assert "Invalid JSON" in result.text
    assert result.repairs == ()


def test_a_string_value_ending_in_a_comma_is_untouched() -> None:
    result = typed('{"note": "one, two,", "ids": [1]}')
    assert (result.value["note"], result.repairs) == ("one, two,", ())


def test_trailing_comma_repair_combines_with_the_other_repairs() -> None:
    # Double-encoded arguments whose outer text has a trailing comma in an array value.
    result = typed('{"note": "n", "ids": [1,], "meta": "{\\"a\\": 2}"}')
    assert result.value == {"note": "n", "ids": [1], "meta": {"a": 2}}
    assert result.repairs == (REPAIR, "$.meta: JSON object sent as a string: decoded")


def test_validate_arguments_applies_it_and_still_reports_the_rest() -> None:
    assert tag.validate_arguments('{"note": "n", "ids": [1,],}').ids == [1]  # type: ignore[attr-defined]
    with pytest.raises(ToolArgumentsError) as caught:
        tag.validate_arguments('{"note": 5, "ids": [1,],}')
    assert [e.path for e in caught.value.errors] == ["$.note"]
    result = typed(b'{"note": 5, "ids": [1,],}')
    assert result.is_error and result.repairs == (REPAIR,)


@pytest.mark.parametrize("run", RUN)
def test_hostile_text_after_a_trailing_comma_costs_linear_time(run: Any) -> None:
    # Escaped quotes after an unterminated string: a scan that restarts at every quote is
    # quadratic (minutes here); a linear one takes milliseconds.
    raw = '{"note": "n", "ids": [1,], "x": "' + '\\"' * 100_000
    started = time.process_time()
    result = run(raw)
    assert time.process_time() - started < 1.0
    assert result.is_error and result.repairs == ()
