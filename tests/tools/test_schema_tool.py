"""`SchemaTool`: JSON-schema validation, handler kinds, result conversion, repairs, error kinds."""

from __future__ import annotations

import asyncio
import functools
import json
import time
from typing import Any

import pydantic_core
import pytest
from pydantic import BaseModel

from agentforge_typed import (
    ArgumentProblem,
    ModelRetry,
    ReturnBehavior,
    SchemaTool,
    ToolArgumentsError,
    ToolCall,
    ToolContext,
    ToolExecutionResult,
    ToolSpecification,
    tool,
)
from agentforge_typed.providers import Dialect, render_schema
from agentforge_typed.tools import _schema_arguments
from agentforge_typed.tools._base import ToolLike
from agentforge_typed.tools._schema_arguments import DecodedArguments, SchemaArguments

SPEC = ToolSpecification(
    name="book",
    description="Book a room.",
    parameters={
        "type": "object",
        "properties": {
            "room": {"type": "string", "enum": ["red", "blue"]},
            "nights": {"type": "integer", "minimum": 1},
            "day": {"type": "string", "format": "date"},
        },
        "required": ["room", "nights"],
        "additionalProperties": False,
    },
)


def call(arguments: str) -> ToolCall:
    return ToolCall(id="call_1", name="book", arguments=arguments)


def context() -> ToolContext[Any]:
    return ToolContext(deps=None, tool_call_id="call_1", tool_name="book")


def test_satisfies_tool_like() -> None:
    tool: ToolLike = SchemaTool(SPEC, dict, sequential=True, max_retries=5)
    assert tool.name == "book"
    assert tool.specification is SPEC
    assert tool.return_behavior is ReturnBehavior.TO_LLM
    assert (tool.max_retries, tool.sequential) == (5, True)


def test_valid_call_passes_the_arguments_dict_and_converts_the_result() -> None:
    seen: list[dict[str, Any]] = []

    def handler(arguments: dict[str, Any]) -> dict[str, Any]:
        seen.append(arguments)
        return {"booked": arguments["room"], "nights": arguments["nights"]}

    result = SchemaTool(SPEC, handler).execute(call('{"room": "red", "nights": 2}'), context())
    assert seen == [{"room": "red", "nights": 2}]
    assert result == ToolExecutionResult(
        text='{"booked":"red","nights":2}', value={"booked": "red", "nights": 2}
    )


@pytest.mark.parametrize(
    ("returned", "text"),
    [
        ("as is", "as is"),
        (None, "Success"),
        ([1, 2], "[1,2]"),
    ],
)
def test_result_text(returned: Any, text: str) -> None:
    result = SchemaTool(SPEC, lambda _: returned).execute(
        call('{"room": "red", "nights": 1}'), context()
    )
    assert (result.text, result.value, result.is_error) == (text, returned, False)


def test_pydantic_model_result_is_json() -> None:
    class Booking(BaseModel):
        room: str

    result = SchemaTool(SPEC, lambda args: Booking(room=args["room"])).execute(
        call('{"room": "blue", "nights": 1}'), context()
    )
    assert result.text == '{"room":"blue"}'
    assert isinstance(result.value, Booking)


def test_validation_errors_use_the_shared_format() -> None:
    tool = SchemaTool(SPEC, dict)
    result = tool.execute(call('{"room": "green", "nights": "2", "cty": "Paris"}'), context())
    assert result.is_error and result.error_kind == "arguments"
    assert result.text == (
        "Invalid arguments for tool `book`:\n"
        '- $.room: Input should be one of "red", "blue" (input: "green")\n'
        '- $.nights: Input should be of type integer (input: "2")\n'
        '- $.cty: Unexpected argument (input: "Paris")\n'
        "Correct the arguments and call `book` again."
    )
    assert isinstance(result.exception, ToolArgumentsError)
    assert [e.path for e in result.exception.errors] == ["$.room", "$.nights", "$.cty"]


def test_missing_field_and_other_keywords() -> None:
    result = SchemaTool(SPEC, dict).execute(call('{"nights": 0}'), context())
    assert result.text == (
        "Invalid arguments for tool `book`:\n"
        "- $.nights: Input should be greater than or equal to 1 (input: 0)\n"
        '- $.room: Field required (input: {"nights":0})\n'
        "Correct the arguments and call `book` again."
    )


def test_format_is_checked() -> None:
    result = SchemaTool(SPEC, dict).execute(
        call('{"room": "red", "nights": 1, "day": "2024-13-45"}'), context()
    )
    assert result.error_kind == "arguments"
    assert '- $.day: Input should match the format "date" (input: "2024-13-45")' in result.text


def test_invalid_json_and_non_object() -> None:
    tool = SchemaTool(SPEC, dict)
    broken = tool.execute(call('{"room": '), context())
    assert broken.error_kind == "arguments"
    assert "- $: Invalid JSON: EOF while parsing a value" in broken.text
    listed = tool.execute(call("[1, 2]"), context())
    assert "- $: Input should be a JSON object (input: [1,2])" in listed.text


def test_non_utf8_bytes_are_an_arguments_error_as_for_typed_tools() -> None:
    @tool
    def book(room: str, nights: int) -> None: ...

    raw = b'{"room": \xff}'
    with pytest.raises(ToolArgumentsError) as raised:
        SchemaTool(SPEC, dict).validate_arguments(raw)
    assert raised.value.errors == (
        ArgumentProblem(
            "$", "Invalid JSON: expected value at line 1 column 10", '{"room": \ufffd}'
        ),
    )
    with pytest.raises(ToolArgumentsError) as typed:
        book.validate_arguments(raw)
    assert typed.value.errors == raised.value.errors
    # `ToolCall` only holds `str`; bytes reach `execute` from a call built without validation.
    result = SchemaTool(SPEC, dict).execute(
        ToolCall.model_construct(id="call_1", name="book", arguments=raw), context()
    )
    assert (result.error_kind, result.text.splitlines()[1]) == (
        "arguments",
        '- $: Invalid JSON: expected value at line 1 column 10 (input: "{\\"room\\": \ufffd}")',
    )


