"""Example arguments from a JSON Schema, valid under strict pydantic validation.

`FakeModel` calls tools with these, so a tool set can be exercised end to end offline. The
values are deterministic and chosen to pass pydantic's strict JSON mode: integers for
`integer`, ISO strings for dates and times, versioned UUIDs for `uuid1`…`uuid5`, every bound and
`multipleOf` honoured.

Limits (best effort): a `pattern` is satisfied for ordinary regular expressions (literals,
classes, `\\d`/`\\w`/`\\s`, groups, alternation, quantifiers, anchors) but not for lookarounds or
backreferences; `date-time` values carry a UTC offset, so a naive-only field rejects them;
`not`, `if`/`then`/`else` and `dependentSchemas` are ignored.
"""

from __future__ import annotations

import math
import re
import uuid
from typing import Any

__all__ = ["synthesize_arguments"]

JsonSchema = dict[str, Any]

_MAX_DEPTH = 64
"""Nesting beyond which synthesis gives up (a recursive schema with no way to stop)."""
_RECURSION_LIMIT = 2
"""How many times one `$ref` may be open at once before synthesis starts closing the recursion."""

_FORMATS: dict[str, str] = {
    "date-time": "2024-01-15T09:30:00Z",
    "date": "2024-01-15",
    "time": "09:30:00",
    "duration": "PT1H30M",
    "email": "user@example.com",
    "idn-email": "user@example.com",
    "uri": "https://example.com/",
    "iri": "https://example.com/",
    "uri-reference": "https://example.com/",
    "hostname": "example.com",
    "ipv4": "192.0.2.1",
    "ipv6": "2001:db8::1",
    "ipvanyaddress": "192.0.2.1",
    "ipvanyinterface": "192.0.2.1/24",
    "ipvanynetwork": "192.0.2.0/24",
    "path": "example.txt",
    "uuid": "12345678-1234-4678-9234-567812345678",
    "json-string": "{}",
    "color": "red",
}
_UUID_BITS = 0x12345678_1234_1234_1234_567812345678


def synthesize_arguments(schema: JsonSchema) -> dict[str, Any]:
    """Build arguments that validate against `schema` (a tool's arguments object schema).

    Every property is filled in, optional ones included, so nested models get exercised;
    `$ref`/`$defs` are followed and recursion is cut short through optional or nullable paths.

    Raises:
        ValueError: the schema is not an object schema, or no finite value satisfies it (e.g. a
            recursion through required properties only).
    """
    value = _Synthesizer(schema).value(schema, (), 0)
    if not isinstance(value, dict):
        raise ValueError("tool arguments schema must describe a JSON object")
    return value


