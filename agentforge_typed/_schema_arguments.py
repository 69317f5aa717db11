"""Arguments of a tool declared by a hand-written JSON Schema: decode the model's JSON, repair
the tolerated envelope quirks, validate with `jsonschema` (Draft 2020-12), and report problems as
`ArgumentError`s in the format every tool kind shares.

Used by `SchemaTool`, `HttpTool` (schema-declared) and MCP tools, so all three reject the same
inputs with the same text. The repairs are the typed tools' (see `_arguments.py`), each recorded:
empty arguments read as `{}`, the arguments object double-encoded as a JSON string, and a JSON
object or array sent as a string where the schema wants an object or array.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import pydantic_core
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, ValidationError
from referencing.exceptions import Unresolvable

from ._argument_errors import json_path
from ._arguments import (
    MAX_REPAIR_ROUNDS,
    REPAIR_DOUBLE_ENCODED,
    REPAIR_EMPTY,
    repair_string_encoded,
)
from ._exceptions import ArgumentError
from ._execution import ToolExecutionResult
from ._outcomes import arguments_error_result, execution_error_result
from ._schema_messages import argument_errors
from ._schema_validator import (
    SCHEMA_REGISTRY,
    ToolSchemaValidator,
    unresolvable_references,
    value_at,
)

__all__ = [
    "DecodedArguments",
    "SchemaArguments",
    "decode_arguments",
]


@dataclass(frozen=True)
class DecodedArguments:
    """The outcome of decoding and validating one call's arguments."""

    arguments: dict[str, Any] | None
    """The validated arguments object, or `None` when there are `errors` or a `schema_failure`."""
    errors: tuple[ArgumentError, ...] = ()
    repairs: tuple[str, ...] = field(default=())
    schema_failure: str | None = None
    """Why the tool's own schema could not check the arguments: the tool's fault, which the
    model cannot fix by correcting them."""

    def error_result(self, tool_name: str) -> ToolExecutionResult:
        """The error result of arguments that did not pass (`arguments` is `None`): an
        `"arguments"` error, or an `"execution"` error when the schema itself failed."""
        if self.schema_failure is not None:
            return execution_error_result(tool_name, self.schema_failure, repairs=self.repairs)
        return arguments_error_result(tool_name, self.errors, self.repairs)


def decode_arguments(raw: str | bytes) -> DecodedArguments:
    """Parse the raw JSON a model sent into an object, repairing the envelope quirks we tolerate.

    An empty (or blank) string means `{}`; an object double-encoded as a JSON string is decoded
    once more. Each repair is recorded so it is never silent. Text that is not UTF-8 (bytes, or a
    `str` holding a lone surrogate) is invalid JSON.
    """
    if not raw.strip():
        return DecodedArguments({}, repairs=(REPAIR_EMPTY,))
    try:
        value = _from_json(raw)
    except ValueError as exc:
        text = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
        return DecodedArguments(None, (ArgumentError("$", f"Invalid JSON: {exc}", text),))
    repairs: tuple[str, ...] = ()
    if isinstance(value, str):
        try:
            inner = _from_json(value)
        except ValueError:
            inner = None
        if isinstance(inner, dict):
            value, repairs = inner, (REPAIR_DOUBLE_ENCODED,)
    if not isinstance(value, dict):
        return DecodedArguments(
            None, (ArgumentError("$", "Input should be a JSON object", value),), repairs
        )
    return DecodedArguments(value, repairs=repairs)


def _from_json(text: str | bytes) -> Any:
    """`pydantic_core.from_json`, raising `ValueError` for every text that is not JSON.

    A `str` holding a lone surrogate cannot be encoded as UTF-8, and pydantic raises `TypeError`
    for it; passed on as the bytes it stands for, it is reported as an invalid code point.
    """
    try:
        return pydantic_core.from_json(text)
    except TypeError:
        if not isinstance(text, str):
            raise
        return pydantic_core.from_json(text.encode(errors="surrogatepass"))