def test_a_lone_surrogate_is_invalid_json() -> None:
    # A provider's JSON decoder turns an escaped lone surrogate into one: UTF-8 cannot carry it.
    raw = '{"room": "\ud83d", "nights": 1}'
    with pytest.raises(ToolArgumentsError) as raised:
        SchemaTool(SPEC, dict).validate_arguments(raw)
    assert raised.value.errors == (
        ArgumentProblem("$", "Invalid JSON: invalid unicode code point at line 1 column 11", raw),
    )
    # In a string the schema wants as an object, it is no JSON either: left as the string.
    decoded = SchemaArguments(NESTED.parameters, tool_name="nest").validate_object(
        {"o": '{"k": "\ud83d"}'}
    )
    assert decoded.errors == (
        ArgumentProblem("$.o", "Input should be of type object", '{"k": "\ud83d"}'),
    )


FINITE = "Input should be a finite number"


@pytest.mark.parametrize(
    ("raw", "errors"),
    [
        ('{"x": NaN}', [f"- $.x: {FINITE} (input: NaN)"]),
        (
            '{"x": -Infinity, "y": [1, Infinity]}',
            [f"- $.x: {FINITE} (input: -Infinity)", f"- $.y[1]: {FINITE} (input: Infinity)"],
        ),
        ('{"x": 1e400}', [f"- $.x: {FINITE} (input: Infinity)"]),
        # The number is the problem, whatever else the schema says of it (`minimum`).
        (
            '{"x": -1e400, "n": -1}',
            [
                f"- $.x: {FINITE} (input: -Infinity)",
                "- $.n: Input should be greater than or equal to 0 (input: -1)",
            ],
        ),
        # Inside containers sent as strings, and decoded.
        (
            '{"y": "[NaN, 2]", "z": "{\\"k\\": 1e999}"}',
            [f"- $.y[0]: {FINITE} (input: NaN)", f"- $.z.k: {FINITE} (input: Infinity)"],
        ),
    ],
)
def test_numbers_must_be_finite(raw: str, errors: list[str]) -> None:
    spec = ToolSpecification(
        name="measure",
        parameters={
            "type": "object",
            "properties": {
                "x": {"type": "number", "minimum": 0},
                "y": {"type": "array"},
                "z": {"type": "object"},
                "n": {"minimum": 0},
            },
        },
    )
    result = SchemaTool(spec, dict).execute(
        ToolCall(id="1", name="measure", arguments=raw), context()
    )
    assert (result.error_kind, result.text.splitlines()[1:-1]) == ("arguments", errors)


def errors_for(schema: dict[str, Any] | bool, value: str) -> list[tuple[str, str]]:
    """`(path, message)` of each error for `{"x": value}` where `x` has `schema`."""
    spec = ToolSpecification(
        name="check", parameters={"type": "object", "properties": {"x": schema}}
    )
    with pytest.raises(ToolArgumentsError) as raised:
        SchemaTool(spec, dict).validate_arguments(f'{{"x": {value}}}')
    return [(error.path, error.message) for error in raised.value.errors]


