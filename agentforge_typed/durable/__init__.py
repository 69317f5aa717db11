"""Durable execution on Temporal: the tool loop as workflow code, model calls and tool bodies as
activities.

`TemporalToolService` drives the same loop as `ToolService.achat` (one state machine, `Run`), from
inside a Temporal workflow. What has side effects or is non-deterministic runs as an activity,
whose result Temporal records: each model call, and each tool body. What is pure stays in the
workflow: validating arguments, the error policies, the round bookkeeping. A worker that dies is
replaced by another that replays the recorded history and goes on from there, so a tool body that
completed is never run again. A call that needs a person's approval (or an external result) does
not end a durable run: the workflow waits for the decision, sent with the `<name>.decide` update.
Install the `temporal` extra (`pip install 'agentforge-typed[temporal]'`); `AgentForgePlugin`
configures clients, workers and replayers. `agentforge_typed.temporal` is this module under its
first name.

- `_workflow`: `TemporalToolService` (the workflow's side, the client's, the worker's);
- `_activities`: the model and tool activities;
- `_payloads`: what travels between them, and its caps;
- `_plugin`: `AgentForgePlugin`, `installed_binary`.
"""

from __future__ import annotations

try:
    import temporalio  # noqa: F401
except ImportError as error:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "agentforge_typed.durable needs temporalio: pip install 'agentforge-typed[temporal]'"
    ) from error

from ._payloads import (
    DEFAULT_MAX_PAYLOAD_BYTES,
    DEFAULT_MAX_RESULT_BYTES,
    DEFAULT_MODEL_OPTIONS,
    DEFAULT_TOOL_OPTIONS,
    ActivityOptions,
    Decisions,
    PayloadTooLargeError,
    ToolActivityInput,
    ToolActivityResult,
)
from ._plugin import AgentForgePlugin, installed_binary
from ._workflow import TemporalToolService

__all__ = [
    "DEFAULT_MAX_PAYLOAD_BYTES",
    "DEFAULT_MAX_RESULT_BYTES",
    "DEFAULT_MODEL_OPTIONS",
    "DEFAULT_TOOL_OPTIONS",
    "AgentForgePlugin",
    "ActivityOptions",
    "Decisions",
    "PayloadTooLargeError",
    "TemporalToolService",
    "ToolActivityInput",
    "ToolActivityResult",
    "installed_binary",
]
