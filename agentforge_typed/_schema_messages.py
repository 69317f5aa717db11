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


def _message(error: ValidationError) -> str:
    """The message for one failed keyword, with the schema's values as JSON."""
    value: Any = error.validator_value
    schema: Any = error.schema
    match error.validator:
        case None:  # the schema `false`
            return "Input is not allowed here"
        case "type":
            names = value if isinstance(value, list) else [value]
            return f"Input should be of type {' or '.join(map(str, names))}"
        case "enum":
            return f"Input should be one of {', '.join(map(render_input, value))}"
        case "const":
            return f"Input should be {render_input(value)}"
        case "minimum":
            return f"Input should be greater than or equal to {render_input(value)}"
        case "maximum":
            return f"Input should be less than or equal to {render_input(value)}"
        case "exclusiveMinimum":
            return f"Input should be greater than {render_input(value)}"
        case "exclusiveMaximum":
            return f"Input should be less than {render_input(value)}"
        case "multipleOf":
            return f"Input should be a multiple of {render_input(value)}"
        case "minLength":
            return f"Input should have at least {_count(value, 'character')}"
        case "maxLength":
            return f"Input should have at most {_count(value, 'character')}"
        case "pattern":
            return f"Input should match the pattern {render_input(value)}"
        case "format":
            return f"Input should match the format {render_input(value)}"
        case "minItems":
            return f"Input should have at least {_count(value, 'item')}"
        case "maxItems":
            return f"Input should have at most {_count(value, 'item')}"
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
        case "minProperties":
            return f"Input should have at least {_count(value, 'property', 'properties')}"
        case "maxProperties":
            return f"Input should have at most {_count(value, 'property', 'properties')}"
        case "not":
            return f"Input should not match {render_input(value)}"
        case "anyOf":
            return f"Input should match at least one of {render_input(value)}"
        case "oneOf":
            several = "" if error.context else ", but matches several"
            return f"Input should match exactly one of {render_input(value)}{several}"
        case "unevaluatedProperties" if value is False:
            return "Input should have no properties other than those the schema declares"
        case "unevaluatedItems" if value is False:
            return "Input should have no items other than those the schema declares"
        case keyword:
            return f"Input does not match the schema's `{keyword}`"


def _count(number: int, singular: str, plural: str | None = None) -> str:
    return f"{number} {singular if number == 1 else plural or singular + 's'}"
