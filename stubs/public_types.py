"""Static-typing contract of the public types for public surfaces: every type a public function
takes or returns is importable from `agentforge_typed`, and hooks may be async."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from typing_extensions import assert_type

from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatRequestParameters,
    ChatResponse,
    FunctionModel,
    ToolArgumentsError,
    ToolCall,
    ToolContext,
    ToolExecution,
    ToolService,
    tool,
)
from agentforge_typed.loop import (
    AfterToolCall,
    ArgumentsErrorHandler,
    BeforeToolCall,
    ExecutionErrorHandler,
    UnknownToolHandler,
)
from agentforge_typed.providers import Dialect, ModelFunction
from agentforge_typed.tools import (
    ErrorKind,
    HandlerTimeoutError,
    MCPTool,
    ToolExecutionResult,
    ToolLike,
)


def deny(call: ToolCall, context: ToolContext[Any]) -> str | None:
    return None


async def approve(call: ToolCall, context: ToolContext[Any]) -> ToolExecutionResult | None:
    return None


def audit(execution: ToolExecution) -> None:
    return None


async def audit_remotely(execution: ToolExecution) -> None:
    return None


def on_arguments(error: ToolArgumentsError, context: ToolContext[Any]) -> str:
    return str(error)


def on_failure(error: BaseException, context: ToolContext[Any]) -> ToolExecutionResult:
    return ToolExecutionResult.error(str(error), "execution")


def on_unknown(call: ToolCall, names: Sequence[str]) -> str | None:
    return None


before: BeforeToolCall = deny
async_before: BeforeToolCall = approve
after: AfterToolCall = audit
async_after: AfterToolCall = audit_remotely
arguments_handler: ArgumentsErrorHandler = on_arguments
execution_handler: ExecutionErrorHandler = on_failure
unknown_handler: UnknownToolHandler = on_unknown
service = ToolService(
    before_tool_call=approve,
    after_tool_call=audit_remotely,
    arguments_error_handler=arguments_handler,
    execution_error_handler=execution_handler,
    unknown_tool_handler=unknown_handler,
)


def wrong_arity(call: ToolCall) -> None:
    return None


def counts(execution: ToolExecution) -> int:
    return 1


bad_before: BeforeToolCall = wrong_arity  # type: ignore[assignment]
bad_after: AfterToolCall = counts  # type: ignore[assignment]
ToolService(after_tool_call=counts)  # type: ignore[arg-type]
bad_unknown: UnknownToolHandler = deny  # type: ignore[assignment]


# FunctionModel's callable, sync or async.
def reply(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
    return AiMessage(text="hi")


async def areply(
    messages: Sequence[ChatMessage], parameters: ChatRequestParameters
) -> ChatResponse:
    return ChatResponse(ai_message=AiMessage(text="hi"))


function: ModelFunction = reply
async_function: ModelFunction = areply
FunctionModel(function)


def no_parameters() -> AiMessage:
    return AiMessage(text="hi")


bad_function: ModelFunction = no_parameters  # type: ignore[assignment]

kind: ErrorKind = "timeout"
ran_unread: ErrorKind = "unreadable_result"
bad_kind: ErrorKind = "oops"  # type: ignore[assignment]
dialect: Dialect = "openai-strict"
bad_dialect: Dialect = "gpt"  # type: ignore[assignment]


@tool
def add(a: int, b: int) -> int:
    return a + b


registered: ToolLike = add


def mcp_tool_is_a_tool(found: MCPTool) -> ToolLike:
    return found


timeout = HandlerTimeoutError(2.0)
assert_type(timeout.timeout, float)
assert_type(timeout.abandoned, bool)
