"""Durable execution on Temporal: `agentforge_typed.durable` under its first name (see there)."""

from .durable import (
    DEFAULT_MAX_PAYLOAD_BYTES,
    DEFAULT_MAX_RESULT_BYTES,
    DEFAULT_MODEL_OPTIONS,
    DEFAULT_TOOL_OPTIONS,
    ActivityOptions,
    AgentForgePlugin,
    Decisions,
    PayloadTooLargeError,
    TemporalToolService,
    ToolActivityInput,
    ToolActivityResult,
    installed_binary,
)
from .durable._plugin import PASSTHROUGH_MODULES as PASSTHROUGH_MODULES

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
