"""Arguments of a tool declared by a hand-written JSON Schema: decode the model's JSON, repair
the tolerated envelope quirks, validate with `jsonschema` (Draft 2020-12), and report problems as
`ArgumentProblem`s in the format every tool kind shares.

Used by `SchemaTool`, `HttpTool` (schema-declared) and MCP tools, so all three reject the same
inputs with the same text. The repairs are the typed tools' (see `_arguments.py`), each recorded:
empty arguments read as `{}`, the arguments object double-encoded as a JSON string, and a JSON
object or array sent as a string where the schema wants an object or array.

Three parts, in order: the validator (every problem reported at the path of the value it is about,
references resolved as jsonschema resolves them, from its bundled metaschemas and nothing fetched,
regular expressions run in linear time);
the wording of its errors (as pydantic words them, `Input should ...`, with the schema's values
written as JSON: jsonschema's own messages embed Python reprs and the model reads JSON); and the
decoding, repairs and validation of one call's arguments.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from json.encoder import encode_basestring
from typing import TYPE_CHECKING, Any, Literal, cast

import pydantic_core
from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import SchemaError, ValidationError
from jsonschema.protocols import Validator
from jsonschema.validators import extend
from jsonschema_specifications import REGISTRY  # type: ignore[import-untyped]
from pydantic_core import core_schema
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012, Schema, SchemaRegistry, SchemaResource

from .._exceptions import ArgumentProblem
from ._argument_errors import json_path, render_input
from ._arguments import (
    MAX_REPAIR_ROUNDS,
    REPAIR_DOUBLE_ENCODED,
    REPAIR_EMPTY,
    REPAIR_TRAILING_COMMAS,
    repair_dropped,
    repair_string_encoded,
    without_trailing_commas,
)
from ._base import ExtraArguments, check_extra_arguments
from ._outcomes import ValidatedArguments

if TYPE_CHECKING:
    from referencing._core import Resolver


__all__ = [
    "SCHEMA_REGISTRY",
    "DecodedArguments",
    "SchemaArguments",
    "ToolSchemaValidator",
    "closed_schema",
    "decode_arguments",
    "unresolvable_references",
]

# -- the validator ----------------------------------------------------------------------------

# Patterns may come from a third party (an MCP server) and are matched against text the model
# writes: Python's backtracking `re` can take exponential time on both, so every pattern runs on
# pydantic-core's Rust engine, which is linear in the text and has no look-around and no
# back-references. A schema with a pattern it cannot compile is refused when the tool is built.


def _linear_regex(pattern: str) -> pydantic_core.SchemaValidator:
    """A validator of strings that contain a match of `pattern` (JSON Schema's `pattern` is not
    anchored), on the linear-time engine.

    Raises:
        pydantic_core.SchemaError: `pattern` does not compile on that engine.
    """
    schema = core_schema.str_schema(pattern=pattern, regex_engine="rust-regex")
    return pydantic_core.SchemaValidator(schema)


_compiled_regex = functools.lru_cache(maxsize=4096)(_linear_regex)
"""`_linear_regex`, compiled once per pattern of a tool's schema."""


def matches_any(name: str, patterns: Iterable[str]) -> bool:
    """Whether `name` contains a match of one of `patterns`, found in linear time."""
    return any(_compiled_regex(pattern).isinstance_python(name) for pattern in patterns)


def _is_linear_regex(instance: object) -> bool:
    # Model-written text (`"format": "regex"`): compiled, never cached. CPython's `re.compile`
    # can exhaust the stack on deeply nested groups.
    if isinstance(instance, str):
        _linear_regex(instance)
    return True


def _pattern(
    validator: Validator, pattern: str, instance: Any, schema: Schema
) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not matches_any(instance, (pattern,)):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


