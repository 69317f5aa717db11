"""Static-typing contract of content beyond text: the parts, the messages that carry them, and
what a tool may return (mypy --strict must accept the usage and reject the misuse lines)."""

from __future__ import annotations

from typing_extensions import assert_type

from agentforge_typed import (
    AudioContent,
    Content,
    DocumentContent,
    FallbackModel,
    FileContent,
    ImageContent,
    MCPServer,
    OpenAIChatModel,
    TextContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    ToolReturn,
    UserMessage,
    tool,
)
from agentforge_typed.tools import (
    MAX_CONTENT_BYTES,
    MAX_CONTENT_PARTS,
    ContentURLs,
    SchemaTool,
    ToolSpecification,
)

image = ImageContent(data=b"\x89PNG", media_type="image/png")
assert_type(image.data, bytes | None)
assert_type(image.url, str | None)
parts: list[Content] = [
    TextContent(text="Look:"),
    image,
    DocumentContent(url="https://example.com/a.pdf", title="a.pdf"),
    AudioContent(data=b"RIFF", media_type="audio/wav"),
    FileContent(data=b"a,b", media_type="text/csv", filename="a.csv"),
]
UserMessage(content=parts)
message = ToolResultMessage(tool_call_id="c", tool_name="t", content=parts)
assert_type(message.content[0], Content)
assert_type(message.text, str)


@tool
def screenshot() -> ImageContent:
    return image


@tool
def pages() -> list[str | ImageContent]:
    return ["Page 1:", image]


@tool
def total() -> ToolReturn[int]:
    return ToolReturn(42, ["The chart:", image])


assert_type(screenshot, Tool[[], ImageContent])
assert_type(screenshot(), ImageContent)
assert_type(pages(), list[str | ImageContent])
assert_type(total().value, int)
result = total.execute(ToolCall(id="c", name="total"))
assert_type(result.content, tuple[Content, ...])
assert_type(result.content_notes, tuple[str, ...])
assert_type(image.wire_size, int)
assert_type(MAX_CONTENT_BYTES, int)
assert_type(MAX_CONTENT_PARTS, int)

# Which links a source's parts may carry: a tool, a schema tool, an MCP server.
trusting: ContentURLs = "any"


@tool(content_urls="http")
def chart() -> ImageContent:
    return ImageContent(url="http://charts.example.com/q3.png")


assert_type(chart.content_urls, ContentURLs)
spec = ToolSpecification(name="t", description="", parameters={"type": "object"})
assert_type(
    SchemaTool(spec, lambda arguments: None, content_urls=trusting).content_urls, ContentURLs
)
assert_type(MCPServer.stdio("server", content_urls="any").content_urls, ContentURLs)

# What a model takes of a tool result's parts, decided at the tool result.
fitted = OpenAIChatModel("m", api_key="k").fit_tool_content(parts)
assert_type(fitted, tuple[tuple[Content, ...], tuple[str, ...]])
assert_type(
    FallbackModel(OpenAIChatModel("m", api_key="k")).fit_tool_content(parts),
    tuple[tuple[Content, ...], tuple[str, ...]],
)

# Misuse that must stay a type error.
ImageContent(data=5, media_type="image/png")  # type: ignore[arg-type]
ToolReturn(1, content=[5])  # type: ignore[list-item]
ToolResultMessage(tool_call_id="c", tool_name="t", content=["text"])  # type: ignore[list-item]
tool(content_urls="all")(chart)  # type: ignore[call-overload]
MCPServer.stdio("server", content_urls=True)  # type: ignore[arg-type]
