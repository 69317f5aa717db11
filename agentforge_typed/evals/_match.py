"""Scoring one answer's calls against the expected ones, by BFCL's rules (and where it differs,
stricter on types): `docs/reference/evals.md`, "Scoring rules".

Pure functions over JSON values: no I/O, no model. A value matches an expected value when it has
the same JSON type and the same value — strings compared after BFCL's normalisation (unless the
case says `"exact"`), an integer parameter never matched by `5.0` or `"5"`, a number parameter
matched by an integer, `true` never by `1`; a list element by element, in order; an object key by
key, each key's expected value being a list of acceptable values (`""`: the key may be left out).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from .._messages import ToolCall
from ._report import ArgumentCheck, CallCheck, SentCall, TurnScore

__all__ = ["OMITTED", "normalize", "score_turn"]

OMITTED = ""
"""In a list of acceptable values: the argument may be left out."""

_BFCL_PUNCTUATION = re.compile(r"[ ,./\-_*^]")
_SHOWN = 200
"""Characters of a value kept in a mismatch's words (the value itself is kept whole)."""


def normalize(text: str) -> str:
    """A string as BFCL compares it: no spaces nor `,./-_*^`, lower case, `'` as `"`."""
    return _BFCL_PUNCTUATION.sub("", text).lower().replace("'", '"')


def score_turn(
    expected: Sequence[Any] | None,
    calls: Sequence[ToolCall],
    schemas: Mapping[str, Mapping[str, Any]],
    *,
    ordered: bool = False,
    strings: str = "bfcl",
    null_is_omitted: Collection[str] = (),
    refused: Mapping[str, str] | None = None,
) -> TurnScore:
    """Score the calls of one answer.

    Args:
        expected: The `ExpectedCall`s, `[]` for none (irrelevance), `None` when not scored.
        calls: The answer's calls, in order.
        schemas: Each tool's arguments schema (JSON Schema), by name: an `integer` parameter
            is matched by integers only, a `number` one by any number.
        ordered: The calls must come in `expected`'s order.
        strings: `"bfcl"` (normalised) or `"exact"`.
        null_is_omitted: The tools whose `null` argument counts as left out (a strict schema rendering makes
            optional parameters required and nullable: `null` is how the model leaves one out).
        refused: The loop's arguments-error text for each call it refused, by call id.
    """
    refused = refused or {}
    sent = [_sent(call, refused.get(call.id)) for call in calls]
    if expected is None:
        return TurnScore(calls=sent)
    parsed = [_arguments(call.arguments) for call in calls]
    rules = _Rules(strings == "bfcl", False)
    nullable = _Rules(strings == "bfcl", True)
    checks = [
        [
            _check_call(
                want,
                call.name,
                args,
                schemas.get(want.name),
                nullable if want.name in null_is_omitted else rules,
            )
            for call, args in zip(calls, parsed, strict=True)
        ]
        for want in expected
    ]
    names_ok = _names_match([w.name for w in expected], [c.name for c in calls], ordered)
    passed = len(calls) == len(expected) and _perfect(checks, ordered)
    pairing = _pairing(checks, ordered)
    results: list[CallCheck] = []
    for index, want in enumerate(expected):
        paired = pairing.get(index)
        if paired is None:
            results.append(
                CallCheck(
                    name=want.name,
                    call=None,
                    ok=False,
                    why=f"{want.name} was not called" + (" in its place" if ordered else ""),
                    arguments=[],
                )
            )
        else:
            found = checks[index][paired]
            assert found is not None  # paired by name
            results.append(found.model_copy(update={"call": paired}))
    unexpected = [i for i in range(len(calls)) if i not in set(pairing.values())]
    return TurnScore(
        calls=sent,
        expected=results,
        unexpected=unexpected,
        tool_selection=names_ok,
        passed=passed,
    )


class _Rules:
    __slots__ = ("normalized", "null_is_omitted")

    def __init__(self, normalized: bool, null_is_omitted: bool) -> None:
        self.normalized = normalized
        self.null_is_omitted = null_is_omitted


