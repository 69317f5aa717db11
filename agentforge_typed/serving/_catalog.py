"""What a `ToolServer` serves: the tools of its collection, each declared for `tools/list`.

A declaration is built once per tool and reused for every listing: the name, the title, the
description, the `inputSchema` exactly as the tool's specification holds it (pydantic's JSON
Schema, closed objects and `$defs`, with `$schema` naming its dialect, 2020-12), an
`outputSchema` where the tool's results are structured, and the annotations the tool declares.

Structured results: a `@tool` whose declared return type is data (a pydantic model, a dataclass,
a `TypedDict`, a number, a list, ...) gets an `outputSchema` from that type, in pydantic's
serialization mode, and its results carry `structuredContent`. A type whose JSON is an object is
its own schema and its value is the structured content as it is (a model's fields); any other is
wrapped as the specification allows, `{"result": <value>}`, since `structuredContent` is an
object. A tool returning text (`str`), nothing, content parts, `Any` or an unannotated value has
none, and neither has one with a `result_converter=`: its text is what the program chose to
show, and structured content beside it would show the raw value. A tool of an `MCPServer` keeps
its server's `outputSchema` and structured content.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import pydantic_core
from pydantic import TypeAdapter

from .._request import ToolAnnotations
from ..loop._service import ToolService
from ..loop._toolsets import resolve
from ..tools._base import ToolLike, may_wait
from ..tools._function import Tool
from ..tools._result_text import DeclaredResultText
from ..tools._returns import content_kinds, value_annotation
from ..tools.mcp._results import OutputSchema

if TYPE_CHECKING:
    import mcp_types

__all__ = ["SCHEMA_DIALECT", "Catalog", "Served", "StructuredOutput", "catalog_of"]

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
"""The `$schema` every `inputSchema` declares: pydantic writes JSON Schema 2020-12."""

_UNSTRUCTURED: frozenset[Any] = frozenset({inspect.Parameter.empty, Any, None, type(None), str})
"""Return annotations whose results are text or nothing: no `outputSchema`."""


@dataclass(frozen=True, slots=True)
class StructuredOutput:
    """How a tool's results become `structuredContent`, and the schema they are checked against."""

    schema: OutputSchema
    """The advertised `outputSchema`, compiled."""
    wrapped: bool
    """Whether the value goes under `"result"` (its JSON is not an object)."""
    dump: Callable[[Any], Any]
    """The result's value → its JSON (Python objects), as the tool's text shows it."""
    conforms: Callable[[Any], bool] | None = None
    """A quick test that a dumped value fits the type the schema was derived from; `None` when
    the value was checked before it got here (an `MCPServer`'s tool)."""

    def structured(self, value: Any) -> Any:
        """The `structuredContent` of a result whose value is `value`."""
        dumped = self.dump(value)
        return {"result": dumped} if self.wrapped else dumped

    def problems(self, structured: Any) -> str | None:
        """One line per way `structured` breaks the advertised schema, or `None`.

        The schema is pydantic's of the tool's return type, so a value that the type itself
        validates (strictly, from its JSON) fits it: the JSON Schema validator, several times
        dearer, runs only for a value that does not (a tool returning other than it declares),
        and words its problems."""
        if self.conforms is None:
            return None
        if self.conforms(structured["result"] if self.wrapped else structured):
            return None
        return self.schema.problems(structured)


@dataclass(frozen=True, slots=True)
class Served:
    """One served tool: the tool, its declaration, how its results are structured."""

    tool: ToolLike
    declaration: mcp_types.Tool
    output: StructuredOutput | None
    needs_approval: bool
    """Whether its calls may wait for approval when it was declared (an `MCPServer`'s policy may
    change: the declaration is built again then)."""


class Catalog:
    """The served tools by name, and their declarations in listing order."""

    __slots__ = ("by_name", "declarations", "version")

    def __init__(self, served: Sequence[Served], version: int) -> None:
        self.by_name: dict[str, Served] = {entry.tool.name: entry for entry in served}
        self.declarations: list[mcp_types.Tool] = [entry.declaration for entry in served]
        self.version = version