class _Synthesizer:
    def __init__(self, root: JsonSchema) -> None:
        self.root = root
        self.defs: dict[str, Any] = root.get("$defs", {})

    def resolve(self, ref: str) -> JsonSchema:
        if ref == "#":
            return self.root
        name = ref.removeprefix("#/$defs/")
        target = self.defs.get(name) if name != ref else None
        if not isinstance(target, dict):
            raise ValueError(f"cannot resolve $ref {ref!r}")
        return target

    def value(self, schema: Any, refs: tuple[str, ...], variant: int) -> Any:
        """A valid value for `schema`; `variant` n > 0 asks for a different one (unique items)."""
        if len(refs) > _MAX_DEPTH:
            raise ValueError("schema nests too deeply to synthesize a finite value")
        if schema is True or not isinstance(schema, dict):
            return "example"
        closing = any(refs.count(ref) >= _RECURSION_LIMIT for ref in refs)
        if isinstance(ref := schema.get("$ref"), str):
            return self.value(self.merged(schema, self.resolve(ref)), (*refs, ref), variant)
        if "allOf" in schema:
            merged: JsonSchema = {k: v for k, v in schema.items() if k != "allOf"}
            for part in schema["allOf"]:
                merged = {**self.merged(merged, part)}
            return self.value(merged, refs, variant)
        if "const" in schema:
            return schema["const"]
        if "enum" in schema:
            values = schema["enum"]
            return values[variant % len(values)]
        variants = schema.get("anyOf") or schema.get("oneOf")
        if variants:
            return self.value(self.pick(variants, closing), refs, variant)
        kind = schema.get("type")
        if isinstance(kind, list):
            kind = "null" if closing and "null" in kind else next(t for t in kind if t != "null")
        match kind:
            case "null":
                return None
            case "boolean":
                return variant % 2 == 0
            case "integer":
                return _integer(schema, variant)
            case "number":
                return _number(schema, variant)
            case "string":
                return _string(schema, variant)
            case "array":
                return self.array(schema, refs, variant, closing)
            case "object":
                return self.object(schema, refs, variant, closing)
        if "properties" in schema:
            return self.object(schema, refs, variant, closing)
        return "example"  # no type at all: any value is valid

    @staticmethod
    def merged(schema: JsonSchema, target: Any) -> JsonSchema:
        rest = {key: value for key, value in schema.items() if key != "$ref"}
        return {**target, **rest} if isinstance(target, dict) else rest

    @staticmethod
    def pick(variants: list[Any], closing: bool) -> Any:
        non_null = [v for v in variants if v != {"type": "null"}]
        if closing and len(non_null) < len(variants):
            return {"type": "null"}
        return non_null[0] if non_null else {"type": "null"}

    def array(self, schema: JsonSchema, refs: tuple[str, ...], variant: int, closing: bool) -> Any:
        prefix = schema.get("prefixItems") or []
        low = schema.get("minItems", 0)
        count = max(low, len(prefix), 0 if closing else 1)
        count = min(count, schema.get("maxItems", count))
        items = schema.get("items", False if prefix else {})
        out: list[Any] = []
        for index in range(count):
            sub = prefix[index] if index < len(prefix) else items
            if sub is False:
                break
            out.append(self.value(sub, refs, variant + index))
        return out

    def object(self, schema: JsonSchema, refs: tuple[str, ...], variant: int, closing: bool) -> Any:
        required = set(schema.get("required", ()))
        out: dict[str, Any] = {}
        for name, sub in schema.get("properties", {}).items():
            if closing and name not in required:
                continue
            out[name] = self.value(sub, refs, variant)
        extra = schema.get("additionalProperties")
        if not schema.get("properties") and isinstance(extra, dict) and not closing:
            # "1" is a valid key for `dict[str, X]` and for `dict[int, X]` alike.
            out[str(1 + variant)] = self.value(extra, refs, variant)
        return out


def _integer(schema: JsonSchema, variant: int) -> int:
    step = schema.get("multipleOf", 1)
    low, high = schema.get("minimum"), schema.get("maximum")
    if (bound := schema.get("exclusiveMinimum")) is not None:
        low = math.floor(bound) + 1
    if (bound := schema.get("exclusiveMaximum")) is not None:
        high = math.ceil(bound) - 1
    low = None if low is None else math.ceil(low)
    high = None if high is None else math.floor(high)
    start = 1 + variant
    if low is not None and start < low:
        start = low + variant
    if high is not None and start > high:
        start = high - variant
    value = math.ceil(start / step) * step
    if high is not None and value > high:
        value = math.floor(high / step) * step
    return int(value)


def _number(schema: JsonSchema, variant: int) -> float | int:
    # A whole number by default: valid for `float` and for a `Decimal` with `decimal_places=0`.
    low = schema.get("minimum", schema.get("exclusiveMinimum"))
    high = schema.get("maximum", schema.get("exclusiveMaximum"))
    value: float | int = 1 + variant
    if (step := schema.get("multipleOf")) is not None:
        if low is not None:
            value = max(value, low + (step if "exclusiveMinimum" in schema else 0))
        value = math.ceil(value / step) * step
        if high is not None and value >= high:
            value = math.floor(high / step) * step
            if value == high and "exclusiveMaximum" in schema:
                value -= step
        return value
    if low is not None and high is not None:
        if not low < value < high:
            value = low + (high - low) * (variant + 1) / (variant + 2)
    elif low is not None and value <= low:
        value = math.floor(low) + 1 + variant
    elif high is not None and value >= high:
        value = math.ceil(high) - 1 - variant
    return value