@pytest.mark.parametrize(
    ("schema", "value", "message"),
    [
        ({"const": True}, "false", "Input should be true"),
        ({"const": None}, "1", "Input should be null"),
        ({"const": {"a": [1]}}, "{}", 'Input should be {"a":[1]}'),
        ({"enum": ["a", None]}, '"b"', 'Input should be one of "a", null'),
        ({"type": ["integer", "null"]}, '"1"', "Input should be of type integer or null"),
        ({"minimum": 1}, "0", "Input should be greater than or equal to 1"),
        ({"maximum": 1.5}, "2", "Input should be less than or equal to 1.5"),
        ({"exclusiveMinimum": 0}, "0", "Input should be greater than 0"),
        ({"exclusiveMaximum": 10}, "10", "Input should be less than 10"),
        ({"multipleOf": 0.5}, "0.7", "Input should be a multiple of 0.5"),
        ({"minLength": 1}, '""', "Input should have at least 1 character"),
        ({"maxLength": 2}, '"abc"', "Input should have at most 2 characters"),
        ({"pattern": "^\\d+$"}, '"a"', 'Input should match the pattern "^\\\\d+$"'),
        ({"format": "email"}, '"nope"', 'Input should match the format "email"'),
        ({"minItems": 2}, "[1]", "Input should have at least 2 items"),
        ({"maxItems": 1}, "[true, null]", "Input should have at most 1 item"),
        ({"prefixItems": [{}], "items": False}, "[1, 2]", "Input should have at most 1 item"),
        ({"uniqueItems": True}, '[{"a": null}, {"a": null}]', "Items should be unique"),
        (
            {"contains": {"type": "integer"}},
            '["a"]',
            'Input should contain at least 1 item matching {"type":"integer"}',
        ),
        (
            {"contains": {"type": "integer"}, "minContains": 2},
            '[1, "a"]',
            'Input should contain at least 2 items matching {"type":"integer"}',
        ),
        (
            {"contains": {"type": "integer"}, "maxContains": 1},
            "[1, 2]",
            'Input should contain at most 1 item matching {"type":"integer"}',
        ),
        ({"minProperties": 1}, "{}", "Input should have at least 1 property"),
        ({"maxProperties": 0}, '{"k": false}', "Input should have at most 0 properties"),
        ({"not": {"type": "null"}}, "null", 'Input should not match {"type":"null"}'),
        (
            {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            '"a"',
            'Input should match at least one of [{"type":"integer"},{"type":"null"}]',
        ),
        (
            {"oneOf": [{"type": "integer"}, {"type": "string"}]},
            "1.5",
            'Input should match exactly one of [{"type":"integer"},{"type":"string"}]',
        ),
        (
            {"oneOf": [{"type": "integer"}, {"type": "number"}]},
            "1",
            'Input should match exactly one of [{"type":"integer"},{"type":"number"}],'
            " but matches several",
        ),
        (
            {"prefixItems": [{}], "unevaluatedItems": False},
            "[1, 2]",
            "Input should have no items other than those the schema declares",
        ),
        (
            {"unevaluatedProperties": {"type": "integer"}},
            '{"b": "2"}',
            "Input does not match the schema's `unevaluatedProperties`",
        ),
        (False, "1", "Input is not allowed here"),
        ({"not": {}}, "1", "Input should not match {}"),
    ],
)
def test_keyword_messages_are_json_worded(
    schema: dict[str, Any] | bool, value: str, message: str
) -> None:
    assert errors_for(schema, value) == [("$.x", message)]


def test_a_false_subschema_is_reported_at_the_value_it_forbids() -> None:
    schema = {
        "type": "object",
        "properties": {"legacy_id": False, "name": {"type": "string"}},
        "patternProperties": {"^x-": False},
        "additionalProperties": {
            "type": "array",
            "prefixItems": [{"type": "string"}, False, {}, False],
        },
    }
    spec = ToolSpecification(name="check", parameters=schema)
    with pytest.raises(ToolArgumentsError) as raised:
        SchemaTool(spec, dict).validate_arguments(
            '{"name": 1, "legacy_id": 7, "x-a": null, "tags": ["a", 9, 8]}'
        )
    assert [(e.path, e.message, e.input) for e in raised.value.errors] == [
        ("$.name", "Input should be of type string", 1),
        ("$.legacy_id", "Input is not allowed here", 7),
        ('$["x-a"]', "Input is not allowed here", None),
        ("$.tags[1]", "Input is not allowed here", 9),
    ]


def test_unevaluated_properties_false_is_reported_at_the_object() -> None:
    # Which properties count as evaluated (through `allOf`, `$ref`, ...) only jsonschema's private
    # helpers know: the object is named, its keys are in the input shown.
    schema = {
        "allOf": [{"properties": {"a": {}}}],
        "properties": {"b": {}},
        "unevaluatedProperties": False,
    }
    assert errors_for(schema, '{"a": 1, "b": 2, "c": 3, "d": [4]}') == [
        ("$.x", "Input should have no properties other than those the schema declares"),
    ]


def test_dependent_required_names_each_missing_property() -> None:
    schema = {"dependentRequired": {"start": ["end", "zone"], "day": ["end"]}}
    assert errors_for(schema, '{"start": 1, "day": 2}') == [
        ("$.x.end", 'Field required when "start" is given'),
        ("$.x.zone", 'Field required when "start" is given'),
    ]


def test_property_name_errors_say_so_and_show_the_name() -> None:
    spec = ToolSpecification(
        name="check",
        parameters={"type": "object", "additionalProperties": {"propertyNames": {"maxLength": 2}}},
    )
    with pytest.raises(ToolArgumentsError) as raised:
        SchemaTool(spec, dict).validate_arguments('{"x": {"ok": 1, "long": 2}}')
    assert raised.value.errors == (
        ArgumentProblem(
            "$.x", "Invalid property name: Input should have at most 2 characters", "long"
        ),
    )


NESTED = ToolSpecification(
    name="nest",
    parameters={
        "type": "object",
        "properties": {
            "o": {"type": "object", "properties": {"k": {"type": "boolean"}}, "required": ["k"]},
            "tags": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]},
        },
    },
)


def test_object_and_array_sent_as_strings_are_decoded_and_recorded() -> None:
    seen: list[dict[str, Any]] = []
    result = SchemaTool(NESTED, seen.append).execute(
        ToolCall(id="1", name="nest", arguments='{"o": "{\\"k\\": true}", "tags": "[\\"a\\"]"}'),
        context(),
    )
    assert (result.is_error, seen) == (False, [{"o": {"k": True}, "tags": ["a"]}])
    assert result.repairs == (
        "$.o: JSON object sent as a string: decoded",
        "$.tags: JSON array sent as a string: decoded",
    )


def test_string_encoded_repair_reads_as_for_typed_tools() -> None:
    class Inner(BaseModel):
        k: bool

    @tool
    def nest(o: Inner) -> None: ...

    raw = '{"o": "{\\"k\\": true}"}'
    typed = nest.execute(ToolCall(id="1", name="nest", arguments=raw))
    schema = SchemaTool(NESTED, dict).execute(
        ToolCall(id="1", name="nest", arguments=raw), context()
    )
    assert schema.repairs == typed.repairs == ("$.o: JSON object sent as a string: decoded",)


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ('{"o": "k=true"}', '- $.o: Input should be of type object (input: "k=true")'),
        ('{"o": "[true]"}', '- $.o: Input should be of type object (input: "[true]")'),
        ('{"o": "{\\"k\\": 1}"}', "- $.o.k: Input should be of type boolean (input: 1)"),
    ],
)
def test_only_strings_that_decode_to_the_wanted_kind_are_repaired(
    arguments: str, error: str
) -> None:
    result = SchemaTool(NESTED, dict).execute(
        ToolCall(id="1", name="nest", arguments=arguments), context()
    )
    assert (result.error_kind, result.text.splitlines()[1]) == ("arguments", error)
    decoded = ("$.o: JSON object sent as a string: decoded",)
    assert result.repairs == (decoded if arguments.startswith('{"o": "{') else ())


def test_a_string_several_alternatives_want_decoded_is_decoded_once() -> None:
    spec = ToolSpecification(
        name="pick",
        parameters={
            "type": "object",
            "properties": {"x": {"anyOf": [{"type": "array", "minItems": 3}, {"type": "array"}]}},
        },
    )
    result = SchemaTool(spec, dict).execute(
        ToolCall(id="1", name="pick", arguments='{"x": "[1]"}'), context()
    )
    assert (result.value, result.repairs) == (
        {"x": [1]},
        ("$.x: JSON array sent as a string: decoded",),
    )


