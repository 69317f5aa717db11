"""Argument validation: strict vs lax, error paths and text, unknown arguments, envelope repairs."""

from __future__ import annotations

import datetime as dt
import enum
import uuid
from decimal import Decimal
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

from agentforge_typed import ArgumentProblem, Tool, ToolArgumentsError, ToolCall, tool


class Color(enum.Enum):
    RED = "red"


class Priority(enum.IntEnum):
    LOW = 1


def one_parameter_tool(annotation: Any, *, strict: bool) -> Tool[..., Any]:
    def check(v: Any) -> None:
        return None

    check.__annotations__ = {"v": annotation, "return": None}
    return tool(strict=strict)(check)


Bounded = Annotated[int, Field(ge=1, le=10)]

# (annotation, JSON value of `v`, accepted in strict mode, accepted in lax mode)
STRICT_VS_LAX: list[tuple[Any, str, bool, bool]] = [
    (int, "5", True, True),
    (int, '"5"', False, True),
    (int, "5.0", False, True),
    (int, "5.5", False, False),
    (int, "true", False, True),
    (int, str(2**70), True, True),
    (bool, "true", True, True),
    (bool, '"true"', False, True),
    (bool, "1", False, True),
    (bool, '"yes"', False, True),
    (float, "1", True, True),
    (float, '"1.5"', False, True),
    # JSON has no NaN or Infinity, and 1e400 overflows to infinity: a float must be finite.
    (float, "NaN", False, False),
    (float, "Infinity", False, False),
    (float, "-Infinity", False, False),
    (float, "1e400", False, False),
    (float, '"NaN"', False, False),
    (str, "5", False, False),
    (str, "null", False, False),
    (Bounded, "11", False, False),
    (Bounded, "0", False, False),
    (Bounded, "10", True, True),
    (Annotated[str, Field(max_length=3)], '"abcd"', False, False),
    (Color, '"red"', True, True),
    (Color, '"RED"', False, False),
    (Priority, "1", True, True),
    (Priority, '"1"', False, True),
    (dt.datetime, '"2024-05-01T12:00:00Z"', True, True),
    (dt.datetime, "1714564800", False, True),
    (dt.date, '"2024-05-01"', True, True),
    (dt.date, '"2024-05-01T00:00:00"', False, True),
    (dt.time, '"10:30:00"', True, True),
    (uuid.UUID, '"12345678-1234-5678-1234-567812345678"', True, True),
    (uuid.UUID, '"not-a-uuid"', False, False),
    (Decimal, '"12.50"', True, True),
    (Decimal, "12.5", True, True),
    (list[int], "[1, 2]", True, True),
    (list[int], '["1"]', False, True),
    (tuple[int, str], '[1, "a"]', True, True),
    (set[int], "[1, 1]", True, True),
    (Literal["a", "b"], '"c"', False, False),
    (int | None, "null", True, True),
    (dict[str, int], '{"a": "1"}', False, True),
]


@pytest.mark.parametrize(("annotation", "value", "strict_ok", "lax_ok"), STRICT_VS_LAX)
def test_strict_vs_lax(annotation: Any, value: str, strict_ok: bool, lax_ok: bool) -> None:
    raw = f'{{"v": {value}}}'
    for strict, expected in ((True, strict_ok), (False, lax_ok)):
        made = one_parameter_tool(annotation, strict=strict)
        result = made.execute(ToolCall(id="c", name="check", arguments=raw))
        assert result.is_error is (not expected), (strict, result.text)
        if not expected:
            assert result.error_kind == "arguments"
            assert result.text.startswith("Invalid arguments for tool `check`:\n- $.v")


def test_strict_table_is_large_enough() -> None:
    assert len(STRICT_VS_LAX) >= 25


@pytest.mark.parametrize(
    ("raw", "shown"), [("NaN", "NaN"), ("-Infinity", "-Infinity"), ("1e400", "Infinity")]
)
@pytest.mark.parametrize("strict", [True, False])
def test_non_finite_numbers_are_refused_with_a_clear_text(
    raw: str, shown: str, strict: bool
) -> None:
    made = one_parameter_tool(float, strict=strict)
    result = made.execute(ToolCall(id="c", name="check", arguments=f'{{"v": {raw}}}'))
    assert result.text == (
        "Invalid arguments for tool `check`:\n"
        f"- $.v: Input should be a finite number (input: {shown})\n"
        "Correct the arguments and call `check` again."
    )


