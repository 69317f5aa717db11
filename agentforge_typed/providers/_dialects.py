"""JSON Schema dialects: pydantic's schema of a tool's arguments, rendered for one provider.

`ToolSpecification.parameters` holds plain JSON Schema as pydantic generates it. Each provider
speaks a slightly different subset, so before a request it calls `render_schema(parameters,
dialect)`:

- `"openai"` and `"anthropic"`: plain JSON Schema (`tools[].function.parameters`, `input_schema`).
  Only noise is removed: pydantic's generated `title`s and `$schema`.
- `"openai-strict"`: OpenAI Structured Outputs (`strict: true`). Every property is required,
  optional ones become nullable, every object is closed, `oneOf` becomes `anyOf`, and `default`
  moves into the description (`null` is how the model asks for it; see `strict_schema`).
- `"anthropic-strict"`: Anthropic structured outputs (strict tools, `output_config.format`).
  Every object is closed and `oneOf` becomes `anyOf`, as for OpenAI, but optional properties stay
  optional; the keywords Anthropic does not enforce (numeric bounds, lengths, `minItems` over 1,
  `maxItems`) move into the description, and recursion is refused.
- `"gemini"`: the OpenAPI 3 subset of Gemini function declarations. `$ref`s are inlined,
  `anyOf [X, null]` becomes `nullable`, `const` a one-value `enum`. Inlining can multiply a
  schema's size (definitions that refer to each other twice double it per level), so the
  rendering is refused past `MAX_GEMINI_SCHEMA_CHARS`, as soon as it passes them.

A keyword a dialect cannot carry is moved into the description (the model still reads it, and
validation still enforces it). A schema a dialect cannot express at all is refused with
`SchemaDialectError`; a type is never silently narrowed or widened.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, get_args

from .._exceptions import AgentForgeError, path_step

__all__ = [
    "DIALECTS",
    "MAX_GEMINI_SCHEMA_CHARS",
    "Dialect",
    "DialectRules",
    "SchemaDialectError",
    "dialect_rules",
    "render_schema",
]

Dialect = Literal["openai", "openai-strict", "anthropic", "anthropic-strict", "gemini"]
"""A provider's JSON Schema dialect."""

DIALECTS: tuple[Dialect, ...] = get_args(Dialect)
"""Every `Dialect`, in declaration order."""

JsonSchema = dict[str, Any]

# Where JSON Schema nests subschemas: one schema, a list of them, or a name → schema map.
_SCHEMA_VALUE_KEYS = frozenset(
    {
        "items",
        "additionalItems",
        "additionalProperties",
        "unevaluatedItems",
        "unevaluatedProperties",
        "contains",
        "propertyNames",
        "not",
        "if",
        "then",
        "else",
    }
)
_SCHEMA_LIST_KEYS = frozenset({"anyOf", "oneOf", "allOf", "prefixItems"})
_SCHEMA_MAP_KEYS = frozenset({"properties", "patternProperties", "dependentSchemas", "$defs"})

# Keywords that give a node a type; a node with none of them accepts any value.
_TYPE_KEYS = frozenset({"type", "$ref", "anyOf", "oneOf", "allOf", "enum", "const"})
_NOISE = frozenset({"title", "$schema"})

_STRICT_KEEP = frozenset(
    {
        "type",
        "description",
        "enum",
        "const",
        "anyOf",
        "$ref",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "minItems",
        "maxItems",
        "pattern",
        "format",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
    }
)
_STRICT_DROP = frozenset({*_NOISE, "discriminator"})
_STRICT_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
_LOOKAROUND = re.compile(r"(?<!\\)\(\?(?:=|!|<=|<!)")

MAX_GEMINI_SCHEMA_CHARS = 100_000
"""The most characters of one tool's schema in the `gemini` dialect (as compact JSON, about
25,000 tokens). The OpenAPI subset has no `$ref`, so each reference is replaced by what it refers
to: a schema of a few kilobytes whose definitions each refer to the next one twice doubles with
every level. Past this size the rendering stops (its work linear in the size reached) and is
refused; the JSON Schema Gemini is sent by default keeps `$defs` and has no such limit."""

