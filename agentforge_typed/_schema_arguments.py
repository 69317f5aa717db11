"""Arguments of a tool declared by a hand-written JSON Schema: decode the model's JSON, repair
the tolerated envelope quirks, validate with `jsonschema` (Draft 2020-12), and report problems as
`ArgumentError`s in the format every tool kind shares.

Used by `SchemaTool`, `HttpTool` (schema-declared) and MCP tools, so all three reject the same
inputs with the same text. The repairs are the typed tools' (see `_arguments.py`), each recorded:
empty arguments read as `{}`, the arguments object double-encoded as a JSON string, and a JSON
object or array sent as a string where the schema wants an object or array.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import pydantic_core
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, ValidationError
from referencing import Registry
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

from ._argument_errors import json_path, render_input
from ._arguments import (
    MAX_REPAIR_ROUNDS,
    REPAIR_DOUBLE_ENCODED,
    REPAIR_EMPTY,
    repair_string_encoded,
)
from ._exceptions import ArgumentError

__all__ = [
    "DecodedArguments",
    "SchemaArguments",
    "decode_arguments",
]


@dataclass(frozen=True)
class DecodedArguments:
    """The outcome of decoding and validating one call's arguments."""

    arguments: dict[str, Any] | None
    """The validated arguments object, or `None` when there are `errors`."""
    errors: tuple[ArgumentError, ...] = ()
    repairs: tuple[str, ...] = field(default=())


def decode_arguments(raw: str | bytes) -> DecodedArguments:
    """Parse the raw JSON a model sent into an object, repairing the envelope quirks we tolerate.

    An empty (or blank) string means `{}`; an object double-encoded as a JSON string is decoded
    once more. Each repair is recorded so it is never silent. Bytes that are not UTF-8 are
    invalid JSON, reported as typed tools report them.
    """
    if not raw.strip():
        return DecodedArguments({}, repairs=(REPAIR_EMPTY,))
    try:
        value = pydantic_core.from_json(raw)
    except ValueError as exc:
        text = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
        return DecodedArguments(None, (ArgumentError("$", f"Invalid JSON: {exc}", text),))
    repairs: tuple[str, ...] = ()
    if isinstance(value, str):
        try:
            inner = pydantic_core.from_json(value)
        except ValueError:
            inner = None
        if isinstance(inner, dict):
            value, repairs = inner, (REPAIR_DOUBLE_ENCODED,)
    if not isinstance(value, dict):
        return DecodedArguments(
            None, (ArgumentError("$", "Input should be a JSON object", value),), repairs
        )
    return DecodedArguments(value, repairs=repairs)


class SchemaArguments:
    """Validates arguments against one JSON Schema; the validator is compiled once.

    Format checking is on (`"format": "date"`, `"email"`, … are enforced where `jsonschema`
    supports them). Keys the schema does not declare are accepted or rejected as the schema says
    (`additionalProperties`).

    Raises:
        ValueError: At construction, when `schema` is not a valid Draft 2020-12 schema, or has a
            `$ref` that points nowhere (nothing is fetched: a remote `$ref` points nowhere too).
    """

    def __init__(self, schema: dict[str, Any], *, tool_name: str) -> None:
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            raise ValueError(f"invalid JSON schema for tool {tool_name!r}: {exc.message}") from exc
        _check_references(schema, tool_name)
        self._validator = Draft202012Validator(
            schema, format_checker=Draft202012Validator.FORMAT_CHECKER
        )

    def validate(self, raw: str | bytes) -> DecodedArguments:
        """Decode `raw` (with envelope repairs) and validate it against the schema."""
        decoded = decode_arguments(raw)
        if decoded.arguments is None:
            return decoded
        return self.validate_object(decoded.arguments, repairs=decoded.repairs)

    def validate_object(
        self, arguments: dict[str, Any], *, repairs: tuple[str, ...] = ()
    ) -> DecodedArguments:
        """Validate an already-decoded arguments object (never modified: repairs copy it)."""
        errors = list(self._validator.iter_errors(arguments))
        if not errors:
            return DecodedArguments(arguments, repairs=repairs)
        recorded = list(repairs)
        for _ in range(MAX_REPAIR_ROUNDS):
            arguments, changed = _decode_string_encoded(arguments, errors, recorded)
            if not changed:
                break
            errors = list(self._validator.iter_errors(arguments))
            if not errors:
                return DecodedArguments(arguments, repairs=tuple(recorded))
        return DecodedArguments(None, tuple(_argument_errors(errors, arguments)), tuple(recorded))