def test_iso_strings_become_python_values() -> None:
    def when(at: dt.datetime, day: dt.date, id: uuid.UUID, amount: Decimal) -> None: ...

    arguments = tool(when).validate_arguments(
        '{"at": "2024-05-01T12:00:00+02:00", "day": "2024-05-01",'
        ' "id": "12345678-1234-5678-1234-567812345678", "amount": "0.10"}'
    )
    assert arguments.model_dump() == {
        "at": dt.datetime(2024, 5, 1, 12, tzinfo=dt.timezone(dt.timedelta(hours=2))),
        "day": dt.date(2024, 5, 1),
        "id": uuid.UUID("12345678-1234-5678-1234-567812345678"),
        "amount": Decimal("0.10"),
    }


# --- nested DTO errors ------------------------------------------------------------------------------


class LineItem(BaseModel):
    sku: str
    quantity: Annotated[int, Field(ge=1)]


class Order(BaseModel):
    customer: str
    items: list[LineItem]


class Circle(BaseModel):
    radius: float


class Square(BaseModel):
    side: float


@tool
def place_order(order: Order, express: bool = False) -> str:
    """Place an order."""
    return f"{len(order.items)} lines"


@tool
def draw(shape: Circle | Square) -> None:
    """Draw a shape."""


def test_nested_errors_have_json_paths() -> None:
    with pytest.raises(ToolArgumentsError) as caught:
        place_order.validate_arguments(
            '{"order": {"items": [{"sku": "a", "quantity": 1}, {"sku": 7, "quantity": 0}]},'
            ' "express": "yes"}'
        )
    assert caught.value.tool_name == "place_order"
    assert caught.value.errors == (
        ArgumentProblem(
            "$.order.customer",
            "Field required",
            {"items": [{"sku": "a", "quantity": 1}, {"sku": 7, "quantity": 0}]},
        ),
        ArgumentProblem("$.order.items[1].sku", "Input should be a valid string", 7),
        ArgumentProblem(
            "$.order.items[1].quantity", "Input should be greater than or equal to 1", 0
        ),
        ArgumentProblem("$.express", "Input should be a valid boolean", "yes"),
    )


def test_union_errors_name_the_alternative() -> None:
    with pytest.raises(ToolArgumentsError) as caught:
        draw.validate_arguments('{"shape": {"radius": "big"}}')
    assert [(e.path, e.message) for e in caught.value.errors] == [
        ("$.shape.Circle.radius", "Input should be a valid number"),
        ("$.shape.Square.side", "Field required"),
        # Unknown keys are rejected at every depth: `radius` is not a `Square` property.
        ("$.shape.Square.radius", "Extra inputs are not permitted"),
    ]


def test_arguments_error_text_is_exact() -> None:
    result = place_order.execute(
        ToolCall(
            id="c1",
            name="place_order",
            arguments='{"order": {"customer": "c", "items": [{"sku": "a", "quantity": 0}]},'
            ' "expres": true}',
        )
    )
    assert result.is_error and result.error_kind == "arguments" and result.value is None
    assert result.text == (
        "Invalid arguments for tool `place_order`:\n"
        "- $.order.items[0].quantity: Input should be greater than or equal to 1 (input: 0)\n"
        "- $.expres: Unexpected argument; this tool takes: order, express (input: true)\n"
        "Correct the arguments and call `place_order` again."
    )
    assert isinstance(result.exception, ToolArgumentsError)
    assert [e.path for e in result.exception.errors] == ["$.order.items[0].quantity", "$.expres"]


def test_long_inputs_are_truncated_in_the_text() -> None:
    result = place_order.execute(
        ToolCall(id="c", name="place_order", arguments='{"order": "' + "x" * 500 + '"}')
    )
    line = result.text.splitlines()[1]
    assert line.startswith('- $.order: Input should be an object (input: "xxx')
    assert line.endswith("…)") and len(line) < 200


def test_invalid_json_is_an_arguments_error() -> None:
    result = place_order.execute(ToolCall(id="c", name="place_order", arguments='{"order": '))
    assert result.error_kind == "arguments"
    assert result.text.splitlines()[1].startswith("- $: Invalid JSON: EOF while parsing")


