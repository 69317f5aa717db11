"""A stdio MCP server speaking raw JSON-RPC, scripted by its one argument (a JSON object), for
the hostile and edge cases an SDK-built server will not send: URL-mode questions with any URL,
`URLElicitationRequired` errors, tasks in any status.

The script:
- `"tools"`: the tools listed (`tools/list`'s `tools`); `"listings"`: the tools of the first
  listings, one per `tools/list`, before `"tools"`; with `"changed_after_listing"`, each of them
  is followed at once by `notifications/tools/list_changed`;
- `"capabilities"`: the server's capabilities (default: tools and tasks for `tools/call`);
- `"calls"`: per tool name, what a `tools/call` does, a list of steps taken one per call (the
  last one repeats): `{"error": {...}}` answers that JSON-RPC error; `{"ask": params}` sends
  `elicitation/create` with those params, then answers with the reply as text; `{"task": {...},
  "polls": [task, ...], "result": {...}}` answers the task (as `CreateTaskResult`), each
  `tasks/get` with the next poll (the last repeats), and `tasks/result` with the result (with
  `"delay"`: seconds it waits before answering the call; with `"exit_after_polls"`: it exits,
  dropping the connection, at the poll after that many);
  `{"result": {...}}` answers that result.
- `"log"`: a file each request's method (and params) is appended to, one JSON line each;
  `"replies"`: a file each reply to a question (`elicitation/create`) is appended to.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

SCRIPT: dict[str, Any] = json.loads(sys.argv[1])
TOOLS: list[dict[str, Any]] = SCRIPT.get("tools", [])
CAPABILITIES = SCRIPT.get(
    "capabilities", {"tools": {}, "tasks": {"cancel": {}, "requests": {"tools": {"call": {}}}}}
)
CALLS: dict[str, list[dict[str, Any]]] = SCRIPT.get("calls", {})
LISTINGS: list[list[dict[str, Any]]] = SCRIPT.get("listings", [])
TAKEN: dict[str, int] = {}
POLLED: dict[str, int] = {}
TASKS: dict[str, dict[str, Any]] = {}
NEXT_ID = [0]


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    sys.stdout.flush()


def log(method: str, params: Any) -> None:
    if "log" in SCRIPT:
        with open(SCRIPT["log"], "a") as file:
            file.write(json.dumps({"method": method, "params": params}) + "\n")


def receive() -> dict[str, Any] | None:
    line = sys.stdin.readline()
    return None if not line else json.loads(line)


def ask(params: dict[str, Any]) -> dict[str, Any]:
    """Send `elicitation/create` and wait for its reply (requests meanwhile are not served)."""
    NEXT_ID[0] += 1
    asked = f"s{NEXT_ID[0]}"
    send({"id": asked, "method": "elicitation/create", "params": params})
    while (message := receive()) is not None:
        if message.get("id") == asked and "method" not in message:
            reply: dict[str, Any] = message.get("result") or {"error": message.get("error")}
            if "replies" in SCRIPT:
                with open(SCRIPT["replies"], "a") as file:
                    file.write(json.dumps(reply) + "\n")
            return reply
    raise SystemExit(0)


def step(name: str) -> dict[str, Any]:
    steps = CALLS.get(name) or [{"result": {"content": [{"type": "text", "text": "ran"}]}}]
    taken = TAKEN.get(name, 0)
    TAKEN[name] = taken + 1
    return steps[min(taken, len(steps) - 1)]


def call(request_id: Any, params: dict[str, Any]) -> None:
    name = params.get("name", "")
    plan = step(name)
    if "error" in plan:
        send({"id": request_id, "error": plan["error"]})
    elif "ask" in plan:
        reply = ask(plan["ask"])
        text = json.dumps(reply, sort_keys=True)
        send({"id": request_id, "result": {"content": [{"type": "text", "text": text}]}})
    elif "task" in plan:
        task = plan["task"]
        TASKS[str(task.get("taskId") if isinstance(task, dict) else task)] = plan
        time.sleep(plan.get("delay", 0))
        send({"id": request_id, "result": {"task": task}})
    else:
        send({"id": request_id, "result": plan["result"]})


def task_request(request_id: Any, method: str, params: dict[str, Any]) -> None:
    task_id = str(params.get("taskId"))
    plan = TASKS.get(task_id)
    if plan is None:
        send({"id": request_id, "error": {"code": -32602, "message": f"no task {task_id}"}})
    elif method == "tasks/get":
        polls = plan.get("polls") or [plan["task"]]
        polled = POLLED.get(task_id, 0)
        POLLED[task_id] = polled + 1
        if polled >= plan.get("exit_after_polls", polled + 1):
            raise SystemExit(0)
        send({"id": request_id, "result": polls[min(polled, len(polls) - 1)]})
    elif method == "tasks/result":
        send({"id": request_id, "result": plan["result"]})
    else:  # tasks/cancel
        send({"id": request_id, "result": {**plan["task"], "status": "cancelled"}})


def main() -> None:
    while (message := receive()) is not None:
        method, request_id = message.get("method"), message.get("id")
        params = message.get("params") or {}
        if method is None or request_id is None:  # a reply or a notification
            continue
        log(method, params)
        if method == "initialize":
            result = {
                "protocolVersion": params.get("protocolVersion", "2025-11-25"),
                "capabilities": CAPABILITIES,
                "serverInfo": {"name": "raw", "version": "1"},
            }
            send({"id": request_id, "result": result})
        elif method == "tools/list":
            changed = bool(LISTINGS) and SCRIPT.get("changed_after_listing")
            listed = LISTINGS.pop(0) if LISTINGS else TOOLS
            send({"id": request_id, "result": {"tools": listed}})
            if changed:
                send({"method": "notifications/tools/list_changed"})
        elif method == "tools/call":
            call(request_id, params)
        elif method in ("tasks/get", "tasks/result", "tasks/cancel"):
            task_request(request_id, method, params)
        elif method == "ping":
            send({"id": request_id, "result": {}})
        else:
            send({"id": request_id, "error": {"code": -32601, "message": "Method not found"}})


if __name__ == "__main__":
    main()