# `descend` is jsonschema's, missing from its `Validator` protocol.
def _pattern_properties(
    validator: Any, patterns: dict[str, Any], instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if validator.is_type(instance, "object"):
        for pattern, subschema in patterns.items():
            for name, value in instance.items():
                if matches_any(name, (pattern,)):
                    yield from validator.descend(value, subschema, path=name, schema_path=pattern)


def _additional_properties(
    validator: Any, additional: Any, instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    declared = schema.get("properties", {})
    patterns = schema.get("patternProperties", {})
    extras = [n for n in instance if n not in declared and not matches_any(n, patterns)]
    if validator.is_type(additional, "object"):
        for name in extras:
            yield from validator.descend(instance[name], additional, path=name)
    elif additional is False and extras:
        yield ValidationError(f"Additional properties are not allowed ({extras!r} unexpected)")


def _unique_items(
    validator: Validator, unique: Any, instance: Any, schema: Schema
) -> Iterator[ValidationError]:
    if not unique or not validator.is_type(instance, "array"):
        return
    unique_json = _all_unique(instance)
    if unique_json is None:  # not JSON data: jsonschema's own comparison
        yield from _KEYWORDS["uniqueItems"](validator, unique, instance, schema)
    elif not unique_json:
        yield ValidationError(f"{instance!r} has non-unique elements")


def _all_unique(items: list[Any]) -> bool | None:
    """Whether no two of `items` are equal as JSON Schema compares them (`None` when one is not
    JSON data), in time linear in their size: jsonschema compares arrays of objects pairwise
    (53 KB of arguments took 19 s)."""
    seen: set[str] = set()
    for item in items:
        parts: list[str] = []
        if not _write_canonical(item, parts):
            return None
        key = "".join(parts)
        if key in seen:
            return False
        seen.add(key)
    return True


def _write_canonical(value: Any, parts: list[str]) -> bool:
    """Append to `parts` a text of `value` equal for exactly the values JSON Schema calls equal
    (`1` and `1.0`, objects in any key order; not `true` and `1`); `False` for a value that is
    not JSON data.

    Strings (not tuples of Python values) are the set's keys: their hash is seeded per process,
    while integers that collide (`n` and `n + 2**61 - 1`) would make the set quadratic again.
    """
    kind = type(value)
    if kind is str:
        parts.append(encode_basestring(value))
    elif kind is dict or kind is list:
        entries: Iterable[tuple[str, Any]]
        if kind is list:
            entries = (("", item) for item in value)
        elif all(type(name) is str for name in value):
            entries = ((encode_basestring(name) + ":", value[name]) for name in sorted(value))
        else:
            return False
        parts.append("[" if kind is list else "{")
        for prefix, item in entries:
            parts.append(prefix)
            if not _write_canonical(item, parts):
                return False
            parts.append(",")
        parts.append("]" if kind is list else "}")
    elif value is None:
        parts.append("n")
    elif kind is bool:
        parts.append("t" if value else "f")
    elif kind is int or kind is float:
        parts.append(_canonical_number(value))
    else:
        return False
    return True


_EXACT_FLOAT_INTEGERS = 2**53
"""Below this magnitude every integer is a float too."""


def _canonical_number(number: float) -> str:
    """The same text for an `int` and a `float` of equal value (Python compares them exactly)."""
    if type(number) is int:
        if -_EXACT_FLOAT_INTEGERS < number < _EXACT_FLOAT_INTEGERS:
            return str(number)
        try:
            as_float = float(number)
        except OverflowError:
            as_float = math.inf
        # `hex`: `str` refuses integers of more than 4300 digits, and no float equals these.
        return repr(as_float) if as_float == number else f"i{number:#x}"
    if number.is_integer() and -_EXACT_FLOAT_INTEGERS < number < _EXACT_FLOAT_INTEGERS:
        return str(int(number))
    if math.isnan(number):  # the JSON parser lets NaN through; as for jsonschema, it equals
        return f"nan{id(number)}"  # only itself (the item is alive: its id is its own)
    return repr(number)


FORMAT_CHECKER = FormatChecker(formats=())
"""Draft 2020-12's format checker, with `regex` meaning "compiles on the linear-time engine"."""
FORMAT_CHECKER.checkers = {
    **Draft202012Validator.FORMAT_CHECKER.checkers,
    "regex": (_is_linear_regex, pydantic_core.SchemaError),
}

_KEYWORDS = {**Draft202012Validator.VALIDATORS, "patternProperties": _pattern_properties}


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
        "pattern": _pattern,
        "uniqueItems": _unique_items,
        "additionalProperties": _additional_properties,
        "properties": _false_reported_in_place("properties", _properties_under_false),
        "patternProperties": _false_reported_in_place(
            "patternProperties", _pattern_properties_under_false
        ),
        "prefixItems": _false_reported_in_place("prefixItems", _prefix_items_under_false),
    },
    format_checker=FORMAT_CHECKER,
)
"""Draft 2020-12, with every problem reported at the path of the value it is about, regular
expressions matched and `uniqueItems` checked in linear time."""

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


