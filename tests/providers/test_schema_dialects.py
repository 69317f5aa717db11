"""Schema dialects: golden renderings of real pydantic schemas, the rules pinned inline, refusals.

The golden files in `tests/fixtures/schema_dialects/` hold, per case, pydantic's input schema and
the exact output of every dialect (or the refusal). Regenerate them after a deliberate change
with `UPDATE_GOLDEN=1 pytest tests/providers/test_schema_dialects.py` and review the diff.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import decimal
import enum
import json
import os
import uuid
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import jsonschema
import pydantic_core
import pytest
from pydantic import UUID4, AnyUrl, BaseModel, ConfigDict, Field, create_model
from typing_extensions import NotRequired, TypedDict

from agentforge_typed import AgentForgeError, SchemaDialectError
from agentforge_typed.providers import render_schema
from agentforge_typed.providers._dialects import Dialect
from agentforge_typed.providers._synthesize import synthesize_arguments

DIALECTS: tuple[Dialect, ...] = get_args(Dialect)
GOLDEN = Path(__file__).parents[1] / "fixtures" / "schema_dialects"


# -- input models: every kind of parameter a tool signature can have -----------------------------


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Priority(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Address(BaseModel):
    """A postal address."""

    street: str = Field(description="Street and number", min_length=1)
    city: str
    zip_code: str | None = None


class LineItem(BaseModel):
    sku: str = Field(pattern=r"^[A-Z]{3}-\d{4}$")
    quantity: int = Field(ge=1, le=100)
    unit_price: decimal.Decimal = Field(gt=0)


class Customer(BaseModel):
    name: str
    address: Address
    tags: list[str] = []


class Order(BaseModel):
    customer: Customer
    items: list[LineItem] = Field(min_length=1, max_length=10)
    note: str | None = None


@dataclasses.dataclass
class Point:
    x: float
    y: float
    label: str = "origin"


class Filters(TypedDict, total=False):
    city: str
    max_price: float


class Flags(TypedDict):
    verbose: bool
    level: NotRequired[int]


class Cat(BaseModel):
    kind: Literal["cat"]
    lives: int = 9


class Dog(BaseModel):
    kind: Literal["dog"]
    good: bool = True


class Node(BaseModel):
    value: int
    children: list[Node] = []


class Category(BaseModel):
    name: str
    parent: Category | None = None


class Meta(BaseModel):
    labels: dict[str, str]


class Holder(BaseModel):
    meta: Meta


class Open(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str


def _model(name: str, /, **fields: Any) -> type[BaseModel]:
    return create_model(name, **fields)


CASES: dict[str, type[BaseModel]] = {
    "scalars": _model(
        "scalars", text=(str, ...), count=(int, ...), ratio=(float, ...), on=(bool, ...)
    ),
    "defaults": _model("defaults", limit=(int, 10), unit=(str, "metric"), dry_run=(bool, False)),
    "optional": _model("optional", city=(str | None, None), days=(int | None, ...)),
    "enum_str": _model("enum_str", color=(Color, ...), fallback=(Color, Color.RED)),
    "enum_int": _model("enum_int", priority=(Priority, ...)),
    "literal_str": _model("literal_str", unit=(Literal["c", "f"], ...)),
    "literal_int": _model("literal_int", level=(Literal[1, 2, 3], 1)),
    "literal_mixed": _model("literal_mixed", mode=(Literal["auto", 0], ...)),
    "literal_const": _model("literal_const", version=(Literal["v1"], "v1")),
    "uuid": _model("uuid", id=(uuid.UUID, ...), token=(UUID4, ...)),
    "datetimes": _model(
        "datetimes",
        at=(dt.datetime, ...),
        day=(dt.date, ...),
        time=(dt.time, ...),
        wait=(dt.timedelta, ...),
    ),
    "decimal": _model(
        "decimal", amount=(decimal.Decimal, ...), fee=(decimal.Decimal, Field(ge=0, le=10))
    ),
    "collections": _model(
        "collections",
        ids=(list[int], ...),
        names=(set[str], ...),
        frozen=(frozenset[int], ...),
        scores=(tuple[float, ...], ...),
    ),
    "tuple_same": _model("tuple_same", rgb=(tuple[int, int, int], ...)),
    "tuple_mixed": _model("tuple_mixed", pair=(tuple[str, int], ...)),
    "dict_str": _model("dict_str", counts=(dict[str, int], ...)),
    "dict_untyped": _model("dict_untyped", payload=(dict, ...)),
    "nested_model": _model("nested_model", address=(Address, ...)),
    "nested_optional": _model("nested_optional", address=(Address | None, None)),
    "nested_deep": _model("nested_deep", order=(Order, ...)),
    "dataclass": _model("dataclass", point=(Point, ...)),
    "typeddict": _model("typeddict", filters=(Filters, ...), flags=(Flags, ...)),
    "union_scalars": _model("union_scalars", key=(int | str, ...)),
    "union_models": _model("union_models", pet=(Cat | Dog, ...)),
    "discriminated": _model(
        "discriminated", pet=(Annotated[Cat | Dog, Field(discriminator="kind")], ...)
    ),
    "recursive_field": _model("recursive_field", tree=(Node, ...)),
    "recursive_root": Node,
    "recursive_optional": Category,
    "strings_constrained": _model(
        "strings_constrained",
        code=(str, Field(min_length=2, max_length=8, pattern=r"^[a-z]+$")),
        email=(str, Field(json_schema_extra={"format": "email"})),
        url=(AnyUrl, ...),
        data=(bytes, ...),
    ),
    "numbers_constrained": _model(
        "numbers_constrained",
        age=(int, Field(ge=0, le=150)),
        step=(int, Field(multiple_of=5, gt=0)),
        share=(float, Field(gt=0, lt=1)),
    ),
    "descriptions": _model(
        "descriptions",
        city=(str, Field(description="City name")),
        address=(Address, Field(description="Where to ship")),
        when=(dt.date | None, Field(None, description="Delivery day")),
    ),
    "examples": _model(
        "examples", query=(str, Field(examples=["pizza"], title="Search query", max_length=50))
    ),
    "any": _model("any", value=(Any, ...)),
    "list_untyped": _model("list_untyped", values=(list, ...)),
    "empty": _model("empty"),
    "closed": create_model(
        "closed", __config__=ConfigDict(extra="forbid"), city=(str, ...), point=(Point, ...)
    ),
    "open_model": _model("open_model", item=(Open, ...)),
    "nested_open": _model("nested_open", holder=(Holder, ...)),
    "list_of_models": _model("list_of_models", items=(list[LineItem], ...)),
}


# -- golden files ----------------------------------------------------------------------------


def _render(schema: dict[str, Any], dialect: Dialect) -> Any:
    try:
        return render_schema(schema, dialect)
    except SchemaDialectError as exc:
        return {"error": {"path": exc.path, "message": str(exc)}}


def _golden_path(case: str) -> Path:
    return GOLDEN / f"{case}.json"


def _load(case: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(_golden_path(case).read_text(encoding="utf-8"))
    return result


if os.environ.get("UPDATE_GOLDEN"):  # pragma: no cover - maintenance switch
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for _case, _model_class in CASES.items():
        _schema = _model_class.model_json_schema()
        _record: dict[str, Any] = {"input": _schema, **{d: _render(_schema, d) for d in DIALECTS}}
        _golden_path(_case).write_text(
            json.dumps(_record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )


def test_every_case_has_a_golden_file() -> None:
    assert len(CASES) >= 30
    assert sorted(p.stem for p in GOLDEN.glob("*.json")) == sorted(CASES)


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_input_is_what_pydantic_generates(case: str) -> None:
    assert CASES[case].model_json_schema() == _load(case)["input"]


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_output(case: str, dialect: Dialect) -> None:
    golden = _load(case)
    before = copy.deepcopy(golden["input"])
    assert _render(golden["input"], dialect) == golden[dialect]
    assert golden["input"] == before  # pure: the input is never mutated


# -- properties every rendering has --------------------------------------------------------------


def _nodes(schema: Any) -> list[dict[str, Any]]:
    """Every schema node (not property names, enum values or defaults) in `schema`."""
    if not isinstance(schema, dict):
        return []
    found = [schema]
    for key, value in schema.items():
        if key in ("properties", "$defs", "patternProperties") and isinstance(value, dict):
            for sub in value.values():
                found += _nodes(sub)
        elif key in ("anyOf", "oneOf", "allOf", "prefixItems") and isinstance(value, list):
            for sub in value:
                found += _nodes(sub)
        elif key in ("items", "additionalProperties", "not"):
            found += _nodes(value)
    return found


def _rendered(dialect: Dialect) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for case in sorted(CASES):
        result = _load(case)[dialect]
        if "error" not in result:
            out.append((case, result))
    return out


@pytest.mark.parametrize(("case", "schema"), _rendered("openai-strict"))
def test_strict_rules_hold_everywhere(case: str, schema: dict[str, Any]) -> None:
    jsonschema.Draft202012Validator.check_schema(schema)
    for node in _nodes(schema):
        assert not {"title", "default", "oneOf", "allOf", "prefixItems", "minLength"} & set(node)
        if node.get("type") == "object":
            assert node["additionalProperties"] is False
            assert node["required"] == list(node["properties"])
        if "$ref" in node:
            assert set(node) == {"$ref"}, "strict mode allows nothing next to $ref"


@pytest.mark.parametrize(("case", "schema"), _rendered("gemini"))
def test_gemini_rules_hold_everywhere(case: str, schema: dict[str, Any]) -> None:
    for node in _nodes(schema):
        assert not {"$ref", "$defs", "const", "title", "oneOf", "default", "pattern"} & set(node)
        assert not isinstance(node.get("type"), list)
        assert "type" in node or "anyOf" in node
        if "enum" in node:
            assert node["type"] == "string"


@pytest.mark.parametrize("dialect", ["openai", "anthropic", "openai-strict"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_rendering_accepts_valid_arguments(case: str, dialect: Dialect) -> None:
    """No narrowing: valid arguments still validate against the rendered JSON Schema."""
    model = CASES[case]
    rendered = _load(case)[dialect]
    if "error" in rendered:
        return
    if dialect == "openai-strict" and case.startswith("recursive"):
        # Synthesis stops recursion by leaving optional properties out; strict mode instead
        # requires them (as null), which pydantic would reject for a non-nullable list.
        return
    arguments = synthesize_arguments(model.model_json_schema())
    model.model_validate_json(pydantic_core.to_json(arguments), strict=True)
    jsonschema.validate(arguments, rendered, cls=jsonschema.Draft202012Validator)


# -- the rules, pinned inline --------------------------------------------------------------------


def test_plain_dialects_drop_only_titles() -> None:
    schema = _model("t", city=(str, Field(description="City", title="Town")), n=(int, 3))
    expected = {
        "properties": {
            "city": {"description": "City", "type": "string"},
            "n": {"default": 3, "type": "integer"},
        },
        "required": ["city"],
        "type": "object",
    }
    assert render_schema(schema.model_json_schema(), "openai") == expected
    assert render_schema(schema.model_json_schema(), "anthropic") == expected


def test_a_property_named_title_is_kept() -> None:
    schema = _model("t", title=(str, ...)).model_json_schema()
    assert render_schema(schema, "openai")["properties"] == {"title": {"type": "string"}}
    assert render_schema(schema, "gemini")["properties"] == {"title": {"type": "string"}}


def test_strict_makes_optional_properties_required_and_nullable() -> None:
    schema = _model(
        "t",
        city=(str, ...),
        days=(int, 3),
        unit=(Literal["c", "f"], "c"),
        address=(Address | None, None),
        color=(Color, Color.RED),
    ).model_json_schema()
    out = render_schema(schema, "openai-strict")
    assert out["required"] == ["city", "days", "unit", "address", "color"]
    assert out["additionalProperties"] is False
    # Strict mode has no `default`: the description says what a `null` stands for.
    assert out["properties"] == {
        "city": {"type": "string"},
        "days": {"type": ["integer", "null"], "description": "default: 3"},
        "unit": {
            "anyOf": [{"enum": ["c", "f"], "type": "string"}, {"type": "null"}],
            "description": "default: c",
        },
        "address": {
            "anyOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}],
            "description": "default: null",
        },
        "color": {
            "anyOf": [{"$ref": "#/$defs/Color"}, {"type": "null"}],
            "description": "default: red",
        },
    }
    assert out["$defs"]["Address"] == {
        "description": "A postal address.",
        "properties": {
            "street": {"description": "Street and number (minLength: 1)", "type": "string"},
            "city": {"type": "string"},
            "zip_code": {
                "anyOf": [{"type": "string"}, {"type": "null"}],
                "description": "default: null",
            },
        },
        "required": ["street", "city", "zip_code"],
        "type": "object",
        "additionalProperties": False,
    }


def test_strict_wraps_a_described_ref_and_turns_one_of_into_any_of() -> None:
    schema = _model(
        "t",
        address=(Address, Field(description="Ship here")),
        pet=(Annotated[Cat | Dog, Field(discriminator="kind")], ...),
    ).model_json_schema()
    props = render_schema(schema, "openai-strict")["properties"]
    assert props["address"] == {"anyOf": [{"$ref": "#/$defs/Address"}], "description": "Ship here"}
    assert props["pet"] == {"anyOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}]}


def test_strict_moves_unsupported_keywords_into_the_description() -> None:
    schema = create_model(
        "t",
        __config__=ConfigDict(regex_engine="python-re"),  # the Rust engine has no lookarounds
        code=(str, Field(description="Code", min_length=2, max_length=4, pattern="^[a-z]+$")),
        tags=(set[str], ...),
        token=(UUID4, ...),
        look=(str, Field(pattern=r"^(?!x)\w+$")),
    ).model_json_schema()
    props = render_schema(schema, "openai-strict")["properties"]
    assert props["code"] == {
        "description": "Code (maxLength: 4, minLength: 2)",
        "pattern": "^[a-z]+$",
        "type": "string",
    }
    assert props["tags"] == {
        "items": {"type": "string"},
        "type": "array",
        "description": "uniqueItems: true",
    }
    assert props["token"] == {"type": "string", "description": "format: uuid4"}
    assert props["look"] == {"type": "string", "description": "pattern: ^(?!x)\\w+$"}


def test_strict_rewrites_a_same_type_tuple_as_items() -> None:
    schema = _model("t", rgb=(tuple[int, int, int], ...)).model_json_schema()
    assert render_schema(schema, "openai-strict")["properties"]["rgb"] == {
        "maxItems": 3,
        "minItems": 3,
        "type": "array",
        "items": {"type": "integer"},
    }


def test_strict_keeps_recursion_through_defs_and_root() -> None:
    assert render_schema(Node.model_json_schema(), "openai-strict") == {
        "properties": {
            "value": {"type": "integer"},
            "children": {
                "anyOf": [{"items": {"$ref": "#"}, "type": "array"}, {"type": "null"}],
                "description": "default: []",
            },
        },
        "required": ["value", "children"],
        "type": "object",
        "additionalProperties": False,
    }
    nested = _model("t", tree=(Node, ...)).model_json_schema()
    out = render_schema(nested, "openai-strict")
    assert out["$defs"]["Node"]["properties"]["children"]["anyOf"][0] == {
        "items": {"$ref": "#/$defs/Node"},
        "type": "array",
    }


def test_gemini_inlines_refs_and_spells_null_as_nullable() -> None:
    schema = _model(
        "t",
        address=(Address | None, Field(None, description="Ship here")),
        version=(Literal["v1"], ...),
        level=(Literal[1, 2], ...),
    ).model_json_schema()
    assert render_schema(schema, "gemini") == {
        "properties": {
            "address": {
                "description": "Ship here (default: null)",
                "properties": {
                    "street": {"description": "Street and number (minLength: 1)", "type": "string"},
                    "city": {"type": "string"},
                    "zip_code": {
                        "type": "string",
                        "nullable": True,
                        "description": "default: null",
                    },
                },
                "required": ["street", "city"],
                "type": "object",
                "nullable": True,
            },
            "version": {"type": "string", "enum": ["v1"]},
            "level": {"type": "integer", "description": "enum: [1, 2]"},
        },
        "required": ["version", "level"],
        "type": "object",
    }


def test_gemini_spells_type_lists_and_keeps_real_unions() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": ["string", "null"]},
            "b": {"type": ["string", "integer"]},
            "c": {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]},
            "d": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
        },
    }
    assert render_schema(schema, "gemini")["properties"] == {
        "a": {"type": "string", "nullable": True},
        "b": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
        "c": {"anyOf": [{"type": "string"}, {"type": "integer"}], "nullable": True},
        "d": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
    }


def test_gemini_moves_open_object_details_into_the_description() -> None:
    schema = _model("t", counts=(dict[str, int], Field(description="Per key"))).model_json_schema()
    assert render_schema(schema, "gemini")["properties"]["counts"] == {
        "description": 'Per key (additionalProperties: {"type": "integer"})',
        "type": "object",
    }


def test_single_all_of_is_folded() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"allOf": [{"$ref": "#/$defs/A"}], "description": "An A"}},
        "required": ["a"],
        "$defs": {"A": {"type": "string", "enum": ["x"]}},
    }
    assert render_schema(schema, "openai-strict")["properties"]["a"] == {
        "anyOf": [{"$ref": "#/$defs/A"}],
        "description": "An A",
    }
    assert render_schema(schema, "gemini")["properties"]["a"] == {
        "type": "string",
        "enum": ["x"],
        "description": "An A",
    }


def test_unreferenced_defs_are_rendered_too() -> None:
    schema = {
        "type": "object",
        "properties": {},
        "$defs": {"Unused": {"type": "object", "properties": {"a": {"type": "integer"}}}},
    }
    assert render_schema(schema, "openai-strict")["$defs"] == {
        "Unused": {
            "type": "object",
            "properties": {"a": {"type": ["integer", "null"]}},
            "required": ["a"],
            "additionalProperties": False,
        }
    }


# -- refusals --------------------------------------------------------------------------------


def _refusal(schema: dict[str, Any], dialect: Dialect) -> SchemaDialectError:
    with pytest.raises(SchemaDialectError) as info:
        render_schema(schema, dialect)
    error = info.value
    assert error.dialect == dialect
    assert isinstance(error, ValueError) and isinstance(error, AgentForgeError)
    assert f"the {dialect} schema dialect cannot express {error.path}: " in str(error)
    return error


@pytest.mark.parametrize(
    ("fields", "path", "reason"),
    [
        ({"counts": (dict[str, int], ...)}, "$.counts", "open object"),
        ({"payload": (dict, ...)}, "$.payload", "open object"),
        ({"holder": (Holder, ...)}, "$.holder.meta.labels", "open object"),
        ({"item": (Open, ...)}, "$.item", "open object"),
        ({"maybe": (dict[str, int] | None, None)}, "$.maybe", "open object"),
        ({"deep": (list[dict[str, int]], ...)}, "$.deep[*]", "open object"),
        ({"value": (Any, ...)}, "$.value", "any type"),
        ({"values": (list, ...)}, "$.values", "typed `items`"),
        ({"pair": (tuple[str, int], ...)}, "$.pair", "different element types"),
    ],
)
def test_strict_refusals_name_the_parameter(fields: dict[str, Any], path: str, reason: str) -> None:
    error = _refusal(_model("t", **fields).model_json_schema(), "openai-strict")
    assert error.path == path
    assert reason in error.reason


@pytest.mark.parametrize(
    ("schema", "path", "reason"),
    [
        (
            {"type": "object", "properties": {"a": {"$ref": "#/$defs/Missing"}}},
            "$.a",
            "unresolvable",
        ),
        ({"type": "object", "properties": {"a": {"$ref": "other.json#/X"}}}, "$.a", "unresolvable"),
        (
            {
                "type": "object",
                "properties": {"a": {"allOf": [{"type": "string"}, {"minLength": 1}]}},
            },
            "$.a",
            "allOf",
        ),
        (
            {
                "type": "object",
                "properties": {
                    "a": {"oneOf": [{"type": "string"}], "anyOf": [{"type": "integer"}]}
                },
            },
            "$.a",
            "oneOf",
        ),
        (
            {"type": "object", "patternProperties": {"^x": {"type": "string"}}, "properties": {}},
            "$",
            "open object",
        ),
        ({"type": "object", "properties": {"a": {"type": "array"}}}, "$.a", "typed `items`"),
        (
            {
                "type": "object",
                "properties": {
                    "rest": {
                        "type": "array",
                        "prefixItems": [{"type": "string"}],
                        "items": {"type": "integer"},
                    }
                },
            },
            "$.rest",
            "extra items",
        ),
        ({"type": "object", "properties": {"my key": {}}}, '$["my key"]', "any type"),
    ],
)
def test_strict_refusals_of_hand_written_schemas(
    schema: dict[str, Any], path: str, reason: str
) -> None:
    error = _refusal(schema, "openai-strict")
    assert (error.path, reason in error.reason) == (path, True)


@pytest.mark.parametrize(
    ("schema", "path", "reason"),
    [
        (_model("t", tree=(Node, ...)).model_json_schema(), "$.tree.children[*]", "recursive"),
        (Node.model_json_schema(), "$.children[*]", "recursive"),
        (Category.model_json_schema(), "$.parent", "recursive"),
        (_model("t", mode=(Literal["auto", 0], ...)).model_json_schema(), "$.mode", "mixing"),
        (_model("t", value=(Any, ...)).model_json_schema(), "$.value", "any type"),
        (_model("t", pair=(tuple[str, int], ...)).model_json_schema(), "$.pair", "different"),
        ({"type": "object", "properties": {"n": {"type": "null"}}}, "$.n", "only be `null`"),
        ({"type": "object", "properties": {"a": {"$ref": "#/$defs/X"}}}, "$.a", "unresolvable"),
        (
            {
                "type": "object",
                "properties": {"a": {"allOf": [{"type": "string"}, {"type": "integer"}]}},
            },
            "$.a",
            "allOf",
        ),
    ],
)
def test_gemini_refusals(schema: dict[str, Any], path: str, reason: str) -> None:
    error = _refusal(schema, "gemini")
    assert error.path == path
    assert reason in error.reason


@pytest.mark.parametrize("dialect", DIALECTS)
@pytest.mark.parametrize(
    "schema",
    [{"type": "string"}, {"anyOf": [{"type": "object"}, {"type": "null"}]}, {}],
)
def test_every_dialect_refuses_a_non_object_root(schema: dict[str, Any], dialect: Dialect) -> None:
    error = _refusal(schema, dialect)
    assert error.path == "$"


def test_an_unknown_dialect_is_a_plain_value_error() -> None:
    with pytest.raises(ValueError, match="unknown schema dialect 'bedrock'") as info:
        render_schema({"type": "object"}, "bedrock")  # type: ignore[arg-type]
    assert not isinstance(info.value, SchemaDialectError)


def test_rendering_never_mutates_or_aliases_the_input() -> None:
    schema = _model("t", unit=(Literal["c", "f"], "c"), address=(Address, ...)).model_json_schema()
    before = copy.deepcopy(schema)
    for dialect in DIALECTS:
        out = render_schema(schema, dialect)
        out["properties"]["unit"].setdefault("enum", []).append("k")
        out["properties"].clear()
    assert schema == before