def _sent(call: ToolCall, refused: str | None) -> SentCall:
    try:
        arguments: Any = json.loads(call.arguments) if call.arguments.strip() else {}
    except ValueError:
        arguments = call.arguments
    return SentCall(id=call.id, name=call.name, arguments=arguments, refused=refused)


def _arguments(raw: str) -> dict[str, Any] | None:
    """The call's arguments as an object; `None` when they are not one. Empty means `{}`, as the
    loop reads it."""
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _names_match(expected: list[str], called: list[str], ordered: bool) -> bool:
    return expected == called if ordered else sorted(expected) == sorted(called)


def _check_call(
    want: Any,
    name: str,
    arguments: dict[str, Any] | None,
    schema: Mapping[str, Any] | None,
    rules: _Rules,
) -> CallCheck | None:
    """How one call matches one expected call; `None` when it calls another tool."""
    if name != want.name:
        return None
    if arguments is None:
        return CallCheck(
            name=want.name,
            call=None,
            ok=False,
            why="its arguments are not a JSON object",
            arguments=[],
        )
    properties = _properties(schema)
    checks: list[ArgumentCheck] = []
    for argument, acceptable in want.arguments.items():
        present = argument in arguments
        value = arguments.get(argument)
        if present and value is None and rules.null_is_omitted and OMITTED in acceptable:
            present = False
        if not present:
            ok = OMITTED in acceptable
            checks.append(
                ArgumentCheck(
                    name=argument,
                    ok=ok,
                    expected=acceptable,
                    sent=False,
                    why=None if ok else "missing",
                )
            )
            continue
        why = _acceptable(value, acceptable, properties.get(argument), schema, rules)
        checks.append(
            ArgumentCheck(
                name=argument, ok=why is None, expected=acceptable, sent=True, got=value, why=why
            )
        )
    for argument, value in arguments.items():
        if argument not in want.arguments:
            checks.append(
                ArgumentCheck(
                    name=argument,
                    ok=False,
                    expected=None,
                    sent=True,
                    got=value,
                    why="not an expected argument",
                )
            )
    ok = all(check.ok for check in checks)
    why = None if ok else "; ".join(f"{c.name}: {c.why}" for c in checks if not c.ok)
    return CallCheck(name=want.name, call=None, ok=ok, why=why, arguments=checks)


def _acceptable(
    value: Any,
    acceptable: Sequence[Any],
    schema: Mapping[str, Any] | None,
    root: Mapping[str, Any] | None,
    rules: _Rules,
) -> str | None:
    """`None` when `value` matches one of `acceptable`, else why not: the reason itself when
    one value is acceptable or the value's type fits none of them, else the list."""
    candidates = [
        expected
        for expected in acceptable
        if expected != OMITTED or (isinstance(value, str) and value == OMITTED)
    ]
    reasons = []
    for expected in candidates:
        why = _match(value, expected, schema, root, rules)
        if why is None:
            return None
        reasons.append(why)
    if len(reasons) == 1:
        return reasons[0]
    if reasons and all(_json_type(value) != _json_type(e) for e in candidates):
        return reasons[0]
    return f"{_shown(value)} is none of {_shown(candidates or list(acceptable))}"


def _match(
    value: Any,
    expected: Any,
    schema: Mapping[str, Any] | None,
    root: Mapping[str, Any] | None,
    rules: _Rules,
) -> str | None:
    """`None` when `value` matches the one value `expected`, else why not."""
    if expected is None or isinstance(expected, bool):
        if value is expected:
            return None
        return _differs(value, expected)
    if isinstance(expected, (int, float)):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return _wrong_type(value, expected)
        if _kind(schema, root) == "integer" and not isinstance(value, int):
            return f"{_shown(value)} is not an integer (the parameter is one)"
        return None if value == expected else _differs(value, expected)
    if isinstance(expected, str):
        if not isinstance(value, str):
            return _wrong_type(value, expected)
        same = normalize(value) == normalize(expected) if rules.normalized else value == expected
        return None if same else _differs(value, expected)
    if isinstance(expected, list):
        if not isinstance(value, list):
            return _wrong_type(value, expected)
        if len(value) != len(expected):
            return f"{len(value)} items where {len(expected)} are expected"
        items = _resolve(schema, root).get("items") if schema is not None else None
        for index, (got, want) in enumerate(zip(value, expected, strict=True)):
            why = _match(got, want, items if isinstance(items, Mapping) else None, root, rules)
            if why is not None:
                return f"[{index}]: {why}"
        return None
    if isinstance(expected, dict):
        if not isinstance(value, dict):
            return _wrong_type(value, expected)
        properties = _properties(_resolve(schema, root)) if schema is not None else {}
        for key, got in value.items():
            if key not in expected:
                return f"key {_shown(key)} is not expected"
            acceptable = expected[key] if isinstance(expected[key], list) else [expected[key]]
            why = _acceptable(got, acceptable, properties.get(key), root, rules)
            if why is not None:
                return f".{key}: {why}"
        for key, acceptable in expected.items():
            if key not in value and not (isinstance(acceptable, list) and OMITTED in acceptable):
                return f"key {_shown(key)} is missing"
        return None
    return _differs(value, expected)


