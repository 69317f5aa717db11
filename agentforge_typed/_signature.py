"""A function's signature as a tool: the pydantic arguments model, its JSON Schema, and how to call.

Everything here runs once, at decoration; anything a model could not express or fill is refused
then, with a message naming the function and the parameter.
"""

from __future__ import annotations

import functools
import inspect
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PydanticUserError, TypeAdapter, create_model
from pydantic.errors import PydanticInvalidForJsonSchema, PydanticSchemaGenerationError
from pydantic.fields import FieldInfo
from pydantic.json_schema import GenerateJsonSchema
from pydantic_core import CoreSchema

from ._docstrings import parse_docstring
from ._execution import ToolContext

__all__ = [
    "TOOL_NAME_PATTERN",
    "ToolJsonSchema",
    "ToolSignature",
    "check_tool_name",
    "inspect_function",
]

TOOL_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
"""What every provider accepts as a tool (function) name."""


class ToolJsonSchema(GenerateJsonSchema):
    """pydantic's JSON Schema without the per-property `title`s derived from field names.

    `"city": {"title": "City", "type": "string"}` tells the model nothing the key does not, and
    costs tokens on every request; model titles in `$defs` (class names) are kept.
    """

    def field_title_should_be_set(self, schema: CoreSchema) -> bool:
        """Never: a field's title only repeats its name."""
        return False


@dataclass(frozen=True)
class ToolSignature:
    """What decoration learns from a function."""

    args_model: type[BaseModel]
    parameters: dict[str, Any]
    """The arguments' JSON Schema (pydantic's dialect, top-level title removed)."""
    description: str
    context_parameter: str | None
    """The parameter annotated with `ToolContext`, injected at run time."""
    positional: tuple[str, ...]
    """Positional-only parameters, in order: passed positionally."""
    renames: Mapping[str, str] | None
    """Model field name → parameter name, for parameters that cannot be field names as they are."""
    return_annotation: Any
    """The declared return type, or `inspect.Parameter.empty`."""


def check_tool_name(name: str) -> str:
    """Return `name`, or raise `ValueError` when providers would refuse it."""
    if not TOOL_NAME_PATTERN.fullmatch(name):
        raise ValueError(
            f"invalid tool name {name!r}: a tool name must match {TOOL_NAME_PATTERN.pattern}"
        )
    return name


def inspect_function(
    function: Callable[..., Any],
    *,
    name: str,
    has_receiver: bool,
    localns: Mapping[str, Any] | None = None,
) -> ToolSignature:
    """Build the arguments model and schema of `function` (skipping `self`/`cls` when `has_receiver`)."""
    label = f"tool `{name}` ({getattr(function, '__qualname__', function)!r})"
    annotated, documented = _annotated_function(function)
    try:
        hints = typing.get_type_hints(annotated, localns=dict(localns or {}), include_extras=True)
    except Exception as exc:  # NameError for an undefined forward reference, TypeError, …
        raise TypeError(f"{label}: cannot resolve its type annotations: {exc}") from exc

    docstring = parse_docstring(documented)
    parameters = list(inspect.signature(function).parameters.values())
    if has_receiver:
        parameters = parameters[1:]

    fields: dict[str, Any] = {}
    renames: dict[str, str] = {}
    positional: list[str] = []
    context_parameter: str | None = None
    for parameter in parameters:
        where = f"{label}, parameter `{parameter.name}`"
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            raise TypeError(f"{where}: `*{parameter.name}` is not supported; declare each argument")
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            raise TypeError(
                f"{where}: `**{parameter.name}` is not supported; declare each argument"
            )
        if parameter.name not in hints:
            raise TypeError(f"{where}: missing type annotation")
        annotation = hints[parameter.name]
        if _is_context(annotation):
            if context_parameter is not None:
                raise TypeError(f"{where}: only one parameter may be a `ToolContext`")
            if parameter.kind is inspect.Parameter.POSITIONAL_ONLY:
                raise TypeError(f"{where}: a `ToolContext` parameter cannot be positional-only")
            context_parameter = parameter.name
            continue
        if parameter.kind is inspect.Parameter.POSITIONAL_ONLY:
            positional.append(parameter.name)
        field_name, alias = parameter.name, None
        if field_name.startswith("_") or hasattr(BaseModel, field_name):
            # `_x` would be a private attribute and `json`/`copy`/`model_*` shadow BaseModel
            # members: store under another field name, keep the parameter name as the alias.
            field_name, alias = f"arg{len(fields)}_{field_name.lstrip('_')}", field_name
            renames[field_name] = parameter.name
        doc = docstring.parameters.get(parameter.name)
        fields[field_name] = _field(annotation, parameter, doc, alias)

    # Always `extra="forbid"`: the schema tells the model it must not invent arguments; a tool
    # with `extra_arguments="ignore"` drops them in the validator's repair path instead.
    config = ConfigDict(extra="forbid", protected_namespaces=())
    try:
        args_model: type[BaseModel] = create_model(f"{name}_arguments", __config__=config, **fields)
        schema = args_model.model_json_schema(schema_generator=ToolJsonSchema)
    except (PydanticSchemaGenerationError, PydanticInvalidForJsonSchema, PydanticUserError) as exc:
        raise TypeError(_unsupported_type_message(label, fields, renames, exc)) from exc
    schema.pop("title", None)

    return ToolSignature(
        args_model=args_model,
        parameters=schema,
        description=docstring.description,
        context_parameter=context_parameter,
        positional=tuple(positional),
        renames=renames or None,
        return_annotation=hints.get("return", inspect.Parameter.empty),
    )


