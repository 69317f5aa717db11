"""agentforge_typed: typed Python functions as LLM tools, validated by pydantic.

`__all__` is the common path: what a program writes by name to define tools, run them on a model
(blocking or streaming), read, pause and resume a run, test offline, and catch what a caller
catches. Everything else has its public home in a sub-package: `agentforge_typed.tools` (tool
kinds, declarations, caches, MCP extras), `agentforge_typed.providers` (a model's stream and
response details, profiles, dialects, options), `agentforge_typed.loop` (the loop's extension
points: guardrails, history processors, hooks, tool selection, the stream's other events,
instrumentation), `agentforge_typed.serving` and `agentforge_typed.stores`. The names that left
`__all__` still import from here (docs/reference/api.md).
"""

import importlib
import warnings
from typing import TYPE_CHECKING, Any

from . import _lazy
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
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from ._model import ChatModel, TextDelta
from ._records import (
    Approval,
    Approved,
    Elicitation,
    ElicitationAnswer,
    PendingCall,
    ToolExecution,
    ToolFailed,
    pending_calls,
)
from ._request import ChatRequest, ChatRequestParameters
from ._response import ChatResponse
from .loop._events import FinalResultEvent, ToolCallEvent, ToolLoopEvent, ToolResultEvent
from .loop._options import RunOptions
from .loop._output import OutputValidationError
from .loop._results import ToolChatResult
from .loop._service import ToolService
from .loop._usage import UsageLimitExceededError, UsageLimits
from .tools._base import ToolContext
from .tools._function import Tool, tool
from .tools._returns import ToolReturn

if TYPE_CHECKING:
    from .providers._fake import FakeModel
    from .providers._fallback import FallbackModel
    from .providers._function import FunctionModel
    from .providers._registry import get_model
    from .providers.anthropic import AnthropicChatModel
    from .providers.gemini import GeminiChatModel
    from .providers.openai import OpenAIChatModel
    from .providers.openai_responses import OpenAIResponsesModel
    from .tools.mcp._server import MCPServer

    # The names that left `__all__`, re-exported from their homes for type checkers (`X as X`:
    # one statement per home, which the import sorter would split into one per name).
    # isort: off
    from .loop import (
        AfterToolCall as AfterToolCall,
        ArgumentsErrorHandler as ArgumentsErrorHandler,
        BeforeToolCall as BeforeToolCall,
        Block as Block,
        CallCheck as CallCheck,
        CallDecision as CallDecision,
        CallRule as CallRule,
        ExecutionErrorHandler as ExecutionErrorHandler,
        Guardrail as Guardrail,
        GuardrailError as GuardrailError,
        GuardrailOutcome as GuardrailOutcome,
        HistoryProcessor as HistoryProcessor,
        HistoryProcessorError as HistoryProcessorError,
        Instrumentation as Instrumentation,
        OutputCallEvent as OutputCallEvent,
        OutputSpec as OutputSpec,
        PartialArgumentsEvent as PartialArgumentsEvent,
        PendingReason as PendingReason,
        PrepareContext as PrepareContext,
        PrepareTools as PrepareTools,
        Redact as Redact,
        RunOutput as RunOutput,
        SubRunEvent as SubRunEvent,
        ToolProgressEvent as ToolProgressEvent,
        ToolSearch as ToolSearch,
        ToolSelection as ToolSelection,
        UnknownToolHandler as UnknownToolHandler,
        available_tools_handler as available_tools_handler,
        call_guardrail as call_guardrail,
        drop_old_tool_results as drop_old_tool_results,
        input_guardrail as input_guardrail,
        instrument as instrument,
        keep_last_rounds as keep_last_rounds,
        list_available_tools as list_available_tools,
        logging_hook as logging_hook,
        max_cost_per_call as max_cost_per_call,
        output_guardrail as output_guardrail,
        redact_secrets as redact_secrets,
        result_guardrail as result_guardrail,
    )
    from .providers import (
        AllModelsFailedError as AllModelsFailedError,
        Dialect as Dialect,
        FinishReason as FinishReason,
        ModelFunction as ModelFunction,
        ModelProfile as ModelProfile,
        ResponseComplete as ResponseComplete,
        ResponseFormat as ResponseFormat,
        SchemaDialectError as SchemaDialectError,
        StreamEvent as StreamEvent,
        ThinkingDelta as ThinkingDelta,
        TokenUsage as TokenUsage,
        ToolCallDelta as ToolCallDelta,
        ToolChoice as ToolChoice,
        UnsupportedFeatureError as UnsupportedFeatureError,
        render_schema as render_schema,
    )
    from .serving import (
        ToolServer as ToolServer,
        ask_client as ask_client,
        ask_client_model as ask_client_model,
        serve_mcp as serve_mcp,
    )
    from .stores import (
        ConversationConflictError as ConversationConflictError,
    )
    from .tools import (
        ApprovalPolicy as ApprovalPolicy,
        ArgumentProblem as ArgumentProblem,
        ErrorKind as ErrorKind,
        HandlerTimeoutError as HandlerTimeoutError,
        HttpTool as HttpTool,
        LocalRedirect as LocalRedirect,
        MCPAuthorizationError as MCPAuthorizationError,
        MCPTool as MCPTool,
        MCPToolFilter as MCPToolFilter,
        MemoryCache as MemoryCache,
        ResultCache as ResultCache,
        ReturnBehavior as ReturnBehavior,
        SchemaTool as SchemaTool,
        StoreCache as StoreCache,
        ToolAnnotations as ToolAnnotations,
        ToolDecorator as ToolDecorator,
        ToolExecutionResult as ToolExecutionResult,
        ToolExecutor as ToolExecutor,
        ToolLike as ToolLike,
        ToolSpecification as ToolSpecification,
    )
    # isort: on