def test_string_encoding_is_decoded_a_bounded_number_of_times() -> None:
    spec = ToolSpecification(
        name="deep",
        parameters={
            "type": "object",
            "properties": {"x": {"$ref": "#/$defs/list"}},
            "$defs": {"list": {"type": "array", "items": {"$ref": "#/$defs/list"}}},
        },
    )
    value: Any = []
    for _ in range(9):
        value = [pydantic_core.to_json(value).decode()]
    raw = pydantic_core.to_json({"x": value[0]}).decode()
    result = SchemaTool(spec, dict).execute(ToolCall(id="1", name="deep", arguments=raw), context())
    assert result.error_kind == "arguments"
    assert len(result.repairs) == 8
    assert "Input should be of type array" in result.text


def test_repairs_leave_the_given_object_unchanged() -> None:
    arguments = {"o": '{"k": true}'}
    decoded = SchemaArguments(NESTED.parameters, tool_name="nest").validate_object(arguments)
    assert decoded.arguments == {"o": {"k": True}}
    assert arguments == {"o": '{"k": true}'}


@pytest.mark.parametrize("count", [2, 200])
def test_repairs_copy_each_container_once(monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    # Copying the path per repaired string made `count` strings in one list cost count² steps.
    copied: list[Any] = []
    copy = _schema_arguments._shallow_copy

    def counted(container: Any) -> Any:
        copied.append(container)
        return copy(container)

    monkeypatch.setattr(_schema_arguments, "_shallow_copy", counted)
    schema = {
        "type": "object",
        "properties": {
            "m": {"properties": {"xs": {"items": {"type": "array"}}}, "additionalProperties": True}
        },
    }
    arguments = {"m": {"xs": ["[1]"] * count, "other": 1}}
    decoded = SchemaArguments(schema, tool_name="t").validate_object(arguments)
    assert decoded.arguments == {"m": {"xs": [[1]] * count, "other": 1}}
    assert len(decoded.repairs) == count
    assert list(map(id, copied)) == [id(arguments), id(arguments["m"]), id(arguments["m"]["xs"])]
    assert arguments == {"m": {"xs": ["[1]"] * count, "other": 1}}


def test_additional_keys_are_accepted_only_where_the_schema_allows_them() -> None:
    open_spec = ToolSpecification(
        name="echo",
        parameters={
            "type": "object",
            "properties": {"a": {"type": "integer"}},
            "additionalProperties": True,
        },
    )
    result = SchemaTool(open_spec, lambda args: args).execute(
        ToolCall(id="1", name="echo", arguments='{"a": 1, "extra": true}'), context()
    )
    assert result.value == {"a": 1, "extra": True}


def test_validate_arguments_raises_with_every_error() -> None:
    tool = SchemaTool(SPEC, dict)
    assert tool.validate_arguments('{"room": "red", "nights": 3}') == {"room": "red", "nights": 3}
    with pytest.raises(ToolArgumentsError) as raised:
        tool.validate_arguments("{}")
    assert [(e.path, e.message) for e in raised.value.errors] == [
        ("$.room", "Field required"),
        ("$.nights", "Field required"),
    ]


def test_invalid_schema_is_refused_at_construction() -> None:
    bad = ToolSpecification(name="bad", parameters={"type": "object", "properties": 5})
    with pytest.raises(ValueError, match="invalid JSON schema for tool 'bad'"):
        SchemaTool(bad, dict)


@pytest.mark.parametrize(
    ("keyword", "reference", "schema"),
    [
        ("$ref", "#/$defs/Missing", {"$ref": "#/$defs/Missing"}),
        ("$ref", "#/properties/nope", {"$ref": "#/properties/nope"}),
        ("$ref", "https://example.com/item.json", {"$ref": "https://example.com/item.json"}),
        ("$dynamicRef", "#/$defs/Missing", {"$dynamicRef": "#/$defs/Missing"}),
        # Properties named like keywords whose values are data are still subschemas.
        ("$ref", "#/$defs/Missing", {"properties": {"default": {"$ref": "#/$defs/Missing"}}}),
        ("$ref", "#/$defs/Missing", {"properties": {"enum": {"$ref": "#/$defs/Missing"}}}),
        ("$ref", "#/$defs/Missing", {"anyOf": [{"not": {"$ref": "#/$defs/Missing"}}]}),
        # Resolved against the `$id` in scope, as jsonschema resolves it.
        ("$ref", "#/$defs/Item", {"$id": "https://example.com/item", "$ref": "#/$defs/Item"}),
    ],
)
def test_a_reference_that_points_nowhere_is_refused_at_construction(
    keyword: str, reference: str, schema: dict[str, Any]
) -> None:
    parameters = {
        "type": "object",
        "properties": {"item": schema, "other": {"$ref": "#/$defs/Item"}},
        "$defs": {"Item": {"type": "integer"}},
    }
    with pytest.raises(ValueError) as refused:
        SchemaTool(ToolSpecification(name="bad", parameters=parameters), dict)
    assert str(refused.value) == (
        f"invalid JSON schema for tool 'bad': `{keyword}` {reference!r} points nowhere"
    )


def test_references_that_resolve_are_accepted() -> None:
    schema = {
        "type": "object",
        "properties": {
            "item": {"$ref": "#/$defs/Item"},
            "again": {"$ref": "#/properties/item"},
            "literal": {"const": {"$ref": "not a reference: data"}},
            "documented": {"examples": [{"$ref": "#/nope"}], "x-note": {"$ref": "#/nope"}},
            "$ref": {"example": {"$ref": "#/nope"}},
            "schema": {"$ref": "https://json-schema.org/draft/2020-12/schema"},
            "local": {
                "$id": "https://example.com/local",
                "$ref": "#/$defs/Id",
                "$defs": {"Id": {}},
            },
        },
        "$defs": {"Item": {"type": "integer"}},
    }
    spec = ToolSpecification(name="ok", parameters=schema)
    echo = SchemaTool(spec, lambda arguments: arguments)
    call = ToolCall(id="c", name="ok", arguments='{"item": "x", "schema": {"type": "text"}}')
    assert echo.execute(call, context()).text.splitlines()[1:-1] == [
        '- $.item: Input should be of type integer (input: "x")',
        '- $.schema.type: Input should match at least one of [{"$ref":"#/$defs/simpleTypes"},'
        '{"type":"array","items":{"$ref":"#/$defs/simpleTypes"},"minItems":1,"uniqueItems":true}]'
        ' (input: "text")',
    ]
    valid = ToolCall(id="c", name="ok", arguments='{"item": 1, "schema": {"type": "string"}}')
    assert not echo.execute(valid, context()).is_error


def test_a_reference_unresolvable_at_validation_is_an_execution_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Should the check at construction miss one, no call raises: the schema is the tool's fault.
    monkeypatch.setattr(_schema_arguments, "unresolvable_references", lambda schema: iter(()))
    spec = ToolSpecification(
        name="dangling", parameters={"properties": {"a": {"$ref": "#/$defs/Gone"}}}
    )
    decoded = SchemaArguments(spec.parameters, tool_name="dangling").validate('"{\\"a\\": 1}"')
    assert decoded == DecodedArguments(
        None,
        repairs=("arguments were double-encoded as a JSON string: decoded",),
        schema_failure="its JSON schema has a `$ref` that cannot be resolved (/$defs/Gone)",
    )
    result = decoded.error_result("dangling")
    assert (result.error_kind, result.text, result.repairs) == (
        "execution",
        "Tool `dangling` failed: its JSON schema has a `$ref` that cannot be resolved (/$defs/Gone)",
        ("arguments were double-encoded as a JSON string: decoded",),
    )


async def test_execute_never_raises_for_an_unresolvable_reference(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_schema_arguments, "unresolvable_references", lambda schema: iter(()))
    spec = ToolSpecification(
        name="dangling", parameters={"properties": {"a": {"$ref": "#/$defs/Gone"}}}
    )
    tool = SchemaTool(spec, dict)
    dangling = ToolCall(id="1", name="dangling", arguments='{"a": 1}')
    text = (
        "Tool `dangling` failed: its JSON schema has a `$ref` that cannot be resolved (/$defs/Gone)"
    )
    for result in (tool.execute(dangling, context()), await tool.aexecute(dangling, context())):
        assert (result.error_kind, result.text) == ("execution", text)


def test_a_problem_several_subschemas_find_is_reported_once() -> None:
    schema = {"allOf": [{"type": "integer"}, {"type": "integer", "minimum": 1}]}
    assert errors_for(schema, '"a"') == [("$.x", "Input should be of type integer")]


def test_empty_string_is_repaired_and_recorded() -> None:
    spec = ToolSpecification(name="ping", parameters={"type": "object", "properties": {}})
    result = SchemaTool(spec, lambda args: args).execute(
        ToolCall(id="1", name="ping", arguments=""), context()
    )
    assert (result.value, result.repairs) == ({}, ("empty arguments read as {}",))


def test_double_encoded_object_is_repaired_and_recorded() -> None:
    result = SchemaTool(SPEC, lambda args: args).execute(
        call('"{\\"room\\": \\"red\\", \\"nights\\": 1}"'), context()
    )
    assert result.value == {"room": "red", "nights": 1}
    assert result.repairs == ("arguments were double-encoded as a JSON string: decoded",)


def test_double_encoded_invalid_arguments_keep_the_repair() -> None:
    result = SchemaTool(SPEC, dict).execute(call('"{\\"room\\": \\"red\\"}"'), context())
    assert result.error_kind == "arguments"
    assert result.repairs == ("arguments were double-encoded as a JSON string: decoded",)


def test_model_retry_and_exceptions() -> None:
    def retry(_: dict[str, Any]) -> None:
        raise ModelRetry("Room red is full, try blue.")

    def boom(_: dict[str, Any]) -> None:
        raise KeyError("nope")

    arguments = call('{"room": "red", "nights": 1}')
    retried = SchemaTool(SPEC, retry).execute(arguments, context())
    assert (retried.text, retried.error_kind) == ("Room red is full, try blue.", "retry")
    failed = SchemaTool(SPEC, boom).execute(arguments, context())
    assert (failed.text, failed.error_kind) == ("Tool `book` failed: KeyError: 'nope'", "execution")
    assert isinstance(failed.exception, KeyError)


async def test_async_handler_sync_and_async_execution() -> None:
    async def handler(arguments: dict[str, Any]) -> str:
        await asyncio.sleep(0)
        return f"{arguments['room']} x{arguments['nights']}"

    tool = SchemaTool(SPEC, handler)
    arguments = call('{"room": "blue", "nights": 4}')
    assert (await tool.aexecute(arguments, context())).text == "blue x4"
    # `execute` from inside a running loop: the coroutine gets a loop of its own.
    assert tool.execute(arguments, context()).text == "blue x4"


def test_async_handler_from_sync_code() -> None:
    async def handler(arguments: dict[str, Any]) -> int:
        return int(arguments["nights"]) * 2

    assert (
        SchemaTool(SPEC, handler).execute(call('{"room": "red", "nights": 3}'), context()).text
        == "6"
    )


async def test_sync_handler_runs_off_the_event_loop() -> None:
    loop_thread: list[bool] = []

    def handler(_: dict[str, Any]) -> None:
        try:
            asyncio.get_running_loop()
            loop_thread.append(True)
        except RuntimeError:
            loop_thread.append(False)

    await SchemaTool(SPEC, handler).aexecute(call('{"room": "red", "nights": 1}'), context())
    assert loop_thread == [False]


def test_timeout_sync_handler() -> None:
    tool = SchemaTool(SPEC, lambda _: time.sleep(2), timeout=0.05)
    started = time.monotonic()
    result = tool.execute(call('{"room": "red", "nights": 1}'), context())
    assert time.monotonic() - started < 1
    assert (result.text, result.error_kind) == (
        "Tool `book` timed out after 0.05 seconds.",
        "timeout",
    )


async def test_timeout_async_and_sync_handlers_under_aexecute() -> None:
    async def slow(_: dict[str, Any]) -> None:
        await asyncio.sleep(2)

    arguments = call('{"room": "red", "nights": 1}')
    for handler in (slow, lambda _: time.sleep(2)):
        result = await SchemaTool(SPEC, handler, timeout=0.05).aexecute(arguments, context())
        assert result.error_kind == "timeout"


def test_handler_raising_timeout_error_is_an_execution_error() -> None:
    def handler(_: dict[str, Any]) -> None:
        raise TimeoutError("socket")

    result = SchemaTool(SPEC, handler, timeout=5).execute(
        call('{"room": "red", "nights": 1}'), context()
    )
    assert (result.error_kind, result.text) == (
        "execution",
        "Tool `book` failed: TimeoutError: socket",
    )


class RecordingExecutor:
    """A `ToolExecutor` handler: receives the (repaired) call and the context."""

    def __init__(self) -> None:
        self.calls: list[tuple[ToolCall, ToolContext[Any]]] = []

    def execute(self, call: ToolCall, context: ToolContext[Any]) -> ToolExecutionResult:
        self.calls.append((call, context))
        return ToolExecutionResult(text="sync " + call.arguments, repairs=("executor repair",))

    async def aexecute(self, call: ToolCall, context: ToolContext[Any]) -> ToolExecutionResult:
        self.calls.append((call, context))
        return ToolExecutionResult(text="async " + call.arguments)


async def test_executor_handler_gets_the_call_after_validation_and_repair() -> None:
    executor = RecordingExecutor()
    tool = SchemaTool(SPEC, executor)
    ctx = context()
    result = tool.execute(call('"{\\"room\\": \\"red\\", \\"nights\\": 1}"'), ctx)
    assert result.text == 'sync {"room":"red","nights":1}'
    assert result.repairs == (
        "arguments were double-encoded as a JSON string: decoded",
        "executor repair",
    )
    assert executor.calls[0][1] is ctx
    result = await tool.aexecute(call('{"room": "blue", "nights": 2}'), ctx)
    assert (result.text, result.repairs) == ('async {"room": "blue", "nights": 2}', ())
    invalid = await tool.aexecute(call('{"room": "blue"}'), ctx)
    assert invalid.error_kind == "arguments"
    assert len(executor.calls) == 2  # invalid arguments never reach the executor


async def test_async_handler_raising_timeout_error_is_an_execution_error() -> None:
    async def handler(_: dict[str, Any]) -> None:
        raise TimeoutError("upstream")

    result = await SchemaTool(SPEC, handler, timeout=5).aexecute(
        call('{"room": "red", "nights": 1}'), context()
    )
    assert (result.error_kind, result.text) == (
        "execution",
        "Tool `book` failed: TimeoutError: upstream",
    )


# -- regular expressions run in linear time ------------------------------------------------------

REDOS = r"^(\w+\s?)*$"
"""Exponential on a backtracking engine: each extra character doubles the work."""
HOSTILE = "a" * 30 + "!"


@pytest.mark.parametrize(
    ("schema", "arguments"),
    [
        ({"properties": {"x": {"type": "string", "pattern": REDOS}}}, {"x": HOSTILE}),
        (
            {"patternProperties": {REDOS: {"type": "integer"}}, "additionalProperties": False},
            {HOSTILE: 1},
        ),
        ({"patternProperties": {REDOS: False, "^a": {"type": "string"}}}, {HOSTILE: 1}),
        ({"propertyNames": {"pattern": REDOS}}, {HOSTILE: 1}),
        (
            {"properties": {"x": {"$ref": "#/$defs/Word"}}, "$defs": {"Word": {"pattern": REDOS}}},
            {"x": HOSTILE},
        ),
    ],
)
def test_patterns_run_in_linear_time(schema: dict[str, Any], arguments: dict[str, Any]) -> None:
    spec = ToolSpecification(name="check", parameters={"type": "object", **schema})
    tool = SchemaTool(spec, dict)
    started = time.monotonic()
    result = tool.execute(
        ToolCall(id="1", name="check", arguments=json.dumps(arguments)), context()
    )
    assert time.monotonic() - started < 1.0  # a backtracking engine takes minutes
    assert result.error_kind == "arguments"


@pytest.mark.parametrize(
    ("schema", "valid", "invalid"),
    [
        ({"pattern": "b"}, "abc", "ac"),  # not anchored, as JSON Schema says
        ({"pattern": "^b"}, "bc", "abc"),
        ({"pattern": r"^\p{L}+$"}, "héllo", "h3llo"),  # ECMA-262 `u` classes
        ({"pattern": REDOS}, "a b c", HOSTILE),
    ],
)
def test_patterns_keep_their_meaning(schema: dict[str, Any], valid: str, invalid: str) -> None:
    spec = ToolSpecification(
        name="check", parameters={"type": "object", "properties": {"x": schema}}
    )
    tool = SchemaTool(spec, dict)
    assert tool.validate_arguments(json.dumps({"x": valid})) == {"x": valid}
    assert errors_for(schema, json.dumps(invalid)) == [
        ("$.x", f"Input should match the pattern {json.dumps(schema['pattern'])}")
    ]


def test_a_pattern_property_keeps_its_meaning() -> None:
    spec = ToolSpecification(
        name="check",
        parameters={
            "type": "object",
            "patternProperties": {"^x_": {"type": "integer"}},
            "additionalProperties": False,
        },
    )
    tool = SchemaTool(spec, dict)
    assert tool.validate_arguments('{"x_a": 1}') == {"x_a": 1}
    with pytest.raises(ToolArgumentsError) as raised:
        tool.validate_arguments('{"x_a": "1", "y": 2}')
    assert [(e.path, e.message) for e in raised.value.errors] == [
        ("$.x_a", "Input should be of type integer"),
        ("$.y", "Unexpected argument"),
    ]


def test_a_regex_the_model_writes_cannot_exhaust_the_stack() -> None:
    # `"format": "regex"`: CPython's `re.compile` raises `RecursionError` on deep nesting.
    assert errors_for({"type": "string", "format": "regex"}, json.dumps("(" * 100_000)) == [
        ("$.x", 'Input should match the format "regex"')
    ]
    assert errors_for({"format": "regex"}, json.dumps("(?=a)")) == [
        ("$.x", 'Input should match the format "regex"')
    ]


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        ("(?=a)b", "look-around, including look-ahead and look-behind, is not supported"),
        ("(?<!x)y", "look-around, including look-ahead and look-behind, is not supported"),
        (r"(a)\1", "backreferences are not supported"),
        ("a{1000}{1000}", "Compiled regex exceeds size limit of 10485760 bytes."),
    ],
)
@pytest.mark.parametrize("where", ["pattern", "patternProperties", "nested"])
def test_a_pattern_the_linear_engine_cannot_run_is_refused_at_construction(
    pattern: str, reason: str, where: str
) -> None:
    schemas: dict[str, dict[str, Any]] = {
        "pattern": {"properties": {"x": {"type": "string", "pattern": pattern}}},
        "patternProperties": {"patternProperties": {pattern: {}}},
        "nested": {"$defs": {"A": {"items": {"propertyNames": {"pattern": pattern}}}}},
    }
    spec = ToolSpecification(name="bad", parameters={"type": "object", **schemas[where]})
    with pytest.raises(ValueError) as refused:
        SchemaTool(spec, dict)
    assert str(refused.value) == (
        f"invalid JSON schema for tool 'bad': pattern {json.dumps(pattern)} cannot run on the "
        f"linear-time regex engine (no look-around, no back-references): {reason}"
    )