_DATA_KEYWORDS = frozenset({"const", "enum", "default", "examples"})
"""Keywords whose values are data, not schemas: a `$ref` key in them is not a reference."""


def _check_references(schema: dict[str, Any], tool_name: str) -> None:
    """Refuse a `$ref` that resolves to nothing, which would otherwise fail every call.

    Schemas with an `$id` are left to validation: their references resolve against it.
    """
    references: list[str] = []
    if _collect_references(schema, references):
        return
    resolver = Registry().with_resource("", DRAFT202012.create_resource(schema)).resolver()
    for reference in references:
        try:
            resolver.lookup(reference)
        except Unresolvable:
            raise ValueError(
                f"invalid JSON schema for tool {tool_name!r}: `$ref` {reference!r} points nowhere"
            ) from None


def _collect_references(node: Any, references: list[str]) -> bool:
    """Append every `$ref` under `node` to `references`; return whether an `$id` was seen."""
    seen_id = False
    if isinstance(node, dict):
        seen_id = "$id" in node
        reference = node.get("$ref")
        if isinstance(reference, str):
            references.append(reference)
        for key, value in node.items():
            if key not in _DATA_KEYWORDS:
                seen_id = _collect_references(value, references) or seen_id
    elif isinstance(node, list):
        for item in node:
            seen_id = _collect_references(item, references) or seen_id
    return seen_id


_CONTAINER_KINDS: dict[type, Literal["object", "array"]] = {dict: "object", list: "array"}


def _decode_string_encoded(
    arguments: dict[str, Any], errors: Iterable[ValidationError], repairs: list[str]
) -> tuple[dict[str, Any], bool]:
    """Decode each string the schema wanted as an object or array, when it is one in JSON."""
    changed = False
    for error in _with_context(errors):
        if error.validator != "type" or not isinstance(error.instance, str):
            continue
        wanted = error.validator_value
        wanted = wanted if isinstance(wanted, list) else [wanted]
        if "object" not in wanted and "array" not in wanted:
            continue
        try:
            decoded = pydantic_core.from_json(error.instance)
        except ValueError:
            continue
        kind = _CONTAINER_KINDS.get(type(decoded))
        path = list(error.absolute_path)
        # Another alternative (`anyOf`) may have decoded this very string already.
        if kind is None or kind not in wanted or _at(arguments, path) is not error.instance:
            continue
        arguments = _replaced(arguments, path, decoded)
        repairs.append(repair_string_encoded(json_path(path), kind))
        changed = True
    return arguments, changed


def _with_context(errors: Iterable[ValidationError]) -> Iterable[ValidationError]:
    """`errors` and, depth first, those of the alternatives they summarize (`anyOf`, `oneOf`)."""
    for error in errors:
        yield error
        yield from _with_context(error.context)


def _at(data: Any, path: Sequence[str | int]) -> Any:
    for step in path:
        data = data[step]
    return data


def _replaced(data: Any, path: Sequence[str | int], value: Any) -> Any:
    """A copy of `data` with `value` at `path`; only the containers on the path are copied."""
    if not path:
        return value
    copy: Any = dict(data) if isinstance(data, dict) else list(data)
    copy[path[0]] = _replaced(data[path[0]], path[1:], value)
    return copy


def _argument_errors(
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
                if name not in declared and not _matches_any(name, patterns):
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
        and isinstance(_at(arguments, error.absolute_path), dict)
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


def _matches_any(name: str, patterns: dict[str, Any]) -> bool:
    return any(re.search(pattern, name) for pattern in patterns)
