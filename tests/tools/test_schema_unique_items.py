"""`uniqueItems` in schema-declared tools: JSON Schema's equality, checked in linear time."""

from __future__ import annotations

import itertools
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from jsonschema._utils import equal

from agentforge_typed import SchemaTool, ToolCall, ToolContext, ToolSpecification
from agentforge_typed.tools._schema_arguments import ToolSchemaValidator, _all_unique

UNIQUE = ToolSchemaValidator({"uniqueItems": True})


def unique_by_jsonschema_equality(items: list[Any]) -> bool:
    """The specification's reading, pairwise with jsonschema's own `equal`."""
    return not any(equal(one, two) for one, two in itertools.combinations(items, 2))


# Few distinct leaves, so that equal items (and near misses: `1`, `1.0`, `true`) are common.
leaves = st.sampled_from([None, True, False, 0, 1, 0.0, -0.0, 1.0, 1.5, 2**53, 2.0**53, "", "1"])
json_values = st.recursive(
    leaves,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3)
    ),
    max_leaves=8,
)


def respelled(value: Any, data: st.DataObject) -> Any:
    """`value` written another way JSON Schema calls equal: integers as floats, keys reordered."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float):
        if float(value) == value and data.draw(st.booleans()):
            return float(value) if isinstance(value, int) else int(value)
        return value
    if isinstance(value, list):
        return [respelled(item, data) for item in value]
    keys = data.draw(st.permutations(list(value)))
    return {key: respelled(value[key], data) for key in keys}


@settings(max_examples=400, deadline=None)
@given(items=st.lists(json_values, max_size=6), data=st.data())
def test_unique_items_is_json_schema_equality(items: list[Any], data: st.DataObject) -> None:
    duplicate = data.draw(st.booleans())
    if items and duplicate:  # a duplicate, spelled differently
        twin = respelled(data.draw(st.sampled_from(items)), data)
        items.insert(data.draw(st.integers(0, len(items))), twin)
    assert UNIQUE.is_valid(items) == unique_by_jsonschema_equality(items)


@settings(max_examples=200, deadline=None)
@given(items=st.lists(st.dictionaries(st.sampled_from("ab"), leaves, max_size=2), max_size=5))
def test_unique_items_agrees_with_jsonschema_on_arrays_of_objects(items: list[Any]) -> None:
    # Objects are not sortable, so jsonschema compares them pairwise: its answer is the spec's.
    assert UNIQUE.is_valid(items) == Draft202012Validator({"uniqueItems": True}).is_valid(items)


@pytest.mark.parametrize(
    ("items", "unique"),
    [
        ([1, 1.0], False),
        ([True, 1], True),
        ([False, 0], True),
        ([0.0, -0.0], False),
        ([{"a": 1, "b": [2]}, {"b": [2.0], "a": 1.0}], False),
        ([[1, 2], [2, 1]], True),
        ([{"a": [True]}, {"a": [1]}], True),
        ([2**53, 2.0**53], False),
        ([2**53 + 1, 2.0**53], True),
        ([10**400, 10**400], False),  # beyond any float
        ([10**400, float("inf")], True),
        (["1", 1], True),
        ([float("nan"), float("nan")], True),  # never equal, as `NaN` is reported on its own
        ([math.nan, math.nan], False),  # one object, equal to itself for jsonschema too
        ([None, "n"], True),
        # jsonschema compares sortable items only with their neighbours once sorted, and says
        # this is unique.
        ([[1], [True], [1]], False),
    ],
)
def test_unique_items_cases(items: list[Any], unique: bool) -> None:
    assert UNIQUE.is_valid(items) is unique


def test_integers_longer_than_str_may_write() -> None:
    assert _all_unique([10**5000, 10**5000 + 1]) is True
    assert _all_unique([10**5000, 10**5000]) is False


def test_values_that_are_not_json_data_fall_back_to_jsonschema() -> None:
    with_tuples: Any = [(1,), (1,)]
    with_integer_keys: Any = [{1: "a"}, {2: "a"}]
    assert not UNIQUE.is_valid(with_tuples)
    assert UNIQUE.is_valid(with_integer_keys)


def test_a_duplicate_is_reported_as_before() -> None:
    spec = ToolSpecification(
        name="tag",
        parameters={
            "type": "object",
            "properties": {"tags": {"type": "array", "uniqueItems": True}},
        },
    )
    raw = '{"tags": [{"a": 1, "b": 2}, {"b": 2, "a": 1.0}]}'
    context = ToolContext(deps=None, tool_call_id="call_1", tool_name="tag")
    result = SchemaTool(spec, dict).execute(
        ToolCall(id="call_1", name="tag", arguments=raw), context
    )
    assert result.text.splitlines()[1] == (
        '- $.tags: Items should be unique (input: [{"a":1,"b":2},{"b":2,"a":1.0}])'
    )