def test_unevaluated_properties_with_pattern_properties_is_refused_at_construction() -> None:
    spec = ToolSpecification(
        name="bad",
        parameters={
            "type": "object",
            "allOf": [{"patternProperties": {REDOS: {}}}],
            "unevaluatedProperties": False,
        },
    )
    with pytest.raises(
        ValueError, match="`unevaluatedProperties` together with `patternProperties`"
    ):
        SchemaTool(spec, dict)


def test_a_pattern_refused_at_validation_is_an_execution_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Should the check when the tool is built miss a pattern the engine cannot run.
    spec = ToolSpecification(
        name="check", parameters={"type": "object", "properties": {"x": {"pattern": "a"}}}
    )
    tool = SchemaTool(spec, dict)
    refusing = functools.partial(_schema_arguments._linear_regex, "(?=a)")
    monkeypatch.setattr(_schema_arguments, "_compiled_regex", lambda pattern: refusing())
    result = tool.execute(ToolCall(id="1", name="check", arguments='{"x": "a"}'), context())
    assert (result.error_kind, result.text) == (
        "execution",
        "Tool `check` failed: its JSON schema has a pattern the linear-time regex engine "
        "cannot run",
    )


# -- keys the schema does not declare --------------------------------------------------------------

BOOKING = {
    "type": "object",
    "properties": {
        "guest": {"type": "object", "properties": {"name": {"type": "string"}}},
        "rooms": {"type": "array", "items": {"$ref": "#/$defs/Room"}},
        "transfer": {"anyOf": [{"$ref": "#/$defs/Room"}, {"type": "null"}]},
        "notes": {"type": "object"},  # declares no properties: a free-form map
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
    },
    "$defs": {"Room": {"type": "object", "properties": {"size": {"type": "integer"}}}},
}


