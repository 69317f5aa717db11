"""MCP content, faithfully: image, audio, embedded resources and resource links from a real
server (tests/mcp_content_server.py, built with the official SDK's helpers) become content parts;
`structuredContent` is the value, checked against the tool's `outputSchema` (a server of the
SDK's low-level `Server`, in this process, sends what its high-level helpers never would)."""

from __future__ import annotations

import base64
import contextlib
import logging
import sys
from collections.abc import Iterator, Sequence
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from dns_support import PUBLIC, resolving
from mcp.server.lowlevel import Server
from mcp.types import CallToolResult, ListToolsResult, Tool
from mcp.types import ImageContent as MCPImage
from mcp_memory import in_memory
from pydantic import BaseModel, field_validator

from agentforge_typed import (
    AiMessage,
    AudioContent,
    ChatMessage,
    ChatRequestParameters,
    DocumentContent,
    FunctionModel,
    ImageContent,
    MCPServer,
    TextContent,
    ToolCall,
    ToolResultMessage,
    ToolService,
)
from agentforge_typed.tools._base import ToolContext

SERVER = str(Path(__file__).parents[2] / "mcp_content_server.py")
MCP_SDK_1 = version("mcp").startswith("1.")
PNG = b"\x89PNG\r\n\x1a\nmcp-image"
PDF = b"%PDF-1.7 mcp"
WAV = b"RIFF....WAVEmcp"


@pytest.fixture(scope="module")
def content_server() -> Iterator[MCPServer]:
    with MCPServer.stdio(sys.executable, [SERVER]) as server:
        yield server


def run(server: MCPServer, name: str, arguments: str = "{}") -> Any:
    (found,) = [t for t in server.tools() if t.name == name]
    return found.execute(
        ToolCall(id="c1", name=name, arguments=arguments), ToolContext(None, "c1", name)
    )


def test_an_image_block_is_an_image_part(content_server: MCPServer) -> None:
    result = run(content_server, "screenshot")
    assert result.content == (ImageContent(data=PNG, media_type="image/png"),)
    assert result.text == f"[image: image/png, {len(PNG)} bytes]"
    assert not result.is_error


def test_resources_audio_and_links_are_parts(
    content_server: MCPServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    resolving(monkeypatch, {"example.com": PUBLIC})  # a public host: its link is forwarded
    result = run(content_server, "report")
    assert result.content == (
        TextContent(text="Quarterly report:"),
        DocumentContent(data=PDF, media_type="application/pdf", title="q3.pdf"),
        TextContent(text="Revenue is up."),
        AudioContent(data=WAV, media_type="audio/wav"),
        ImageContent(url="https://example.com/chart.png", media_type="image/png"),
        # A server's own file is out of every provider's reach: named, not linked.
        TextContent(text="[resource: file:///data/raw.csv]"),
    )


def test_structured_content_is_the_value_and_conforms(content_server: MCPServer) -> None:
    result = run(content_server, "forecast", '{"city": "Paris"}')
    assert (result.is_error, result.value) == (False, {"city": "Paris", "celsius": 21})
    (forecast,) = [t for t in content_server.tools() if t.name == "forecast"]
    assert forecast.output_schema is not None
    assert forecast.output_schema.schema["required"] == ["city", "celsius"]


def test_an_mcp_image_reaches_the_history(content_server: MCPServer) -> None:
    def reply(messages: Sequence[ChatMessage], _: ChatRequestParameters) -> AiMessage:
        if isinstance(messages[-1], ToolResultMessage):
            return AiMessage(text="A page.")
        return AiMessage(tool_calls=[ToolCall(id="c1", name="screenshot")])

    service = ToolService()
    service.register(content_server)
    result = service.chat(FunctionModel(reply), "Look.")
    answer = result.messages[2]
    assert isinstance(answer, ToolResultMessage)
    assert answer.content == (ImageContent(data=PNG, media_type="image/png"),)


# -- what the SDK's helpers never send -----------------------------------------------------------

FORECAST_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "celsius": {"type": "integer"}},
    "required": ["city", "celsius"],
}


@contextlib.contextmanager
def low_level(
    result: CallToolResult, output_schema: Any = FORECAST_SCHEMA, **options: Any
) -> Iterator[MCPServer]:
    """A server of the SDK's low-level `Server` whose one tool `t` answers `result`."""

    async def call_tool(context: Any, params: Any) -> CallToolResult:
        return result

    async def list_tools(context: Any, params: Any) -> ListToolsResult:
        tool = Tool(name="t", input_schema={"type": "object"}, output_schema=output_schema)
        return ListToolsResult(tools=[tool])

    served = Server("low", on_list_tools=list_tools, on_call_tool=call_tool)

    with in_memory(served, label="low", **options) as server:
        yield server


