"""A function's signature as a tool: the arguments' validator, their JSON Schema, how to call.

Everything here runs once, at decoration; anything a model could not express or fill is refused
then, with a message naming the function and the parameter. The arguments are one pydantic core
schema built field by field (a model's fields keyed by parameter name, no class around them); the
pydantic model of the same arguments (`args_model`) is built only when something asks for it.
"""

from __future__ import annotations

import functools
import inspect
import math
import re
import threading
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated, Any

import typing_extensions
from pydantic import BaseModel, ConfigDict, Field, PydanticUserError, TypeAdapter, create_model
from pydantic.errors import (
    PydanticInvalidForJsonSchema,
    PydanticSchemaGenerationError,
    PydanticUndefinedAnnotation,
)
from pydantic.fields import FieldInfo
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import (
    CoreSchema,
    PydanticUndefined,
    SchemaError,
    SchemaValidator,
    ValidationError,
    core_schema,
)

from .._messages import shown_name
from ._base import ToolContext
from ._docstrings import parse_docstring

__all__ = [
    "TOOL_NAME_PATTERN",
    "ToolJsonSchema",
    "ToolSignature",
    "check_tool_name",
    "close_nested",
    "closed_validator",
    "core_schema_nodes",
    "deps_accepted",
    "inspect_function",
    "needing_deps",
    "type_name",
]

_JSON_NATIVE = frozenset({str, int, bool, type(None)})

TOOL_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
"""What every provider accepts as a tool (function) name."""


class ToolJsonSchema(GenerateJsonSchema):
    """pydantic's JSON Schema without the per-property `title`s derived from field names, refusing
    what a model must not or cannot fill.

    `"city": {"title": "City", "type": "string"}` tells the model nothing the key does not, and
    costs tokens on every request; model titles in `$defs` (class names) are kept.
    """

    _method_names: tuple[tuple[Any, str], ...] | None = None

    def build_schema_type_to_method(self) -> dict[Any, Callable[[Any], JsonSchemaValue]]:
        """pydantic's, with the schema types and method names listed once per process, not per
        schema (listing them is about a tenth of a small tool's JSON Schema)."""
        names = ToolJsonSchema._method_names
        if names is None:
            names = tuple(
                (kind, method.__name__)
                for kind, method in super().build_schema_type_to_method().items()
            )
            ToolJsonSchema._method_names = names
        return {kind: getattr(self, name) for kind, name in names}

    def field_title_should_be_set(self, schema: CoreSchema) -> bool:
        """Never: a field's title only repeats its name."""
        return False

    def is_subclass_schema(self, schema: core_schema.IsSubclassSchema) -> JsonSchemaValue:
        """Refuse `type[X]`, which pydantic renders as `{}` although JSON carries no class."""
        return self.handle_invalid_for_json_schema(
            schema, f"core_schema.IsSubclassSchema ({schema['cls']})"
        )

    def encode_default(self, dft: Any) -> Any:
        """pydantic's, without building a `TypeAdapter` for the JSON-native defaults (what most
        parameters default to), which encode as themselves."""
        if type(dft) in _JSON_NATIVE or (type(dft) is float and math.isfinite(dft)):
            return dft
        return super().encode_default(dft)

    def model_schema(self, schema: core_schema.ModelSchema) -> JsonSchemaValue:
        """pydantic's, closed (`additionalProperties: false`) where the validator rejects
        unknown keys: pydantic reads the class's own `extra`, not a `closed_validator` schema."""
        return _closed(super().model_schema(schema), schema)

    def dataclass_schema(self, schema: core_schema.DataclassSchema) -> JsonSchemaValue:
        """Closed like `model_schema`."""
        return _closed(super().dataclass_schema(schema), schema)