_GEMINI_KEEP = frozenset(
    {
        "type",
        "format",
        "description",
        "nullable",
        "enum",
        "items",
        "properties",
        "required",
        "minItems",
        "maxItems",
        "minimum",
        "maximum",
        "anyOf",
    }
)
_GEMINI_DROP = frozenset({*_NOISE, "discriminator"})
_GEMINI_FORMATS = {
    "string": frozenset({"date-time"}),
    "integer": frozenset({"int32", "int64"}),
    "number": frozenset({"float", "double"}),
}


class SchemaDialectError(AgentForgeError, ValueError):
    """A tool's schema cannot be expressed in a provider's dialect without changing its meaning.

    Raised when the schema is rendered (at registration), never silently worked around.

    Attributes:
        dialect: The dialect that cannot express the schema.
        path: JSON path of the offending property, e.g. `$.order.metadata` (`$` for the root).
        reason: Why the dialect cannot express it.
    """

    def __init__(self, dialect: str, path: str, reason: str) -> None:
        self.dialect = dialect
        self.path = path
        self.reason = reason
        super().__init__(f"the {dialect} schema dialect cannot express {path}: {reason}")


def render_schema(parameters: JsonSchema, dialect: Dialect) -> JsonSchema:
    """Render pydantic's JSON Schema of a tool's arguments for `dialect`.

    Pure: returns a new dict and never mutates `parameters`.

    Raises:
        SchemaDialectError: the dialect cannot express the schema (e.g. an open `dict[str, X]`
            for `"openai-strict"`, recursion for `"gemini"`, or a `"gemini"` rendering over
            `MAX_GEMINI_SCHEMA_CHARS`), the root is not an object, or the schema is nested too
            deeply to render.
        ValueError: `dialect` is not one of `Dialect`.
    """
    rules = dialect_rules(dialect)
    try:
        root = _inline_root_ref(parameters)
        if root.get("type") != "object":
            raise SchemaDialectError(
                dialect, "$", "a root that is not an object (tool arguments are a JSON object)"
            )
        return rules.render(root)
    except RecursionError:
        raise SchemaDialectError(dialect, "$", "a schema nested too deeply to render") from None


@dataclass(frozen=True)
class DialectRules:
    """Everything one dialect decides: how a schema is rendered, and which names it accepts.

    Adding a dialect is one `DialectRules` in the table below (and one `Dialect` literal).
    """

    render: Callable[[JsonSchema], JsonSchema]
    """The rendering of an arguments schema whose root is an object (raises `SchemaDialectError`)."""
    tool_name: re.Pattern[str]
    """What the provider accepts as a tool (function) name, matched whole."""
    tool_name_rule: str
    """`tool_name` in words, for error messages."""
    property_name: re.Pattern[str] | None = None
    """What the provider accepts as a top-level property name, when it checks them at all."""
    property_name_rule: str = ""


def dialect_rules(dialect: str) -> DialectRules:
    """The rules of `dialect`.

    Raises:
        ValueError: `dialect` is not one of `Dialect`.
    """
    try:
        return _DIALECT_RULES[dialect]  # type: ignore[index]
    except KeyError:
        raise ValueError(
            f"unknown schema dialect {dialect!r}; expected one of {DIALECTS}"
        ) from None


# -- shared helpers ----------------------------------------------------------------------------


def _map_schema(
    schema: JsonSchema, fn: Callable[[JsonSchema, str], JsonSchema], path: str
) -> JsonSchema:
    """Copy `schema`, replacing each direct subschema `s` with `fn(s, path_of_s)`."""
    out: JsonSchema = {}
    for key, value in schema.items():
        if key in _SCHEMA_VALUE_KEYS and isinstance(value, dict):
            sub = "[*]" if key == "items" else ".*" if key == "additionalProperties" else ""
            out[key] = fn(value, path + sub)
        elif key in _SCHEMA_LIST_KEYS and isinstance(value, list):
            out[key] = [
                fn(item, f"{path}[{index}]" if key == "prefixItems" else path)
                if isinstance(item, dict)
                else copy.deepcopy(item)
                for index, item in enumerate(value)
            ]
        elif key in _SCHEMA_MAP_KEYS and isinstance(value, dict):
            out[key] = {
                name: fn(item, path + path_step(name) if key == "properties" else path)
                if isinstance(item, dict)
                else copy.deepcopy(item)
                for name, item in value.items()
            }
        else:
            out[key] = copy.deepcopy(value)
    return out


def _def_name(ref: str) -> str | None:
    return ref[len("#/$defs/") :] if ref.startswith("#/$defs/") else None