def test_validate_arguments_returns_the_args_model() -> None:
    arguments = place_order.validate_arguments(
        b'{"order": {"customer": "c", "items": [{"sku": "a", "quantity": 2}]}}'
    )
    assert isinstance(arguments, place_order.args_model)
    assert arguments.model_dump() == {
        "order": {"customer": "c", "items": [{"sku": "a", "quantity": 2}]},
        "express": False,
    }


def test_non_utf8_bytes_are_an_arguments_error() -> None:
    with pytest.raises(ToolArgumentsError) as caught:
        place_order.validate_arguments(b'{"order": "\xff"}')
    assert caught.value.errors[0].path == "$"
    result = place_order.execute(ToolCall(id="c", name="place_order", arguments='{"x": 1}'))
    assert result.is_error


# --- unknown arguments ------------------------------------------------------------------------------


def test_unknown_arguments_are_rejected_by_default() -> None:
    with pytest.raises(ToolArgumentsError) as caught:
        place_order.validate_arguments('{"order": {"customer": "c", "items": []}, "urgent": 1}')
    assert caught.value.errors == (
        ArgumentProblem("$.urgent", "Unexpected argument; this tool takes: order, express", 1),
    )


def test_unknown_arguments_are_told_the_names_the_schema_offers() -> None:
    # A validation alias, not the parameter's name, is what the validator takes: the message
    # must not offer the name it has just refused (`_k` is stored under another field name).
    @tool
    def count(
        n: Annotated[int, Field(validation_alias="N")] = 0,
        _k: Annotated[int, Field(validation_alias="K")] = 0,
    ) -> str:
        return f"{n} {_k}"

    assert list(count.specification.parameters["properties"]) == ["N", "K"]
    with pytest.raises(ToolArgumentsError) as caught:
        count.validate_arguments('{"n": 1, "_k": 2}')
    assert [e.message for e in caught.value.errors] == [
        "Unexpected argument; this tool takes: N, K"
    ] * 2
    assert count.execute(ToolCall(id="c", name="count", arguments='{"N": 1, "K": 2}')).text == "1 2"


def test_unknown_arguments_can_be_ignored_and_the_drop_is_recorded() -> None:
    @tool(extra_arguments="ignore")
    def greet(name: str) -> str:
        return f"hi {name}"

    result = greet.execute(ToolCall(id="c", name="greet", arguments='{"name": "Ada", "mood": 1}'))
    assert (result.text, result.is_error) == ("hi Ada", False)
    assert result.repairs == ("dropped unknown argument `mood`",)
    # Still forbidden in the schema: the model is told not to invent arguments.
    assert greet.specification.parameters["additionalProperties"] is False
    # The other errors are still reported, with the drop recorded.
    bad = greet.execute(ToolCall(id="c", name="greet", arguments='{"name": 5, "mood": 1}'))
    assert bad.error_kind == "arguments" and "$.name" in bad.text and "mood" not in bad.text


def test_invalid_extra_arguments_option() -> None:
    with pytest.raises(ValueError, match="extra_arguments"):
        tool(extra_arguments="allow")(place_order.__wrapped__)  # type: ignore[call-overload]


# --- envelope repairs -------------------------------------------------------------------------------


@tool
def tag(labels: list[str], note: str = "") -> str:
    return ",".join(labels) + note


@tool
def ping() -> str:
    return "pong"


@pytest.mark.parametrize("raw", ["", "   ", "\n"])
def test_empty_arguments_mean_no_arguments(raw: str) -> None:
    result = ping.execute(ToolCall(id="c", name="ping", arguments=raw))
    assert (result.text, result.repairs) == ("pong", ("empty arguments read as {}",))


def test_empty_arguments_still_need_required_ones() -> None:
    result = tag.execute(ToolCall(id="c", name="tag", arguments=""))
    assert result.error_kind == "arguments"
    assert result.repairs == ("empty arguments read as {}",)
    assert "- $.labels: Field required (input: {})" in result.text


def test_double_encoded_arguments_are_decoded() -> None:
    result = tag.execute(ToolCall(id="c", name="tag", arguments='"{\\"labels\\": [\\"a\\"]}"'))
    assert result.text == "a"
    assert result.repairs == ("arguments were double-encoded as a JSON string: decoded",)


