"""agentforge_typed: typed Python functions as LLM tools, validated by pydantic."""

import importlib
import warnings
from typing import TYPE_CHECKING, Any

from ._content import (
    AudioContent,
    BinaryContent,
    Content,
    DocumentContent,
    FileContent,
    ImageContent,
    TextContent,
)
from ._exceptions import (
    AgentForgeError,
    ArgumentProblem,
    ConversationConflictError,
    GuardrailError,
    ModelError,
    ModelRetry,
    ToolArgumentsError,
    ToolExecutionError,
    ToolLoopLimitError,
    UnknownToolError,
    UnsupportedFeatureError,
)
from ._messages import (
    AiMessage,
    ChatMessage,
    CustomMessage,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from ._model import (
    ChatModel,
    ResponseComplete,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
)
from ._records import (
    Approval,
    Approved,
    CallDecision,
    Elicitation,
    ElicitationAnswer,
    ErrorKind,
    GuardrailOutcome,
    PendingCall,
    PendingReason,
    ToolExecution,
    ToolExecutionResult,
    ToolFailed,
    pending_calls,
)
from ._request import (
    ChatRequest,
    ChatRequestParameters,
    ResponseFormat,
    ToolAnnotations,
    ToolChoice,
    ToolSpecification,
)
from ._response import ChatResponse, FinishReason, TokenUsage
from .loop._decisions import CallRule
from .loop._events import (
    FinalResultEvent,
    OutputCallEvent,
    PartialArgumentsEvent,
    SubRunEvent,
    ToolCallEvent,
    ToolLoopEvent,
    ToolProgressEvent,
    ToolResultEvent,
)
from .loop._guardrails import (
    Block,
    CallCheck,
    Guardrail,
    Redact,
    RunOutput,
    call_guardrail,
    input_guardrail,
    max_cost_per_call,
    output_guardrail,
    redact_secrets,
    result_guardrail,
)
from .loop._history import (
    HistoryProcessor,
    HistoryProcessorError,
    drop_old_tool_results,
    keep_last_rounds,
)
from .loop._options import RunOptions
from .loop._output import OutputSpec, OutputValidationError
from .loop._registry import (
    AfterToolCall,
    ArgumentsErrorHandler,
    BeforeToolCall,
    ExecutionErrorHandler,
    UnknownToolHandler,
    available_tools_handler,
    list_available_tools,
)
from .loop._results import ToolChatResult
from .loop._service import ToolService
from .loop._toolsets import PrepareContext, PrepareTools, ToolSearch, ToolSelection
from .loop._usage import UsageLimitExceededError, UsageLimits
from .tools._base import ApprovalPolicy, ReturnBehavior, ToolContext, ToolExecutor, ToolLike
from .tools._cache import MemoryCache, ResultCache, StoreCache
from .tools._function import Tool, tool
from .tools._invoke import HandlerTimeoutError
from .tools._returns import ToolReturn

if TYPE_CHECKING:
    from .loop._hooks import logging_hook
    from .loop._tracing import Instrumentation, instrument
    from .providers._dialects import Dialect, SchemaDialectError

    # `render_schema` and `ToolDecorator` moved to documented submodules; still importable here.
    from .providers._dialects import render_schema as render_schema
    from .providers._fake import FakeModel
    from .providers._fallback import AllModelsFailedError, FallbackModel
    from .providers._function import FunctionModel, ModelFunction
    from .providers._profiles import ModelProfile
    from .providers._registry import get_model
    from .providers.anthropic import AnthropicChatModel
    from .providers.gemini import GeminiChatModel
    from .providers.openai import OpenAIChatModel
    from .providers.openai_responses import OpenAIResponsesModel
    from .serving import ToolServer, ask_client, ask_client_model, serve_mcp
    from .tools._function import ToolDecorator as ToolDecorator
    from .tools._http import HttpTool
    from .tools._schema_tool import SchemaTool
    from .tools.mcp._server import (
        LocalRedirect,
        MCPAuthorizationError,
        MCPServer,
        MCPTool,
        MCPToolFilter,
        MemoryTokens,
        StoreTokens,
    )

__version__ = "0.1.0"

# Imported on first use, so that a program pays only for the parts it uses: the providers (and
# httpx), the dialect renderers, instrumentation, the HTTP and MCP tools, jsonschema behind the
# schema-declared tools, and serving.
_LAZY = {
    "AllModelsFailedError": ".providers._fallback",
    "AnthropicChatModel": ".providers.anthropic",
    "Dialect": ".providers._dialects",
    "FakeModel": ".providers._fake",
    "FallbackModel": ".providers._fallback",
    "FunctionModel": ".providers._function",
    "GeminiChatModel": ".providers.gemini",
    "HttpTool": ".tools._http",
    "Instrumentation": ".loop._tracing",
    "LocalRedirect": ".tools.mcp._server",
    "MCPAuthorizationError": ".tools.mcp._server",
    "MCPServer": ".tools.mcp._server",
    "MCPTool": ".tools.mcp._server",
    "MCPToolFilter": ".tools.mcp._server",
    "MemoryTokens": ".tools.mcp._server",
    "ModelFunction": ".providers._function",
    "ModelProfile": ".providers._profiles",
    "OpenAIChatModel": ".providers.openai",
    "OpenAIResponsesModel": ".providers.openai_responses",
    "SchemaDialectError": ".providers._dialects",
    "SchemaTool": ".tools._schema_tool",
    "StoreTokens": ".tools.mcp._server",
    "ToolServer": ".serving",
    "ask_client": ".serving",
    "ask_client_model": ".serving",
    "get_model": ".providers._registry",
    "instrument": ".loop._tracing",
    "logging_hook": ".loop._hooks",
    "serve_mcp": ".serving",
    # Plumbing that moved to a documented submodule; still importable from here.
    "ToolDecorator": ".tools",
    "render_schema": ".providers",
}


if TYPE_CHECKING:  # the deprecated names, for type checkers (at run time: __getattr__)
    ArgumentError = ArgumentProblem
    UsageLimitExceeded = UsageLimitExceededError

# Old names that still work, each warning once per use with its replacement (CHANGELOG.md).
_DEPRECATED = {
    "ArgumentError": ("ArgumentProblem", "._exceptions"),
    "UsageLimitExceeded": ("UsageLimitExceededError", ".loop._usage"),
}


if not TYPE_CHECKING:  # hidden from type checkers, which see the imports above instead

    def __getattr__(name: str) -> Any:
        if name in _DEPRECATED:
            new, module = _DEPRECATED[name]
            warnings.warn(
                f"agentforge_typed.{name} is deprecated: use {new} (the same class)",
                DeprecationWarning,
                stacklevel=2,
            )
            return getattr(importlib.import_module(module, __name__), new)
        home = _LAZY.get(name)
        if home is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home, __name__), name)
        globals()[name] = value  # the next lookup is an ordinary attribute
        return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "AfterToolCall",
    "AgentForgeError",
    "AiMessage",
    "AllModelsFailedError",
    "AnthropicChatModel",
    "Approval",
    "ApprovalPolicy",
    "Approved",
    "ArgumentProblem",
    "ArgumentsErrorHandler",
    "AudioContent",
    "BeforeToolCall",
    "BinaryContent",
    "Block",
    "CallCheck",
    "CallDecision",
    "CallRule",
    "ChatMessage",
    "ChatModel",
    "ChatRequest",
    "ChatRequestParameters",
    "ChatResponse",
    "Content",
    "ConversationConflictError",
    "CustomMessage",
    "Dialect",
    "DocumentContent",
    "Elicitation",
    "ElicitationAnswer",
    "ErrorKind",
    "ExecutionErrorHandler",
    "FakeModel",
    "FallbackModel",
    "FileContent",
    "FinalResultEvent",
    "FinishReason",
    "FunctionModel",
    "GeminiChatModel",
    "Guardrail",
    "GuardrailError",
    "GuardrailOutcome",
    "HandlerTimeoutError",
    "HistoryProcessor",
    "HistoryProcessorError",
    "HttpTool",
    "ImageContent",
    "Instrumentation",
    "LocalRedirect",
    "MCPAuthorizationError",
    "MCPServer",
    "MCPTool",
    "MCPToolFilter",
    "MemoryCache",
    "MemoryTokens",
    "ModelError",
    "ModelFunction",
    "ModelProfile",
    "ModelRetry",
    "OpenAIChatModel",
    "OpenAIResponsesModel",
    "OutputCallEvent",
    "OutputSpec",
    "OutputValidationError",
    "PartialArgumentsEvent",
    "PendingCall",
    "PendingReason",
    "PrepareContext",
    "PrepareTools",
    "Redact",
    "ResponseComplete",
    "ResponseFormat",
    "ResultCache",
    "ReturnBehavior",
    "RunOptions",
    "RunOutput",
    "SchemaDialectError",
    "SchemaTool",
    "StoreCache",
    "StoreTokens",
    "StreamEvent",
    "SubRunEvent",
    "SystemMessage",
    "TextContent",
    "TextDelta",
    "ThinkingDelta",
    "TokenUsage",
    "Tool",
    "ToolAnnotations",
    "ToolArgumentsError",
    "ToolCall",
    "ToolCallDelta",
    "ToolCallEvent",
    "ToolChatResult",
    "ToolChoice",
    "ToolContext",
    "ToolExecution",
    "ToolExecutionError",
    "ToolExecutionResult",
    "ToolExecutor",
    "ToolFailed",
    "ToolLike",
    "ToolLoopEvent",
    "ToolLoopLimitError",
    "ToolProgressEvent",
    "ToolResultEvent",
    "ToolResultMessage",
    "ToolReturn",
    "ToolSearch",
    "ToolSelection",
    "ToolServer",
    "ToolService",
    "ToolSpecification",
    "UnknownToolError",
    "UnknownToolHandler",
    "UnsupportedFeatureError",
    "UsageLimitExceededError",
    "UsageLimits",
    "UserMessage",
    "__version__",
    "ask_client",
    "ask_client_model",
    "available_tools_handler",
    "call_guardrail",
    "drop_old_tool_results",
    "get_model",
    "input_guardrail",
    "instrument",
    "keep_last_rounds",
    "list_available_tools",
    "logging_hook",
    "max_cost_per_call",
    "output_guardrail",
    "pending_calls",
    "redact_secrets",
    "result_guardrail",
    "serve_mcp",
    "tool",
]