# -- the wording of its errors ------------------------------------------------------------------


def argument_errors(
    errors: Iterable[ValidationError], arguments: dict[str, Any]
) -> Iterable[ArgumentProblem]:
    # jsonschema's messages embed Python reprs (`True`, `'x'`); the model speaks JSON, so every
    # keyword gets pydantic-like wording built from the schema's values, as typed tools report.
    reported: set[str] = set()  # jsonschema reports `required` once per missing name, and
    # `dependentRequired` once per (given, missing) pair
    for error in errors:
        location = list(error.absolute_path)
        expected: Any = error.validator_value
        if error.validator in ("required", "dependentRequired") and isinstance(
            error.instance, dict
        ):
            for name, message in _missing(error.validator, expected, error.instance):
                path = json_path([*location, name])
                if path not in reported:
                    reported.add(path)
                    yield ArgumentProblem(path, message, error.instance)
        elif _is_undeclared(error):
            instance: Any = error.instance
            for name in _undeclared_names(error):
                value = instance[name]
                yield ArgumentProblem(json_path([*location, name]), "Unexpected argument", value)
        elif (alternative := _undeclared_only_alternative(error)) is not None:
            # `anyOf`/`oneOf` whose one near miss has only keys it does not declare (an
            # optional object, say): those keys are the problem, not the whole alternative.
            yield from argument_errors(alternative, arguments)
        elif _checks_a_property_name(error, arguments):
            message = f"Invalid property name: {_message(error)}"
            yield ArgumentProblem(json_path(location), message, error.instance)
        else:
            yield ArgumentProblem(json_path(location), _message(error), error.instance)


def _is_undeclared(error: ValidationError) -> bool:
    """Whether `error` is about keys an object schema does not declare and refuses."""
    return (
        error.validator == "additionalProperties"
        and error.validator_value is False
        and isinstance(error.instance, dict)
    )


def _undeclared_names(error: ValidationError) -> Iterator[str]:
    """The keys of an `_is_undeclared` error's object that its schema does not declare."""
    schema: Any = error.schema
    instance: Any = error.instance
    declared = schema.get("properties", {})
    patterns = schema.get("patternProperties", {})
    for name in instance:
        if name not in declared and not matches_any(name, patterns):
            yield name