def _string(schema: JsonSchema, variant: int) -> str:
    low = schema.get("minLength", 0)
    high = schema.get("maxLength")
    fmt = schema.get("format")
    if isinstance(fmt, str) and (match := re.fullmatch(r"uuid([1-5])", fmt)):
        value = str(uuid.UUID(int=_UUID_BITS + variant, version=int(match.group(1))))
    elif fmt in _FORMATS:
        value = _FORMATS[fmt]
        if variant and fmt == "email":
            value = f"user{variant}@example.com"
    else:
        pattern = schema.get("pattern")
        if isinstance(pattern, str) and (generated := _from_pattern(pattern, low, high, variant)):
            return generated
        value = "example" if not variant else f"example{variant}"
    if len(value) < low:
        value += "x" * (low - len(value))
    if high is not None and len(value) > high:
        value = value[:high]
    return value


# -- pattern -----------------------------------------------------------------------------------
#
# A small generator for the regular expressions tool schemas use in practice, parsed here rather
# than through `re`'s private parser. The subset: literals and escaped characters; `.`; `\d \w \s`
# and their negations; character classes with ranges (`[a-z0-9_]`, `[^,]`); groups `(...)`,
# `(?:...)`, `(?P<name>...)`; alternation `|`; quantifiers `* + ? {n} {n,} {n,m}` (lazy or not);
# anchors `^ $ \b \A \Z`. Anything else (look-around, back-references, flags) falls back to the
# plain example string. Every candidate is checked with `re.search` before it is used.

_CLASS_ESCAPES = {"d": "7", "D": "a", "w": "a", "W": "-", "s": " ", "S": "a"}
_ANCHOR_ESCAPES = frozenset("bBAZz")
_NEGATED_CANDIDATES = "aZ7_- "


class _UnsupportedPatternError(ValueError):
    """The pattern uses a construct beyond this generator."""


def _from_pattern(pattern: str, low: int, high: int | None, variant: int) -> str | None:
    """A string matching `pattern` (searched, as JSON Schema does) within the length bounds, or
    `None` when the pattern is beyond this small generator."""
    try:
        compiled = re.compile(pattern)
        tree = _PatternParser(pattern).parse()
    except (re.error, _UnsupportedPatternError, RecursionError):
        return None
    for repeat in (1, 2, 4, 8, 16, 32):
        candidate = _generate(tree, variant, repeat)
        fits = len(candidate) >= low and (high is None or len(candidate) <= high)
        if fits and compiled.search(candidate):
            return candidate
    return None


# A parsed pattern: ("seq", [nodes]) | ("alt", [nodes]) | ("lit", text) | ("class", chars, negated)
# | ("repeat", node, low, high); `high` is `None` for unbounded.
_Node = tuple[Any, ...]