class SchemaArguments:
    """Validates arguments against one JSON Schema; the validator is compiled once.

    Format checking is on (`"format": "date"`, `"email"`, … are enforced where `jsonschema`
    supports them). Keys the schema does not declare are accepted or rejected as the schema says
    (`additionalProperties`). Numbers must be finite, as for typed tools.

    Raises:
        ValueError: At construction, when `schema` is not a valid Draft 2020-12 schema, or has a
            `$ref` (or `$dynamicRef`) that points nowhere (nothing is fetched: a remote `$ref`
            points nowhere too, except to the JSON Schema metaschemas).
    """

    def __init__(self, schema: dict[str, Any], *, tool_name: str) -> None:
        try:
            ToolSchemaValidator.check_schema(schema)
        except SchemaError as exc:
            raise ValueError(f"invalid JSON schema for tool {tool_name!r}: {exc.message}") from exc
        unresolvable = next(unresolvable_references(schema), None)
        if unresolvable is not None:
            keyword, reference = unresolvable
            raise ValueError(
                f"invalid JSON schema for tool {tool_name!r}: "
                f"`{keyword}` {reference!r} points nowhere"
            )
        self._validator = ToolSchemaValidator(
            schema, registry=SCHEMA_REGISTRY, format_checker=Draft202012Validator.FORMAT_CHECKER
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
        recorded = list(repairs)
        try:
            arguments, errors = self._repaired(arguments, recorded)
        except Unresolvable as exc:  # the build-time check missed it: never raise on a call
            failure = f"its JSON schema has a `$ref` that cannot be resolved ({exc.ref})"
            return DecodedArguments(None, repairs=tuple(recorded), schema_failure=failure)
        non_finite = list(_non_finite_numbers(arguments, []))
        if not errors and not non_finite:
            return DecodedArguments(arguments, repairs=tuple(recorded))
        # A non-finite number is the problem at its path, whatever the schema says of it.
        paths = {error.path for error in non_finite}
        reported = [e for e in argument_errors(errors, arguments) if e.path not in paths]
        # One line per problem: jsonschema reports one once per subschema that finds it (`allOf`).
        unique = {(e.path, e.message, id(e.input)): e for e in (*non_finite, *reported)}
        return DecodedArguments(None, tuple(unique.values()), tuple(recorded))

    def _repaired(
        self, arguments: dict[str, Any], recorded: list[str]
    ) -> tuple[dict[str, Any], list[ValidationError]]:
        """`arguments` with the strings the schema wanted as objects or arrays decoded (each
        repair appended to `recorded`), and the schema's errors for them."""
        errors = list(self._validator.iter_errors(arguments))
        copies: set[int] = set()
        for _ in range(MAX_REPAIR_ROUNDS):
            if not errors:
                break
            arguments, changed = _decode_string_encoded(arguments, errors, recorded, copies)
            if not changed:
                break
            errors = list(self._validator.iter_errors(arguments))
        return arguments, errors


def _non_finite_numbers(container: Any, location: list[str | int]) -> Iterator[ArgumentError]:
    """An error for each NaN or infinity in `container` (JSON has none; parsers let them
    through)."""
    for key, value in container.items() if isinstance(container, dict) else enumerate(container):
        if isinstance(value, float):
            if not math.isfinite(value):
                path = json_path([*location, key])
                yield ArgumentError(path, "Input should be a finite number", value)
        elif isinstance(value, dict | list):
            location.append(key)
            yield from _non_finite_numbers(value, location)
            location.pop()


_CONTAINER_KINDS: dict[type, Literal["object", "array"]] = {dict: "object", list: "array"}


def _decode_string_encoded(
    arguments: dict[str, Any],
    errors: Iterable[ValidationError],
    repairs: list[str],
    copies: set[int],
) -> tuple[dict[str, Any], bool]:
    """Decode each string the schema wanted as an object or array, when it is one in JSON.

    `copies` holds the ids of the containers already copied from the caller's object: those are
    changed in place, so each container is copied once however many strings it holds.
    """
    changed = False
    for error in _with_context(errors):
        if error.validator != "type" or not isinstance(error.instance, str):
            continue
        wanted = error.validator_value
        wanted = wanted if isinstance(wanted, list) else [wanted]
        if "object" not in wanted and "array" not in wanted:
            continue
        try:
            decoded = _from_json(error.instance)
        except ValueError:
            continue
        kind = _CONTAINER_KINDS.get(type(decoded))
        path = list(error.absolute_path)
        # Another alternative (`anyOf`) may have decoded this very string already.
        if kind is None or kind not in wanted or value_at(arguments, path) is not error.instance:
            continue
        arguments = _replaced(arguments, path, decoded, copies)
        repairs.append(repair_string_encoded(json_path(path), kind))
        changed = True
    return arguments, changed


def _with_context(errors: Iterable[ValidationError]) -> Iterable[ValidationError]:
    """`errors` and, depth first, those of the alternatives they summarize (`anyOf`, `oneOf`)."""
    for error in errors:
        yield error
        yield from _with_context(error.context)


def _replaced(data: Any, path: Sequence[str | int], value: Any, copies: set[int]) -> Any:
    """`data` with `value` at `path`, copying each container on the path that is not in `copies`
    yet."""
    if not path:
        return value
    root = node = _copied(data, copies)
    for step in path[:-1]:
        child = _copied(node[step], copies)
        node[step] = child
        node = child
    node[path[-1]] = value
    return root


def _copied(container: Any, copies: set[int]) -> Any:
    if id(container) in copies:  # a copy of ours (alive: it is in the arguments being repaired)
        return container
    copy = _shallow_copy(container)
    copies.add(id(copy))
    return copy


def _shallow_copy(container: dict[str, Any] | list[Any]) -> dict[str, Any] | list[Any]:
    return dict(container) if isinstance(container, dict) else list(container)
