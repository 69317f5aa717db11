"""Unknown keys are rejected at every depth of a typed tool's arguments, not only at the top."""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Literal

import pydantic
import pytest
from pydantic import BaseModel, ConfigDict
from typing_extensions import TypedDict

from agentforge_typed import (
    AiMessage,
    FunctionModel,
    ToolArgumentsError,
    ToolCall,
    ToolContext,
    ToolService,
    tool,
)
from agentforge_typed.providers._dialects import DIALECTS, render_schema


class Guest(BaseModel):
    name: str


class IgnoringGuest(BaseModel):
    """Explicitly lenient: the tool still forbids unknown keys in it."""

    model_config = ConfigDict(extra="ignore")
    name: str


class OpenGuest(BaseModel):
    """Explicitly open: keeps its extra keys."""

    model_config = ConfigDict(extra="allow")
    name: str
    inner: Guest | None = None


@dataclasses.dataclass
class Seat:
    row: int


@pydantic.dataclasses.dataclass(config=ConfigDict(extra="ignore"))
class Table:
    number: int


class Address(TypedDict):
    street: str


class LenientAddress(TypedDict):
    __pydantic_config__ = ConfigDict(extra="ignore")  # type: ignore[misc]
    street: str


class Node(BaseModel):
    model_config = ConfigDict(extra="ignore")
    value: int
    children: list[Node] = []


class Circle(BaseModel):
    kind: Literal["circle"] = "circle"
    radius: float


class Square(BaseModel):
    kind: Literal["square"] = "square"
    side: float


@tool
def book(
    guest: Guest,
    lenient: IgnoringGuest | None = None,
    seats: list[Seat] | None = None,
    table: Table | None = None,
    address: Address | None = None,
    lenient_address: LenientAddress | None = None,
    by_name: dict[str, Guest] | None = None,
    tree: Node | None = None,
    shape: Circle | Square | None = None,
    open_guest: OpenGuest | None = None,
) -> str:
    return "booked"