def catalog_of(
    service: ToolService[Any],
    select: Sequence[str] | None,
    version: int,
    previous: Catalog | None = None,
) -> Catalog:
    """The catalog of what `service` registers (only what `select` names, when given), reusing
    the declarations of `previous` for the tools it still holds.

    Raises:
        ValueError: `select` names no registered tool or group; a tool is external (the program
            runs it elsewhere, so no server can).
        TypeError: A tool's return type has no JSON Schema.
    """
    tools = {item.name: item for item in service.tools}
    names = list(tools) if select is None else resolve(select, tools, service.groups)
    served: list[Served] = []
    for name in names:
        tool = tools[name]
        kept = previous.by_name.get(name) if previous is not None else None
        if kept is not None and kept.tool is tool and kept.needs_approval == may_wait(tool):
            served.append(kept)
            continue
        if getattr(tool, "external", False):
            raise ValueError(
                f"tool {name!r} is external (the program runs it elsewhere): it cannot be "
                "served; leave it out with select="
            )
        served.append(_served(tool))
    return Catalog(served, version)


def _served(tool: ToolLike) -> Served:
    import mcp_types

    spec = tool.specification
    output = _output(tool)
    hints = spec.annotations
    needs_approval = may_wait(tool)
    declaration = mcp_types.Tool(
        name=spec.name,
        title=hints.title if hints is not None else None,
        description=spec.description or None,
        input_schema={"$schema": SCHEMA_DIALECT, **spec.parameters},
        output_schema=output.schema.schema if output is not None else None,
        annotations=_annotations(hints, needs_approval),
    )
    return Served(tool, declaration, output, needs_approval)


def _annotations(
    hints: ToolAnnotations | None, needs_approval: bool
) -> mcp_types.ToolAnnotations | None:
    """The MCP annotations of what a tool declares; a tool whose calls wait for approval is never
    advertised as read-only (a client may run read-only tools without asking)."""
    import mcp_types

    if hints is None:
        return None
    read_only = hints.read_only
    if read_only and needs_approval:
        read_only = False
    return mcp_types.ToolAnnotations(
        title=hints.title,
        read_only_hint=read_only,
        destructive_hint=hints.destructive,
        idempotent_hint=hints.idempotent,
        open_world_hint=hints.open_world,
    )


def _output(tool: ToolLike) -> StructuredOutput | None:
    if isinstance(tool, Tool):
        return _typed_output(tool)
    schema = getattr(tool, "output_schema", None)  # an `MCPTool`: its server's
    if isinstance(schema, OutputSchema) and schema.schema.get("type") == "object":
        return StructuredOutput(schema, wrapped=False, dump=_same)
    return None


def _same(value: Any) -> Any:
    return value


def _typed_output(tool: Tool[Any, Any]) -> StructuredOutput | None:
    convert = tool._convert
    if not isinstance(convert, DeclaredResultText):
        return None  # a `result_converter=`: the program chose what to show
    annotation = value_annotation(convert.annotation)
    if _unstructured(annotation):
        return None
    adapter: TypeAdapter[Any] = TypeAdapter(annotation)
    schema = adapter.json_schema(mode="serialization")
    wrapped = not _is_object(schema)
    if wrapped:
        definitions = schema.pop("$defs", None)
        schema = {"type": "object", "properties": {"result": schema}, "required": ["result"]}
        if definitions is not None:
            schema["$defs"] = definitions
    elif "type" not in schema:
        # A root `$ref` (a recursive model): the revisions before 2026 want `type` at the root.
        schema = {"type": "object", **schema}
    serializer = adapter.serializer
    validator = adapter.validator

    def dump(value: Any) -> Any:
        return serializer.to_python(value, mode="json", by_alias=True, warnings=False)

    def conforms(dumped: Any) -> bool:
        try:
            validator.validate_json(pydantic_core.to_json(dumped), strict=True)
        except ValueError:  # a `ValidationError`
            return False
        return True

    return StructuredOutput(OutputSchema(schema, tool_name=tool.name), wrapped, dump, conforms)


def _unstructured(annotation: Any) -> bool:
    try:
        if annotation in _UNSTRUCTURED:
            return True
    except TypeError:  # an unhashable annotation
        pass
    return isinstance(annotation, TypeVar) or bool(content_kinds(annotation))


def _is_object(schema: Mapping[str, Any]) -> bool:
    """Whether every value of `schema` is a JSON object (its root, or the definition its root
    `$ref` names)."""
    if schema.get("type") == "object":
        return True
    reference = schema.get("$ref")
    if isinstance(reference, str) and reference.startswith("#/$defs/") and len(schema) <= 2:
        target = schema.get("$defs", {}).get(reference.removeprefix("#/$defs/"), {})
        return isinstance(target, Mapping) and target.get("type") == "object"
    return False