__version__ = "0.1.0"

# Imported on first use, so that a program pays only for the parts it uses: the providers (and
# httpx) and the MCP client.
_LAZY = {
    "AnthropicChatModel": ".providers.anthropic",
    "FakeModel": ".providers._fake",
    "FallbackModel": ".providers._fallback",
    "FunctionModel": ".providers._function",
    "GeminiChatModel": ".providers.gemini",
    "MCPServer": ".tools.mcp._server",
    "OpenAIChatModel": ".providers.openai",
    "OpenAIResponsesModel": ".providers.openai_responses",
    "get_model": ".providers._registry",
}

# Names off the common path, by their public home (each in that module's `__all__`): still
# importable from here, without a warning (they were not renamed), loaded from the home on first use.
_ELSEWHERE = {
    ".loop": (
        "AfterToolCall",
        "ArgumentsErrorHandler",
        "BeforeToolCall",
        "Block",
        "CallCheck",
        "CallDecision",
        "CallRule",
        "ExecutionErrorHandler",
        "Guardrail",
        "GuardrailError",
        "GuardrailOutcome",
        "HistoryProcessor",
        "HistoryProcessorError",
        "Instrumentation",
        "OutputCallEvent",
        "OutputSpec",
        "PartialArgumentsEvent",
        "PendingReason",
        "PrepareContext",
        "PrepareTools",
        "Redact",
        "RunOutput",
        "SubRunEvent",
        "ToolProgressEvent",
        "ToolSearch",
        "ToolSelection",
        "UnknownToolHandler",
        "available_tools_handler",
        "call_guardrail",
        "drop_old_tool_results",
        "input_guardrail",
        "instrument",
        "keep_last_rounds",
        "list_available_tools",
        "logging_hook",
        "max_cost_per_call",
        "output_guardrail",
        "redact_secrets",
        "result_guardrail",
    ),
    ".providers": (
        "AllModelsFailedError",
        "Dialect",
        "FinishReason",
        "ModelFunction",
        "ModelProfile",
        "ResponseComplete",
        "ResponseFormat",
        "SchemaDialectError",
        "StreamEvent",
        "ThinkingDelta",
        "TokenUsage",
        "ToolCallDelta",
        "ToolChoice",
        "UnsupportedFeatureError",
        "render_schema",
    ),
    ".serving": (
        "ToolServer",
        "ask_client",
        "ask_client_model",
        "serve_mcp",
    ),
    ".stores": ("ConversationConflictError",),
    ".tools": (
        "ApprovalPolicy",
        "ArgumentProblem",
        "ErrorKind",
        "HandlerTimeoutError",
        "HttpTool",
        "LocalRedirect",
        "MCPAuthorizationError",
        "MCPTool",
        "MCPToolFilter",
        "MemoryCache",
        "ResultCache",
        "ReturnBehavior",
        "SchemaTool",
        "StoreCache",
        "ToolAnnotations",
        "ToolDecorator",
        "ToolExecutionResult",
        "ToolExecutor",
        "ToolLike",
        "ToolSpecification",
    ),
}
_MOVED = {name: home for home, names in _ELSEWHERE.items() for name in names}


if TYPE_CHECKING:  # the deprecated names, for type checkers (at run time: __getattr__)
    ArgumentError = ArgumentProblem
    UsageLimitExceeded = UsageLimitExceededError

# Old names that still work, each warning once per use with its replacement (CHANGELOG.md).
_DEPRECATED = {
    "ArgumentError": ("ArgumentProblem", "._exceptions"),
    "UsageLimitExceeded": ("UsageLimitExceededError", ".loop._usage"),
}


if not TYPE_CHECKING:  # hidden from type checkers, which see the imports above instead
    _load, __dir__ = _lazy.lazy_exports(__name__, {**_MOVED, **_LAZY})

    def __getattr__(name: str) -> Any:
        if name in _DEPRECATED:
            new, module = _DEPRECATED[name]
            home = f", from agentforge_typed{_MOVED[new]}" if new in _MOVED else ""
            warnings.warn(
                f"agentforge_typed.{name} is deprecated: use {new} (the same class{home})",
                DeprecationWarning,
                stacklevel=2,
            )
            return getattr(importlib.import_module(module, __name__), new)
        return _load(name)


__all__ = [
    "AgentForgeError",
    "AiMessage",
    "AnthropicChatModel",
    "Approval",
    "Approved",
    "AudioContent",
    "BinaryContent",
    "ChatMessage",
    "ChatModel",
    "ChatRequest",
    "ChatRequestParameters",
    "ChatResponse",
    "Content",
    "CustomMessage",
    "DocumentContent",
    "Elicitation",
    "ElicitationAnswer",
    "FakeModel",
    "FallbackModel",
    "FileContent",
    "FinalResultEvent",
    "FunctionModel",
    "GeminiChatModel",
    "ImageContent",
    "MCPServer",
    "ModelError",
    "ModelRetry",
    "OpenAIChatModel",
    "OpenAIResponsesModel",
    "OutputValidationError",
    "PendingCall",
    "RunOptions",
    "SystemMessage",
    "TextContent",
    "TextDelta",
    "Tool",
    "ToolArgumentsError",
    "ToolCall",
    "ToolCallEvent",
    "ToolChatResult",
    "ToolContext",
    "ToolExecution",
    "ToolExecutionError",
    "ToolFailed",
    "ToolLoopEvent",
    "ToolLoopLimitError",
    "ToolResultEvent",
    "ToolResultMessage",
    "ToolReturn",
    "ToolService",
    "UnknownToolError",
    "UsageLimitExceededError",
    "UsageLimits",
    "UserMessage",
    "__version__",
    "get_model",
    "pending_calls",
    "tool",
]
