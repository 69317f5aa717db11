"""An `MCPServer` talking, over memory streams, to a server in this process that serves the
tasks extension (2025-11-25) the way its specification says: its one tool is task-only
(`execution.taskSupport: "required"`); each call creates a task that runs the handler on a worker
thread, `tasks/get` tells its status, `tasks/result` waits for its result, `tasks/cancel` stops
it. The SDK's own `Server` cannot answer a `tools/call` with a task (it checks every answer to one
as a `CallToolResult`), so this one speaks JSON-RPC itself: the real protocol and the client's
real session, without a subprocess. The conformance suite's `MCPTool (task)` factory
(tests/conformance.py) builds on it."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Mapping
from typing import Any

import anyio
from mcp.shared.memory import create_client_server_memory_streams
from mcp.shared.message import SessionMessage
from mcp.types import JSONRPCError, JSONRPCRequest, JSONRPCResponse
from typing_extensions import Unpack

from agentforge_typed import MCPServer
from agentforge_typed.tools import MCPServerOptions

POLL_MS = 20
"""The poll interval the server asks for (the client holds it to at least 50 ms)."""

Render = Callable[[Any], dict[str, Any]]
"""The handler's answer as a `CallToolResult` (wire form)."""


class _Task:
    """One task: its status, and the handler's result once it ends."""

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id
        self.status = "working"
        self.result: dict[str, Any] = {}
        self.done = anyio.Event()
        self.scope = anyio.CancelScope()

    def wire(self) -> dict[str, Any]:
        return {
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": "2026-01-01T00:00:00Z",
            "lastUpdatedAt": "2026-01-01T00:00:00Z",
            "ttl": 60_000,
            "pollInterval": POLL_MS,
        }


def _text(answer: Any) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": str(answer)}]}


def task_server(
    handler: Callable[[dict[str, Any]], Any],
    schema: Mapping[str, Any],
    *,
    name: str = "t",
    render: Render = _text,
    **options: Unpack[MCPServerOptions],
) -> MCPServer:
    """An `MCPServer` (not entered) whose every connection serves anew a task-only tool `name`
    that runs `handler(arguments)`; `render` makes its result (default: its text)."""

    async def connect(stack: contextlib.AsyncExitStack[Any]) -> tuple[Any, Any]:
        client, (read, write) = await stack.enter_async_context(
            create_client_server_memory_streams()
        )
        group = await stack.enter_async_context(anyio.create_task_group())
        stack.callback(group.cancel_scope.cancel)
        tasks: dict[str, _Task] = {}
        numbers = itertools.count(1)

        async def run(task: _Task, arguments: dict[str, Any]) -> None:
            with task.scope:
                try:
                    answer = await anyio.to_thread.run_sync(
                        handler, arguments, abandon_on_cancel=True
                    )
                    task.result, task.status = render(answer), "completed"
                except Exception as exc:
                    failed = {"type": "text", "text": f"{type(exc).__name__}: {exc}"}
                    task.result = {"content": [failed], "isError": True}
                    task.status = "failed"
            task.done.set()

        async def answer(method: str, params: dict[str, Any]) -> dict[str, Any]:
            if method == "initialize":
                return {
                    "protocolVersion": params.get("protocolVersion", "2025-11-25"),
                    "capabilities": {
                        "tools": {},
                        "tasks": {"cancel": {}, "requests": {"tools": {"call": {}}}},
                    },
                    "serverInfo": {"name": "tasks", "version": "1"},
                }
            if method == "tools/list":
                listed = {
                    "name": name,
                    "inputSchema": dict(schema),
                    "execution": {"taskSupport": "required"},
                }
                return {"tools": [listed]}
            if method == "ping":
                return {}
            if method == "tools/call":
                if "task" not in params:
                    raise LookupError("this tool requires task augmentation")
                created = _Task(f"task-{next(numbers)}")
                tasks[created.task_id] = created
                group.start_soon(run, created, dict(params.get("arguments") or {}))
                return {"task": created.wire()}
            task = tasks.get(str(params.get("taskId")))
            if task is None:
                raise LookupError(f"no task {params.get('taskId')!r}")
            if method == "tasks/get":
                return task.wire()
            if method == "tasks/result":
                await task.done.wait()
                return task.result
            if method == "tasks/cancel":
                task.scope.cancel()
                task.status = "cancelled"
                task.done.set()
                return task.wire()
            raise LookupError(f"method {method!r} not found")

        async def reply(request: JSONRPCRequest) -> None:
            try:
                result = await answer(request.method, dict(request.params or {}))
                message: Any = JSONRPCResponse(jsonrpc="2.0", id=request.id, result=result)
            except LookupError as exc:
                error = {"code": -32602, "message": str(exc)}
                message = JSONRPCError.model_validate(
                    {"jsonrpc": "2.0", "id": request.id, "error": error}
                )
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                await write.send(SessionMessage(message))

        async def serve() -> None:
            async for item in read:
                if isinstance(item, SessionMessage) and isinstance(item.message, JSONRPCRequest):
                    group.start_soon(reply, item.message)

        group.start_soon(serve)
        return client

    options.setdefault("revision", "handshake")  # nothing else to discover
    return MCPServer(connect, label="tasks", **options)
