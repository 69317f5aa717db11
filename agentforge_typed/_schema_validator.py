"""The `jsonschema` validator schema-declared tools use: Draft 2020-12 with every problem reported
at the path of the value it is about, references resolved as jsonschema resolves them (its bundled
metaschemas and nothing fetched), and the check that every reference resolves.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError
from jsonschema.protocols import Validator
from jsonschema.validators import extend
from jsonschema_specifications import REGISTRY  # type: ignore[import-untyped]
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012, Schema, SchemaRegistry, SchemaResource

if TYPE_CHECKING:
    from referencing._core import Resolver

__all__ = [
    "SCHEMA_REGISTRY",
    "ToolSchemaValidator",
    "matches_any",
    "unresolvable_references",
    "value_at",
]

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
