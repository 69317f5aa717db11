"""A workflow whose run calls an MCP server's tool that asks the user a question, for
test_temporal_mcp.py. The MCP server is entered by the test, so the durable service is built there
(`serve`) and this module, passed through the workflow sandbox, holds it for the workflow."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatRequestParameters,
    FunctionModel,
    MCPServer,
    ToolCall,
    ToolResultMessage,
    ToolService,
    UserMessage,
)
from agentforge_typed.temporal import ActivityOptions, AgentForgePlugin, TemporalToolService

PLUGIN = AgentForgePlugin(passthrough_modules=[__name__])

held: list[TemporalToolService] = []
"""The durable service of the MCP server the test entered last."""


def script(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
    """Calls `ask` (with the arguments of the first user message), then says what it read."""
    results = [m for m in messages if isinstance(m, ToolResultMessage)]
    if results:
        return AiMessage(text=f"the tool said: {results[-1].text}")
    first = messages[0]
    arguments = (first.text if isinstance(first, UserMessage) else None) or "{}"
    return AiMessage(tool_calls=[ToolCall(id="c1", name="ask", arguments=arguments)])


def serve(server: MCPServer) -> TemporalToolService:
    """The durable service of `server`'s tools, held for the workflow."""
    durable = TemporalToolService(
        ToolService([server]),
        FunctionModel(script),
        name="asking",
        tool_options=ActivityOptions(
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(maximum_attempts=1),
        ),
    )
    held[:] = [durable]
    return durable


@workflow.defn
class AskWorkflow:
    """Runs one conversation; returns its last text and what the tool said."""

    @workflow.run
    async def run(self, arguments: str) -> list[str]:
        result = await held[0].chat(arguments)
        return [result.text or "", *(e.result.text for e in result.tool_executions)]
