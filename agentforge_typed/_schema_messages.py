"""jsonschema's errors as `ArgumentError`s, worded as pydantic words them (`Input should ...`) with
the schema's values written as JSON: jsonschema's own messages embed Python reprs (`True`,
`'x'`), and the model reads JSON.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from jsonschema.exceptions import ValidationError

from ._argument_errors import json_path, render_input
from ._exceptions import ArgumentError
from ._schema_validator import matches_any, value_at

__all__ = ["argument_errors"]


def argument_errors(
    errors: Iterable[ValidationError], arguments: dict[str, Any]
) -> Iterable[ArgumentError]:
    # jsonschema's messages embed Python reprs (`True`, `'x'`); the model speaks JSON, so every
    # keyword gets pydantic-like wording built from the schema's values, as typed tools report.
    reported: set[str] = set()  # jsonschema reports `required` once per missing name, and
    # `dependentRequired` once per (given, missing) pair
    for error in errors:
        location = list(error.absolute_path)
        expected: Any = error.validator_value
        schema: Any = error.schema
        if error.validator in ("required", "dependentRequired") and isinstance(
            error.instance, dict
        ):
            for name, message in _missing(error.validator, expected, error.instance):
                path = json_path([*location, name])
                if path not in reported:
                    reported.add(path)
                    yield ArgumentError(path, message, error.instance)
        elif error.validator == "additionalProperties" and isinstance(error.instance, dict):
            declared = schema.get("properties", {})
            patterns = schema.get("patternProperties", {})
            for name, value in error.instance.items():
                if name not in declared and not matches_any(name, patterns):
                    yield ArgumentError(json_path([*location, name]), "Unexpected argument", value)
        elif _checks_a_property_name(error, arguments):
            message = f"Invalid property name: {_message(error)}"
            yield ArgumentError(json_path(location), message, error.instance)
        else:
            yield ArgumentError(json_path(location), _message(error), error.instance)


def _checks_a_property_name(error: ValidationError, arguments: dict[str, Any]) -> bool:
    """Whether `error` comes from `propertyNames`: its input is one of the keys of the object at
    its location, not a value."""
    return (
        "propertyNames" in error.absolute_schema_path
        and isinstance(error.instance, str)
        and isinstance(value_at(arguments, error.absolute_path), dict)
    )


def _missing(keyword: str, expected: Any, instance: dict[str, Any]) -> Iterable[tuple[str, str]]:
    """`(name, message)` for each property `required` or `dependentRequired` wants but lacks."""
    if keyword == "required":
        yield from ((name, "Field required") for name in expected if name not in instance)
        return
    for given, needed in expected.items():
        if given in instance:
            message = f"Field required when {render_input(given)} is given"
            yield from ((name, message) for name in needed if name not in instance)


_VALUE_MESSAGES = {
    "const": "Input should be",
    "minimum": "Input should be greater than or equal to",
    "maximum": "Input should be less than or equal to",
    "exclusiveMinimum": "Input should be greater than",
    "exclusiveMaximum": "Input should be less than",
    "multipleOf": "Input should be a multiple of",
    "pattern": "Input should match the pattern",
    "format": "Input should match the format",
    "not": "Input should not match",
    "anyOf": "Input should match at least one of",
}
"""Keywords whose message is a phrase and the schema's value, as JSON."""

_COUNT_MESSAGES = {
    "minLength": ("at least", "character", "characters"),
    "maxLength": ("at most", "character", "characters"),
    "minItems": ("at least", "item", "items"),
    "maxItems": ("at most", "item", "items"),
    "minProperties": ("at least", "property", "properties"),
    "maxProperties": ("at most", "property", "properties"),
}
"""Keywords that bound a count: `Input should have at least 2 items`."""


def _message(error: ValidationError) -> str:
    """The message for one failed keyword, with the schema's values as JSON."""
    value: Any = error.validator_value
    schema: Any = error.schema
    keyword = error.validator
    if keyword in _VALUE_MESSAGES:
        return f"{_VALUE_MESSAGES[keyword]} {render_input(value)}"
    if keyword in _COUNT_MESSAGES:
        bound, singular, plural = _COUNT_MESSAGES[keyword]
        return f"Input should have {bound} {_count(value, singular, plural)}"
    match keyword:
        case None:  # the schema `false`
            return "Input is not allowed here"
        case "type":
            names = value if isinstance(value, list) else [value]
            return f"Input should be of type {' or '.join(map(str, names))}"
        case "enum":
            return f"Input should be one of {', '.join(map(render_input, value))}"
        case "items":  # `false`: nothing past `prefixItems`
            return f"Input should have at most {_count(len(schema.get('prefixItems', ())), 'item')}"
        case "uniqueItems":
            return "Items should be unique"
        case "contains" | "minContains":
            least = schema.get("minContains", 1)
            matching = render_input(schema["contains"])
            return f"Input should contain at least {_count(least, 'item')} matching {matching}"
        case "maxContains":
            matching = render_input(schema["contains"])
            return f"Input should contain at most {_count(value, 'item')} matching {matching}"
        case "oneOf":
            several = "" if error.context else ", but matches several"
            return f"Input should match exactly one of {render_input(value)}{several}"
        case "unevaluatedProperties" if value is False:
            return "Input should have no properties other than those the schema declares"
        case "unevaluatedItems" if value is False:
            return "Input should have no items other than those the schema declares"
        case _:
            return f"Input does not match the schema's `{keyword}`"


def _count(number: int, singular: str, plural: str | None = None) -> str:
    return f"{number} {singular if number == 1 else plural or singular + 's'}"