@pytest.mark.skipif(MCP_SDK_1, reason="SDK 2's low-level `Server`")
def test_structured_content_that_breaks_the_output_schema_is_an_unreadable_result() -> None:
    # The tool ran on the server: the model is told so, never that it failed.
    wrong = CallToolResult(content=[], structured_content={"city": 7, "celsius": "warm", "wind": 3})
    with low_level(wrong) as server:
        result = run(server, "t")
    assert (result.is_error, result.error_kind) == (True, "unreadable_result")
    assert result.text == (
        "Tool `t` ran, but its result could not be read (its structuredContent does not match "
        "its outputSchema:\n"
        "- $.city: Input should be of type string (input: 7)\n"
        '- $.celsius: Input should be of type integer (input: "warm")). '
        "Its effects, if any, took place: do not call it again to get the result."
    )
    assert result.value == {"city": 7, "celsius": "warm", "wind": 3}  # for the program


@pytest.mark.skipif(MCP_SDK_1, reason="SDK 2's low-level `Server`")
def test_no_structured_content_from_a_tool_with_an_output_schema_is_an_unreadable_result() -> None:
    with low_level(CallToolResult(content=[])) as server:
        result = run(server, "t")
    assert result.error_kind == "unreadable_result"
    assert result.text == (
        "Tool `t` ran, but its result could not be read (the server sent no structuredContent, "
        "but the tool declares an outputSchema). Its effects, if any, took place: do not call it "
        "again to get the result."
    )


@pytest.mark.skipif(MCP_SDK_1, reason="SDK 2's low-level `Server`")
def test_image_data_that_is_not_base64_is_left_out_with_a_note() -> None:
    bad = CallToolResult(
        content=[
            MCPImage(type="image", data="%%% not base64 %%%", mime_type="image/png"),
            MCPImage(type="image", data=base64.b64encode(PNG).decode(), mime_type="image/png"),
        ]
    )
    with low_level(bad, output_schema=None) as server:
        result = run(server, "t")
    assert result.content == (
        TextContent(text="[image: image/png, left out: not valid]"),
        ImageContent(data=PNG, media_type="image/png"),
    )


@pytest.mark.skipif(MCP_SDK_1, reason="SDK 2's low-level `Server`")
def test_a_tool_with_an_invalid_output_schema_is_skipped(caplog: pytest.LogCaptureFixture) -> None:
    with (
        caplog.at_level(logging.WARNING, logger="agentforge_typed"),
        low_level(CallToolResult(content=[]), output_schema=BROKEN) as server,
    ):
        assert server.tools() == ()
    assert "tool 't' skipped: invalid outputSchema for tool 't': 'strng' is not valid under" in (
        caplog.text
    )


BROKEN = {"type": "object", "properties": {"a": {"type": "strng"}}}


class Forecast(BaseModel):
    """What the program reads a forecast as."""

    city: str
    celsius: int

    @field_validator("celsius")
    @classmethod
    def plausible(cls, celsius: int) -> int:
        if not -90 <= celsius <= 60:
            raise ValueError("not a temperature on Earth")
        return celsius


@pytest.mark.skipif(MCP_SDK_1, reason="SDK 2's low-level `Server`")
def test_structured_content_is_typed_for_the_program_when_a_type_is_given() -> None:
    answer = CallToolResult(content=[], structured_content={"city": "Oslo", "celsius": 4})
    with low_level(answer, output_types={"t": Forecast}) as server:
        result = run(server, "t")
    assert result.value == Forecast(city="Oslo", celsius=4)
    assert result.text == '{"city":"Oslo","celsius":4}'  # the model reads what the server sent


@pytest.mark.skipif(MCP_SDK_1, reason="SDK 2's low-level `Server`")
def test_structured_content_that_does_not_fit_the_programs_type_is_an_unreadable_result() -> None:
    # The outputSchema allows it; the program's type does not.
    answer = CallToolResult(content=[], structured_content={"city": "Oslo", "celsius": 400})
    with low_level(answer, output_types={"t": Forecast}) as server:
        result = run(server, "t")
    assert (result.is_error, result.error_kind) == (True, "unreadable_result")
    assert result.text == (
        "Tool `t` ran, but its result could not be read (its structuredContent is not a "
        "Forecast:\n- $.celsius: Value error, not a temperature on Earth (input: 400)). Its "
        "effects, if any, took place: do not call it again to get the result."
    )