def test_undeclared_keys_are_refused_at_every_depth() -> None:
    tool = SchemaTool(ToolSpecification(name="book", parameters=BOOKING), dict)
    arguments = {
        "guest": {"name": "Ann", "vip": True},
        "rooms": [{"size": 2}, {"size": 1, "view": "sea"}],
        "transfer": {"size": 4, "limo": True},
        "notes": {"anything": [1]},
        "labels": {"k": "v"},
        "discount": 100,
    }
    with pytest.raises(ToolArgumentsError) as raised:
        tool.validate_arguments(json.dumps(arguments))
    assert [(e.path, e.message, e.input) for e in raised.value.errors] == [
        ("$.guest.vip", "Unexpected argument", True),
        ("$.rooms[1].view", "Unexpected argument", "sea"),
        ("$.transfer.limo", "Unexpected argument", True),
        ("$.discount", "Unexpected argument", 100),
    ]
    # What the model is offered says what is enforced (not for the free-form `notes`).
    assert tool.specification.parameters == {
        "type": "object",
        "properties": {
            "guest": {
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "additionalProperties": False,
            },
            "rooms": {"type": "array", "items": {"$ref": "#/$defs/Room"}},
            "transfer": {"anyOf": [{"$ref": "#/$defs/Room"}, {"type": "null"}]},
            "notes": {"type": "object"},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        },
        "$defs": {
            "Room": {
                "type": "object",
                "properties": {"size": {"type": "integer"}},
                "additionalProperties": False,
            }
        },
        "additionalProperties": False,
    }


