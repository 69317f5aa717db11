"""Calls of task-only tools (the tasks extension of the 2025-11-25 revision).

A tool listed with `execution.taskSupport: "required"` can only be called as a task: the call is
sent with `task: {}`, the server answers at once with the task it made, and the client polls
`tasks/get` at the server's `pollInterval` until the task needs input (`input_required`) or
ends; `tasks/result` then gives the call's result. A question the server asks meanwhile comes on
that `tasks/result` request, as a question asked mid-call does (`_questions`), and pauses the run
the same way. The task lives within its call: the call's `timeout` bounds it (set aside while a
question waits), and a call that stops waiting (timed out, cancelled, its run ended) cancels the
task (`tasks/cancel`), so nothing runs on the server for no one. A call that stops waiting before
the server named the task waits `_CANCEL_WAIT` seconds more for that answer, then cancels the
task it names. A call whose connection is lost while its task runs is not sent again, even for a
`retry_safe` tool (`_calls`): the task may still run on the server, and the session that could
cancel it is gone.

What the server sends is bounded: a task id over `MAX_TASK_ID_CHARS` characters or a task in an
unknown status ends the call with an error, and its poll interval is held between
`MIN_POLL_INTERVAL` and `MAX_POLL_INTERVAL` seconds.

The SDK (2.3) has types for tasks but no way to send a task-augmented `tools/call` (it reads
every `tools/call` answer as a `CallToolResult`): the requests go through the session's own
dispatcher, stamped as the session stamps its requests. A session without those offers no
task-only tool.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp import ClientSession

__all__ = [
    "MAX_POLL_INTERVAL",
    "MAX_TASK_ID_CHARS",
    "MIN_POLL_INTERVAL",
    "TaskError",
    "call_as_task",
    "offers_tasks",
]

logger = logging.getLogger("agentforge_typed.mcp")

MIN_POLL_INTERVAL = 0.05
"""The shortest wait between two polls of a task, whatever interval the server asks for."""
MAX_POLL_INTERVAL = 5.0
"""The longest wait between two polls of a task."""
MAX_TASK_ID_CHARS = 256
_DEFAULT_POLL_INTERVAL = 1.0
_CANCEL_WAIT = 5.0
"""Seconds a task's cancellation may take once its call stopped waiting."""
_WORKING = frozenset({"working"})
_RESULT_READY = frozenset({"input_required", "completed", "failed"})


class TaskError(Exception):
    """A task ended without a result the call can read (cancelled by the server, an unknown
    status, a malformed answer)."""


def offers_tasks(session: ClientSession) -> bool:
    """Whether calls to the session's task-only tools can be made: the server says it takes
    `tools/call` as a task, and the session can send one."""
    capabilities = session.server_capabilities
    tasks = getattr(capabilities, "tasks", None)
    requests = getattr(tasks, "requests", None)
    tools = getattr(requests, "tools", None)
    if getattr(tools, "call", None) is None:
        return False
    return _sender(session) is not None


async def call_as_task(
    session: ClientSession,
    name: str,
    arguments: dict[str, Any],
    *,
    progress: Any,
    meta: Any,
) -> dict[str, Any]:
    """One `tools/call` as a task, to its result (wire form); `TaskError` when the task ends
    without one, `MCPError` for an error the server answers."""
    import anyio
    from mcp.types import CallToolRequest, CallToolRequestParams, TaskMetadata

    request = CallToolRequest(
        params=CallToolRequestParams(
            name=name, arguments=arguments, task=TaskMetadata(), _meta=meta
        )
    )
    params = request.model_dump(by_alias=True, mode="json", exclude_none=True)["params"]
    created = await _create(session, params, progress)
    if "task" not in created:  # the server ran it at once after all: that is the result
        return _call_result(created)
    task_id = _task_id(created["task"])
    try:
        task = _task(created["task"])
        while task["status"] in _WORKING:
            await anyio.sleep(_interval(task))
            task = _task(await _send(session, "tasks/get", {"taskId": task_id}))
            if task["taskId"] != task_id:
                raise TaskError(f"the server answered a poll of task {task_id!r} with another")
        if task["status"] not in _RESULT_READY:
            raise TaskError(f"the task ended {task['status']}: {task.get('statusMessage', '')}")
        return _call_result(await _send(session, "tasks/result", {"taskId": task_id}))
    except BaseException:  # timed out, cancelled, refused: the server stops it too
        await _cancel(session, task_id)
        raise


