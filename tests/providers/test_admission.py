"""Admission control in the HTTP shell: at most `max_concurrent_requests` requests of a model in
flight, the rest waiting in order; slots come back on success, error, cancellation and abandoned
streams; the wait counts in no timeout; a model works across event loops."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from conformance import assert_linear
from http_server import Reply, ScriptedServer
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import agentforge_typed as af
from agentforge_typed import ChatRequest, ModelError, OpenAIChatModel, UserMessage
from agentforge_typed.providers._admission import AsyncGate

REQUEST = ChatRequest(messages=[UserMessage(content="hi")])


def answer(text: str = "hello") -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o-mini",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }


def sse(text: str) -> bytes:
    def chunk(**fields: Any) -> bytes:
        body = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m", **fields}
        return b"data: " + json.dumps(body).encode() + b"\n\n"

    return (
        chunk(choices=[{"index": 0, "delta": {"role": "assistant", "content": text}}])
        + chunk(choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}])
        + b"data: [DONE]\n\n"
    )


class Counting:
    """An async MockTransport handler that answers after `delay`, counting requests in flight."""

    def __init__(self, delay: float = 0.02, status: int = 200) -> None:
        self.delay, self.status = delay, status
        self.in_flight = self.most = 0
        self.order: list[str] = []

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        self.order.append(json.loads(request.content)["messages"][0]["content"])
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.in_flight -= 1
        if self.status != 200:
            return httpx.Response(self.status, json={"error": {"message": "bad request"}})
        return httpx.Response(200, json=answer())


def model_over(handler: Any, **options: Any) -> OpenAIChatModel:
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    options.setdefault("max_retries", 0)
    return OpenAIChatModel("gpt-4o-mini", api_key="sk-test", async_http_client=client, **options)


def asking(text: str) -> ChatRequest:
    return ChatRequest(messages=[UserMessage(content=text)])


# -- the gate ------------------------------------------------------------------------------------


async def test_waiters_are_served_in_the_order_they_came() -> None:
    gate = AsyncGate(1)
    await gate.acquire()
    served: list[int] = []

    async def wait(n: int) -> None:
        await gate.acquire()
        served.append(n)

    tasks = [asyncio.ensure_future(wait(n)) for n in range(5)]
    await asyncio.sleep(0)
    for _ in range(5):
        gate.release()
        await asyncio.sleep(0)
    await asyncio.gather(*tasks)
    assert served == [0, 1, 2, 3, 4]


async def test_a_cancelled_waiter_gives_its_turn_to_the_next() -> None:
    gate = AsyncGate(1)
    await gate.acquire()
    first = asyncio.ensure_future(gate.acquire())
    second = asyncio.ensure_future(gate.acquire())
    await asyncio.sleep(0)
    first.cancel()
    await asyncio.sleep(0)
    gate.release()
    assert await asyncio.wait_for(second, 1) == pytest.approx(0, abs=1)
    gate.release()
    # Every slot is back: two can be taken at once again (one free, one for the next).
    assert await asyncio.wait_for(gate.acquire(), 1) == 0


def test_cancelling_waiters_costs_each_the_same_however_many_wait() -> None:
    def cancel_all(n: int) -> None:
        async def main() -> None:
            gate = AsyncGate(1)
            await gate.acquire()
            tasks = [asyncio.ensure_future(gate.acquire()) for _ in range(n)]
            await asyncio.sleep(0)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            gate.release()
            assert await gate.acquire() == 0

        asyncio.run(main())

    assert_linear(
        cancel_all,
        2000,
        what="cancelling queued admission waiters",
        repeat=5,
        clock=time.process_time,
    )


async def test_the_created_pool_is_spread_over_small_clients_evenly_loaded() -> None:
    model = OpenAIChatModel("gpt-4o-mini", api_key="sk-test", max_connections=100)
    clients = model._http._loop_clients()
    assert len(clients.clients) == 7 and clients.gate._free == 100
    slots = [(await clients.acquire())[1] for _ in range(40)]
    assert max(clients.loads) - min(clients.loads) <= 1 and sorted(set(slots)) == list(range(7))
    for slot in slots:
        clients.release(slot)
    assert clients.loads == [0] * 7 and clients.gate._free == 100
    pools = {clients.client(i)._transport._pool._max_connections for i in range(7)}  # type: ignore[attr-defined]
    assert pools == {16}
    await model.aclose()
    assert all(client is None or client.is_closed for client in clients.clients)


# -- the shell -----------------------------------------------------------------------------------


async def test_no_more_requests_in_flight_than_the_limit_and_in_order() -> None:
    handler = Counting()
    model = model_over(handler, max_concurrent_requests=3)
    answers = await asyncio.gather(*(model.achat(asking(str(n))) for n in range(12)))
    assert len(answers) == 12 and handler.most == 3
    assert handler.order == [str(n) for n in range(12)]


async def test_by_default_as_many_as_the_pool_of_a_client_passed_in() -> None:
    handler = Counting()
    limits = httpx.Limits(max_connections=4)
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler), limits=limits)
    model = OpenAIChatModel("gpt-4o-mini", api_key="sk-test", async_http_client=client)
    await asyncio.gather(*(model.achat(REQUEST) for _ in range(10)))
    # A MockTransport has no pool to read: the default (100) applies, and all ten run at once.
    assert handler.most == 10
    real = httpx.AsyncClient(limits=limits)
    shell = OpenAIChatModel("gpt-4o-mini", api_key="sk-test", async_http_client=real)._http
    assert shell._loop_clients().gate._free == 4
    await real.aclose()


async def test_slots_come_back_after_errors() -> None:
    handler = Counting(status=400)
    model = model_over(handler, max_concurrent_requests=1)
    for _ in range(3):
        with pytest.raises(ModelError, match="bad request"):
            await asyncio.wait_for(model.achat(REQUEST), 2)
    assert handler.most == 1


async def test_slots_come_back_when_a_waiting_or_running_call_is_cancelled() -> None:
    handler = Counting(delay=0.2)
    model = model_over(handler, max_concurrent_requests=1)
    running = asyncio.ensure_future(model.achat(REQUEST))
    waiting = asyncio.ensure_future(model.achat(REQUEST))
    await asyncio.sleep(0.05)
    running.cancel()
    waiting.cancel()
    await asyncio.gather(running, waiting, return_exceptions=True)
    handler.delay = 0.0
    assert (await asyncio.wait_for(model.achat(REQUEST), 2)).ai_message.text == "hello"


async def test_a_stream_holds_its_slot_until_read_and_an_abandoned_one_gives_it_back() -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        if json.loads(request.content).get("stream"):
            return httpx.Response(
                200, headers={"content-type": "text/event-stream"}, content=sse("streamed")
            )
        return httpx.Response(200, json=answer())

    model = model_over(handler, max_concurrent_requests=1)
    stream = model.astream(REQUEST)
    await anext(stream)  # the stream is open: its slot is held
    blocked = asyncio.ensure_future(model.achat(REQUEST))
    await asyncio.sleep(0.05)
    assert not blocked.done()
    # Abandoned mid-way, never closed by its consumer: dropping it gives the slot back.
    del stream
    gc.collect()
    assert (await asyncio.wait_for(blocked, 2)).ai_message.text == "hello"
    # Read to the end, a stream gives its slot back too.
    events = [event async for event in model.astream(REQUEST)]
    assert events[-1].response.ai_message.text == "streamed"  # type: ignore[union-attr]
    assert (await asyncio.wait_for(model.achat(REQUEST), 2)).ai_message.text == "hello"


async def test_the_wait_counts_in_no_timeout_and_is_visible(caplog: Any) -> None:
    handler = Counting(delay=0.3)
    model = model_over(handler, max_concurrent_requests=1, total_timeout=0.5)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    caplog.set_level(logging.DEBUG, logger="agentforge_typed.providers")
    with af.instrument(provider):
        # Each call takes 0.3 s; the second waits 0.3 s first: 0.6 s > total_timeout, and fine.
        answers = await asyncio.gather(model.achat(REQUEST), model.achat(REQUEST))
    assert [a.ai_message.text for a in answers] == ["hello", "hello"]
    waits = [
        span.attributes.get("agentforge.admission.wait_seconds")
        for span in exporter.get_finished_spans()
        if span.attributes is not None
    ]
    assert sorted(isinstance(w, float) and w > 0.2 for w in waits) == [False, True]
    assert any("waited" in r.message and "admission slot" in r.message for r in caplog.records)


def test_blocking_calls_from_threads_are_admitted_too() -> None:
    in_flight, most = 0, 0
    lock = threading.Lock()

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal in_flight, most
        with lock:
            in_flight += 1
            most = max(most, in_flight)
        time.sleep(0.02)
        with lock:
            in_flight -= 1
        return httpx.Response(200, json=answer())

    model = OpenAIChatModel(
        "gpt-4o-mini",
        api_key="sk-test",
        http_client=httpx.Client(transport=httpx.MockTransport(handler)),
        max_concurrent_requests=2,
    )
    threads = [threading.Thread(target=model.chat, args=(REQUEST,)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    assert most == 2


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_concurrent_requests must be a positive integer"):
        OpenAIChatModel("m", api_key="k", max_concurrent_requests=0)
    with pytest.raises(ValueError, match="max_connections must be a positive integer"):
        OpenAIChatModel("m", api_key="k", max_connections=-1)


# -- one model, several event loops --------------------------------------------------------------


@pytest.fixture
def server() -> Iterator[str]:
    """A server that answers every request at once, keeping connections alive after it."""
    with ScriptedServer(keep_alive=True) as served:
        served.route("/v1/chat/completions", Reply.json(answer()))
        yield f"{served.url}/v1"


def test_two_event_loops_in_turn_share_one_model(server: str) -> None:
    model = OpenAIChatModel("gpt-4o-mini", api_key="sk-test", base_url=server, max_retries=0)
    clients: list[httpx.AsyncClient] = []

    async def converse() -> str | None:
        clients.append(model._http.async_client)
        answers = await asyncio.gather(*(model.achat(REQUEST) for _ in range(3)))
        return answers[0].ai_message.text

    assert asyncio.run(converse()) == "hello"
    assert asyncio.run(converse()) == "hello"  # the first loop's connections are not reused
    # Each loop had its own client, closed when that loop shut down.
    assert clients[0] is not clients[1]
    assert clients[0].is_closed and clients[1].is_closed
