"""Golden JSON schemas (pydantic's plain dialect) and descriptions for typed tool signatures.

Each case pins the exact `ToolSpecification.parameters` a signature produces: no per-property
`title`s, no top-level title, `additionalProperties: false` at the top (unknown arguments are
rejected), defaults in the schema, `$defs` for named types."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import uuid
from decimal import Decimal
from typing import Annotated, Any, Literal, Optional, Union

import pytest
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from agentforge_typed import ToolContext, tool


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Priority(enum.IntEnum):
    LOW = 1
    HIGH = 2


class LineItem(BaseModel):
    """One line of an order."""

    sku: str
    quantity: Annotated[int, Field(ge=1, le=100)]


class Order(BaseModel):
    customer: str
    items: list[LineItem]
    note: str | None = None


@dataclasses.dataclass
class Point:
    x: float
    y: float = 0.0


class Address(TypedDict):
    street: str
    zip_code: str


class TreeNode(BaseModel):
    value: int
    children: list[TreeNode] = []


class Cat(BaseModel):
    kind: Literal["cat"]
    lives: int


class Dog(BaseModel):
    kind: Literal["dog"]
    good: bool


def f_str(text: str) -> None: ...
def f_int(count: int) -> None: ...
def f_float(ratio: float) -> None: ...
def f_bool(flag: bool) -> None: ...
def f_enum(color: Color) -> None: ...
def f_int_enum(priority: Priority) -> None: ...
def f_literal(mode: Literal["fast", "slow"]) -> None: ...
def f_literal_int(level: Literal[1, 2, 3]) -> None: ...
def f_uuid(id: uuid.UUID) -> None: ...
def f_datetime(when: dt.datetime) -> None: ...
def f_date(day: dt.date) -> None: ...
def f_time(at: dt.time) -> None: ...
def f_decimal(amount: Decimal) -> None: ...
def f_list(tags: list[str]) -> None: ...
def f_set(ids: set[int]) -> None: ...
def f_tuple(pair: tuple[int, str]) -> None: ...
def f_tuple_var(values: tuple[float, ...]) -> None: ...
def f_dict(scores: dict[str, int]) -> None: ...
def f_model(order: Order) -> None: ...
def f_dataclass(point: Point) -> None: ...
def f_typeddict(address: Address) -> None: ...
def f_union(value: int | str) -> None: ...
def f_optional_required(value: int | None) -> None: ...
def f_optional_default(limit: int | None = None) -> None: ...
def f_typing_optional(name: Optional[str] = None) -> None: ...  # noqa: UP045
def f_default(days: int = 3, unit: str = "C") -> None: ...
def f_recursive(tree: TreeNode) -> None: ...
def f_discriminated(pet: Annotated[Union[Cat, Dog], Field(discriminator="kind")]) -> None: ...  # noqa: UP007
def f_constraints(
    name: Annotated[str, Field(min_length=1, max_length=20, pattern=r"^[a-z]+$")],
    age: Annotated[int, Field(ge=0, lt=150)],
    score: Annotated[float, Field(gt=0, multiple_of=0.5)] = 1.0,
) -> None: ...
def f_field_description(
    city: Annotated[str, Field(description="City name, e.g. Paris")],
) -> None: ...
def f_field_default(limit: int = Field(10, ge=1, description="Max results")) -> None: ...
def f_list_of_models(items: list[LineItem]) -> None: ...
def f_nested_optional_model(order: Order | None = None) -> None: ...
def f_no_params() -> None: ...
def f_context(ctx: ToolContext[str], query: str) -> None: ...
def f_google(city: str, days: int = 1) -> None:
    """Get the weather forecast.

    Uses the national weather service.

    Args:
        city: The city to forecast.
        days: How many days ahead.

    Returns:
        The forecast.
    """


def f_numpy(city: str, days: int = 1) -> None:
    """Get the weather forecast.

    Parameters
    ----------
    city : str
        The city to forecast.
    days : int
        How many days ahead.
    """


def f_sphinx(city: str, days: int = 1) -> None:
    """Get the weather forecast.

    :param city: The city to forecast.
    :param days: How many days ahead.
    :returns: The forecast.
    """


def f_field_beats_docstring(city: Annotated[str, Field(description="From Field")]) -> None:
    """Lookup.

    Args:
        city: From the docstring.
    """


def f_shadowing(json: str, copy: int = 1) -> None: ...


CASES = [
    (
        f_str,
        "",
        {
            "additionalProperties": False,
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
            "type": "object",
        },
    ),
    (
        f_int,
        "",
        {
            "additionalProperties": False,
            "properties": {"count": {"type": "integer"}},
            "required": ["count"],
            "type": "object",
        },
    ),
    (
        f_float,
        "",
        {
            "additionalProperties": False,
            "properties": {"ratio": {"type": "number"}},
            "required": ["ratio"],
            "type": "object",
        },
    ),
    (
        f_bool,
        "",
        {
            "additionalProperties": False,
            "properties": {"flag": {"type": "boolean"}},
            "required": ["flag"],
            "type": "object",
        },
    ),
    (
        f_enum,
        "",
        {
            "$defs": {"Color": {"enum": ["red", "green"], "title": "Color", "type": "string"}},
            "additionalProperties": False,
            "properties": {"color": {"$ref": "#/$defs/Color"}},
            "required": ["color"],
            "type": "object",
        },
    ),
    (
        f_int_enum,
        "",
        {
            "$defs": {"Priority": {"enum": [1, 2], "title": "Priority", "type": "integer"}},
            "additionalProperties": False,
            "properties": {"priority": {"$ref": "#/$defs/Priority"}},
            "required": ["priority"],
            "type": "object",
        },
    ),
    (
        f_literal,
        "",
        {
            "additionalProperties": False,
            "properties": {"mode": {"enum": ["fast", "slow"], "type": "string"}},
            "required": ["mode"],
            "type": "object",
        },
    ),
    (
        f_literal_int,
        "",
        {
            "additionalProperties": False,
            "properties": {"level": {"enum": [1, 2, 3], "type": "integer"}},
            "required": ["level"],
            "type": "object",
        },
    ),
    (
        f_uuid,
        "",
        {
            "additionalProperties": False,
            "properties": {"id": {"format": "uuid", "type": "string"}},
            "required": ["id"],
            "type": "object",
        },
    ),
    (
        f_datetime,
        "",
        {
            "additionalProperties": False,
            "properties": {"when": {"format": "date-time", "type": "string"}},
            "required": ["when"],
            "type": "object",
        },
    ),
    (
        f_date,
        "",
        {
            "additionalProperties": False,
            "properties": {"day": {"format": "date", "type": "string"}},
            "required": ["day"],
            "type": "object",
        },
    ),
    (
        f_time,
        "",
        {
            "additionalProperties": False,
            "properties": {"at": {"format": "time", "type": "string"}},
            "required": ["at"],
            "type": "object",
        },
    ),
    (
        f_decimal,
        "",
        {
            "additionalProperties": False,
            "properties": {"amount": {"anyOf": [{"type": "number"}, {"type": "string"}]}},
            "required": ["amount"],
            "type": "object",
        },
    ),
    (
        f_list,
        "",
        {
            "additionalProperties": False,
            "properties": {"tags": {"items": {"type": "string"}, "type": "array"}},
            "required": ["tags"],
            "type": "object",
        },
    ),
    (
        f_set,
        "",
        {
            "additionalProperties": False,
            "properties": {
                "ids": {"items": {"type": "integer"}, "type": "array", "uniqueItems": True}
            },
            "required": ["ids"],
            "type": "object",
        },
    ),
    (
        f_tuple,
        "",
        {
            "additionalProperties": False,
            "properties": {
                "pair": {
                    "maxItems": 2,
                    "minItems": 2,
                    "prefixItems": [{"type": "integer"}, {"type": "string"}],
                    "type": "array",
                }
            },
            "required": ["pair"],
            "type": "object",
        },
    ),
    (
        f_tuple_var,
        "",
        {
            "additionalProperties": False,
            "properties": {"values": {"items": {"type": "number"}, "type": "array"}},
            "required": ["values"],
            "type": "object",
        },
    ),
    (
        f_dict,
        "",
        {
            "additionalProperties": False,
            "properties": {
                "scores": {"additionalProperties": {"type": "integer"}, "type": "object"}
            },
            "required": ["scores"],
            "type": "object",
        },
    ),
    (
        f_model,
        "",
        {
            "$defs": {
                "LineItem": {
                    "description": "One line of an order.",
                    "additionalProperties": False,
                    "properties": {
                        "sku": {"type": "string"},
                        "quantity": {"maximum": 100, "minimum": 1, "type": "integer"},
                    },
                    "required": ["sku", "quantity"],
                    "title": "LineItem",
                    "type": "object",
                },
                "Order": {
                    "additionalProperties": False,
                    "properties": {
                        "customer": {"type": "string"},
                        "items": {"items": {"$ref": "#/$defs/LineItem"}, "type": "array"},
                        "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
                    },
                    "required": ["customer", "items"],
                    "title": "Order",
                    "type": "object",
                },
            },
            "additionalProperties": False,
            "properties": {"order": {"$ref": "#/$defs/Order"}},
            "required": ["order"],
            "type": "object",
        },
    ),
    (
        f_dataclass,
        "",
        {
            "$defs": {
                "Point": {
                    "additionalProperties": False,
                    "properties": {
                        "x": {"type": "number"},
                        "y": {"default": 0.0, "type": "number"},
                    },
                    "required": ["x"],
                    "title": "Point",
                    "type": "object",
                }
            },
            "additionalProperties": False,
            "properties": {"point": {"$ref": "#/$defs/Point"}},
            "required": ["point"],
            "type": "object",
        },
    ),
    (
        f_typeddict,
        "",
        {
            "$defs": {
                "Address": {
                    "additionalProperties": False,
                    "properties": {"street": {"type": "string"}, "zip_code": {"type": "string"}},
                    "required": ["street", "zip_code"],
                    "title": "Address",
                    "type": "object",
                }
            },
            "additionalProperties": False,
            "properties": {"address": {"$ref": "#/$defs/Address"}},
            "required": ["address"],
            "type": "object",
        },
    ),
    (
        f_union,
        "",
        {
            "additionalProperties": False,
            "properties": {"value": {"anyOf": [{"type": "integer"}, {"type": "string"}]}},
            "required": ["value"],
            "type": "object",
        },
    ),
    (
        f_optional_required,
        "",
        {
            "additionalProperties": False,
            "properties": {"value": {"anyOf": [{"type": "integer"}, {"type": "null"}]}},
            "required": ["value"],
            "type": "object",
        },
    ),
    (
        f_optional_default,
        "",
        {
            "additionalProperties": False,
            "properties": {
                "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None}
            },
            "type": "object",
        },
    ),
    (
        f_typing_optional,
        "",
        {
            "additionalProperties": False,
            "properties": {
                "name": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None}
            },
            "type": "object",
        },
    ),
    (
        f_default,
        "",
        {
            "additionalProperties": False,
            "properties": {
                "days": {"default": 3, "type": "integer"},
                "unit": {"default": "C", "type": "string"},
            },
            "type": "object",
        },
    ),
    (
        f_recursive,
        "",
        {
            "$defs": {
                "TreeNode": {
                    "additionalProperties": False,
                    "properties": {
                        "value": {"type": "integer"},
                        "children": {
                            "default": [],
                            "items": {"$ref": "#/$defs/TreeNode"},
                            "type": "array",
                        },
                    },
                    "required": ["value"],
                    "title": "TreeNode",
                    "type": "object",
                }
            },
            "additionalProperties": False,
            "properties": {"tree": {"$ref": "#/$defs/TreeNode"}},
            "required": ["tree"],
            "type": "object",
        },
    ),
    (
        f_discriminated,
        "",
        {
            "$defs": {
                "Cat": {
                    "additionalProperties": False,
                    "properties": {
                        "kind": {"const": "cat", "type": "string"},
                        "lives": {"type": "integer"},
                    },
                    "required": ["kind", "lives"],
                    "title": "Cat",
                    "type": "object",
                },
                "Dog": {
                    "additionalProperties": False,
                    "properties": {
                        "kind": {"const": "dog", "type": "string"},
                        "good": {"type": "boolean"},
                    },
                    "required": ["kind", "good"],
                    "title": "Dog",
                    "type": "object",
                },
            },
            "additionalProperties": False,
            "properties": {
                "pet": {
                    "discriminator": {
                        "mapping": {"cat": "#/$defs/Cat", "dog": "#/$defs/Dog"},
                        "propertyName": "kind",
                    },
                    "oneOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}],
                }
            },
            "required": ["pet"],
            "type": "object",
        },
    ),
    (
        f_constraints,
        "",
        {
            "additionalProperties": False,
            "properties": {
                "name": {"maxLength": 20, "minLength": 1, "pattern": "^[a-z]+$", "type": "string"},
                "age": {"exclusiveMaximum": 150, "minimum": 0, "type": "integer"},
                "score": {
                    "default": 1.0,
                    "exclusiveMinimum": 0,
                    "multipleOf": 0.5,
                    "type": "number",
                },
            },
            "required": ["name", "age"],
            "type": "object",
        },
    ),
    (
        f_field_description,
        "",
        {
            "additionalProperties": False,
            "properties": {"city": {"description": "City name, e.g. Paris", "type": "string"}},
            "required": ["city"],
            "type": "object",
        },
    ),
    (
        f_field_default,
        "",
        {
            "additionalProperties": False,
            "properties": {
                "limit": {
                    "default": 10,
                    "description": "Max results",
                    "minimum": 1,
                    "type": "integer",
                }
            },
            "type": "object",
        },
    ),
    (
        f_list_of_models,
        "",
        {
            "$defs": {
                "LineItem": {
                    "description": "One line of an order.",
                    "additionalProperties": False,
                    "properties": {
                        "sku": {"type": "string"},
                        "quantity": {"maximum": 100, "minimum": 1, "type": "integer"},
                    },
                    "required": ["sku", "quantity"],
                    "title": "LineItem",
                    "type": "object",
                }
            },
            "additionalProperties": False,
            "properties": {"items": {"items": {"$ref": "#/$defs/LineItem"}, "type": "array"}},
            "required": ["items"],
            "type": "object",
        },
    ),
    (
        f_nested_optional_model,
        "",
        {
            "$defs": {
                "LineItem": {
                    "description": "One line of an order.",
                    "additionalProperties": False,
                    "properties": {
                        "sku": {"type": "string"},
                        "quantity": {"maximum": 100, "minimum": 1, "type": "integer"},
                    },
                    "required": ["sku", "quantity"],
                    "title": "LineItem",
                    "type": "object",
                },
                "Order": {
                    "additionalProperties": False,
                    "properties": {
                        "customer": {"type": "string"},
                        "items": {"items": {"$ref": "#/$defs/LineItem"}, "type": "array"},
                        "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
                    },
                    "required": ["customer", "items"],
                    "title": "Order",
                    "type": "object",
                },
            },
            "additionalProperties": False,
            "properties": {
                "order": {"anyOf": [{"$ref": "#/$defs/Order"}, {"type": "null"}], "default": None}
            },
            "type": "object",
        },
    ),
    (
        f_no_params,
        "",
        {"additionalProperties": False, "properties": {}, "type": "object"},
    ),
    (
        f_context,
        "",
        {
            "additionalProperties": False,
            "properties": {"query": {"type": "string"}},
            "required": ["query"],
            "type": "object",
        },
    ),
    (
        f_google,
        "Get the weather forecast.\n\nUses the national weather service.",
        {
            "additionalProperties": False,
            "properties": {
                "city": {"description": "The city to forecast.", "type": "string"},
                "days": {"default": 1, "description": "How many days ahead.", "type": "integer"},
            },
            "required": ["city"],
            "type": "object",
        },
    ),
    (
        f_numpy,
        "Get the weather forecast.",
        {
            "additionalProperties": False,
            "properties": {
                "city": {"description": "The city to forecast.", "type": "string"},
                "days": {"default": 1, "description": "How many days ahead.", "type": "integer"},
            },
            "required": ["city"],
            "type": "object",
        },
    ),
    (
        f_sphinx,
        "Get the weather forecast.",
        {
            "additionalProperties": False,
            "properties": {
                "city": {"description": "The city to forecast.", "type": "string"},
                "days": {"default": 1, "description": "How many days ahead.", "type": "integer"},
            },
            "required": ["city"],
            "type": "object",
        },
    ),
    (
        f_field_beats_docstring,
        "Lookup.",
        {
            "additionalProperties": False,
            "properties": {"city": {"description": "From Field", "type": "string"}},
            "required": ["city"],
            "type": "object",
        },
    ),
    (
        f_shadowing,
        "",
        {
            "additionalProperties": False,
            "properties": {"json": {"type": "string"}, "copy": {"default": 1, "type": "integer"}},
            "required": ["json"],
            "type": "object",
        },
    ),
]


@pytest.mark.parametrize(
    ("function", "description", "schema"), CASES, ids=[case[0].__name__ for case in CASES]
)
def test_golden_schema(function: Any, description: str, schema: dict[str, Any]) -> None:
    made = tool(function)
    assert made.specification.parameters == schema
    assert made.specification.name == made.name == function.__name__
    assert made.description == made.specification.description == description
    assert made.specification.strict_schema is False


def test_at_least_thirty_signatures() -> None:
    assert len(CASES) >= 30


def test_schema_is_deterministic() -> None:
    first = tool(f_model).specification.model_dump_json()
    assert all(tool(f_model).specification.model_dump_json() == first for _ in range(3))


def test_description_option_overrides_docstring() -> None:
    made = tool(description="Forecast, briefly.")(f_google)
    assert made.description == "Forecast, briefly."
    assert made.specification.parameters["properties"]["city"]["description"] == (
        "The city to forecast."
    )


def test_name_option_renames_the_tool() -> None:
    made = tool(name="weather-v2")(f_google)
    assert made.name == made.specification.name == "weather-v2"
    assert made.__name__ == "f_google"


def test_shadowing_parameter_names_validate_by_their_own_name() -> None:
    made = tool(f_shadowing)
    arguments = made.validate_arguments('{"json": "x", "copy": 2}')
    assert arguments.model_dump(by_alias=True) == {"json": "x", "copy": 2}


def test_strict_schema_is_recorded() -> None:
    made = tool(strict_schema=True)(f_google)
    assert made.specification.strict_schema is True
