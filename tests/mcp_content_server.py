"""An MCP server whose tools return content beyond text, built with the official SDK's helpers:
an image, a report of embedded resources (a PDF blob, a text), audio and resource links, and a
structured result with its `outputSchema`. Run: `python tests/mcp_content_server.py` (stdio)."""

from __future__ import annotations

import base64

from mcp.server.mcpserver import Audio, Image, MCPServer
from mcp.types import (
    BlobResourceContents,
    EmbeddedResource,
    ResourceLink,
    TextResourceContents,
)
from pydantic import BaseModel

PNG = b"\x89PNG\r\n\x1a\nmcp-image"
PDF = b"%PDF-1.7 mcp"
WAV = b"RIFF....WAVEmcp"

server = MCPServer("content")


class Forecast(BaseModel):
    city: str
    celsius: int


@server.tool()
def screenshot() -> Image:
    """A screenshot of the page."""
    return Image(data=PNG, format="png")


@server.tool(structured_output=False)
def report() -> list[object]:
    """A report: a PDF, a note, a clip and two links."""
    return [
        "Quarterly report:",
        EmbeddedResource(
            type="resource",
            resource=BlobResourceContents(
                uri="file:///reports/q3.pdf",
                mime_type="application/pdf",
                blob=base64.b64encode(PDF).decode(),
            ),
        ),
        EmbeddedResource(
            type="resource",
            resource=TextResourceContents(uri="file:///notes.txt", text="Revenue is up."),
        ),
        Audio(data=WAV, format="wav"),
        ResourceLink(
            type="resource_link",
            name="chart",
            uri="https://example.com/chart.png",
            mime_type="image/png",
        ),
        ResourceLink(type="resource_link", name="raw", uri="file:///data/raw.csv"),
    ]


@server.tool()
def forecast(city: str) -> Forecast:
    """Tomorrow's forecast."""
    return Forecast(city=city, celsius=21)


if __name__ == "__main__":
    server.run()