class _PatternParser:
    def __init__(self, pattern: str) -> None:
        self.text = pattern
        self.at = 0

    def parse(self) -> _Node:
        node = self.alternation()
        if self.at != len(self.text):
            raise _UnsupportedPatternError(f"unbalanced ')' at {self.at}")
        return node

    def peek(self) -> str | None:
        return self.text[self.at] if self.at < len(self.text) else None

    def take(self) -> str:
        if self.at >= len(self.text):
            raise _UnsupportedPatternError("pattern ends early")
        char = self.text[self.at]
        self.at += 1
        return char

    def alternation(self) -> _Node:
        branches = [self.sequence()]
        while self.peek() == "|":
            self.at += 1
            branches.append(self.sequence())
        return branches[0] if len(branches) == 1 else ("alt", branches)

    def sequence(self) -> _Node:
        items: list[_Node] = []
        while self.peek() not in (None, "|", ")"):
            items.append(self.quantified(self.atom()))
        return ("seq", items)

    def atom(self) -> _Node:
        char = self.take()
        if char in "^$":
            return ("lit", "")
        if char == ".":
            return ("class", "x", False)
        if char == "[":
            return self.char_class()
        if char == "(":
            if self.peek() == "?":
                self.at += 1
                if self.text.startswith(":", self.at):
                    self.at += 1
                elif self.text.startswith("P<", self.at):
                    self.at = self.text.index(">", self.at) + 1
                else:
                    raise _UnsupportedPatternError("look-around or inline flags")
            node = self.alternation()
            if self.take() != ")":
                raise _UnsupportedPatternError("unbalanced '('")
            return node
        if char == "\\":
            escaped = self.take()
            if escaped in _CLASS_ESCAPES:
                return ("class", _CLASS_ESCAPES[escaped], False)
            if escaped in _ANCHOR_ESCAPES:
                return ("lit", "")
            if escaped.isalnum():
                raise _UnsupportedPatternError(f"escape \\{escaped}")
            return ("lit", escaped)
        if char in "*+?{":
            raise _UnsupportedPatternError(f"nothing to repeat at {self.at - 1}")
        return ("lit", char)

    def char_class(self) -> _Node:
        negated = self.peek() == "^"
        if negated:
            self.at += 1
        chars: list[str] = []
        first = True
        while True:
            char = self.take()
            if char == "]" and not first:
                break
            first = False
            if char == "\\":
                escaped = self.take()
                if escaped in _CLASS_ESCAPES:
                    chars.append(_CLASS_ESCAPES[escaped])
                    continue
                if escaped.isalnum():
                    raise _UnsupportedPatternError(f"escape \\{escaped} in a class")
                char = escaped
            if self.peek() == "-" and self.text[self.at + 1 : self.at + 2] not in ("]", ""):
                self.at += 1
                end = self.take()
                if end == "\\" or ord(end) < ord(char):
                    raise _UnsupportedPatternError("range")
                chars.append(
                    "".join(chr(c) for c in range(ord(char), min(ord(end), ord(char) + 95) + 1))
                )
                continue
            chars.append(char)
        return ("class", "".join(chars), negated)

    def quantified(self, node: _Node) -> _Node:
        char = self.peek()
        if char == "{":
            match = re.match(r"\{(\d+)(,(\d*))?\}", self.text[self.at :])
            if match is None:
                return node  # a literal brace, as `re` reads it
            self.at += match.end()
            low = int(match.group(1))
            high = (
                low if match.group(2) is None else int(match.group(3)) if match.group(3) else None
            )
        elif char in ("*", "+", "?"):
            self.at += 1
            low, high = {"*": (0, None), "+": (1, None), "?": (0, 1)}[char]
        else:
            return node
        if self.peek() in ("?", "+"):  # lazy or possessive: the same strings match
            self.at += 1
        return ("repeat", node, low, high)


def _generate(node: _Node, variant: int, repeat: int) -> str:
    kind = node[0]
    if kind == "lit":
        return str(node[1])
    if kind == "seq":
        return "".join(_generate(item, variant, repeat) for item in node[1])
    if kind == "alt":
        return _generate(node[1][variant % len(node[1])], variant, repeat)
    if kind == "class":
        chars, negated = node[1], node[2]
        if negated:
            return next((c for c in _NEGATED_CANDIDATES if c not in chars), "~")
        return str(chars[variant % len(chars)])
    _, sub, low, high = node
    count = max(low, repeat if high is None else min(high, repeat))
    return "".join(_generate(sub, variant, repeat) for _ in range(count))