@dataclass(frozen=True)
class ToolSignature:
    """What decoration learns from a function.

    The arguments are validated by the core schema of a model's fields keyed by parameter name,
    with no model class around it: what the function is called with. The pydantic model of the
    same arguments, `args_model`, is only built when something asks for it.
    """

    core_schema: CoreSchema
    """The arguments' core schema: `model-fields` keyed by parameter name, closed at every depth
    (in a `definitions` schema where nested types refer to themselves)."""
    validator: SchemaValidator
    """`validate_json(raw)` → `(arguments, None, given)`: the dict of validated arguments by
    parameter name (defaults filled in), and the set of those the input gave."""
    argument_names: tuple[str, ...]
    """The names the model fills the arguments by: the properties of `parameters`."""
    parameters: dict[str, Any]
    """The arguments' JSON Schema (pydantic's dialect, top-level title removed)."""
    description: str
    context_parameter: str | None
    """The parameter annotated with `ToolContext`, injected at run time."""
    deps_type: Any
    """The `X` of that parameter's `ToolContext[X]`: `Any` without one, or for a bare `ToolContext`."""
    positional: tuple[str, ...]
    """Positional-only parameters, in order: passed positionally."""
    return_annotation: Any
    """The declared return type, or `inspect.Parameter.empty`."""
    model_name: str
    model_fields: Mapping[str, Any]
    """`args_model`'s fields for `create_model`: field name → `(annotation, default)`."""
    renames: Mapping[str, str] | None
    """Parameter name → `args_model` field name, for parameters that cannot be field names as
    they are (`_x`, `json`, `model_*`)."""

    @property
    def args_model(self) -> type[BaseModel]:
        """The pydantic model of the arguments, built at first use: most tools never need it, and
        a model class costs about as much again as the rest of decoration."""
        built: type[BaseModel] | None = self.__dict__.get("_args_model")
        if built is None:
            with _MODEL_LOCK:  # concurrent first uses still see one class
                built = self.__dict__.get("_args_model")
                if built is None:
                    built = create_model(self.model_name, __config__=_CONFIG, **self.model_fields)
                    close_nested(built)
                    self.__dict__["_args_model"] = built
        return built

    def args_instance(self, arguments: dict[str, Any], given: set[str]) -> BaseModel:
        """The `args_model` instance of what `validator` returned."""
        if self.renames:
            renames = self.renames
            arguments = {renames.get(key, key): value for key, value in arguments.items()}
            given = {renames.get(key, key) for key in given}
        return self.args_model.model_construct(given, **arguments)


_MODEL_LOCK = threading.Lock()

# Always `extra="forbid"`, at every depth (see `close_nested`): the schema tells the model it must not
# invent arguments; a tool with `extra_arguments="ignore"` drops them in the validator's repair
# path instead. JSON has no NaN or Infinity (and `1e400` parses as infinity): refuse them as a
# model's numbers.
_CONFIG = ConfigDict(extra="forbid", protected_namespaces=(), allow_inf_nan=False)


