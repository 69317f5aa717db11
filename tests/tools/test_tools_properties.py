"""Property tests: arguments round-trip through JSON, and no input makes validation misbehave."""

from __future__ import annotations

import datetime as dt
import enum
import json
import uuid
from decimal import Decimal
from typing import Annotated, Any, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field, ValidationError

from agentforge_typed import Tool, ToolCall, tool


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class LineItem(BaseModel):
    sku: str
    quantity: Annotated[int, Field(ge=1, le=1000)]
    price: Decimal


class Order(BaseModel):
    items: list[LineItem]
    note: str | None = None


@tool
def everything(
    text: str,
    count: int,
    ratio: float,
    flag: bool,
    color: Color,
    mode: Literal["fast", "slow"],
    id: uuid.UUID,
    when: dt.datetime,
    day: dt.date,
    at: dt.time,
    amount: Decimal,
    tags: list[str],
    ids: set[int],
    pair: tuple[int, str],
    scores: dict[str, int],
    order: Order,
    maybe: int | None = None,
    json: str = "shadows a BaseModel method",
) -> str:
    return "ok"


finite_floats = st.floats(allow_nan=False, allow_infinity=False)
decimals = st.decimals(allow_nan=False, allow_infinity=False, places=4)
# ISO 8601 offsets are whole minutes.
offsets = st.integers(-23 * 60, 23 * 60).map(lambda m: dt.timezone(dt.timedelta(minutes=m)))
line_items = st.builds(LineItem, sku=st.text(), quantity=st.integers(1, 1000), price=decimals)

ARGUMENTS = st.fixed_dictionaries(
    {
        "text": st.text(),
        "count": st.integers(),
        "ratio": finite_floats,
        "flag": st.booleans(),
        "color": st.sampled_from(Color),
        "mode": st.sampled_from(["fast", "slow"]),
        "id": st.uuids(),
        "when": st.datetimes(timezones=st.none() | offsets),
        "day": st.dates(),
        "at": st.times(),
        "amount": decimals,
        "tags": st.lists(st.text()),
        "ids": st.sets(st.integers()),
        "pair": st.tuples(st.integers(), st.text()),
        "scores": st.dictionaries(st.text(), st.integers()),
        "order": st.builds(
            Order, items=st.lists(line_items, max_size=4), note=st.none() | st.text()
        ),
        "maybe": st.none() | st.integers(),
        "json": st.text(),
    }
)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(ARGUMENTS)
def test_any_arguments_instance_round_trips_through_json(values: dict[str, Any]) -> None:
    instance = everything.args_model.model_validate(values)
    raw = instance.model_dump_json(by_alias=True)
    assert everything.validate_arguments(raw) == instance
    result = everything.execute(ToolCall(id="c", name="everything", arguments=raw))
    assert (result.text, result.repairs) == ("ok", ())


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | finite_floats | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
json_objects = st.dictionaries(
    st.sampled_from(["text", "count", "order", "tags", "json", "maybe", "ctx", "x"]),
    json_values,
)


def assert_call_or_arguments_error(raw: str | bytes) -> None:
    if isinstance(raw, bytes):
        try:
            everything.validate_arguments(raw)
        except Exception as error:
            assert type(error).__name__ == "ToolArgumentsError"
            assert error.errors  # type: ignore[attr-defined]
        return
    result = everything.execute(ToolCall(id="c", name="everything", arguments=raw))
    assert result.error_kind in (None, "arguments"), result.text
    if result.is_error:
        assert result.text.startswith("Invalid arguments for tool `everything`:\n- $")
        assert result.text.endswith("Correct the arguments and call `everything` again.")
        assert "Traceback" not in result.text
    else:
        assert result.text == "ok"


@settings(max_examples=300)
@given(json_values | json_objects)
def test_any_json_is_a_call_or_an_arguments_error(value: Any) -> None:
    raw = json.dumps(value)
    assert_call_or_arguments_error(raw)
    assert_call_or_arguments_error(json.dumps(raw))  # double-encoded


@settings(max_examples=300)
@given(st.text())
def test_any_text_is_a_call_or_an_arguments_error(raw: str) -> None:
    assert_call_or_arguments_error(raw)


@settings(max_examples=300)
@given(st.binary())
def test_any_bytes_are_validated_or_refused(raw: bytes) -> None:
    assert_call_or_arguments_error(raw)


@settings(max_examples=100)
@given(ARGUMENTS, st.sampled_from(["order", "tags", "scores", "pair"]))
def test_string_encoded_containers_are_repaired(values: dict[str, Any], key: str) -> None:
    instance = everything.args_model.model_validate(values)
    data = json.loads(instance.model_dump_json(by_alias=True))
    data[key] = json.dumps(data[key])
    result = everything.execute(ToolCall(id="c", name="everything", arguments=json.dumps(data)))
    assert result.text == "ok"
    kind = "array" if isinstance(json.loads(data[key]), list) else "object"
    assert result.repairs == (f"$.{key}: JSON {kind} sent as a string: decoded",)


class Node(BaseModel):
    value: int
    children: list[Node] = []


@tool
def walk(root: Node, depth: int = 1) -> int:
    return depth


@settings(max_examples=300)
@given(
    st.sampled_from([everything, walk]),
    st.sampled_from([True, None]),
    json_values | json_objects | ARGUMENTS.map(lambda v: everything.args_model(**v)),
)
def test_the_signature_validates_exactly_as_the_args_model(
    dispatch: Tool[..., Any], strict: bool | None, value: Any
) -> None:
    # A tool validates with a core schema of its own (the model's fields keyed by parameter name,
    # no model around them), not with the lazily built model's: same rules, same errors.
    raw = value.model_dump_json() if isinstance(value, BaseModel) else json.dumps(value)
    signature = dispatch._signature
    try:
        expected = dispatch.args_model.__pydantic_validator__.validate_json(raw, strict=strict)
    except ValidationError as model_error:
        with pytest.raises(ValidationError) as error:
            signature.validator.validate_json(raw, strict=strict)
        assert error.value.errors() == model_error.errors()
    else:
        arguments, _, given = signature.validator.validate_json(raw, strict=strict)
        instance = signature.args_instance(arguments, given)
        assert instance.__dict__ == expected.__dict__
        assert instance.model_fields_set == expected.model_fields_set
