"""Static-typing contract of content beyond text: the parts, the messages that carry them, and
what a tool may return (mypy --strict must accept the usage and reject the misuse lines)."""

from __future__ import annotations

from typing_extensions import assert_type

from agentforge_typed import (
    AudioContent,
    Content,
    DocumentContent,
    FileContent,
    ImageContent,
    TextContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    ToolReturn,
    UserMessage,
    tool,
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

# Misuse that must stay a type error.
ImageContent(data=5, media_type="image/png")  # type: ignore[arg-type]
ToolReturn(1, content=[5])  # type: ignore[list-item]
ToolResultMessage(tool_call_id="c", tool_name="t", content=["text"])  # type: ignore[list-item]
