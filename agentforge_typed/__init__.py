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
from ._request import ChatRequest, ChatRequestParameters, ToolChoice, ToolSpecification
from ._response import ChatResponse, FinishReason, TokenUsage
from .providers._function import FunctionModel

__version__ = "0.1.0"

__all__ = [
    "AgentForgeError",
    "AiMessage",
    "ArgumentError",
    "ChatMessage",
    "ChatModel",
    "ChatRequest",
    "ChatRequestParameters",
    "ChatResponse",
    "CustomMessage",
    "FinishReason",
    "FunctionModel",
    "ImageContent",
    "ModelError",
    "ModelRetry",
    "ResponseComplete",
    "StreamEvent",
    "SystemMessage",
    "TextContent",
    "TextDelta",
    "ThinkingDelta",
    "TokenUsage",
    "ToolArgumentsError",
    "ToolCall",
    "ToolCallDelta",
    "ToolChoice",
    "ToolExecutionError",
    "ToolLoopLimitError",
    "ToolResultMessage",
    "ToolSpecification",
    "UnknownToolError",
    "UserMessage",
    "__version__",
]
