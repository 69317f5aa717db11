"""The tool loop: `ToolService` and everything a run consults.

The modules are private; `ToolService`, its options, results and pauses are exported from
`agentforge_typed` itself. This module is the public home of the loop's extension points
(docs/reference/api.md), each loaded on first use:

- guardrails and decisions: `Guardrail`, `input_guardrail`, `call_guardrail`, `result_guardrail`,
  `output_guardrail`, `Block`, `Redact`, `CallCheck`, `RunOutput`, `GuardrailOutcome`,
  `GuardrailError`, `redact_secrets`, `max_cost_per_call`, `CallRule`, `CallDecision`,
  `PendingReason`;
- history processors: `HistoryProcessor`, `HistoryProcessorError`, `keep_last_rounds`,
  `drop_old_tool_results`;
- hooks and handlers: `BeforeToolCall`, `AfterToolCall`, `ArgumentsErrorHandler`,
  `ExecutionErrorHandler`, `UnknownToolHandler`, `available_tools_handler`,
  `list_available_tools`, `logging_hook`;
- tool selection: `PrepareTools`, `PrepareContext`, `ToolSelection`, `ToolSearch`;
- structured output: `OutputSpec`;
- the result's two kinds: `FinishedChatResult`, `PausedChatResult` (told apart by
  `result.paused`);
- the stream's other events: `OutputCallEvent`, `PartialArgumentsEvent`, `SubRunEvent`,
  `ToolProgressEvent`;
- instrumentation: `instrument`, `Instrumentation`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import _lazy

if TYPE_CHECKING:
    from .._exceptions import GuardrailError
    from .._records import CallDecision, GuardrailOutcome, PendingReason
    from ._decisions import CallRule
    from ._events import OutputCallEvent, PartialArgumentsEvent, SubRunEvent, ToolProgressEvent
    from ._guardrails import (
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
    from ._history import (
        HistoryProcessor,
        HistoryProcessorError,
        drop_old_tool_results,
        keep_last_rounds,
    )
    from ._hooks import logging_hook
    from ._output import OutputSpec
    from ._registry import (
        AfterToolCall,
        ArgumentsErrorHandler,
        BeforeToolCall,
        ExecutionErrorHandler,
        UnknownToolHandler,
        available_tools_handler,
        list_available_tools,
    )
    from ._results import FinishedChatResult, PausedChatResult
    from ._toolsets import PrepareContext, PrepareTools, ToolSearch, ToolSelection
    from ._tracing import Instrumentation, instrument

__all__ = [
    "AfterToolCall",
    "ArgumentsErrorHandler",
    "BeforeToolCall",
    "Block",
    "CallCheck",
    "CallDecision",
    "CallRule",
    "ExecutionErrorHandler",
    "FinishedChatResult",
    "Guardrail",
    "GuardrailError",
    "GuardrailOutcome",
    "HistoryProcessor",
    "HistoryProcessorError",
    "Instrumentation",
    "OutputCallEvent",
    "OutputSpec",
    "PartialArgumentsEvent",
    "PausedChatResult",
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
]

# Loaded on first use: the loop's own modules import one another through this package, which must
# not pull in instrumentation (or anything else) before a program asks for it.
_HOMES = {
    "GuardrailError": ".._exceptions",
    **dict.fromkeys(("CallDecision", "GuardrailOutcome", "PendingReason"), ".._records"),
    "CallRule": "._decisions",
    **dict.fromkeys(
        ("OutputCallEvent", "PartialArgumentsEvent", "SubRunEvent", "ToolProgressEvent"),
        "._events",
    ),
    **dict.fromkeys(
        (
            "Block",
            "CallCheck",
            "Guardrail",
            "Redact",
            "RunOutput",
            "call_guardrail",
            "input_guardrail",
            "max_cost_per_call",
            "output_guardrail",
            "redact_secrets",
            "result_guardrail",
        ),
        "._guardrails",
    ),
    **dict.fromkeys(
        ("HistoryProcessor", "HistoryProcessorError", "drop_old_tool_results", "keep_last_rounds"),
        "._history",
    ),
    "logging_hook": "._hooks",
    "OutputSpec": "._output",
    **dict.fromkeys(("FinishedChatResult", "PausedChatResult"), "._results"),
    **dict.fromkeys(
        (
            "AfterToolCall",
            "ArgumentsErrorHandler",
            "BeforeToolCall",
            "ExecutionErrorHandler",
            "UnknownToolHandler",
            "available_tools_handler",
            "list_available_tools",
        ),
        "._registry",
    ),
    **dict.fromkeys(
        ("PrepareContext", "PrepareTools", "ToolSearch", "ToolSelection"), "._toolsets"
    ),
    **dict.fromkeys(("Instrumentation", "instrument"), "._tracing"),
}


if not TYPE_CHECKING:  # hidden from type checkers, which see the imports above instead
    __getattr__, __dir__ = _lazy.lazy_exports(__name__, _HOMES)