def check_tool_name(name: str, function: Callable[..., Any] | None = None) -> str:
    """Return `name`, or raise `ValueError` (naming `function` when given) when providers would
    refuse it."""
    if not TOOL_NAME_PATTERN.fullmatch(name):
        of_function = f" (function {_qualified_name(function)!r})" if function is not None else ""
        raise ValueError(
            f"invalid tool name {shown_name(name)!r}{of_function}: a tool name must match "
            f"{TOOL_NAME_PATTERN.pattern}"
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
    label = f"tool `{name}` ({_qualified_name(function)!r})"
    annotated, documented = _annotated_function(function)
    hints = _type_hints(annotated, label, dict(localns or {}))

    docstring = parse_docstring(documented)
    parameters = list(inspect.signature(function).parameters.values())
    if has_receiver:
        parameters = parameters[1:]

    fields: dict[str, Any] = {}  # `args_model`'s, by field name
    arguments: dict[str, tuple[Any, Any]] = {}  # `fields`, by parameter name and without aliases
    renames: dict[str, str] = {}
    positional: list[str] = []
    defaults: dict[str, Any] = {}  # by parameter name: the defaults given as values
    context_parameter: str | None = None
    deps_type: Any = Any
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
        try:
            context = _context(annotation)
        except TypeError as exc:
            raise TypeError(f"{where}: {exc}") from None
        if context is not None:
            if context_parameter is not None:
                raise TypeError(f"{where}: only one parameter may be a `ToolContext`")
            if parameter.kind is inspect.Parameter.POSITIONAL_ONLY:
                raise TypeError(f"{where}: a `ToolContext` parameter cannot be positional-only")
            context_parameter = parameter.name
            deps_type = _context_deps(context)
            continue
        if parameter.kind is inspect.Parameter.POSITIONAL_ONLY:
            positional.append(parameter.name)
        field_name, alias = parameter.name, None
        if field_name.startswith("_") or hasattr(BaseModel, field_name):
            # `_x` would be a private attribute and `json`/`copy`/`model_*` shadow BaseModel
            # members: `args_model` stores them under another field name, the parameter name as
            # the alias unless the parameter has its own. (The validated dict keeps the parameter
            # name.)
            field_name, alias = f"arg{len(fields)}_{field_name.lstrip('_')}", field_name
        if field_name in fields:
            # `_x` is stored as `arg0_x`: a parameter of that very name would silently replace it.
            taken = next((p for p, f in renames.items() if f == field_name), field_name)
            raise TypeError(
                f"{label}: parameters `{taken}` and `{parameter.name}` collide: both would be "
                f"stored as `{field_name}`; rename one"
            )
        if alias is not None:
            renames[parameter.name] = field_name
        default = parameter.default
        if isinstance(default, FieldInfo):
            default = default.default
        if default is not inspect.Parameter.empty and default is not PydanticUndefined:
            defaults[parameter.name] = default
        doc = docstring.parameters.get(parameter.name)
        argument = _field(annotation, parameter, doc, None)
        arguments[parameter.name] = argument
        fields[field_name] = (
            argument if alias is None else _field(annotation, parameter, doc, alias)
        )

    model_name = f"{name}_arguments"
    try:
        fields_schema, core_config, model = _fields_schema(arguments, fields, renames, model_name)
        schema, nodes, closed = _closed_schema(fields_schema)
        # One validator, built once the schema is closed. Where nothing needed closing, nested
        # classes' own validators are reused as they are.
        validator = (
            closed_validator(schema, core_config)
            if closed
            else SchemaValidator(schema, core_config)
        )
        json_schema = _object_schema(ToolJsonSchema().generate(schema, mode="validation"))
    except PydanticUndefinedAnnotation as exc:
        # In today's words: what a model built from the signature says.
        error = PydanticUserError(
            f"`{model_name}` is not fully defined; you should define `{exc.name}`, then call "
            f"`{model_name}.model_rebuild()`.",
            code="class-not-fully-defined",
        )
        raise TypeError(_unsupported_type_message(label, arguments, error)) from exc
    except _UNSUPPORTED_TYPE_ERRORS as exc:
        raise TypeError(_unsupported_type_message(label, arguments, exc)) from exc
    for parameter_name, default in defaults.items():
        _check_default(validator, label, parameter_name, arguments[parameter_name][0], default)
    if _contains_context(nodes):
        # The model would fill it: a forged context. Find the parameter to name.
        for parameter_name, (annotation, _) in arguments.items():
            if _contains_context(core_schema_nodes(TypeAdapter(annotation).core_schema)):
                raise TypeError(
                    f"{label}, parameter `{parameter_name}`: a `ToolContext` is injected only as "
                    "a parameter of the tool itself, never inside another parameter's type"
                )

    signature = ToolSignature(
        core_schema=schema,
        validator=validator,
        # What the schema offers: a validation alias, not the parameter's name, is what the
        # validator takes.
        argument_names=tuple(json_schema.get("properties", ())),
        parameters=json_schema,
        description=docstring.description,
        context_parameter=context_parameter,
        deps_type=deps_type,
        positional=tuple(positional),
        return_annotation=hints.get("return", inspect.Parameter.empty),
        model_name=model_name,
        model_fields=fields,
        renames=renames or None,
    )
    if model is not None:  # built to take its schema: kept, not built again at first use
        close_nested(model)
        signature.__dict__["_args_model"] = model
    return signature


def _check_default(
    validator: SchemaValidator, label: str, parameter: str, annotation: Any, default: Any
) -> None:
    """Raise `TypeError` when `default` is not a value of the parameter's own type (strictly: the
    function would be called with it as it is, where the model's arguments are validated)."""
    try:
        validator.validate_assignment({}, parameter, default, strict=True)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        if typing.get_origin(annotation) is Annotated:
            annotation = annotation.__origin__
        raise TypeError(
            f"{label}, parameter `{parameter}`: the default {default!r} does not fit the "
            f"parameter's type `{type_name(annotation)}` ({error['msg']}); give a default of "
            "that type"
        ) from None
    except Exception:
        # A validator of the program's own failed on the default some other way: that is for the
        # call to report (as an execution error the model reads), not a reason to refuse the tool.
        return


def _object_schema(json_schema: JsonSchemaValue) -> JsonSchemaValue:
    """The arguments' JSON Schema as a model's reads, without its title: closed, keys in order."""
    json_schema["additionalProperties"] = False
    return dict(sorted(json_schema.items()))


_FieldsSchema = tuple[CoreSchema, core_schema.CoreConfig, type[BaseModel] | None]
"""The arguments' `model-fields` core schema keyed by parameter name, its config, and the
`args_model` when it was built to get them."""

_PRIVATE_API_CHANGED = (ImportError, AttributeError, TypeError)
"""What a pydantic whose private schema-generation API moved raises from `_generated_fields`."""


def _fields_schema(
    arguments: Mapping[str, tuple[Any, Any]],
    fields: Mapping[str, Any],
    renames: Mapping[str, str],
    model_name: str,
) -> _FieldsSchema:
    """The arguments' fields schema (see `_FieldsSchema`), not yet closed.

    Generated field by field (`_generated_fields`), through pydantic's private API; where that
    API has changed, taken from `args_model` built from `fields` (`_model_fields`): the same
    schema, at about twice the cost.
    """
    try:
        return _generated_fields(arguments, model_name)
    except _PRIVATE_API_CHANGED:
        # A genuine `TypeError` of an argument's type comes back from pydantic's public API too.
        return _model_fields(fields, renames, model_name)


def _generated_fields(arguments: Mapping[str, tuple[Any, Any]], model_name: str) -> _FieldsSchema:
    """pydantic's own schema generation, field by field, as it does for a model's fields, without
    the model class (its creation and field collection cost about as much as the rest) nor a
    serializer. `model-fields` rather than `typed-dict`: pydantic-core's typed-dict validator
    pays for `extra="forbid"` on every call (a fifth more for 12 parameters).
    """
    from pydantic._internal._config import ConfigWrapper
    from pydantic._internal._decorators import DecoratorInfos
    from pydantic._internal._generate_schema import GenerateSchema
    from typing_inspection.introspection import AnnotationSource

    config = ConfigWrapper(_CONFIG)
    generate = GenerateSchema(config)
    decorators = DecoratorInfos()
    fields = {}
    for name, field in arguments.items():
        # What `create_model` makes of the same `(annotation, default)`.
        info = FieldInfo.from_annotated_attribute(*field, _source=AnnotationSource.CLASS)
        fields[name] = generate._generate_md_field_schema(name, info, decorators)
    schema = generate.clean_schema(
        core_schema.model_fields_schema(fields, model_name=model_name, extra_behavior="forbid")
    )
    return schema, config.core_config(title=model_name), None


def _model_fields(
    fields: Mapping[str, Any], renames: Mapping[str, str], model_name: str
) -> _FieldsSchema:
    """The fields schema of `args_model` built from `fields` (pydantic's public API), its keys
    renamed back to parameter names."""
    model = create_model(model_name, __config__=_CONFIG, **fields)
    schema: Any = model.__pydantic_core_schema__
    definitions = None
    if schema["type"] == "definitions":  # nested models that refer to themselves
        schema, definitions = schema["schema"], schema["definitions"]
    fields_schema: Any = dict(schema["schema"])
    parameter_of = {field: parameter for parameter, field in renames.items()}
    fields_schema["fields"] = {
        parameter_of.get(name, name): field for name, field in fields_schema["fields"].items()
    }
    if definitions is not None:
        fields_schema = core_schema.definitions_schema(fields_schema, definitions)
    return fields_schema, schema["config"], model


def _closed_schema(schema: CoreSchema) -> tuple[CoreSchema, list[dict[str, Any]], bool]:
    """`schema`, closed at every depth (see `close_nested`); the nodes of the schema before closing
    (the same but for `extra_behavior`); whether it needed closing."""
    nodes = core_schema_nodes(schema)
    if not any(_needs_closing(node) for node in nodes):
        return schema, nodes, False
    return _closed_copy(schema), nodes, True


def _qualified_name(function: Callable[..., Any]) -> Any:
    return getattr(function, "__qualname__", function)


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
    # `__call__`'s own docstring: `inspect.getdoc` would find one up the MRO ("Call self as a
    # function.") before the class's.
    return call, call if getattr(call, "__doc__", None) else type(function)


def _type_hints(annotated: Any, label: str, localns: dict[str, Any]) -> dict[str, Any]:
    """The resolved annotations of `annotated`; on failure, the error names the culprit."""
    try:
        return typing.get_type_hints(annotated, localns=localns, include_extras=True)
    except Exception as exc:  # NameError for an undefined forward reference, TypeError, …
        where = _unresolvable_annotation(annotated, localns)
        culprit = f", {where}" if where else ""
        raise TypeError(f"{label}{culprit}: cannot resolve its type annotations: {exc}") from exc


def _unresolvable_annotation(annotated: Any, localns: dict[str, Any]) -> str | None:
    """Which annotation fails alone, if one does: "parameter `x`" or "return type".

    Each is resolved as `get_type_hints` would, from an object that has only that annotation and
    takes its namespace from `annotated` (through `__wrapped__`). A class is not probed: its
    annotations resolve in each base's own namespace.
    """
    if inspect.isclass(annotated):
        return None
    try:
        annotations = dict(annotated.__annotations__)
    except Exception:  # no annotations, or (Python 3.14) ones that fail on access
        return None
    type_params = getattr(annotated, "__type_params__", ())
    for name, annotation in annotations.items():
        alone = types.SimpleNamespace(
            __annotations__={name: annotation}, __wrapped__=annotated, __type_params__=type_params
        )
        try:
            typing.get_type_hints(alone, localns=localns, include_extras=True)
        except Exception:
            return "return type" if name == "return" else f"parameter `{name}`"
    return None


def _context(annotation: Any) -> Any:
    """The `ToolContext` annotation (`ToolContext`, `ToolContext[X]` or a subclass) that
    `annotation` is, also inside `Annotated[...]`, a type alias or `... | None`; `None` when it is
    none.

    Raises:
        TypeError: A union of a `ToolContext` with an argument type: a parameter is either
            injected or filled by the model, never both.
    """
    origin = typing.get_origin(annotation)
    if _is_context_class(annotation) or _is_context_class(origin):
        return annotation
    if origin is Annotated:
        return _context(annotation.__origin__)
    if isinstance(annotation, (typing_extensions.TypeAliasType, *_TYPE_ALIAS_TYPES)):
        aliased: Any = annotation
        return _context(aliased.__value__)
    if origin in (typing.Union, types.UnionType):
        members = [m for m in typing.get_args(annotation) if m is not type(None)]
        contexts = [_context(member) for member in members]
        found = [context for context in contexts if context is not None]
        if found and len(found) < len(contexts):
            raise TypeError(
                "a `ToolContext` cannot share a union with argument types: the parameter is "
                "either injected or filled by the model"
            )
        # Several contexts in one union: their deps types are not one type.
        return found[0] if len(found) == 1 else ToolContext if found else None
    return None


def _context_deps(context: Any) -> Any:
    """The `X` of a `ToolContext[X]` annotation; `Any` for a bare `ToolContext` or a subclass."""
    return typing.get_args(context)[0] if _is_context_class(typing.get_origin(context)) else Any


def needing_deps(tools: Iterable[Any]) -> list[str]:
    """`name (ToolContext[X])` of each tool whose `ToolContext[X]` does not accept `None`: run
    without deps, each of its calls would fail inside the tool."""
    return [
        f"{item.name} (ToolContext[{type_name(expected)}])"
        for item in tools
        if not deps_accepted(expected := getattr(item, "deps_type", Any), None)
    ]


def deps_accepted(expected: Any, deps_type: Any) -> bool:
    """Whether a `ToolContext[expected]` accepts deps of type `deps_type`: `expected` is that type
    or a supertype of it (for a union, of each member). `True` where it cannot be told at run time
    (a `TypeVar`, a protocol that is not runtime-checkable, a forward reference)."""
    if expected is Any or expected is object or isinstance(expected, typing.TypeVar):
        return True
    origin = typing.get_origin(expected)
    if origin is Annotated:
        return deps_accepted(typing.get_args(expected)[0], deps_type)
    if origin in (typing.Union, types.UnionType):
        return any(deps_accepted(member, deps_type) for member in typing.get_args(expected))
    given = typing.get_origin(deps_type)
    if given in (typing.Union, types.UnionType):
        return all(deps_accepted(expected, member) for member in typing.get_args(deps_type))
    expected_class = origin or (type(None) if expected is None else expected)
    given_class = given or (type(None) if deps_type is None else deps_type)
    if not (isinstance(expected_class, type) and isinstance(given_class, type)):
        return True
    try:
        return issubclass(given_class, expected_class)
    except TypeError:  # a protocol that is not runtime-checkable
        return True


def type_name(annotation: Any) -> str:
    """A type as a reader writes it: `Db`, `list[int]`, `None`."""
    if annotation is None or annotation is type(None):
        return "None"
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return annotation.__qualname__
    return repr(annotation).replace("typing.", "")


def _is_context_class(candidate: Any) -> bool:
    return isinstance(candidate, type) and issubclass(candidate, ToolContext)


_TYPE_ALIAS_TYPES: tuple[type, ...] = (
    (typing.TypeAliasType,) if hasattr(typing, "TypeAliasType") else ()  # Python 3.12+
)


def core_schema_nodes(schema: Any) -> list[dict[str, Any]]:
    """Every node of a pydantic core schema (definitions included), in no particular order."""
    nodes: list[dict[str, Any]] = []
    pending = [schema]
    # A loop over a stack, not recursion: decoration walks each schema several times, and a
    # recursive generator costs a frame per node.
    while pending:
        item = pending.pop()
        kind = type(item)
        if kind is dict:
            nodes.append(item)
            pending.extend(item.values())
        elif kind is list or kind is tuple:
            pending.extend(item)
    return nodes


_FIELDS_NODES = frozenset({"model-fields", "dataclass-args", "typed-dict"})
"""The core-schema nodes that hold an object's named fields, and its `extra_behavior`."""


def close_nested(args_model: type[BaseModel]) -> None:
    """Make `args_model` reject unknown keys at every depth, not only at the top.

    When a nested model, dataclass or TypedDict of its core schema does not forbid extra keys
    (and its class does not explicitly set `extra="allow"`), the schema is replaced by a closed
    copy (`_closed_schema`) and the validator is rebuilt from it. The nested classes are left
    untouched.
    """
    schema, _, closed = _closed_schema(args_model.__pydantic_core_schema__)
    if closed:  # else pydantic's own validator already refuses unknown keys everywhere
        args_model.__pydantic_core_schema__ = schema
        args_model.__pydantic_validator__ = closed_validator(schema)


def _closed_copy(schema: Any) -> Any:
    """A copy of `schema` in which every object node that `_needs_closing` forbids extra keys
    (nested classes share their schemas: the copy leaves theirs untouched)."""
    schema = _copy(schema)
    for node in core_schema_nodes(schema):
        if _needs_closing(node):
            _fields_node(node)["extra_behavior"] = "forbid"  # type: ignore[index]
    return schema


def _needs_closing(node: dict[str, Any]) -> bool:
    if node.get("type") not in ("model", "dataclass", "typed-dict"):
        return False
    fields = _fields_node(node)
    if fields is None or fields.get("extra_behavior") in ("allow", "forbid"):
        return False
    cls = node.get("cls")
    own = (
        cls.model_config
        if isinstance(cls, type) and issubclass(cls, BaseModel)
        else getattr(cls, "__pydantic_config__", None) or {}
    )
    return own.get("extra") not in ("allow", "forbid")  # a class that forbids them already does


def closed_validator(schema: Any, config: core_schema.CoreConfig | None = None) -> SchemaValidator:
    """A validator built from `schema` itself, nested classes included.

    pydantic-core otherwise reuses a complete class's own validator for its node ("prebuilt"),
    which would ignore what `close_nested` changed there. The classes are marked incomplete only while
    the validator is built, so pydantic-core builds their nodes from the schema.
    """
    classes = {
        cls
        for node in core_schema_nodes(schema)
        if node.get("type") in ("model", "dataclass")
        and isinstance(cls := node.get("cls"), type)
        and cls.__dict__.get("__pydantic_complete__") is True
    }
    with _incomplete(classes):
        return SchemaValidator(schema, config)


@contextmanager
def _incomplete(classes: set[type]) -> Iterator[None]:
    for cls in classes:
        type.__setattr__(cls, "__pydantic_complete__", False)
    try:
        yield
    finally:
        for cls in classes:
            type.__setattr__(cls, "__pydantic_complete__", True)


def _fields_node(node: dict[str, Any]) -> dict[str, Any] | None:
    """The node holding the fields of a `model`, `dataclass` or `typed-dict` node (through the
    validator functions pydantic may wrap around them); `None` for a root model."""
    inner: Any = node
    while inner.get("type") not in _FIELDS_NODES:
        if inner is not node and not str(inner.get("type")).startswith("function-"):
            return None
        inner = inner.get("schema")
        if not isinstance(inner, dict):
            return None
    return inner  # type: ignore[no-any-return]


def _closed(json_schema: JsonSchemaValue, schema: Any) -> JsonSchemaValue:
    fields = _fields_node(schema)
    if (
        fields is not None
        and fields.get("extra_behavior") == "forbid"
        and "$ref" not in json_schema
    ):
        json_schema["additionalProperties"] = False
    return json_schema


def _copy(schema: Any) -> Any:
    """A copy of a core schema's dicts and lists (what `close_nested` edits); other values are shared."""
    if type(schema) is dict:
        return {key: _copy(value) for key, value in schema.items()}
    if type(schema) is list:
        return [_copy(item) for item in schema]
    return schema


def _contains_context(nodes: list[dict[str, Any]]) -> bool:
    """Whether the `nodes` of a pydantic core schema validate a `ToolContext` anywhere (the JSON
    Schema may not show it: `SkipJsonSchema`)."""
    return any(
        node.get("type") == "dataclass" and _is_context_class(node.get("cls")) for node in nodes
    )


def _field(
    annotation: Any, parameter: inspect.Parameter, doc: str | None, alias: str | None
) -> tuple[Any, Any]:
    """`(annotation, default)` for `create_model`; a `Field` description beats the docstring, and
    a `Field` alias (or validation alias) of the parameter's own beats `alias`."""
    default = parameter.default
    if default is inspect.Parameter.empty:
        default = ...
    extra: dict[str, Any] = {}
    if doc and not _has_description(annotation, default):
        extra["description"] = doc
    if alias is not None and not _has_alias(annotation, default):
        extra["alias"] = alias
    if not extra:
        return (annotation, default)
    if isinstance(default, FieldInfo):
        return (Annotated[annotation, Field(**extra)], default)
    return (annotation, Field(default, **extra))


def _has_description(annotation: Any, default: Any) -> bool:
    if isinstance(default, FieldInfo) and default.description is not None:
        return True
    if typing.get_origin(annotation) is not Annotated:
        return False
    return any(
        isinstance(meta, FieldInfo) and meta.description is not None
        for meta in annotation.__metadata__
    )


def _has_alias(annotation: Any, default: Any) -> bool:
    """Whether the parameter's own `Field` names the argument (`alias` or `validation_alias`)."""
    infos = [default] if isinstance(default, FieldInfo) else []
    if typing.get_origin(annotation) is Annotated:
        infos += [meta for meta in annotation.__metadata__ if isinstance(meta, FieldInfo)]
    return any(info.alias is not None or info.validation_alias is not None for info in infos)


_UNSUPPORTED_TYPE_ERRORS = (
    PydanticSchemaGenerationError,
    PydanticInvalidForJsonSchema,
    PydanticUserError,
    SchemaError,  # a constraint pydantic-core refuses: `gt="a"`, a regex with look-around, …
)


def _unsupported_type_message(
    label: str, arguments: Mapping[str, tuple[Any, Any]], error: Exception
) -> str:
    # pydantic's error names the type, not the parameter: find the parameter that fails alone.
    for parameter, (annotation, _) in arguments.items():
        try:
            TypeAdapter(annotation).json_schema(schema_generator=ToolJsonSchema)
        except _UNSUPPORTED_TYPE_ERRORS as field_error:
            where = f"{label}, parameter `{parameter}`: type {annotation!r}"
            if isinstance(field_error, SchemaError):
                # Nested "Error building … validator:" lines; the last one says what is wrong.
                reason = str(field_error).strip().splitlines()[-1].strip()
                return f"{where} has a constraint pydantic cannot build a validator for ({reason})"
            return (
                f"{where} cannot be expressed as JSON Schema for a model to fill "
                f"({_first_line(error)})"
            )
    return f"{label}: its arguments cannot be expressed as JSON Schema ({_first_line(error)})"


def _first_line(error: Exception) -> str:
    return str(error).strip().splitlines()[0]
