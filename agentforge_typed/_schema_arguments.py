"""Arguments of a tool declared by a hand-written JSON Schema: decode the model's JSON, repair
the tolerated envelope quirks, validate with `jsonschema` (Draft 2020-12), and report problems as
`ArgumentError`s in the format every tool kind shares.

Used by `SchemaTool`, `HttpTool` (schema-declared) and MCP tools, so all three reject the same
inputs with the same text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pydantic_core
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, ValidationError

from ._argument_errors import json_path
from ._arguments import REPAIR_DOUBLE_ENCODED, REPAIR_EMPTY
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
    once more. Each repair is recorded so it is never silent.
    """
    text = raw.decode() if isinstance(raw, bytes) else raw
    if not text.strip():
        return DecodedArguments({}, repairs=(REPAIR_EMPTY,))
    try:
        value = pydantic_core.from_json(text)
    except ValueError as exc:
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
        ValueError: At construction, when `schema` is not a valid Draft 2020-12 schema.
    """

    def __init__(self, schema: dict[str, Any], *, tool_name: str) -> None:
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            raise ValueError(f"invalid JSON schema for tool {tool_name!r}: {exc.message}") from exc
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
        """Validate an already-decoded arguments object."""
        errors = tuple(_argument_errors(self._validator.iter_errors(arguments)))
        if errors:
            return DecodedArguments(None, errors, repairs)
        return DecodedArguments(arguments, repairs=repairs)


def _argument_errors(errors: Iterable[ValidationError]) -> Iterable[ArgumentError]:
    # jsonschema's messages embed Python reprs (`True`, `'x'`); the model speaks JSON, so the most
    # common keywords get pydantic-like wording, matching what typed tools report.
    reported: set[str] = set()  # jsonschema reports `required` once per missing name
    for error in errors:
        location = list(error.absolute_path)
        expected: Any = error.validator_value
        schema: Any = error.schema
        if error.validator == "required" and isinstance(error.instance, dict):
            missing = [name for name in expected if name not in error.instance]
            for name in missing:
                path = json_path([*location, name])
                if path not in reported:
                    reported.add(path)
                    yield ArgumentError(path, "Field required", error.instance)
        elif error.validator == "additionalProperties" and isinstance(error.instance, dict):
            declared = schema.get("properties", {})
            patterns = schema.get("patternProperties", {})
            for name, value in error.instance.items():
                if name not in declared and not _matches_any(name, patterns):
                    yield ArgumentError(json_path([*location, name]), "Unexpected argument", value)
        elif error.validator == "type":
            names = expected if isinstance(expected, list) else [expected]
            yield ArgumentError(
                json_path(location),
                f"Input should be of type {' or '.join(map(str, names))}",
                error.instance,
            )
        elif error.validator == "enum":
            options = ", ".join(_json(option) for option in expected)
            yield ArgumentError(
                json_path(location), f"Input should be one of {options}", error.instance
            )
        else:
            yield ArgumentError(json_path(location), error.message, error.instance)


def _matches_any(name: str, patterns: dict[str, Any]) -> bool:
    return any(re.search(pattern, name) for pattern in patterns)


def _json(value: Any) -> str:
    return pydantic_core.to_json(value).decode()