UNSAID = ToolSpecification(
    name="book",
    parameters={
        "type": "object",
        "properties": {
            "guest": {"type": "object", "properties": {"name": {"type": "string"}}},
            "rooms": {"type": "array", "items": {"$ref": "#/$defs/Room"}},
        },
        "required": ["guest", "rooms"],
        "$defs": {"Room": {"type": "object", "properties": {"size": {"type": "integer"}}}},
    },
)
"""Objects whose undeclared keys are refused, without saying so."""


@pytest.mark.parametrize("dialect", ["openai", "anthropic", "openai-strict"])
def test_every_dialect_that_can_say_it_offers_closed_objects(dialect: Dialect) -> None:
    rendered = render_schema(SchemaTool(UNSAID, dict).specification.parameters, dialect)
    assert rendered["additionalProperties"] is False
    assert rendered["properties"]["guest"]["additionalProperties"] is False
    assert rendered["$defs"]["Room"]["additionalProperties"] is False


def test_the_gemini_subset_offers_only_the_declared_properties() -> None:
    # It has no `additionalProperties`: a closed object is its declared properties, no note.
    rendered = render_schema(SchemaTool(UNSAID, dict).specification.parameters, "gemini")
    assert rendered == {
        "type": "object",
        "properties": {
            "guest": {"type": "object", "properties": {"name": {"type": "string"}}},
            "rooms": {
                "type": "array",
                "items": {"type": "object", "properties": {"size": {"type": "integer"}}},
            },
        },
        "required": ["guest", "rooms"],
    }


