"""An MCP tool's result → a `ToolExecutionResult`: content blocks as content parts, the
structured content as the value, checked against the tool's `outputSchema`.

Blocks (https://modelcontextprotocol.io/specification/2025-06-18/server/tools#tool-result):
`text` → text; `image` and `audio` (base64 `data`, `mimeType`) → `ImageContent` / `AudioContent`;
`resource` → its embedded `text`, or its `blob` as a part of the kind its `mimeType` says
(`image/*`, `audio/*`, `application/pdf` and `text/*` as a document, else a file); a
`resource_link` to an `http(s)` URI → a part by URL of that kind, forwarded only as the server's
`content_urls` allows (`_content_urls`: by default `https://` to public hosts alone, else a note
in its place); a link to another scheme (a server's `file://`, which no provider can fetch) and
any unknown block → a one-line stand-in. A block that does not make a part (data that is not
base64, no data) becomes a stand-in saying so, not an exception. The parts go through the
result budget like any tool's (`_budget.content_result`).

`structuredContent` is the result's value. A tool that declares an `outputSchema` has it checked
(the specification says clients should): a mismatch, or no structured content at all, is an
`"execution"` error the model reads, one line per problem as in the arguments-error report. A tool
the program gave a type (`output_types`) has its structured content validated into it, likewise.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import pydantic_core
from jsonschema import Draft202012Validator, SchemaError
from pydantic import TypeAdapter, ValidationError

from ..._content import (
    AudioContent,
    BinaryContent,
    Content,
    DocumentContent,
    FileContent,
    ImageContent,
    TextContent,
    content_text,
    has_binary,
)
from ..._exceptions import ToolExecutionError
from ..._records import ToolExecutionResult
from .._argument_errors import problem_lines
from .._arguments import argument_errors as pydantic_errors
from .._base import DEFAULT_CONTENT_URLS, ContentURLs
from .._budget import MAX_CONTENT_PARTS, content_result, cut_result
from .._content_urls import aguard_content, guard_content
from .._outcomes import capped_error_text, unreadable_result
from .._result_text import SUCCESS_TEXT
from .._schema_arguments import (
    FORMAT_CHECKER,
    SCHEMA_REGISTRY,
    ToolSchemaValidator,
    argument_errors,
)
from .._signature import type_name

__all__ = [
    "OutputSchema",
    "OutputType",
    "amap_call_result",
    "map_call_result",
    "own_output_validation",
]


def own_output_validation(session: object) -> None:
    """Leave the check of structured content to `map_call_result` on `session` (an SDK
    `ClientSession`).

    The SDK's client checks it too, before we see the result, and raises a `RuntimeError` with
    the first problem and a dump of the schema. Checked here, the model reads every problem, one
    per line as for its arguments.
    """
    for name in ("validate_tool_result", "_validate_tool_result"):  # SDK 2, SDK 1
        if hasattr(session, name):
            setattr(session, name, _accept)


async def _accept(name: str, result: object) -> None:
    return None


class OutputSchema:
    """A tool's `outputSchema`, compiled once.

    Raises:
        ValueError: At construction, when the schema is not a valid Draft 2020-12 schema.
    """

    def __init__(self, schema: dict[str, Any], *, tool_name: str) -> None:
        try:
            Draft202012Validator.check_schema(schema, format_checker=FORMAT_CHECKER)
        except SchemaError as exc:
            raise ValueError(f"invalid outputSchema for tool {tool_name!r}: {exc.message}") from exc
        except RecursionError:
            raise ValueError(
                f"invalid outputSchema for tool {tool_name!r}: nested too deeply to check"
            ) from None
        self.schema = schema
        self._validator = ToolSchemaValidator(
            schema, registry=SCHEMA_REGISTRY, format_checker=FORMAT_CHECKER
        )

    def problems(self, value: Any) -> str | None:
        """One line per way `value` breaks the schema, or `None` when it conforms."""
        try:
            errors = list(self._validator.iter_errors(value))
        except RecursionError:
            return "- $: Input is nested too deeply to validate"
        except Exception as exc:  # a schema the build-time check let through: never raise
            return f"- $: the outputSchema could not be applied ({type(exc).__name__})"
        if not errors:
            return None
        return problem_lines(list(argument_errors(errors, value)))


class OutputType:
    """The type a program reads a tool's structured content as (`output_types`), its adapter
    built once."""

    def __init__(self, form: Any) -> None:
        self.name = type_name(form)
        self._adapter: TypeAdapter[Any] = TypeAdapter(form)

    def read(self, value: Any) -> tuple[Any, str | None]:
        """`value` as the type, or the problems, one per line."""
        try:
            return self._adapter.validate_python(value), None
        except ValidationError as error:
            return None, problem_lines(pydantic_errors(error))


def map_call_result(
    tool_name: str,
    result: Mapping[str, Any],
    limit: int,
    output_schema: OutputSchema | None = None,
    output_type: OutputType | None = None,
    urls: ContentURLs = DEFAULT_CONTENT_URLS,
) -> ToolExecutionResult:
    """An MCP `CallToolResult` (wire format, camelCase) → a result.

    The parts are the content blocks (see the module), their links as `urls` allows (names
    resolved here, blocking: async code uses `amap_call_result`); without any, the text is the
    structured content as compact JSON; within the budget (`limit` characters). `value` is the
    structured content when the server sent one, else the whole text. `isError` makes it an
    `"execution"` error result (its text capped as errors are). A result that breaks the tool's
    `outputSchema` (or `output_type`) is an `"unreadable_result"`: the tool ran on the server.
    """
    read = _read(tool_name, result, limit, output_schema, output_type)
    if isinstance(read, ToolExecutionResult):
        return read
    parts, notes = guard_content(read[0], urls, MAX_CONTENT_PARTS)
    return content_result(parts, limit, read[1], (), notes)


async def amap_call_result(
    tool_name: str,
    result: Mapping[str, Any],
    limit: int,
    output_schema: OutputSchema | None = None,
    output_type: OutputType | None = None,
    urls: ContentURLs = DEFAULT_CONTENT_URLS,
) -> ToolExecutionResult:
    """`map_call_result` for async code: the names of links are resolved off the event loop."""
    read = _read(tool_name, result, limit, output_schema, output_type)
    if isinstance(read, ToolExecutionResult):
        return read
    parts, notes = await aguard_content(read[0], urls, MAX_CONTENT_PARTS)
    return content_result(parts, limit, read[1], (), notes)


def _read(
    tool_name: str,
    result: Mapping[str, Any],
    limit: int,
    output_schema: OutputSchema | None,
    output_type: OutputType | None,
) -> ToolExecutionResult | tuple[tuple[Content, ...], Any]:
    """The result, or the parts and the value of one with content beyond text (whose links are
    still to check)."""
    parts = [_part(block) for block in result.get("content") or ()]
    structured = result.get("structuredContent")
    text = content_text(parts)
    if not parts and structured is not None:
        text = pydantic_core.to_json(structured).decode()
    if result.get("isError"):
        if not text:
            return ToolExecutionResult.error(f"Tool `{tool_name}` failed", "execution")
        # The model reads a capped text; the program finds the server's whole text on the exception.
        error = ToolExecutionError(tool_name, text)
        return ToolExecutionResult.error(capped_error_text(text), "execution", exception=error)
    if output_schema is not None:
        if structured is None:
            return unreadable_result(
                tool_name,
                "the server sent no structuredContent, but the tool declares an outputSchema",
                text or None,
            )
        problems = output_schema.problems(structured)
        if problems is not None:
            return unreadable_result(
                tool_name,
                f"its structuredContent does not match its outputSchema:\n{problems}",
                structured,
            )
    value = structured if structured is not None else text or None
    if output_type is not None:
        read, problems = output_type.read(structured)
        if problems is not None:
            return unreadable_result(
                tool_name, f"its structuredContent is not a {output_type.name}:\n{problems}", value
            )
        value = read
    if has_binary(parts):
        return tuple(parts), value
    if len(text) > limit:
        return cut_result(text, limit, value)
    return ToolExecutionResult(text=text or SUCCESS_TEXT, value=value)


def _part(block: Mapping[str, Any]) -> Content:
    kind = block.get("type")
    if kind == "text":
        return TextContent(text=str(block.get("text", "")))
    if kind in ("image", "audio"):
        media_type = str(block.get("mimeType") or "application/octet-stream")
        binary: type[BinaryContent] = ImageContent if kind == "image" else AudioContent
        return _binary(binary, kind, data=block.get("data"), media_type=media_type)
    if kind == "resource":
        resource = block.get("resource") or {}
        if "text" in resource:
            return TextContent(text=str(resource["text"]))
        blob_type = str(resource.get("mimeType") or "application/octet-stream")
        uri = str(resource.get("uri", ""))
        of_blob = _kind_of(blob_type)
        fields = _name(of_blob, uri)
        return _binary(of_blob, kind, data=resource.get("blob"), media_type=blob_type, **fields)
    if kind == "resource_link":
        uri = str(block.get("uri", ""))
        if uri.startswith(("https://", "http://")):
            linked = block.get("mimeType")
            of_link = _kind_of(str(linked or ""))
            return _binary(of_link, kind, url=uri, media_type=linked, **_name(of_link, uri))
        return TextContent(text=f"[resource: {uri}]")
    return TextContent(text=f"[{kind}: {block.get('mimeType', 'unknown')}]")


def _binary(part_type: type[BinaryContent], kind: str, **fields: Any) -> Content:
    """The part, or a stand-in when what the server sent does not make one (data that is not
    base64, a missing source)."""
    try:
        part = part_type.model_validate(fields)
    except ValidationError:
        return TextContent(text=f"[{kind}: {fields.get('media_type')}, left out: not valid]")
    return cast("Content", part)


def _kind_of(media_type: str) -> type[BinaryContent]:
    if media_type.startswith("image/"):
        return ImageContent
    if media_type.startswith("audio/"):
        return AudioContent
    if media_type == "application/pdf" or media_type.startswith("text/"):
        return DocumentContent
    return FileContent


def _name(part_type: type[BinaryContent], uri: str) -> dict[str, str]:
    """The part's title or file name: the URI's last segment, where the part takes one."""
    name = uri.rstrip("/").rpartition("/")[2]
    if not name:
        return {}
    if part_type is DocumentContent:
        return {"title": name}
    if part_type is FileContent:
        return {"filename": name}
    return {}
