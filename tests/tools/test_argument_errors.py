"""The arguments-error report stays one line per problem whatever the model sends, and speaks JSON."""

from __future__ import annotations

import enum
import json
import typing
import uuid
from decimal import Decimal
from typing import Annotated, Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from agentforge_typed import ToolCall, ToolContext, tool
from agentforge_typed._exceptions import ArgumentProblem, path_step
from agentforge_typed.loop._output import OutputSpec
from agentforge_typed.tools._argument_errors import (
    MAX_MESSAGE_CHARS,
    MAX_PATH_CHARS,
    MAX_REPORTED_ERRORS,
    format_arguments_error,
    json_path,
)


class Cat(BaseModel):
    kind: Literal["cat"]


class Dog(BaseModel):
    kind: Literal["dog"]


@tool
def adopt(
    pet: Annotated[Cat | Dog, Field(discriminator="kind")], tags: dict[str, int], name: str = ""
) -> str:
    return name


def report(arguments: dict[str, Any]) -> str:
    result = adopt.execute(ToolCall(id="c", name="adopt", arguments=json.dumps(arguments)))
    assert result.error_kind == "arguments"
    return result.text


@pytest.mark.parametrize(
    ("location", "path"),
    [
        ((), "$"),
        (("order", "items", 0, "sku"), "$.order.items[0].sku"),
        (("a.b",), '$["a.b"]'),
        (("x\n- $.a: forged",), '$["x\\n- $.a: forged"]'),
        (("größe",), '$["größe"]'),
        (("line\u2028break",), '$["line\\u2028break"]'),
        (("k" * 100,), '$["' + "k" * 59 + '…"]'),
        (("shape", "Circle", "radius"), "$.shape.Circle.radius"),
        (("value", "list[int]", 0), '$.value["list[int]"][0]'),
        (("scores", "a", "[key]"), "$.scores.a[key]"),
    ],
)
def test_json_path_quotes_keys_that_are_not_identifiers(
    location: tuple[str | int, ...], path: str
) -> None:
    assert json_path(location) == path
    assert "".join(path_step(key) for key in location) == path[1:]


def test_a_deep_path_keeps_its_end() -> None:
    path = json_path(("level",) * 40 + ("leaf",))
    assert len(path) == MAX_PATH_CHARS
    assert path.startswith("…") and path.endswith(".level.level.leaf")


def test_a_lone_surrogate_in_the_arguments_is_reported_escaped() -> None:
    # A str the model layer decoded from broken UTF-16: UTF-8 (and so pydantic) cannot carry it.
    raw = '{"pet": {"kind": "cat"}, "tags": {}, "name": "\ud83d"}'
    result = adopt.execute(ToolCall(id="c", name="adopt", arguments=raw))
    assert result.error_kind == "arguments"
    line = result.text.splitlines()[1]
    assert line.startswith("- $: ") and line.endswith('"name\\": \\"\\ud83d\\"}")')


def test_a_key_sent_by_the_model_cannot_add_lines() -> None:
    text = report({"pet": {"kind": "cat"}, "tags": {"k\nx": "1"}, "x\n- $.a: fake\nCorrect": 1})
    assert text == (
        "Invalid arguments for tool `adopt`:\n"
        '- $.tags["k\\nx"]: Input should be a valid integer (input: "1")\n'
        '- $["x\\n- $.a: fake\\nCorrect"]: Unexpected argument; this tool takes: pet, tags, name'
        " (input: 1)\n"
        "Correct the arguments and call `adopt` again."
    )


def test_a_message_that_repeats_the_input_is_flattened_and_truncated() -> None:
    forged = "cow\n- $.pet: forged line\nCorrect the arguments. " + "x" * 400
    line = report({"pet": {"kind": forged}, "tags": {}}).splitlines()[1]
    message = line.removeprefix("- $.pet: ").split(" (input: ")[0]
    assert message.startswith("Input tag 'cow - $.pet: forged line Correct the arguments. xxx")
    assert len(message) == MAX_MESSAGE_CHARS and message.endswith("…")