def test_undeclared_keys_are_dropped_and_recorded_with_extra_arguments_ignore() -> None:
    tool = SchemaTool(
        ToolSpecification(name="book", parameters=BOOKING), lambda a: a, extra_arguments="ignore"
    )
    raw = json.dumps(
        {
            "guest": {"name": "Ann", "vip": True},
            "rooms": [{"size": 1, "view": "sea"}],
            "transfer": {"size": 4, "limo": True},
            "notes": {"anything": [1]},
            "discount": 100,
        }
    )
    result = tool.execute(ToolCall(id="1", name="book", arguments=raw), context())
    assert result.value == {
        "guest": {"name": "Ann"},
        "rooms": [{"size": 1}],
        "transfer": {"size": 4},
        "notes": {"anything": [1]},
    }
    assert sorted(result.repairs) == [
        "dropped unknown argument `discount`",
        "dropped unknown argument `guest.vip`",
        "dropped unknown argument `rooms[0].view`",
        "dropped unknown argument `transfer.limo`",
    ]
    # Other problems are still reported.
    invalid = tool.execute(
        ToolCall(id="1", name="book", arguments='{"guest": {"name": 5, "vip": true}}'), context()
    )
    assert invalid.error_kind == "arguments"
    assert invalid.text.splitlines()[1:-1] == [
        "- $.guest.name: Input should be of type string (input: 5)"
    ]
    assert invalid.repairs == ("dropped unknown argument `guest.vip`",)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {}}, "additionalProperties": True},
        {"type": "object", "properties": {"a": {}}, "additionalProperties": {"type": "integer"}},
        {"type": "object", "properties": {"a": {}}, "patternProperties": {"^e": {}}},
        {"type": "object", "properties": {"a": {}}, "unevaluatedProperties": {"type": "integer"}},
        # Keys one branch of `allOf` declares are declared for the object.
        {"allOf": [{"properties": {"a": {}}}, {"properties": {"extra": {}}}]},
        {
            "allOf": [{"$ref": "#/$defs/A"}],
            "properties": {"extra": {}},
            "$defs": {"A": {"properties": {"a": {}}}},
        },
        {
            "type": "object",
            "properties": {"a": {}},
            "if": {"properties": {"a": {"const": 1}}},
            "then": {"properties": {"extra": {"type": "integer"}}},
        },
    ],
)
def test_schemas_that_allow_or_combine_keys_keep_them(schema: dict[str, Any]) -> None:
    tool = SchemaTool(ToolSpecification(name="t", parameters=schema), dict)
    assert tool.validate_arguments('{"a": 1, "extra": 2}') == {"a": 1, "extra": 2}


@pytest.mark.parametrize(
    "schema",
    [{"type": "object"}, {"type": "object", "properties": {}}, {"properties": {"a": {}}}],
)
def test_a_tool_schema_that_declares_no_such_argument_refuses_it(schema: dict[str, Any]) -> None:
    tool = SchemaTool(ToolSpecification(name="t", parameters=schema), dict)
    with pytest.raises(ToolArgumentsError) as raised:
        tool.validate_arguments('{"extra": 2}')
    assert [(e.path, e.message) for e in raised.value.errors] == [
        ("$.extra", "Unexpected argument")
    ]


def test_extra_arguments_must_be_forbid_or_ignore() -> None:
    with pytest.raises(ValueError, match="extra_arguments must be 'forbid' or 'ignore'"):
        SchemaTool(SPEC, dict, extra_arguments="allow")  # type: ignore[arg-type]


# -- depth -----------------------------------------------------------------------------------------


def nested_schema(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


def test_a_schema_nested_too_deeply_to_check_is_refused_at_construction() -> None:
    with pytest.raises(ValueError) as refused:
        SchemaTool(ToolSpecification(name="deep", parameters=nested_schema(300)), dict)
    assert str(refused.value) == "invalid JSON schema for tool 'deep': nested too deeply to check"


async def test_arguments_nested_too_deeply_to_validate_are_an_arguments_error() -> None:
    recursive = {
        "type": "object",
        "properties": {"n": {"$ref": "#/$defs/Node"}},
        "$defs": {"Node": {"type": "object", "properties": {"n": {"$ref": "#/$defs/Node"}}}},
    }
    tool = SchemaTool(ToolSpecification(name="tree", parameters=recursive), lambda a: "ok")
    raw = '{"n": ' * 200 + "{}" + "}" * 200  # within what the JSON parser accepts
    call = ToolCall(id="1", name="tree", arguments=raw)
    for result in (tool.execute(call, context()), await tool.aexecute(call, context())):
        assert result.error_kind == "arguments"
        assert result.text.splitlines()[1].startswith(
            '- $: Input is nested too deeply to validate (input: {"n":{"n":'
        )
    shallow = ToolCall(id="1", name="tree", arguments='{"n": ' * 20 + "{}" + "}" * 20)
    assert tool.execute(shallow, context()).text == "ok"