def _annotated_function(function: Callable[..., Any]) -> tuple[Callable[..., Any], Any]:
    """The function that carries the annotations of `function`, and the object whose docstring
    describes it: the wrapped function of a `functools.partial`, the `__call__` method (or its
    class) of a callable object; `function` itself otherwise. (The signature is still read from
    `function`, so a partial's bound arguments are left out.)"""
    while isinstance(function, functools.partial):
        function = function.func
    if inspect.isroutine(function) or inspect.isclass(function):
        return function, function
    call = type(function).__call__
    return call, call if inspect.getdoc(call) else type(function)


def _is_context(annotation: Any) -> bool:
    """`ToolContext`, `ToolContext[X]`, also inside `Annotated[...]` or `... | None`."""
    origin = typing.get_origin(annotation)
    if annotation is ToolContext or origin is ToolContext:
        return True
    if origin is Annotated:
        return _is_context(annotation.__origin__)
    if origin in (typing.Union, types.UnionType):
        return any(_is_context(member) for member in typing.get_args(annotation))
    return False


def _field(
    annotation: Any, parameter: inspect.Parameter, doc: str | None, alias: str | None
) -> tuple[Any, Any]:
    """`(annotation, default)` for `create_model`; a `Field` description beats the docstring."""
    if doc and not _has_description(annotation, parameter.default):
        annotation = Annotated[annotation, Field(description=doc)]
    if alias is not None:
        annotation = Annotated[annotation, Field(alias=alias)]
    default = parameter.default
    return (annotation, ... if default is inspect.Parameter.empty else default)


def _has_description(annotation: Any, default: Any) -> bool:
    if isinstance(default, FieldInfo) and default.description is not None:
        return True
    if typing.get_origin(annotation) is not Annotated:
        return False
    return any(
        isinstance(meta, FieldInfo) and meta.description is not None
        for meta in annotation.__metadata__
    )


def _unsupported_type_message(
    label: str, fields: Mapping[str, Any], renames: Mapping[str, str], error: Exception
) -> str:
    # pydantic's error names the type, not the parameter: find the parameter that fails alone.
    for field_name, (annotation, _) in fields.items():
        try:
            TypeAdapter(annotation).json_schema()
        except (PydanticSchemaGenerationError, PydanticInvalidForJsonSchema, PydanticUserError):
            parameter = renames.get(field_name, field_name)
            return (
                f"{label}, parameter `{parameter}`: type {annotation!r} cannot be expressed "
                f"as JSON Schema for a model to fill ({_first_line(error)})"
            )
    return f"{label}: its arguments cannot be expressed as JSON Schema ({_first_line(error)})"


def _first_line(error: Exception) -> str:
    return str(error).strip().splitlines()[0]