def _errors(arguments: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(ToolArgumentsError) as caught:
        book.validate_arguments(json.dumps({"guest": {"name": "Ada"}, **arguments}))
    return [(e.path, e.message) for e in caught.value.errors]


EXTRA = "Extra inputs are not permitted"


@pytest.mark.parametrize(
    ("arguments", "path"),
    [
        ({"guest": {"name": "x", "vip": True}}, "$.guest.vip"),
        ({"lenient": {"name": "x", "vip": True}}, "$.lenient.vip"),
        ({"seats": [{"row": 1}, {"row": 2, "window": True}]}, "$.seats[1].window"),
        ({"table": {"number": 1, "vip": True}}, "$.table.vip"),
        ({"address": {"street": "s", "zip": "1"}}, "$.address.zip"),
        ({"lenient_address": {"street": "s", "zip": "1"}}, "$.lenient_address.zip"),
        ({"by_name": {"a": {"name": "x", "vip": 1}}}, "$.by_name.a.vip"),
        ({"tree": {"value": 1, "children": [{"value": 2, "x": 0}]}}, "$.tree.children[0].x"),
        ({"open_guest": {"name": "x", "inner": {"name": "y", "vip": 1}}}, "$.open_guest.inner.vip"),
    ],
)
def test_unknown_keys_are_rejected_at_every_depth(arguments: dict[str, Any], path: str) -> None:
    assert _errors(arguments) == [(path, EXTRA)]
    # The fast path of `execute` (a validator of the fields alone) rejects them too.
    result = book.execute(ToolCall(id="c", name="book", arguments=json.dumps(arguments)))
    assert result.error_kind == "arguments" and path in result.text


def test_an_explicitly_open_model_keeps_its_extra_keys() -> None:
    arguments = book.validate_arguments(
        '{"guest": {"name": "x"}, "open_guest": {"name": "y", "z": 1}}'
    )
    assert arguments.open_guest.model_extra == {"z": 1}  # type: ignore[attr-defined]


def test_a_union_member_reports_the_key_it_does_not_have() -> None:
    assert _errors({"shape": {"radius": 1, "vip": True}}) == [
        ("$.shape.Circle.vip", EXTRA),
        ("$.shape.Square.side", "Field required"),
        ("$.shape.Square.radius", EXTRA),
        ("$.shape.Square.vip", EXTRA),
    ]


def test_the_nested_classes_themselves_are_unchanged() -> None:
    assert IgnoringGuest.model_validate({"name": "x", "vip": 1}) == IgnoringGuest(name="x")
    assert pydantic.TypeAdapter(Table).validate_python({"number": 1, "vip": 1}) == Table(number=1)
    assert IgnoringGuest.__pydantic_complete__ and Table.__pydantic_complete__  # type: ignore[attr-defined]
    # A valid call builds the user's own classes, equal to ones built directly.
    arguments = book.validate_arguments(
        '{"guest": {"name": "x"}, "lenient": {"name": "y"}, "table": {"number": 3}}'
    )
    assert type(arguments.lenient) is IgnoringGuest  # type: ignore[attr-defined]
    assert arguments.lenient == IgnoringGuest(name="y")  # type: ignore[attr-defined]
    assert arguments.table == Table(number=3)  # type: ignore[attr-defined]


def _objects(schema: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    if isinstance(schema, dict):
        if "properties" in schema:
            found.append(schema)
        for value in schema.values():
            found += _objects(value)
    elif isinstance(schema, list):
        for item in schema:
            found += _objects(item)
    return found


def test_the_schema_closes_every_object_it_closes() -> None:
    parameters = book.specification.parameters
    closed = {d: s.get("additionalProperties") for d, s in parameters["$defs"].items()}
    assert closed == {
        "Address": False,
        "Circle": False,
        "Guest": False,
        "IgnoringGuest": False,
        "LenientAddress": False,
        "Node": False,
        "OpenGuest": True,
        "Seat": False,
        "Square": False,
        "Table": False,
    }
    assert parameters["additionalProperties"] is False
    for dialect in ("openai", "anthropic"):
        rendered = render_schema(parameters, dialect)
        flags = [o.get("additionalProperties") for o in _objects(rendered)]
        assert flags.count(False) == len(flags) - 1 and flags.count(True) == 1, dialect
    assert "gemini" in DIALECTS  # cannot say it: it drops `additionalProperties: false`


# -- extra_arguments="ignore": dropped at every depth, each drop recorded -----------------------


@tool(extra_arguments="ignore")
def seat_guests(guests: list[Guest], table: Table, note: str = "") -> str:
    return ",".join(g.name for g in guests) + f"@{table.number}"


def test_ignore_drops_unknown_keys_at_every_depth_and_records_each() -> None:
    arguments = {
        "guests": [{"name": "a", "vip": 1}, {"name": "b"}, {"name": "c", "x": {"y": 1}}],
        "table": {"number": 4, "guests": []},
        "mood": "ok",
    }
    result = seat_guests.execute(
        ToolCall(id="c", name="seat_guests", arguments=json.dumps(arguments))
    )
    assert (result.text, result.is_error) == ("a,b,c@4", False)
    assert sorted(result.repairs) == [
        "$.guests[0].vip: unknown property dropped",
        "$.guests[2].x: unknown property dropped",
        "$.table.guests: unknown property dropped",
        "dropped unknown argument `mood`",
    ]


async def test_ignore_drops_nested_keys_under_aexecute() -> None:
    call = ToolCall(
        id="c",
        name="seat_guests",
        arguments='{"guests": [{"name": "a", "vip": 1}], "table": {"number": 1}}',
    )
    result = await seat_guests.aexecute(call)
    assert (result.text, result.repairs) == ("a@1", ("$.guests[0].vip: unknown property dropped",))


def test_ignore_still_reports_the_other_errors() -> None:
    call = ToolCall(
        id="c",
        name="seat_guests",
        arguments='{"guests": [{"name": 1, "vip": 1}], "table": {"number": 1}}',
    )
    result = seat_guests.execute(call)
    assert result.error_kind == "arguments" and "$.guests[0].name" in result.text
    assert "vip" not in result.text


def test_ignore_drops_the_key_where_it_is_not_a_same_named_parent() -> None:
    class Inner(BaseModel):
        inner: int

    @tool(extra_arguments="ignore")
    def nest(inner: Inner) -> int:
        return inner.inner

    # The unknown key `$.inner.x` must not remove the parameter `inner` itself.
    result = nest.execute(
        ToolCall(id="c", name="nest", arguments='{"inner": {"inner": 2, "x": 1}}')
    )
    assert (result.text, result.repairs) == ("2", ("$.inner.x: unknown property dropped",))


def test_ignore_combines_with_other_repairs() -> None:
    raw = json.dumps({"guests": json.dumps([{"name": "a", "vip": 1}]), "table": {"number": 2}})
    result = seat_guests.execute(ToolCall(id="c", name="seat_guests", arguments=raw))
    assert result.text == "a@2"
    assert result.repairs == (
        "$.guests: JSON array sent as a string: decoded",
        "$.guests[0].vip: unknown property dropped",
    )


# -- through the loop --------------------------------------------------------------------------


def test_the_loop_sends_a_nested_unknown_key_back_to_the_model() -> None:
    calls = iter(
        [
            AiMessage(
                tool_calls=[
                    ToolCall(
                        id="1", name="greet", arguments='{"guest": {"name": "Ada", "vip": true}}'
                    )
                ]
            ),
            AiMessage(
                tool_calls=[ToolCall(id="2", name="greet", arguments='{"guest": {"name": "Ada"}}')]
            ),
            AiMessage(text="done"),
        ]
    )

    @tool
    def greet(guest: Guest, ctx: ToolContext[None]) -> str:
        return f"hi {guest.name}"

    result = ToolService([greet]).chat(FunctionModel(lambda m, p: next(calls)), "hi")
    first, second = result.tool_executions
    assert first.result.error_kind == "arguments" and "$.guest.vip" in first.result.text
    assert second.result.text == "hi Ada"