def test_string_encoded_array_is_decoded() -> None:
    result = tag.execute(ToolCall(id="c", name="tag", arguments='{"labels": "[\\"a\\", \\"b\\"]"}'))
    assert result.text == "a,b"
    assert result.repairs == ("$.labels: JSON array sent as a string: decoded",)


def test_string_encoded_nested_object_is_decoded() -> None:
    raw = '{"order": {"customer": "c", "items": ["{\\"sku\\": \\"a\\", \\"quantity\\": 2}"]}}'
    result = place_order.execute(ToolCall(id="c", name="place_order", arguments=raw))
    assert result.text == "1 lines"
    assert result.repairs == ("$.order.items[0]: JSON object sent as a string: decoded",)


def test_double_encoding_inside_double_encoding() -> None:
    inner = '{"customer": "c", "items": []}'
    outer = pydantic_json({"order": inner})
    result = place_order.execute(
        ToolCall(id="c", name="place_order", arguments=pydantic_json(outer))
    )
    assert result.text == "0 lines"
    assert result.repairs == (
        "arguments were double-encoded as a JSON string: decoded",
        "$.order: JSON object sent as a string: decoded",
    )


def test_repairs_stop_at_the_wrong_container() -> None:
    # A string holding an array where an object is wanted is not "repaired" into a type error.
    result = place_order.execute(ToolCall(id="c", name="place_order", arguments='{"order": "[1]"}'))
    assert result.error_kind == "arguments" and result.repairs == ()
    assert '- $.order: Input should be an object (input: "[1]")' in result.text


def test_repairs_are_recorded_on_a_result_that_still_fails() -> None:
    result = tag.execute(ToolCall(id="c", name="tag", arguments='"{\\"labels\\": [1]}"'))
    assert result.error_kind == "arguments"
    assert result.repairs == ("arguments were double-encoded as a JSON string: decoded",)
    assert "- $.labels[0]: Input should be a valid string (input: 1)" in result.text


@pytest.mark.parametrize(
    "raw",
    [
        "null",
        "[]",
        '{"labels": "a,b"}',  # a string that is not JSON
        "{'labels': ['a']}",  # Python, not JSON
    ],
)
def test_nothing_else_is_guessed(raw: str) -> None:
    result = tag.execute(ToolCall(id="c", name="tag", arguments=raw))
    assert result.error_kind == "arguments" and result.repairs == ()


def test_valid_arguments_have_no_repairs() -> None:
    result = tag.execute(ToolCall(id="c", name="tag", arguments='{"labels": ["x"]}'))
    assert (result.text, result.repairs, result.is_error) == ("x", (), False)


def pydantic_json(value: object) -> str:
    import pydantic_core

    return pydantic_core.to_json(value).decode()


class _Options(BaseModel):
    tags: list[str] = []
    level: int = 1
    label: str


@tool(strict_schema=True)
def _strict_search(query: str, limit: int = 10, options: _Options | None = None) -> str:
    """Search."""
    return f"{query} {limit} {options}"


def test_strict_schema_null_means_default_at_every_depth() -> None:
    raw = '{"query": "q", "limit": null, "options": {"tags": null, "level": null, "label": "x"}}'
    result = _strict_search.execute(ToolCall(id="1", name="_strict_search", arguments=raw))
    assert not result.is_error
    assert result.value == "q 10 tags=[] level=1 label='x'"
    assert result.repairs == (
        "$.limit: null read as not given (the default applies)",
        "$.options.tags: null read as not given (the default applies)",
        "$.options.level: null read as not given (the default applies)",
    )


def test_strict_schema_null_for_a_required_value_is_still_an_error() -> None:
    raw = '{"query": null, "limit": null, "options": {"label": null}}'
    with pytest.raises(ToolArgumentsError) as info:
        _strict_search.validate_arguments(raw)
    assert [(e.path, e.input) for e in info.value.errors] == [
        ("$.query", None),
        ("$.options.label", None),
    ]


def test_null_for_a_default_is_an_error_without_strict_schema() -> None:
    @tool
    def search(query: str, limit: int = 10) -> str:
        """Search."""
        return query

    with pytest.raises(ToolArgumentsError, match="limit"):
        search.validate_arguments('{"query": "q", "limit": null}')
