"""A tool's `ToolExecutionResult` → the MCP `CallToolResult` a client reads.

Text goes as a text block, within the tool's result budget as the loop gives it to a model. The
parts a tool returns beyond text become content blocks (the inverse of the client's mapping in
`tools/mcp/_results`): images and audio held inline (or as a base64 `data:` URL) as `image` and
`audio` blocks, documents and files held inline as embedded resources (text for a `text/*` media
type, else a base64 blob), and any part by URL as a `resource_link`. A structured result adds
`structuredContent` (see `_catalog`), checked against the advertised `outputSchema` before it is
sent (`StructuredOutput.problems`); a value that does not conform is the tool's failure, an error
result. Errors (invalid
arguments, a tool that raised, a timeout) are `isError: true` with the text the loop gives a
model.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import mcp_types

from .._content import BinaryContent, Content, DocumentContent, FileContent, TextContent
from .._records import ToolExecutionResult
from ..tools._outcomes import describe_exception, reraise_uncontained
from ._catalog import StructuredOutput

__all__ = ["call_result", "error_result"]


def error_result(text: str) -> mcp_types.CallToolResult:
    """An error result (`isError: true`) whose text the calling model reads."""
    return mcp_types.CallToolResult(content=[mcp_types.TextContent(text=text)], is_error=True)


def call_result(
    name: str, result: ToolExecutionResult, output: StructuredOutput | None
) -> mcp_types.CallToolResult:
    """`result` as a `CallToolResult` (see the module)."""
    if result.is_error:
        return error_result(result.text)
    parts = result.content
    blocks: list[mcp_types.ContentBlock] = (
        [_block(part, index) for index, part in enumerate(parts)]
        if parts
        else [mcp_types.TextContent(text=result.text)]
    )
    if output is None:
        return mcp_types.CallToolResult(content=blocks)
    try:
        structured = output.structured(result.value)
    except BaseException as exc:  # a value its own type cannot serialize: the tool's failure
        reraise_uncontained(exc)
        return error_result(f"Tool `{name}` failed: {describe_exception(exc)}")
    problems = output.problems(structured)
    if problems is not None:
        return error_result(
            f"Tool `{name}` failed: its result does not match its outputSchema:\n{problems}"
        )
    return mcp_types.CallToolResult(content=blocks, structured_content=structured)


def _block(part: Content, index: int) -> mcp_types.ContentBlock:
    if isinstance(part, TextContent):
        return mcp_types.TextContent(text=part.text)
    inline = part.base64_data()
    if inline is None:
        assert part.url is not None
        return mcp_types.ResourceLink(
            uri=part.url, name=_name(part, index), mime_type=part.media_type
        )
    media_type, data = inline
    if part.kind == "image":
        return mcp_types.ImageContent(data=data, mime_type=media_type)
    if part.kind == "audio":
        return mcp_types.AudioContent(data=data, mime_type=media_type)
    uri = f"attachment://{index}/{_name(part, index)}"
    resource: mcp_types.TextResourceContents | mcp_types.BlobResourceContents
    text = _text(data) if media_type.startswith("text/") else None
    if text is not None:
        resource = mcp_types.TextResourceContents(uri=uri, mime_type=media_type, text=text)
    else:
        resource = mcp_types.BlobResourceContents(uri=uri, mime_type=media_type, blob=data)
    return mcp_types.EmbeddedResource(resource=resource)


def _name(part: BinaryContent, index: int) -> str:
    """A file name for a part: its own (a document's title, a file's name), the last segment of
    its URL, else its kind and position."""
    own: Any = None
    if isinstance(part, DocumentContent):
        own = part.title
    elif isinstance(part, FileContent):
        own = part.filename
    if not own and part.url is not None and not part.url.startswith("data:"):
        own = part.url.rstrip("/").rpartition("/")[2]
    return str(own) if own else f"{part.kind}-{index}"


def _text(data: str) -> str | None:
    try:
        return base64.b64decode(data, validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return None