async def _create(session: ClientSession, params: dict[str, Any], progress: Any) -> dict[str, Any]:
    """The answer to the `tools/call` that creates the task (raw). A caller that stops waiting
    before it comes (timed out, cancelled) waits up to `_CANCEL_WAIT` seconds more for it,
    shielded, and cancels the task it names: a server that answers late (the task's id is known
    only from that answer) is not left running it for no one."""
    import anyio

    answered: list[dict[str, Any]] = []
    failed: list[Exception] = []
    arrived = anyio.Event()
    shield = anyio.CancelScope(shield=True)

    async def create() -> None:
        with shield:
            try:
                answered.append(await _send(session, "tools/call", params, progress))
            except Exception as exc:
                failed.append(exc)
        arrived.set()

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(create)
            try:
                await arrived.wait()
            except BaseException:  # stopped waiting: the answer has a little longer to come
                shield.deadline = min(shield.deadline, anyio.current_time() + _CANCEL_WAIT)
                raise
    except BaseException:
        if answered and isinstance(answered[0].get("task"), Mapping):
            with contextlib.suppress(TaskError):
                await _cancel(session, _task_id(answered[0]["task"]))
        raise
    if failed:
        raise failed[0]
    return answered[0]


async def _cancel(session: ClientSession, task_id: str) -> None:
    """Cancel the task on the server (`tasks/cancel`), shielded and bounded, whatever the
    server answers."""
    import anyio

    with anyio.CancelScope(shield=True), anyio.move_on_after(_CANCEL_WAIT):
        with contextlib.suppress(Exception):
            await _send(session, "tasks/cancel", {"taskId": task_id})


def _task_id(raw: Any) -> str:
    """The id of a `Task` the server sent (checked), so that it can be cancelled."""
    if not isinstance(raw, Mapping):
        raise TaskError("the server sent a task that is not an object")
    task_id = raw.get("taskId")
    if not isinstance(task_id, str) or not 0 < len(task_id) <= MAX_TASK_ID_CHARS:
        raise TaskError(f"the server sent a task without an id of at most {MAX_TASK_ID_CHARS}")
    return task_id


def _task(raw: Any) -> dict[str, Any]:
    """A `Task` the server sent, checked to be one this client can follow."""
    _task_id(raw)
    status = raw.get("status")
    if status not in _WORKING | _RESULT_READY | {"cancelled"}:
        raise TaskError(f"the server sent a task in an unknown status ({str(status)[:40]!r})")
    return dict(raw)


def _interval(task: Mapping[str, Any]) -> float:
    """Seconds to the next poll: the server's `pollInterval` (milliseconds), held in bounds."""
    asked = task.get("pollInterval")
    if not isinstance(asked, int | float) or isinstance(asked, bool):
        return _DEFAULT_POLL_INTERVAL
    return min(max(asked / 1000, MIN_POLL_INTERVAL), MAX_POLL_INTERVAL)


def _call_result(raw: Mapping[str, Any]) -> dict[str, Any]:
    from mcp.types import CallToolResult

    if raw.get("resultType") == "input_required":  # the stateless revision's, not a task's
        raise TaskError("the server answered a task's call with input_required")

    result: dict[str, Any] = CallToolResult.model_validate(raw).model_dump(
        mode="json", by_alias=True
    )
    return result


def _sender(session: ClientSession) -> tuple[Any, Any] | None:
    """The session's stamp and dispatcher (SDK 2.3's), or `None` when it has none."""
    stamp = getattr(session, "_stamp", None)
    dispatcher = getattr(session, "_dispatcher", None)
    if stamp is None or not callable(getattr(dispatcher, "send_raw_request", None)):
        return None
    return stamp, dispatcher


async def _send(
    session: ClientSession, method: str, params: dict[str, Any], progress: Any = None
) -> dict[str, Any]:
    """A request sent as the session sends its own, its raw result."""
    sender = _sender(session)
    if sender is None:  # pragma: no cover - `offers_tasks` said so
        raise TaskError("this MCP SDK cannot send task requests")
    stamp, dispatcher = sender
    data: dict[str, Any] = {"method": method, "params": params}
    options: dict[str, Any] = {}
    stamp(data, options)
    if progress is not None:
        options["on_progress"] = progress
    raw = await dispatcher.send_raw_request(method, data.get("params"), options)
    if not isinstance(raw, dict):
        raise TaskError(f"the server's answer to {method} is not an object")
    return raw
