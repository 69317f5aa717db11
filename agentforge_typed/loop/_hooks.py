"""Ready-made `ToolService` hooks."""

from __future__ import annotations

import logging

from .._messages import shown_name
from .._records import ToolExecution
from ._registry import AfterToolCall

__all__ = ["logging_hook"]

_REDACTED = "<redacted>"


def logging_hook(
    logger: logging.Logger | None = None,
    *,
    level: int = logging.INFO,
    error_level: int = logging.WARNING,
    include_arguments: bool = False,
    include_results: bool = False,
) -> AfterToolCall:
    """An `after_tool_call` hook that logs each execution: tool name, call id, duration and
    outcome (`ok` or the error kind).

    Arguments and result texts may hold personal data or secrets, so they are logged as
    `<redacted>` unless `include_arguments` / `include_results` ask for them. Failed calls log at
    `error_level`. The default logger is `agentforge_typed.tools`.
    """
    log = logger or logging.getLogger("agentforge_typed.tools")

    def hook(execution: ToolExecution) -> None:
        result = execution.result
        outcome = result.error_kind or "error" if result.is_error else "ok"
        log.log(
            error_level if result.is_error else level,
            "tool %s call_id=%s outcome=%s duration=%.1fms arguments=%s result=%s",
            shown_name(execution.call.name),
            execution.call.id,
            outcome,
            execution.duration.total_seconds() * 1000,
            execution.call.arguments if include_arguments else _REDACTED,
            result.text if include_results else _REDACTED,
        )

    return hook
