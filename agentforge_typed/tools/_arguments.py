"""Raw tool-call arguments → validated arguments model: the hot path, and the envelope repairs.

The fast path is one `validate_json` on the raw string, so a valid call costs what pydantic
costs. Only when it fails do we look at the input again, for the envelope quirks models are
known to produce, each repair recorded:

- an empty (or whitespace) string for "no arguments" → `{}`;
- the whole arguments object double-encoded as a JSON string;
- trailing commas before a closing `}` or `]` (outside strings), removed;
- a JSON object or array sent as a string where the schema wants an object or array;
- with `extra_arguments="ignore"`, keys the signature's types do not have are dropped, at any
  depth.

Nothing else is guessed: anything still invalid is reported, one `ArgumentProblem` per problem.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any, Literal

import pydantic_core
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from .._exceptions import ArgumentProblem
from ._argument_errors import json_path, render_input
from ._outcomes import ValidatedArguments
from ._signature import core_schema_nodes

__all__ = [
    "MAX_REPAIR_ROUNDS",
    "REPAIR_DOUBLE_ENCODED",
    "REPAIR_EMPTY",
    "REPAIR_TRAILING_COMMAS",
    "ArgumentsValidator",
    "argument_errors",
    "json_choices",
    "repair_dropped",
    "repair_kind",
    "repair_string_encoded",
    "without_trailing_commas",
]

# Shared with schema-declared tools (`_schema_arguments.py`): a log reads alike whatever the tool.
REPAIR_EMPTY = "empty arguments read as {}"
REPAIR_DOUBLE_ENCODED = "arguments were double-encoded as a JSON string: decoded"
REPAIR_TRAILING_COMMAS = "trailing commas removed"

# A JSON string (skipped as it is), or a comma that follows a value and precedes a closing
# bracket. An unterminated string runs to the end of the text (which then does not parse): were
# its closing quote required, every quote after it would rescan the rest, quadratic on hostile input.
_TRAILING_COMMA = re.compile(
    r'"[^"\\]*(?:\\.[^"\\]*)*"?|(?<=[^ \t\r\n\[{,])([ \t\r\n]*,)(?=[ \t\r\n]*[}\]])'
)


def without_trailing_commas(raw: str | bytes, json_error: str) -> str | None:
    """`raw` without its trailing commas, when the JSON parser's `json_error` was one and the
    text parses once they are gone; otherwise `None` (nothing else is guessed)."""
    if "trailing comma" not in json_error:
        return None
    try:
        text = raw.decode() if isinstance(raw, bytes) else raw
        fixed = _TRAILING_COMMA.sub(lambda m: "" if m.group(1) else m.group(0), text)
        pydantic_core.from_json(fixed)
    except (ValueError, TypeError):  # not UTF-8, or still not JSON
        return None
    return fixed


_DROPPED = "dropped unknown argument "
_DROPPED_PROPERTY = ": unknown property dropped"
_NULL_DEFAULT = ": null read as not given (the default applies)"
_STRING_ENCODED = " sent as a string: decoded"


def repair_string_encoded(path: str, kind: Literal["object", "array"]) -> str:
    """The repair recorded for a JSON object or array sent as a string at `path`."""
    return f"{path}: JSON {kind}{_STRING_ENCODED}"


def repair_dropped(name: str) -> str:
    """The repair recorded for an undeclared argument `name` dropped (`extra_arguments="ignore"`)."""
    return f"{_DROPPED}`{name}`"


def repair_kind(repair: str) -> str:
    """What kind of repair `repair` records, as one of a fixed set of names.

    The texts quote argument names and paths the model wrote; the kind never does, so telemetry
    may record it without the content opt-in. A text this module did not write is `"other"`.
    """
    if repair in _KINDS:
        return _KINDS[repair]
    if repair.startswith(_DROPPED) or repair.endswith(_DROPPED_PROPERTY):
        return "unknown_argument_dropped"
    if repair.endswith(_NULL_DEFAULT):
        return "null_read_as_not_given"
    if repair.endswith(_STRING_ENCODED):
        return "string_encoded_json"
    return "other"


_KINDS = {
    REPAIR_EMPTY: "empty_arguments",
    REPAIR_DOUBLE_ENCODED: "double_encoded",
    REPAIR_TRAILING_COMMAS: "trailing_commas",
}


_OBJECT_ERRORS = frozenset({"model_type", "model_attributes_type", "dataclass_type", "dict_type"})
_ARRAY_ERRORS = frozenset({"list_type", "tuple_type", "set_type", "frozen_set_type"})
_STRING_ENCODED_ERRORS = _OBJECT_ERRORS | _ARRAY_ERRORS
_EXTRA_ERRORS = frozenset({"extra_forbidden", "unexpected_keyword_argument"})
"""An object key its type does not declare (a dataclass reports it as a keyword argument)."""
_JSON_MESSAGES = {
    "bytes_type": "Input should be a string",
    "complex_type": 'Input should be a complex number: a number, or a string such as "1+2j"',
    "complex_str_parsing": 'Input should be a complex number: a number, or a string such as "1+2j"',
    "decimal_type": "Input should be a decimal number: a number, or a string of one",
    "uuid_type": "Input should be a UUID string",
    "unexpected_keyword_argument": "Extra inputs are not permitted",
}
"""pydantic messages that speak of Python types, in words about the JSON a model can send."""
MAX_REPAIR_ROUNDS = 8
"""String-encoded JSON can hide more string-encoded JSON; a bound keeps hostile input cheap."""


class ArgumentsValidator:
    """Validates a tool's raw arguments with a core validator: a signature's
    (`ToolSignature.validator`, whose validated arguments are `(arguments, None, given)`, no model
    instance built), or an arguments model's (`ArgumentsValidator.of_model`).

    Args:
        validator: The core validator (a `SchemaValidator`, or pydantic's plugin wrapper of one).
        core_schema: Its core schema (for the JSON wording of `Literal` and `Enum` messages).
        names: The names the arguments are filled by, listed to a model that sends another.
        strict: pydantic strict mode (no `"5"` → `5`); `False` leaves each model's own setting.
        extra_arguments: `"forbid"` reports unknown keys, `"ignore"` drops them (at any depth).
        null_means_default: The arguments' JSON Schema, for tools whose schema the provider
            enforces (OpenAI strict mode makes every optional property required and nullable):
            a `null` that fails validation where the schema does not require the property is
            read as "not given", so the default applies, at any depth.
    """

    __slots__ = (
        "_choices",
        "_drop_extra",
        "_optional_schema",
        "_repairable_kinds",
        "_unexpected",
        "_validator",
        "strict",
        "validate_json",
    )

    def __init__(
        self,
        validator: Any,
        core_schema: Any,
        names: Sequence[str],
        *,
        strict: bool,
        extra_arguments: Literal["forbid", "ignore"] = "forbid",
        null_means_default: dict[str, Any] | None = None,
    ) -> None:
        self._validator = validator
        self.validate_json = validator.validate_json
        """The core validator's `validate_json`, for callers that inline the fast path."""
        self._optional_schema = null_means_default
        self.strict: bool | None = True if strict else None
        """What `validate_json` takes as `strict`: `True`, or `None` for each model's own setting.
        Callers that inline the fast path (`Tool.execute`) pass it, then call
        `repair(raw, error)` on a `ValidationError`."""
        self._drop_extra = extra_arguments == "ignore"
        self._repairable_kinds = _STRING_ENCODED_ERRORS | (
            _EXTRA_ERRORS if self._drop_extra else frozenset()
        )
        self._unexpected = f"Unexpected argument; this tool takes: {', '.join(names) or 'nothing'}"
        self._choices = json_choices(core_schema)

    @classmethod
    def of_model(
        cls,
        args_model: type[BaseModel],
        *,
        strict: bool,
        extra_arguments: Literal["forbid", "ignore"] = "forbid",
    ) -> ArgumentsValidator:
        """A validator of `args_model` (built with `extra="forbid"`): the validated arguments are
        an instance of it."""
        return cls(
            args_model.__pydantic_validator__,
            args_model.__pydantic_core_schema__,
            # The names its JSON Schema offers (a `validation_alias` where there is one).
            list(args_model.model_json_schema().get("properties", ())),
            strict=strict,
            extra_arguments=extra_arguments,
        )

    def validate(self, raw: str | bytes) -> ValidatedArguments[Any]:
        """The validated arguments (what the validator returns), or the errors."""
        try:
            arguments = self._validator.validate_json(raw, strict=self.strict)
        except ValidationError as error:
            return self.repair(raw, error)
        return ValidatedArguments(arguments)

    def repair(self, raw: str | bytes, error: ValidationError) -> ValidatedArguments[Any]:
        """The slow path, after `error` from the fast one: try the repairs, then revalidate."""
        details = _details(error)
        repairs: list[str] = []
        if details[0]["type"] == "json_invalid":
            fixed = without_trailing_commas(raw, details[0]["msg"])
            if fixed is not None:
                raw, repairs = fixed, [REPAIR_TRAILING_COMMAS]
                try:
                    arguments = self._validator.validate_json(raw, strict=self.strict)
                    return ValidatedArguments(arguments, repairs=(repairs[0],))
                except ValidationError as exc:
                    details = _details(exc)
        if raw and not raw.isspace():
            # Most invalid calls: nothing to repair, so straight to the report.
            if not self._repairable(details):
                return ValidatedArguments(None, self._errors(details), tuple(repairs))
            try:
                data: Any = pydantic_core.from_json(raw)
            except ValueError:
                return ValidatedArguments(None, self._errors(details), tuple(repairs))
            changed = False
        else:
            data, changed, repairs = {}, True, [REPAIR_EMPTY]
        for _ in range(MAX_REPAIR_ROUNDS):
            if changed:
                try:
                    encoded = pydantic_core.to_json(data)
                    arguments = self._validator.validate_json(encoded, strict=self.strict)
                    return ValidatedArguments(arguments, repairs=tuple(repairs))
                except ValidationError as exc:
                    details = _details(exc)
                except ValueError:  # a value pydantic-core parsed but cannot write back
                    break
            data, changed = self._repair_once(data, details, repairs)
            if not changed:
                break
        return ValidatedArguments(None, self._errors(details), tuple(repairs))

    def _repairable(self, errors: Sequence[ErrorDetails]) -> bool:
        """Whether any error is one a repair could fix (most invalid calls have none)."""
        nulls = self._optional_schema is not None
        for detail in errors:
            kind = detail["type"]
            if nulls and detail["input"] is None:
                return True
            if kind in self._repairable_kinds and (
                kind in _EXTRA_ERRORS or isinstance(detail["input"], str)
            ):
                return True
        return False

    def _repair_once(
        self, data: Any, errors: Sequence[ErrorDetails], repairs: list[str]
    ) -> tuple[Any, bool]:
        changed = False
        for detail in errors:
            kind, loc, value = detail["type"], detail["loc"], detail["input"]
            if kind in _EXTRA_ERRORS:
                if self._drop_extra and (path := _drop(data, loc)) is not None:
                    repairs.append(
                        repair_dropped(str(loc[0])) if len(loc) == 1 else path + _DROPPED_PROPERTY
                    )
                    changed = True
                continue
            if value is None and self._optional_schema is not None:
                path = _drop_optional_null(data, loc, self._optional_schema)
                if path is not None:
                    repairs.append(path + _NULL_DEFAULT)
                    changed = True
                continue
            if not isinstance(value, str):
                continue
            wanted: type[Any]
            if kind in _OBJECT_ERRORS:
                wanted = dict
            elif kind in _ARRAY_ERRORS:
                wanted = list
            else:
                continue
            try:
                decoded = pydantic_core.from_json(value)
            except ValueError:
                continue
            if not isinstance(decoded, wanted):
                continue
            data, path = _replace(data, loc, value, decoded)
            if path is None:
                continue
            changed = True
            if path == "$":
                repairs.append(REPAIR_DOUBLE_ENCODED)
            else:
                repairs.append(repair_string_encoded(path, "object" if wanted is dict else "array"))
        return data, changed

    def _errors(self, details: Sequence[ErrorDetails]) -> tuple[ArgumentProblem, ...]:
        return argument_errors(details, unexpected_argument=self._unexpected, choices=self._choices)


_NO_CHOICES: Mapping[str, str] = {}
_CHOICE_KINDS = frozenset({"literal_error", "enum"})


def json_choices(core_schema: Any) -> dict[str, str]:
    """pydantic's message for each `Literal` and `Enum` of a core schema that it words in Python
    (`Input should be 'a' or True`, an enum member's repr), mapped to the same in JSON
    (`Input should be "a" or true`): the `choices` of `argument_errors`."""
    choices = {}
    for node in core_schema_nodes(core_schema):
        if node.get("type") == "literal":
            values = node["expected"]
        elif node.get("type") == "enum":
            values = node["members"]
        else:
            continue
        python = _one_of([repr(v.value if node["type"] == "enum" else v) for v in values])
        json = _one_of([render_input(v.value if isinstance(v, Enum) else v) for v in values])
        if python != json:
            choices[f"Input should be {python}"] = f"Input should be {json}"
    return choices


def _one_of(texts: Sequence[str]) -> str:
    """pydantic's list of choices: `a`, `a or b`, `a, b or c`."""
    return texts[0] if len(texts) == 1 else f"{', '.join(texts[:-1])} or {texts[-1]}"


def _details(error: ValidationError) -> list[ErrorDetails]:
    return error.errors(include_url=False, include_context=False)


def argument_errors(
    error: ValidationError | Sequence[ErrorDetails],
    *,
    unexpected_argument: str | None = None,
    choices: Mapping[str, str] = _NO_CHOICES,
) -> tuple[ArgumentProblem, ...]:
    """A `ValidationError` (or its `.errors()`) as `ArgumentProblem`s: path, message and input.

    The path follows pydantic's location, so a union member's tag (e.g. `$.shape.Circle.radius`)
    stays in it: it tells the model which alternative the message is about. `unexpected_argument`
    replaces pydantic's message for an unknown top-level argument, the few messages that name
    Python types (`Decimal`, `UUID`, `bytes`, `complex`) are reworded for JSON, and so are the
    `Literal` and `Enum` messages found in `choices` (see `json_choices`).
    """
    details = _details(error) if isinstance(error, ValidationError) else error
    # `tuple.__new__` rather than `ArgumentProblem(...)`: the named tuple's Python-level `__new__`
    # costs about as much again, on the path every invalid call takes.
    new = tuple.__new__
    result = []
    for detail in details:
        kind, loc, message, value = detail["type"], detail["loc"], detail["msg"], detail["input"]
        if kind in _JSON_MESSAGES:
            message = _JSON_MESSAGES[kind]
        elif kind in _CHOICE_KINDS:
            message = choices.get(message, message)
        elif unexpected_argument and kind == "extra_forbidden" and len(loc) == 1:
            message = unexpected_argument
        if isinstance(value, (bytes, bytearray)):
            # Raw bytes that are not UTF-8 cannot be rendered as JSON: show what can be read.
            value = bytes(value).decode("utf-8", errors="replace")
        result.append(new(ArgumentProblem, (json_path(loc), message, value)))
    return tuple(result)


def _drop_optional_null(root: Any, loc: Sequence[str | int], schema: dict[str, Any]) -> str | None:
    """Remove the `null` at pydantic location `loc` when its object's schema does not require
    that property; return its JSON path, or `None` when it is required (a real error).

    Location steps the data does not have are union-member tags, skipped as in `_replace`.
    """
    defs = schema.get("$defs", {})
    node, parent = root, None
    nodes: list[dict[str, Any]] = [schema]
    owners: list[dict[str, Any]] = []
    steps: list[str | int] = []
    for step in loc:
        if isinstance(node, dict) and isinstance(step, str) and step in node:
            owners = [n for n in _objects(nodes, defs) if step in n["properties"]]
            nodes = [n["properties"][step] for n in owners]
        elif isinstance(node, list) and isinstance(step, int) and 0 <= step < len(node):
            owners = []
            nodes = [
                n["items"] for n in _alternatives(nodes, defs) if isinstance(n.get("items"), dict)
            ]
        else:
            continue
        parent, node = node, node[step]
        steps.append(step)
    if node is not None or not isinstance(parent, dict) or not owners:
        return None
    if any(steps[-1] in owner.get("required", ()) for owner in owners):
        return None
    del parent[steps[-1]]
    return json_path(steps)


def _alternatives(nodes: Sequence[dict[str, Any]], defs: dict[str, Any]) -> list[dict[str, Any]]:
    """`nodes` with `$ref`s resolved and `anyOf`/`oneOf`/`allOf` flattened."""
    result: list[dict[str, Any]] = []
    pending = list(nodes)
    while pending and len(result) < 64:
        node = pending.pop(0)
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            pending.append(defs.get(ref.removeprefix("#/$defs/"), {}))
            continue
        for keyword in ("anyOf", "oneOf", "allOf"):
            pending.extend(node.get(keyword, ()))
        result.append(node)
    return result


def _objects(nodes: Sequence[dict[str, Any]], defs: dict[str, Any]) -> list[dict[str, Any]]:
    return [n for n in _alternatives(nodes, defs) if "properties" in n]


def _locate(root: Any, loc: Sequence[str | int]) -> tuple[Any, str | int, Any, list[str | int]]:
    """`(parent, key, value, steps)` of the value at pydantic location `loc` (`parent` is `None`
    for the root): the deepest value the data has along `loc`, and the steps taken to it.

    Location steps the data does not have are union-member tags (`"Circle"`, `"int"`), skipped.
    """
    parent: Any = None
    key: str | int = ""
    node = root
    steps: list[str | int] = []
    for step in loc:
        if isinstance(node, dict) and isinstance(step, str) and step in node:
            parent, key, node = node, step, node[step]
        elif isinstance(node, list) and isinstance(step, int) and 0 <= step < len(node):
            parent, key, node = node, step, node[step]
        else:
            continue
        steps.append(step)
    return parent, key, node, steps


def _replace(root: Any, loc: Sequence[str | int], old: str, new: Any) -> tuple[Any, str | None]:
    """Put `new` where `old` sits at pydantic location `loc`; return the new root and its JSON path."""
    parent, key, node, steps = _locate(root, loc)
    if not (isinstance(node, str) and node == old):
        return root, None
    if parent is None:
        return new, "$"
    parent[key] = new
    return root, json_path(steps)


def _drop(root: Any, loc: Sequence[str | int]) -> str | None:
    """Remove the unknown key at pydantic location `loc`; return its JSON path, or `None` when the
    data has no such key (already dropped through another union member's error)."""
    if not loc:
        return None
    *where, key = loc
    _, _, owner, steps = _locate(root, where)
    if not isinstance(owner, dict) or key not in owner:
        return None
    del owner[key]
    return json_path([*steps, key])