def _properties(schema: Mapping[str, Any] | None) -> Mapping[str, Any]:
    if schema is None:
        return {}
    properties = schema.get("properties")
    return properties if isinstance(properties, Mapping) else {}


def _resolve(schema: Mapping[str, Any] | None, root: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """`schema`, its local `$ref` followed (once per step: a schema may refer to itself)."""
    if schema is None:
        return {}
    for _ in range(8):
        ref = schema.get("$ref")
        if not (isinstance(ref, str) and ref.startswith("#/") and root is not None):
            break
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part) if isinstance(target, Mapping) else None
        if not isinstance(target, Mapping):
            break
        schema = target
    return schema


def _kind(schema: Mapping[str, Any] | None, root: Mapping[str, Any] | None) -> str | None:
    """`"integer"` for a parameter that takes integers only; else `None`."""
    resolved = _resolve(schema, root)
    branches = [resolved] + [
        _resolve(b, root) for b in resolved.get("anyOf", ()) if isinstance(b, Mapping)
    ]
    found = {t for b in branches for t in _types(b.get("type"))}
    return "integer" if "integer" in found and "number" not in found else None


def _types(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return []


Checks = list[list[CallCheck | None]]
"""Expected call -> call -> how it matches (`None`: another tool)."""


def _perfect(checks: Checks, ordered: bool) -> bool:
    """Whether every expected call can be paired with its own call that matches it whole (the
    caller has checked that there are as many calls as expected ones)."""
    if ordered:
        return all((found := row[i]) is not None and found.ok for i, row in enumerate(checks))
    # Augmenting paths (Kuhn): a real matching, where BFCL takes the first call that matches.
    owner: dict[int, int] = {}

    def place(want: int, seen: set[int]) -> bool:
        for call, check in enumerate(checks[want]):
            if check is not None and check.ok and call not in seen:
                seen.add(call)
                if call not in owner or place(owner[call], seen):
                    owner[call] = want
                    return True
        return False

    return all(place(want, set()) for want in range(len(checks)))


def _pairing(checks: Checks, ordered: bool) -> dict[int, int]:
    """Expected call -> the call it is reported against: in order, the call in its place with
    the same name; otherwise the unpaired call of the same name that matches it best."""
    pairs: dict[int, int] = {}
    if ordered:
        for want, row in enumerate(checks):
            if want < len(row) and row[want] is not None:
                pairs[want] = want
        return pairs
    taken: set[int] = set()
    # The best first: whole matches, then most matching arguments.
    candidates = sorted(
        (
            (not check.ok, -sum(a.ok for a in check.arguments), want, call)
            for want, row in enumerate(checks)
            for call, check in enumerate(row)
            if check is not None
        ),
    )
    for _, _, want, call in candidates:
        if want not in pairs and call not in taken:
            pairs[want] = call
            taken.add(call)
    return pairs


def _wrong_type(value: Any, expected: Any) -> str:
    return f"{_shown(value)} is {_json_type(value)}, where {_json_type(expected)} is expected"


def _differs(value: Any, expected: Any) -> str:
    return f"{_shown(value)} where {_shown(expected)} is expected"


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"