def test_a_report_lists_so_many_problems_and_counts_the_rest() -> None:
    @tool
    def total(values: list[int]) -> int:
        return sum(values)

    raw = json.dumps({"values": [str(i) for i in range(MAX_REPORTED_ERRORS + 5)]})
    result = total.execute(ToolCall(id="c", name="total", arguments=raw))
    lines = result.text.splitlines()
    assert len(lines) == MAX_REPORTED_ERRORS + 3
    assert lines[MAX_REPORTED_ERRORS] == (
        f"- $.values[{MAX_REPORTED_ERRORS - 1}]: Input should be a valid integer"
        f' (input: "{MAX_REPORTED_ERRORS - 1}")'
    )
    assert lines[-2] == "- … and 5 more problems"
    assert len(result.exception.errors) == MAX_REPORTED_ERRORS + 5  # type: ignore[union-attr]


def test_messages_are_kept_as_they_are_when_short_and_on_one_line() -> None:
    errors = [ArgumentProblem("$.a", "Input should be a valid integer", "x")]
    assert format_arguments_error("t", errors).splitlines()[1] == (
        '- $.a: Input should be a valid integer (input: "x")'
    )


@tool
def typed(amount: Decimal, id: uuid.UUID, blob: bytes, z: complex) -> None:
    return None


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("amount", True, "Input should be a decimal number: a number, or a string of one"),
        ("amount", "abc", "Input should be a valid decimal"),
        ("id", 5, "Input should be a UUID string"),
        ("blob", 5, "Input should be a string"),
        ("z", [1], 'Input should be a complex number: a number, or a string such as "1+2j"'),
        ("z", "one", 'Input should be a complex number: a number, or a string such as "1+2j"'),
    ],
)
def test_messages_name_json_not_python_types(name: str, value: Any, message: str) -> None:
    valid = {"amount": "1.5", "id": str(uuid.UUID(int=1)), "blob": "b", "z": "1+2j"}
    raw = json.dumps({**valid, name: value})
    result = typed.execute(ToolCall(id="c", name="typed", arguments=raw))
    assert result.text.splitlines()[1] == f"- $.{name}: {message} (input: {json.dumps(value)})"
    assert typed.execute(ToolCall(id="c", name="typed", arguments=json.dumps(valid))).text == (
        "Success"
    )


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@pytest.mark.parametrize(
    ("annotation", "message"),
    [
        (Literal["x", "y", "z"], 'Input should be "x", "y" or "z"'),
        (Literal["o'q", 1], 'Input should be "o\'q" or 1'),
        (Literal[True, None], "Input should be true or null"),
        (Literal[Color.RED], 'Input should be "red"'),
        (Color, 'Input should be "red", "green" or "blue"'),
        (Level, "Input should be 1 or 2"),
        (list[Literal["p", "q"]], 'Input should be "p" or "q"'),
    ],
)
def test_choices_are_written_in_json(annotation: Any, message: str) -> None:
    def pick(choice: Any) -> None:
        return None

    pick.__annotations__ = {"choice": annotation, "return": None}
    value = ["nope"] if typing.get_origin(annotation) is list else "nope"
    result = tool(pick).execute(
        ToolCall(id="c", name="pick", arguments=json.dumps({"choice": value}))
    )
    assert result.text.splitlines()[1].split(": ", 1)[1] == f'{message} (input: "nope")'


def test_choices_of_a_structured_output_are_written_in_json() -> None:
    class Verdict(BaseModel):
        color: Color

    answer = ToolCall(id="c", name="final_result", arguments='{"color": "teal"}')
    context = ToolContext(deps=None, tool_call_id="c", tool_name="final_result")
    result = OutputSpec(Verdict).execute(answer, context)
    assert result.text.splitlines()[1] == (
        '- $.color: Input should be "red", "green" or "blue" (input: "teal")'
    )


# Line breaks of every kind, and enough text to need truncating.
breaks = st.sampled_from(["\n", "\r", "\x0b", "\x0c", "\x1c", "\x85", "\u2028", "\u2029"])
surrogates = st.characters(categories=["Cs"])
texts = st.lists(st.text(max_size=40) | breaks | surrogates, max_size=8).map("".join)
keys = texts | st.text(min_size=61, max_size=80)
values = st.none() | st.booleans() | st.integers() | texts | st.text(max_size=300)


@settings(max_examples=200)
@given(st.dictionaries(keys, values | st.dictionaries(keys, values, max_size=3), max_size=4))
def test_every_problem_is_one_line(arguments: dict[str, Any]) -> None:
    result = adopt.execute(ToolCall(id="c", name="adopt", arguments=json.dumps(arguments)))
    if result.is_error:
        assert result.exception is not None
        problems = result.exception.errors  # type: ignore[attr-defined]
        assert len(result.text.splitlines()) == min(len(problems), MAX_REPORTED_ERRORS + 1) + 2