def _inline_root_ref(schema: JsonSchema) -> JsonSchema:
    """Turn pydantic's `{"$ref": "#/$defs/Root", "$defs": …}` (a recursive root model) into an
    object at the top whose self-references point to `#`."""
    ref = schema.get("$ref")
    defs = schema.get("$defs")
    name = _def_name(ref) if isinstance(ref, str) else None
    if name is None or not isinstance(defs, dict) or name not in defs:
        return schema
    target = f"#/$defs/{name}"

    def rewrite(node: JsonSchema, path: str) -> JsonSchema:
        out = _map_schema(node, rewrite, path)
        if out.get("$ref") == target:
            out["$ref"] = "#"
        return out

    rest = {key: value for key, value in schema.items() if key not in ("$ref", "$defs")}
    root = rewrite({**defs[name], **rest}, "$")
    others = {key: value for key, value in defs.items() if key != name}
    if others:
        root["$defs"] = rewrite({"$defs": others}, "$")["$defs"]
    return root


def _plain(schema: JsonSchema, path: str) -> JsonSchema:
    out = _map_schema(schema, _plain, path)
    for key in _NOISE:
        out.pop(key, None)
    return out


def _note(key: str, value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return f"{key}: {text}"


def _describe(out: JsonSchema, notes: list[str]) -> None:
    """Append the constraints a dialect cannot carry to the node's description."""
    if not notes:
        return
    text = ", ".join(notes)
    description = out.get("description")
    out["description"] = f"{description} ({text})" if description else text


def _has_type(schema: JsonSchema) -> bool:
    return any(key in schema for key in _TYPE_KEYS)


def _accepts_null(schema: JsonSchema) -> bool:
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    if "const" in schema and schema["const"] is None:
        return True
    if None in schema.get("enum", ()):
        return True
    return any(isinstance(s, dict) and _accepts_null(s) for s in schema.get("anyOf", ()))


def _merge_all_of(schema: JsonSchema, dialect: str, path: str) -> JsonSchema:
    """Fold a one-element `allOf` (older pydantic's way of annotating a `$ref`) into the node."""
    parts = schema.get("allOf")
    if parts is None:
        return schema
    if len(parts) != 1 or not isinstance(parts[0], dict):
        raise SchemaDialectError(dialect, path, "`allOf` with several schemas")
    rest = {key: value for key, value in schema.items() if key != "allOf"}
    return {**parts[0], **rest}


def _fixed_tuple_items(out: JsonSchema, dialect: str, path: str) -> None:
    """Rewrite `prefixItems` as `items` when every position has the same schema; else refuse."""
    prefix = out.pop("prefixItems", None)
    if prefix is None:
        return
    if out.get("items", False) is not False:
        raise SchemaDialectError(
            dialect, path, "a tuple with extra items (`prefixItems` plus `items`)"
        )
    if not prefix or any(item != prefix[0] for item in prefix):
        raise SchemaDialectError(
            dialect,
            path,
            "a tuple of different element types (`prefixItems`); use `list[X]` or `tuple[X, ...]`",
        )
    out["items"] = prefix[0]
    out["minItems"] = out["maxItems"] = len(prefix)


# -- openai-strict -----------------------------------------------------------------------------


class _StrictRenderer:
    """OpenAI Structured Outputs: closed objects, every property required, `$defs` kept."""

    dialect = "openai-strict"
    keep = _STRICT_KEEP
    formats = _STRICT_FORMATS

    def __init__(self, root: JsonSchema) -> None:
        self.root = root
        self.defs: dict[str, Any] = root.get("$defs", {})
        self.done: dict[str, JsonSchema] = {}

    def render(self) -> JsonSchema:
        body = {key: value for key, value in self.root.items() if key != "$defs"}
        out = self.node(body, "$")
        for name, schema in self.defs.items():  # definitions nothing references
            if name not in self.done:
                self.define(name, schema, f"$defs.{name}")
        if self.done:
            out = {"$defs": {name: self.done[name] for name in self.defs}, **out}
        return out

    def define(self, name: str, schema: Any, path: str) -> None:
        self.done[name] = {}  # in progress: a recursive reference must not recurse again
        self.done[name] = self.node(schema, path)

    def refuse(self, path: str, reason: str) -> SchemaDialectError:
        return SchemaDialectError(self.dialect, path, reason)

    def node(self, schema: JsonSchema, path: str) -> JsonSchema:
        schema = _merge_all_of(schema, self.dialect, path)
        if "oneOf" in schema:
            if "anyOf" in schema:
                raise self.refuse(path, "`oneOf` next to `anyOf`")
            schema = {("anyOf" if k == "oneOf" else k): v for k, v in schema.items()}
        if not _has_type(schema):
            raise self.refuse(path, "a value of any type (no `type`)")
        if schema.get("type") == "object":
            self.refuse_open_object(schema, path)
        if schema.get("type") == "array":
            schema = dict(schema)
            _fixed_tuple_items(schema, self.dialect, path)
            items = schema.get("items")
            if not isinstance(items, dict) or not _has_type(items):
                raise self.refuse(path, "an array without a typed `items`")
        out = _map_schema(schema, self.node, path)
        notes: list[str] = []
        for key in list(out):
            value = out[key]
            if key in _STRICT_DROP:
                del out[key]
            elif key not in self.keep or (
                (key == "format" and value not in self.formats)
                or (key == "pattern" and _LOOKAROUND.search(str(value)))
            ):
                notes.append(_note(key, value))
                del out[key]
        if out.get("type") == "object":
            self.close_object(out, set(schema.get("required", ())))
        _describe(out, notes)
        ref = out.get("$ref")
        if isinstance(ref, str):
            self.follow(ref, path)
            if len(out) > 1:  # strict mode allows no siblings next to `$ref`, but next to anyOf
                out = {"anyOf": [{"$ref": out.pop("$ref")}], **out}
        return out

    def follow(self, ref: str, path: str) -> None:
        if ref == "#":
            return
        name = _def_name(ref)
        if name is None or name not in self.defs:
            raise self.refuse(path, f"an unresolvable `$ref` {ref!r}")
        if name not in self.done:
            self.define(name, self.defs[name], path)

    def refuse_open_object(self, schema: JsonSchema, path: str) -> None:
        extra = schema.get("additionalProperties")
        if (
            extra is True
            or isinstance(extra, dict)
            or "patternProperties" in schema
            or ("properties" not in schema and extra is None)
        ):
            raise self.refuse(
                path,
                "an open object (`dict[str, X]`, extra keys allowed, or an untyped object); "
                "use a model with named fields",
            )

    @staticmethod
    def close_object(out: JsonSchema, required: set[str]) -> None:
        properties: JsonSchema = out.setdefault("properties", {})
        for name, prop in properties.items():
            if name not in required:
                properties[name] = _nullable(prop)
        out["required"] = list(properties)
        out["additionalProperties"] = False


_SCALARS = frozenset({"string", "integer", "number", "boolean"})


def _nullable(schema: JsonSchema) -> JsonSchema:
    """`schema` that also accepts `null` (strict mode's spelling of an optional property)."""
    if _accepts_null(schema):
        return schema
    kind = schema.get("type")
    if "anyOf" in schema:
        return {**schema, "anyOf": [*schema["anyOf"], {"type": "null"}]}
    if kind in _SCALARS and "enum" not in schema and "const" not in schema:
        return {**schema, "type": [kind, "null"]}
    inner = {key: value for key, value in schema.items() if key != "description"}
    out: JsonSchema = {"anyOf": [inner, {"type": "null"}]}
    if "description" in schema:
        out["description"] = schema["description"]
    return out


# -- anthropic-strict --------------------------------------------------------------------------

_ANTHROPIC_STRICT_KEEP = _STRICT_KEEP - {
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "maxItems",
}
_ANTHROPIC_STRICT_FORMATS = _STRICT_FORMATS | {"uri"}


class _AnthropicStrictRenderer(_StrictRenderer):
    """Anthropic structured outputs: closed objects, optional properties kept optional, no
    recursion, and only the constraints it enforces
    (https://docs.anthropic.com/en/docs/build-with-claude/structured-outputs)."""

    dialect = "anthropic-strict"
    keep = _ANTHROPIC_STRICT_KEEP
    formats = _ANTHROPIC_STRICT_FORMATS

    def node(self, schema: JsonSchema, path: str) -> JsonSchema:
        out = super().node(schema, path)
        if out.get("minItems") not in (None, 0, 1):
            _describe(out, [_note("minItems", out.pop("minItems"))])
        return out

    def follow(self, ref: str, path: str) -> None:
        name = _def_name(ref)
        if ref == "#" or (name in self.done and not self.done[name]):
            raise self.refuse(path, f"a recursive schema ({ref!r})")
        super().follow(ref, path)

    @staticmethod
    def close_object(out: JsonSchema, required: set[str]) -> None:
        out.setdefault("properties", {})
        out["additionalProperties"] = False


# -- gemini ------------------------------------------------------------------------------------


class _GeminiRenderer:
    """Gemini function declarations: an OpenAPI 3 subset without `$ref`, `const` or type lists.

    Every `$ref` is inlined, so the output may be far larger than the input: the characters
    rendered are counted as each node is finished (exactly its compact JSON), and the rendering
    is refused as soon as they pass `MAX_GEMINI_SCHEMA_CHARS`.
    """

    dialect = "gemini"

    def __init__(self, root: JsonSchema) -> None:
        self.root = root
        self.defs: dict[str, Any] = root.get("$defs", {})
        self.chars = 0
        """The compact JSON size of the finished subtrees not yet inside a finished parent: it
        only grows, and ends as the size of the whole rendering."""
        self.inlining: set[str] = {"#"}
        """The references being inlined on the path from the root (a set: cycles are found in
        O(1) however deep the path)."""

    def render(self) -> JsonSchema:
        body = {key: value for key, value in self.root.items() if key != "$defs"}
        return self.node(body, "$")[0]

    def refuse(self, path: str, reason: str) -> SchemaDialectError:
        return SchemaDialectError(self.dialect, path, reason)

    def node(self, schema: JsonSchema, path: str) -> tuple[JsonSchema, int]:
        """The rendering of `schema`, and its size as compact JSON."""
        inlined: list[str] = []
        while True:  # inline `$ref`s and unwrap `anyOf [X, null]` until the node is stable
            schema = self.inline(schema, path, inlined)
            split = self.split_nulls(schema, path)
            if split == schema:
                break
            schema = split
        if "const" in schema:
            schema = {**schema, "enum": [schema["const"]]}
            del schema["const"]
        if not _has_type(schema):
            raise self.refuse(path, "a value of any type (no `type`)")
        if "prefixItems" in schema:
            schema = dict(schema)
            _fixed_tuple_items(schema, self.dialect, path)
        # Each subschema rendered, with its size (kept alive, so that no id is reused).
        children: dict[int, tuple[JsonSchema, int]] = {}

        def child(sub: JsonSchema, sub_path: str) -> JsonSchema:
            rendered, size = self.node(sub, sub_path)
            children[id(rendered)] = rendered, size
            return rendered

        out = _map_schema(schema, child, path)
        self.inlining.difference_update(inlined)
        notes: list[str] = []
        if "enum" in out:
            self.enum(out, notes, path)
        formats = _GEMINI_FORMATS.get(str(out.get("type")), frozenset())
        for key in list(out):
            value = out[key]
            # A closed object says nothing the property list does not: only declared properties
            # are offered, and the validator still refuses others. An open one is a note.
            if key in _GEMINI_DROP or (key == "additionalProperties" and value is False):
                del out[key]
            elif key not in _GEMINI_KEEP or (key == "format" and value not in formats):
                notes.append(_note(key, value))
                del out[key]
        _describe(out, notes)
        # A subschema moved into the description is there as longer text: the count only grows.
        sizes = {key: size for key, (_, size) in children.items()}
        size = _json_size(out, sizes)
        self.chars += size - sum(sizes.values())
        if self.chars > MAX_GEMINI_SCHEMA_CHARS:
            raise self.refuse(
                "$",
                f"a rendering of more than {MAX_GEMINI_SCHEMA_CHARS:,} characters "
                "(MAX_GEMINI_SCHEMA_CHARS): the subset has no `$ref`, and inlining each reference "
                "multiplies the schema; the JSON Schema GeminiChatModel sends by default "
                '(function_schema="json-schema") keeps its `$defs` shared',
            )
        return out, size

    def inline(self, schema: JsonSchema, path: str, inlined: list[str]) -> JsonSchema:
        """Replace `$ref` (and a one-element `allOf`) by its target, refusing recursion; the
        references followed are added to `inlining` (and to `inlined`, for the caller to take
        them out once the node's subschemas are rendered)."""
        schema = _merge_all_of(schema, self.dialect, path)
        while isinstance(ref := schema.get("$ref"), str):
            if ref in self.inlining:
                raise self.refuse(path, f"a recursive schema ({ref!r}), which cannot be inlined")
            self.inlining.add(ref)
            inlined.append(ref)
            name = _def_name(ref)
            target = self.defs.get(name) if name is not None else None
            if not isinstance(target, dict):
                raise self.refuse(path, f"an unresolvable `$ref` {ref!r}")
            rest = {key: value for key, value in schema.items() if key != "$ref"}
            schema = _merge_all_of({**target, **rest}, self.dialect, path)
        return schema

    def split_nulls(self, schema: JsonSchema, path: str) -> JsonSchema:
        """Spell `null` as `nullable: true`, whether it came as a union variant or a type list."""
        out = dict(schema)
        if "oneOf" in out:  # pydantic's oneOf variants exclude each other: anyOf is equivalent
            out["anyOf"] = [*out.pop("oneOf"), *out.get("anyOf", ())]
        kind = out.get("type")
        if isinstance(kind, list):
            types = [t for t in kind if t != "null"]
            if len(types) < len(kind):
                out["nullable"] = True
            if len(types) == 1:
                out["type"] = types[0]
            else:
                del out["type"]
                out["anyOf"] = [{"type": t} for t in types]
        if "anyOf" in out:
            variants = out.pop("anyOf")
            kept = [v for v in variants if v != {"type": "null"}]
            if len(kept) < len(variants):
                out["nullable"] = True
            if len(kept) == 1 and isinstance(kept[0], dict):
                out = {**kept[0], **out}
            elif kept:
                out["anyOf"] = kept
        if out.get("type") == "null":
            raise self.refuse(path, "a value that can only be `null`")
        return out

    def enum(self, out: JsonSchema, notes: list[str], path: str) -> None:
        """Gemini enums hold strings only; another enum keeps its type and moves to the text."""
        values = [value for value in out["enum"] if value is not None]
        if len(values) < len(out["enum"]):
            out["nullable"] = True
        kinds = {_json_type(value) for value in values}
        if len(kinds) != 1:
            raise self.refuse(path, "an enum mixing value types")
        kind = kinds.pop()
        out.setdefault("type", kind)
        if kind == "string":
            out["enum"] = values
        else:
            notes.append(_note("enum", values))
            del out["enum"]


def _json_size(value: Any, known: dict[int, int]) -> int:
    """The length of `value` as compact JSON (`json.dumps(value, separators=(",", ":"),
    ensure_ascii=False)`), taking the size of each object whose id is in `known` from there."""
    if isinstance(value, dict):
        size = known.get(id(value))
        if size is not None:
            return size
        return (
            1
            + len(value)
            + sum(
                len(json.dumps(str(key), ensure_ascii=False)) + 1 + _json_size(item, known)
                for key, item in value.items()
            )
            + (not value)
        )
    if isinstance(value, list | tuple):
        return 1 + len(value) + sum(_json_size(item, known) for item in value) + (not value)
    return len(json.dumps(value, ensure_ascii=False, default=str))


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


# -- the table ---------------------------------------------------------------------------------

# Names as the providers' API references define them.
_WORD_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_WORD_NAME_RULE = "letters, digits, _ and -, 1 to 64 characters"

_DIALECT_RULES: dict[Dialect, DialectRules] = {
    "openai": DialectRules(lambda root: _plain(root, "$"), _WORD_NAME, _WORD_NAME_RULE),
    "openai-strict": DialectRules(
        lambda root: _StrictRenderer(root).render(), _WORD_NAME, _WORD_NAME_RULE
    ),
    "anthropic": DialectRules(
        lambda root: _plain(root, "$"),
        _WORD_NAME,
        _WORD_NAME_RULE,
        # Anthropic rejects the whole request when a top-level property key breaks this.
        property_name=re.compile(r"[a-zA-Z0-9_.-]{1,64}"),
        property_name_rule="letters, digits, _, . and -, 1 to 64 characters",
    ),
    "anthropic-strict": DialectRules(
        lambda root: _AnthropicStrictRenderer(root).render(),
        _WORD_NAME,
        _WORD_NAME_RULE,
        property_name=re.compile(r"[a-zA-Z0-9_.-]{1,64}"),
        property_name_rule="letters, digits, _, . and -, 1 to 64 characters",
    ),
    "gemini": DialectRules(
        lambda root: _GeminiRenderer(root).render(),
        re.compile(r"[a-zA-Z_][a-zA-Z0-9_.-]{0,63}"),
        "a letter or _ first, then letters, digits, _, . and -, at most 64 characters",
    ),
}
