"""Arguments of a tool declared by a hand-written JSON Schema: decode the model's JSON, repair
the tolerated envelope quirks, validate with `jsonschema` (Draft 2020-12), and report problems as
`ArgumentError`s in the format every tool kind shares.

Used by `SchemaTool`, `HttpTool` (schema-declared) and MCP tools, so all three reject the same
inputs with the same text. The repairs are the typed tools' (see `_arguments.py`), each recorded:
empty arguments read as `{}`, the arguments object double-encoded as a JSON string, and a JSON
object or array sent as a string where the schema wants an object or array.

Three parts, in order: the validator (every problem reported at the path of the value it is about,
references resolved as jsonschema resolves them, from its bundled metaschemas and nothing fetched);
the wording of its errors (as pydantic words them, `Input should ...`, with the schema's values
written as JSON: jsonschema's own messages embed Python reprs and the model reads JSON); and the
decoding, repairs and validation of one call's arguments.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Literal

import pydantic_core
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, ValidationError
from jsonschema.protocols import Validator
from jsonschema.validators import extend
from jsonschema_specifications import REGISTRY  # type: ignore[import-untyped]
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012, Schema, SchemaRegistry, SchemaResource

from .._exceptions import ArgumentError
from ._argument_errors import json_path, render_input
from ._arguments import (
    MAX_REPAIR_ROUNDS,
    REPAIR_DOUBLE_ENCODED,
    REPAIR_EMPTY,
    repair_string_encoded,
)
from ._outcomes import ValidatedArguments

if TYPE_CHECKING:
    from referencing._core import Resolver

__all__ = [
    "SCHEMA_REGISTRY",
    "DecodedArguments",
    "SchemaArguments",
    "ToolSchemaValidator",
    "decode_arguments",
    "unresolvable_references",
]

# -- the validator ----------------------------------------------------------------------------

_KEYWORDS = Draft202012Validator.VALIDATORS


def _false_reported_in_place(
    keyword: str, under_false: Callable[[Any, Any], Iterable[str | int]]
) -> Callable[..., Iterator[ValidationError]]:
    """`keyword` (a map or list of subschemas), reporting a `false` subschema at the property or
    item it forbids: jsonschema reports it at the enclosing object or array.

    `under_false(subschemas, instance)` gives the keys of `instance` a `false` subschema covers.
    """
    check = _KEYWORDS[keyword]

    def checked(
        validator: Validator, subschemas: Any, instance: Any, schema: Schema
    ) -> Iterator[ValidationError]:
        forbidden = list(under_false(subschemas, instance))
        if not forbidden:
            yield from check(validator, subschemas, instance, schema)
            return
        allowing: Any = (
            {key: True if sub is False else sub for key, sub in subschemas.items()}
            if isinstance(subschemas, dict)
            else [True if sub is False else sub for sub in subschemas]
        )
        yield from check(validator, allowing, instance, schema)
        refusing = validator.evolve(schema=False)
        for key in forbidden:
            for error in refusing.iter_errors(instance[key]):
                error.path.appendleft(key)
                yield error

    return checked


def _properties_under_false(properties: dict[str, Any], instance: Any) -> Iterable[str]:
    if isinstance(instance, dict):
        yield from (name for name in instance if properties.get(name, True) is False)


def _pattern_properties_under_false(patterns: dict[str, Any], instance: Any) -> Iterable[str]:
    forbidding = [pattern for pattern, sub in patterns.items() if sub is False]
    if forbidding and isinstance(instance, dict):
        yield from (name for name in instance if matches_any(name, forbidding))


def _prefix_items_under_false(prefix_items: list[Any], instance: Any) -> Iterable[int]:
    if isinstance(instance, list):
        yield from (i for i, sub in enumerate(prefix_items[: len(instance)]) if sub is False)


ToolSchemaValidator: type[Validator] = extend(  # type: ignore[no-untyped-call]
    Draft202012Validator,
    {
        "properties": _false_reported_in_place("properties", _properties_under_false),
        "patternProperties": _false_reported_in_place(
            "patternProperties", _pattern_properties_under_false
        ),
        "prefixItems": _false_reported_in_place("prefixItems", _prefix_items_under_false),
    },
)
"""Draft 2020-12, with every problem reported at the path of the value it is about."""

SCHEMA_REGISTRY: SchemaRegistry = REGISTRY
"""The specifications jsonschema ships (its metaschemas), which a `$ref` may name; nothing else
is fetched."""


def unresolvable_references(schema: Schema) -> Iterator[tuple[str, str]]:
    """`(keyword, reference)` for each `$ref` or `$dynamicRef` that resolves to nothing, which
    would otherwise fail every call. They are resolved as jsonschema will resolve them."""
    root = DRAFT202012.create_resource(schema)
    return _unresolvable_under(SCHEMA_REGISTRY.resolver_with_root(root), root)


def _unresolvable_under(
    resolver: Resolver[Schema], resource: SchemaResource
) -> Iterator[tuple[str, str]]:
    # Only subschemas are visited: a property *named* `$ref` or `default`, or a `$ref` inside
    # `const` or an unknown keyword, is data. `in_subresource` follows each `$id`.
    resolver = resolver.in_subresource(resource)
    contents = resource.contents
    if isinstance(contents, dict):
        for keyword in ("$ref", "$dynamicRef"):
            reference = contents.get(keyword)
            if isinstance(reference, str):
                try:
                    resolver.lookup(reference)
                except Unresolvable:
                    yield keyword, reference
    for subschema in DRAFT202012.subresources_of(contents):
        yield from _unresolvable_under(resolver, DRAFT202012.create_resource(subschema))


def value_at(data: Any, path: Sequence[str | int]) -> Any:
    for step in path:
        data = data[step]
    return data


def matches_any(name: str, patterns: Iterable[str]) -> bool:
    return any(re.search(pattern, name) for pattern in patterns)


# -- the wording of its errors ------------------------------------------------------------------


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


# -- one call's arguments ----------------------------------------------------------------------


DecodedArguments = ValidatedArguments[dict[str, Any]]
"""Validated arguments of a schema-declared tool: a JSON object."""


def decode_arguments(raw: str | bytes) -> DecodedArguments:
    """Parse the raw JSON a model sent into an object, repairing the envelope quirks we tolerate.

    An empty (or blank) string means `{}`; an object double-encoded as a JSON string is decoded
    once more. Each repair is recorded so it is never silent. Text that is not UTF-8 (bytes, or a
    `str` holding a lone surrogate) is invalid JSON.
    """
    if not raw.strip():
        return ValidatedArguments({}, repairs=(REPAIR_EMPTY,))
    try:
        value = _from_json(raw)
    except ValueError as exc:
        text = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
        return ValidatedArguments(None, (ArgumentError("$", f"Invalid JSON: {exc}", text),))
    repairs: tuple[str, ...] = ()
    if isinstance(value, str):
        try:
            inner = _from_json(value)
        except ValueError:
            inner = None
        if isinstance(inner, dict):
            value, repairs = inner, (REPAIR_DOUBLE_ENCODED,)
    if not isinstance(value, dict):
        return ValidatedArguments(
            None, (ArgumentError("$", "Input should be a JSON object", value),), repairs
        )
    return ValidatedArguments(value, repairs=repairs)


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
            return ValidatedArguments(None, repairs=tuple(recorded), schema_failure=failure)
        non_finite = list(_non_finite_numbers(arguments, []))
        if not errors and not non_finite:
            return ValidatedArguments(arguments, repairs=tuple(recorded))
        # A non-finite number is the problem at its path, whatever the schema says of it.
        paths = {error.path for error in non_finite}
        reported = [e for e in argument_errors(errors, arguments) if e.path not in paths]
        # One line per problem: jsonschema reports one once per subschema that finds it (`allOf`).
        unique = {(e.path, e.message, id(e.input)): e for e in (*non_finite, *reported)}
        return ValidatedArguments(None, tuple(unique.values()), tuple(recorded))

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