def _undeclared_only_alternative(error: ValidationError) -> list[ValidationError] | None:
    """The errors of the one alternative of an `anyOf`/`oneOf` `error` that fails only because
    of undeclared keys, or `None` when there is no such alternative or more than one."""
    if error.validator not in ("anyOf", "oneOf") or not error.context:
        return None
    by_alternative: dict[Any, list[ValidationError]] = {}
    for inner in error.context:
        alternative = next(iter(inner.relative_schema_path), None)
        by_alternative.setdefault(alternative, []).append(inner)
    candidates = [errors for errors in by_alternative.values() if all(map(_is_undeclared, errors))]
    return candidates[0] if len(candidates) == 1 else None


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

    An empty (or blank) string means `{}`; trailing commas are removed; an object double-encoded
    as a JSON string is decoded once more. Each repair is recorded so it is never silent. Text that is not UTF-8 (bytes, or a
    `str` holding a lone surrogate) is invalid JSON.
    """
    if not raw.strip():
        return ValidatedArguments({}, repairs=(REPAIR_EMPTY,))
    repairs: tuple[str, ...] = ()
    try:
        value = _from_json(raw)
    except ValueError as exc:
        fixed = without_trailing_commas(raw, str(exc))
        if fixed is None:
            text = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
            return ValidatedArguments(None, (ArgumentProblem("$", f"Invalid JSON: {exc}", text),))
        value, repairs = _from_json(fixed), (REPAIR_TRAILING_COMMAS,)
    if isinstance(value, str):
        try:
            inner = _from_json(value)
        except ValueError:
            inner = None
        if isinstance(inner, dict):
            value, repairs = inner, (*repairs, REPAIR_DOUBLE_ENCODED)
    if not isinstance(value, dict):
        return ValidatedArguments(
            None, (ArgumentProblem("$", "Input should be a JSON object", value),), repairs
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
    supports them). Keys the schema does not declare are refused unless it explicitly allows them
    (see `closed_schema`); with `extra_arguments="ignore"` they are dropped instead, each drop
    recorded. Numbers must be finite, as for typed tools.

    Raises:
        ValueError: At construction, when `schema` is not a valid Draft 2020-12 schema, has a
            `$ref` (or `$dynamicRef`) that points nowhere (nothing is fetched: a remote `$ref`
            points nowhere too, except to the JSON Schema metaschemas), or has a pattern the
            linear-time regex engine cannot run (look-around, back-references).
    """

    def __init__(
        self,
        schema: dict[str, Any],
        *,
        tool_name: str,
        extra_arguments: ExtraArguments = "forbid",
    ) -> None:
        self._drop_undeclared = check_extra_arguments(extra_arguments) == "ignore"
        try:
            Draft202012Validator.check_schema(schema, format_checker=FORMAT_CHECKER)
        except SchemaError as exc:
            raise ValueError(
                f"invalid JSON schema for tool {tool_name!r}: {_schema_problem(exc)}"
            ) from exc
        except RecursionError:  # a third party's schema must not take its server down
            raise ValueError(
                f"invalid JSON schema for tool {tool_name!r}: nested too deeply to check"
            ) from None
        if {"unevaluatedProperties", "patternProperties"} <= set(_keywords_in(schema)):
            # jsonschema matches `patternProperties` with `re` when it looks for evaluated keys.
            raise ValueError(
                f"invalid JSON schema for tool {tool_name!r}: `unevaluatedProperties` together "
                "with `patternProperties` is not supported; use `additionalProperties`"
            )
        unresolvable = next(unresolvable_references(schema), None)
        if unresolvable is not None:
            keyword, reference = unresolvable
            raise ValueError(
                f"invalid JSON schema for tool {tool_name!r}: "
                f"`{keyword}` {reference!r} points nowhere"
            )
        self.schema = cast(dict[str, Any], closed_schema(schema))
        """What is enforced, and so what the model is offered: `schema`, with
        `"additionalProperties": false` wherever undeclared keys are refused."""
        self._validator = ToolSchemaValidator(
            self.schema, registry=SCHEMA_REGISTRY, format_checker=FORMAT_CHECKER
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
        except pydantic_core.SchemaError:  # the build-time check missed a pattern: never raise
            failure = "its JSON schema has a pattern the linear-time regex engine cannot run"
            return ValidatedArguments(None, repairs=tuple(recorded), schema_failure=failure)
        except RecursionError:  # jsonschema recurses per level of the arguments
            error = ArgumentProblem("$", "Input is nested too deeply to validate", arguments)
            return ValidatedArguments(None, (error,), tuple(recorded))
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
        """`arguments` with the strings the schema wanted as objects or arrays decoded (and,
        under `extra_arguments="ignore"`, the undeclared keys dropped; each repair appended to
        `recorded`), and the schema's errors for them."""
        errors = list(self._validator.iter_errors(arguments))
        copies: set[int] = set()
        for _ in range(MAX_REPAIR_ROUNDS):
            if not errors:
                break
            arguments, changed = _decode_string_encoded(arguments, errors, recorded, copies)
            if self._drop_undeclared:
                arguments, dropped = _dropped_undeclared(arguments, errors, recorded, copies)
                changed = changed or dropped
            if not changed:
                break
            errors = list(self._validator.iter_errors(arguments))
        return arguments, errors


def _schema_problem(error: SchemaError) -> str:
    """What is wrong with a tool's schema; for a pattern, in the regex engine's own words."""
    if error.validator == "format" and isinstance(error.cause, pydantic_core.SchemaError):
        reason = str(error.cause).strip().splitlines()[-1].strip()
        reason = reason.removeprefix("error: ").removeprefix("SchemaError: ")
        return (
            f"pattern {render_input(error.instance)} cannot run on the linear-time regex engine "
            f"(no look-around, no back-references): {reason}"
        )
    return error.message


def _keywords_in(schema: Schema) -> Iterator[str]:
    """The keywords of `schema` and of every subschema in it."""
    for subschema in _subschemas(schema):
        yield from subschema


def _subschemas(schema: Schema) -> Iterator[dict[str, Any]]:
    """`schema` and every subschema in it that is an object (not `true`/`false`), depth first."""
    if isinstance(schema, dict):
        yield schema
    for subschema in DRAFT202012.subresources_of(schema):
        yield from _subschemas(subschema)


_OPENING = frozenset({"additionalProperties", "unevaluatedProperties", "patternProperties"})
"""Keywords by which an object schema says what it does with keys `properties` does not name."""
_MERGING = frozenset({"allOf", "anyOf", "oneOf", "$ref", "$dynamicRef", "if", "dependentSchemas"})
"""Keywords by which other schemas may declare more keys of the same object."""


def closed_schema(schema: Schema) -> Schema:
    """A copy of `schema` in which object schemas that do not say what happens to other keys
    refuse them (`"additionalProperties": false`).

    The model must not slip arguments past a tool (servers that ignore unknown arguments run on
    defaults instead). Closed: the root when it is an object schema, and every object schema
    that declares `properties` (one that declares none, `{"type": "object"}`, is a free-form
    map). Left as written: schemas with `additionalProperties`, `unevaluatedProperties` or
    `patternProperties`; schemas that merge others (`allOf`, `anyOf`, `oneOf`, `$ref`, `if`,
    `dependentSchemas`), which may declare more keys; and everything inside `allOf`, `if`,
    `then`, `else`, `not` and `dependentSchemas` (with what they reference), whose keys add to
    (or invert) another schema's.
    """
    resolver = SCHEMA_REGISTRY.resolver_with_root(DRAFT202012.create_resource(schema))
    combined: set[int] = set()

    def mark(subschema: Schema) -> None:
        for node in _subschemas(subschema):
            if id(node) in combined:
                continue
            combined.add(id(node))
            reference = node.get("$ref")
            if isinstance(reference, str):
                try:
                    mark(resolver.lookup(reference).contents)
                except Unresolvable:
                    pass

    for node in _subschemas(schema):
        for member in (*node.get("allOf", ()), *node.get("dependentSchemas", {}).values()):
            mark(member)
        for keyword in ("if", "then", "else", "not"):
            if keyword in node:
                mark(node[keyword])
    closable = {
        id(node)
        for node in _subschemas(schema)
        if ("properties" in node or (node is schema and node.get("type") == "object"))
        and not node.keys() & (_OPENING | _MERGING)
        and id(node) not in combined
    }
    closed: Schema = _copy_closing(schema, closable)
    return closed


def _copy_closing(node: Any, closable: set[int]) -> Any:
    """A deep copy of `node`, each dict whose id is in `closable` refusing undeclared keys."""
    if isinstance(node, dict):
        copy = {key: _copy_closing(value, closable) for key, value in node.items()}
        if id(node) in closable:
            copy["additionalProperties"] = False
        return copy
    if isinstance(node, list):
        return [_copy_closing(value, closable) for value in node]
    return node


def _non_finite_numbers(container: Any, location: list[str | int]) -> Iterator[ArgumentProblem]:
    """An error for each NaN or infinity in `container` (JSON has none; parsers let them
    through)."""
    for key, value in container.items() if isinstance(container, dict) else enumerate(container):
        if isinstance(value, float):
            if not math.isfinite(value):
                path = json_path([*location, key])
                yield ArgumentProblem(path, "Input should be a finite number", value)
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


def _dropped_undeclared(
    arguments: dict[str, Any],
    errors: Iterable[ValidationError],
    repairs: list[str],
    copies: set[int],
) -> tuple[dict[str, Any], bool]:
    """`arguments` without the keys the schema does not declare (`extra_arguments="ignore"`),
    each drop appended to `repairs`; copied as `_decode_string_encoded` copies."""
    changed = False
    for error in _undeclared_errors(errors):
        path = list(error.absolute_path)
        try:
            container = value_at(arguments, path)
        except (KeyError, IndexError, TypeError):  # an earlier drop took it away
            continue
        names = [name for name in _undeclared_names(error) if name in container]
        if not isinstance(container, dict) or not names:
            continue
        kept = {key: value for key, value in container.items() if key not in names}
        arguments = _replaced(arguments, path, kept, copies)
        copies.add(id(kept))
        for name in names:
            dropped = json_path([*path, name]).removeprefix("$.")
            repairs.append(repair_dropped(dropped))
        changed = True
    return arguments, changed


def _undeclared_errors(errors: Iterable[ValidationError]) -> Iterator[ValidationError]:
    """The errors about undeclared keys, also those of the near-miss alternative of an
    `anyOf`/`oneOf` (see `_undeclared_only_alternative`)."""
    for error in errors:
        if _is_undeclared(error):
            yield error
        elif (alternative := _undeclared_only_alternative(error)) is not None:
            yield from _undeclared_errors(alternative)


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
