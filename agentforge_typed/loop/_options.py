"""The keyword options of one run (`chat`, `achat`, `stream`, `astream`, and a durable run)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from typing_extensions import TypedDict

from .._records import Approval
from ._toolsets import ToolSelection
from ._usage import UsageLimits

__all__ = ["RUN_OPTIONS", "RunOptions"]


class RunOptions(TypedDict, total=False):
    """The options of one run that `chat`, `achat`, `stream` and `astream` take as keywords,
    besides `deps` and `output_type`. Each may be left out or given as `None` (the default).

    Type a wrapper's keywords with it to forward them unchanged:
    `def ask(prompt: str, **options: Unpack[RunOptions]) -> str`.
    """

    tools: ToolSelection | None
    """Narrow what this run offers: tool names, `"group:NAME"` groups, or a `ToolSearch`;
    a name or group that is not registered is a `ValueError` before any model call."""
    conversation_id: str | None
    """The id tools see as `ToolContext.conversation_id` and traces record; a random one by
    default. With a service `store`, the stored conversation the run continues (its history
    first, then the new input; none to resume it), saved at every round boundary."""
    approvals: Mapping[str, Approval] | None
    """Decisions on the calls awaiting approval that the history ends with, by tool call id
    (`True`, `False`, a reason to deny, or `Approved(arguments=...)`); a decision on a call that
    is not pending is a `ValueError`."""
    external_results: Mapping[str, Any] | None
    """Results of the pending external calls the history ends with, by tool call id: a value
    (converted like a tool's return value) or `ToolFailed("why")`."""
    usage_limits: UsageLimits | None
    """Caps for this run, replacing the service's `usage_limits`."""


RUN_OPTIONS = frozenset(RunOptions.__annotations__)
