"""agentforge_typed: typed Python functions as LLM tools, validated by pydantic."""

from ._events import ResponseComplete, StreamEvent, TextDelta, ThinkingDelta, ToolCallDelta
from ._exceptions import (
    AgentForgeError,
    ArgumentError,
    ModelError,
    ModelRetry,
    ToolArgumentsError,
    ToolExecutionError,
    ToolLoopLimitError,
    UnknownToolError,
)
from ._execution import ReturnBehavior, ToolContext, ToolExecutionResult, ToolExecutor
from ._hooks import logging_hook
from ._http_tool import HttpTool
from ._loop_events import (
    FinalResultEvent,
    PartialArgumentsEvent,
    ToolCallEvent,
    ToolLoopEvent,
    ToolResultEvent,
)
from ._mcp import MCPServer
from ._messages import (
    AiMessage,
    ChatMessage,
    CustomMessage,
    ImageContent,
    SystemMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from ._model import ChatModel
from ._output import OutputSpec, OutputValidationError
from ._registry import get_model
from ._request import (
    ChatRequest,
    ChatRequestParameters,
    ResponseFormat,
    ToolChoice,
    ToolSpecification,
)
from ._response import ChatResponse, FinishReason, TokenUsage
from ._results import ToolChatResult, ToolExecution
from ._schema import SchemaDialectError, render_schema
from ._schema_tool import SchemaTool
from ._service import ToolService, list_available_tools
from ._tools import Tool, ToolDecorator, tool
from .providers._fake import FakeModel
from .providers._function import FunctionModel
from .providers.anthropic import AnthropicChatModel
from .providers.openai import OpenAIChatModel

__version__ = "0.1.0"

__all__ = [
    "AgentForgeError",
    "AiMessage",
    "AnthropicChatModel",
    "ArgumentError",
    "ChatMessage",
    "ChatModel",
    "ChatRequest",
    "ChatRequestParameters",
    "ChatResponse",
    "CustomMessage",
    "FakeModel",
    "FinalResultEvent",
    "FinishReason",
    "FunctionModel",
    "HttpTool",
    "ImageContent",
    "MCPServer",
    "ModelError",
    "ModelRetry",
    "OpenAIChatModel",
    "OutputSpec",
    "OutputValidationError",
    "PartialArgumentsEvent",
    "ResponseComplete",
    "ResponseFormat",
    "ReturnBehavior",
    "SchemaDialectError",
    "SchemaTool",
    "StreamEvent",
    "SystemMessage",
    "TextContent",
    "TextDelta",
    "ThinkingDelta",
    "TokenUsage",
    "Tool",
    "ToolArgumentsError",
    "ToolCall",
    "ToolCallDelta",
    "ToolCallEvent",
    "ToolChatResult",
    "ToolChoice",
    "ToolContext",
    "ToolDecorator",
    "ToolExecution",
    "ToolExecutionError",
    "ToolExecutionResult",
    "ToolExecutor",
    "ToolLoopEvent",
    "ToolLoopLimitError",
    "ToolResultEvent",
    "ToolResultMessage",
    "ToolService",
    "ToolSpecification",
    "UnknownToolError",
    "UserMessage",
    "__version__",
    "get_model",
    "list_available_tools",
    "logging_hook",
    "render_schema",
    "tool",
]
