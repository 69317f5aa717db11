"""agentforge_typed: typed Python functions as LLM tools, validated by pydantic."""

from ._dialects import SchemaDialectError, render_schema
from ._events import ResponseComplete, StreamEvent, TextDelta, ThinkingDelta, ToolCallDelta
from ._exceptions import (
    AgentForgeError,
    ArgumentError,
    ArgumentProblem,
    ModelError,
    ModelRetry,
    ToolArgumentsError,
    ToolExecutionError,
    ToolLoopLimitError,
    UnknownToolError,
)
from ._hooks import logging_hook
from ._loop_events import (
    FinalResultEvent,
    PartialArgumentsEvent,
    ToolCallEvent,
    ToolLoopEvent,
    ToolResultEvent,
)
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
from ._request import (
    ChatRequest,
    ChatRequestParameters,
    ResponseFormat,
    ToolChoice,
    ToolSpecification,
)
from ._response import ChatResponse, FinishReason, TokenUsage
from ._results import ToolChatResult, ToolExecution
from ._service import ToolService, list_available_tools
from .providers._fake import FakeModel
from .providers._function import FunctionModel
from .providers._registry import get_model
from .providers.anthropic import AnthropicChatModel
from .providers.openai import OpenAIChatModel
from .tools._base import ReturnBehavior, ToolContext, ToolExecutionResult, ToolExecutor
from .tools._function import Tool, ToolDecorator, tool
from .tools._http import HttpTool
from .tools._mcp import MCPServer
from .tools._schema_tool import SchemaTool

__version__ = "0.1.0"

__all__ = [
    "AgentForgeError",
    "AiMessage",
    "AnthropicChatModel",
    "ArgumentError",
    "ArgumentProblem",
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
