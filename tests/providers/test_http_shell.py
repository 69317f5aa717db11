"""The shared provider HTTP shell: retries, error mapping, secrecy (sync and async)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from typing import Any

import httpx
import pytest

from agentforge_typed import ModelError
from agentforge_typed.providers._http import HttpShell, error_details, error_from_body
from agentforge_typed.providers._retry import RetryPolicy, retry_after
from agentforge_typed.providers._sse import ServerSentEvent

SECRET = "sk-test-0123456789abcdef"
Handler = Callable[[httpx.Request], httpx.Response]


class Recorder:
    def __init__(self) -> None:
        self.waits: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)

    async def asleep(self, seconds: float) -> None:
        self.waits.append(seconds)


def shells(handler: Handler, recorder: Recorder, **kwargs: Any) -> tuple[HttpShell, HttpShell]:
    """The same configuration twice: one for the sync path, one for the async path."""

    def make() -> HttpShell:
        transport = httpx.MockTransport(handler)
        return HttpShell(
            provider="Acme",
            base_url="https://api.acme.test/v1/",
            headers={"authorization": f"Bearer {SECRET}"},
            secrets=[SECRET],
            http_client=httpx.Client(transport=transport),
            async_http_client=httpx.AsyncClient(transport=transport),
            retry=RetryPolicy(random=lambda: 0.0, **kwargs),
            sleep=recorder.sleep,
            asleep=recorder.asleep,
        )

    return make(), make()


def scripted(*responses: httpx.Response | Exception) -> tuple[Handler, list[httpx.Request]]:
    seen: list[httpx.Request] = []
    queue = list(responses)

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        item = queue.pop(0)
        if isinstance(item, Exception):
            raise item
        return item

    return handler, seen


async def both_post(
    handler_factory: Callable[[], tuple[Handler, list[httpx.Request]]], **kwargs: Any
) -> list[tuple[Any, list[float], list[httpx.Request]]]:
    """Run `post_json` sync then async against fresh copies of a scripted exchange."""
    results = []
    for is_async in (False, True):
        handler, seen = handler_factory()
        recorder = Recorder()
        sync_shell, async_shell = shells(handler, recorder, **kwargs)
        try:
            if is_async:
                outcome: Any = await async_shell.apost_json("/chat", {"q": 1})
            else:
                outcome = sync_shell.post_json("/chat", {"q": 1})
        except ModelError as exc:
            outcome = exc
        results.append((outcome, recorder.waits, seen))
    return results


async def test_post_json_sends_json_with_headers() -> None:
    for answer, waits, seen in await both_post(
        lambda: scripted(httpx.Response(200, json={"ok": True}))
    ):
        assert answer == {"ok": True}
        assert waits == []
        (request,) = seen
        assert request.url == "https://api.acme.test/v1/chat"
        assert request.headers["content-type"] == "application/json"
        assert request.headers["authorization"] == f"Bearer {SECRET}"
        assert request.content == b'{"q":1}'


async def test_429_with_retry_after_then_200() -> None:
    def exchange() -> tuple[Handler, list[httpx.Request]]:
        return scripted(
            httpx.Response(429, headers={"retry-after": "2"}, json={"error": {"message": "slow"}}),
            httpx.Response(503, headers={"retry-after-ms": "250"}),
            httpx.Response(200, json={"ok": 1}),
        )

    for answer, waits, seen in await both_post(exchange):
        assert answer == {"ok": 1}
        assert waits == [2.0, 0.25]
        assert len(seen) == 3


async def test_400_is_not_retried() -> None:
    body = {"error": {"message": "bad 'model'", "type": "invalid_request_error", "code": None}}
    for error, waits, seen in await both_post(lambda: scripted(httpx.Response(400, json=body))):
        assert isinstance(error, ModelError)
        assert error.status_code == 400
        assert error.message == "Acme API error 400: bad 'model'"
        assert error.code == "invalid_request_error"
        assert error.body == body
        assert waits == [] and len(seen) == 1


async def test_exhaustion_raises_with_last_status() -> None:
    def exchange() -> tuple[Handler, list[httpx.Request]]:
        return scripted(
            httpx.Response(500, text="boom"),
            httpx.Response(
                529,
                json={
                    "type": "error",
                    "error": {"type": "overloaded_error", "message": "Overloaded"},
                },
            ),
            httpx.Response(502, text="<html>Bad Gateway</html>"),
        )

    for error, waits, seen in await both_post(exchange):
        assert isinstance(error, ModelError)
        assert error.status_code == 502
        assert error.message == "Acme API error 502: <html>Bad Gateway</html>"
        assert waits == [0.5, 1.0]  # exponential backoff, jitter pinned to 0
        assert len(seen) == 3


async def test_max_retries_zero_makes_one_attempt() -> None:
    for error, waits, seen in await both_post(lambda: scripted(httpx.Response(429)), max_retries=0):
        assert isinstance(error, ModelError) and error.status_code == 429
        assert error.message == "Acme API error 429: Too Many Requests"
        assert waits == [] and len(seen) == 1


async def test_connect_error_is_retried_then_mapped() -> None:
    def recovering() -> tuple[Handler, list[httpx.Request]]:
        return scripted(httpx.ConnectError("refused"), httpx.Response(200, json=[]))

    for answer, waits, _ in await both_post(recovering):
        assert answer == []
        assert waits == [0.5]

    def failing() -> tuple[Handler, list[httpx.Request]]:
        return scripted(*[httpx.ReadTimeout("slow")] * 3)

    for error, waits, seen in await both_post(failing):
        assert isinstance(error, ModelError)
        assert error.status_code is None
        assert error.message == "Acme request to https://api.acme.test failed: ReadTimeout: slow"
        assert isinstance(error.__cause__, httpx.ReadTimeout)
        assert len(seen) == 3 and waits == [0.5, 1.0]


async def test_non_transient_transport_error_is_not_retried() -> None:
    for error, waits, _ in await both_post(
        lambda: scripted(httpx.UnsupportedProtocol("no such scheme"))
    ):
        assert isinstance(error, ModelError) and waits == []


async def test_x_should_retry_header_wins() -> None:
    def exchange() -> tuple[Handler, list[httpx.Request]]:
        return scripted(
            httpx.Response(400, headers={"x-should-retry": "true"}),
            httpx.Response(500, headers={"x-should-retry": "false"}),
        )

    for error, waits, seen in await both_post(exchange):
        assert isinstance(error, ModelError) and error.status_code == 500
        assert len(seen) == 2 and waits == [0.5]


async def test_malformed_json_is_a_model_error() -> None:
    for error, _, _ in await both_post(lambda: scripted(httpx.Response(200, text="{not json"))):
        assert isinstance(error, ModelError)
        assert error.message.startswith("Acme returned malformed JSON")
        assert error.body == "{not json"


async def test_secret_never_leaks(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    echo = {
        "error": {"message": f"Incorrect API key provided: {SECRET}.", "code": "invalid_api_key"}
    }

    def exchange() -> tuple[Handler, list[httpx.Request]]:
        return scripted(
            httpx.ConnectError(f"could not connect with {SECRET}"),
            httpx.Response(401, json=echo),
        )

    for error, _, _ in await both_post(exchange):
        assert isinstance(error, ModelError)
        assert error.message == "Acme API error 401: Incorrect API key provided: [redacted]."
        assert SECRET not in repr(error) and SECRET not in str(error.body)
        assert error.code == "invalid_api_key"
    shell, _ = shells(scripted()[0], Recorder())
    assert SECRET not in repr(shell)
    assert caplog.records  # the retry was logged ...
    assert all(SECRET not in record.getMessage() for record in caplog.records)  # ... without it


def test_error_details_shapes() -> None:
    assert error_details({"error": {"message": "m", "type": "t", "code": "c"}}) == ("m", "c")
    assert error_details(
        {"type": "error", "error": {"type": "overloaded_error", "message": "o"}}
    ) == (
        "o",
        "overloaded_error",
    )
    assert error_details({"error": "model 'x' not found"}) == ("model 'x' not found", None)
    assert error_details({"object": "error", "message": "m", "type": "BadRequestError"}) == (
        "m",
        "BadRequestError",
    )
    assert error_details({"detail": "Not Found"}) == ("Not Found", None)
    assert error_details("text") == (None, None)
    stream_error = error_from_body(
        "Acme", {"error": {"message": "overloaded", "code": 503}}, streaming=True
    )
    assert (stream_error.message, stream_error.code, stream_error.status_code) == (
        "Acme stream error: overloaded",
        "503",
        None,
    )


def test_retry_after_parsing() -> None:
    assert retry_after(httpx.Headers({"retry-after": "3"})) == 3.0
    assert retry_after(httpx.Headers({"retry-after": "1.5", "retry-after-ms": "20"})) == 0.02
    assert retry_after(httpx.Headers({"retry-after": "soon"})) is None
    assert retry_after(httpx.Headers({"retry-after": "nan"})) is None
    assert retry_after(httpx.Headers({})) is None
    now = datetime(2024, 9, 13, 12, 0, 0, tzinfo=timezone.utc)
    date = format_datetime(now + timedelta(seconds=30), usegmt=True)
    assert retry_after(httpx.Headers({"retry-after": date}), now=now.timestamp()) == 30.0
    past = format_datetime(now - timedelta(seconds=30), usegmt=True)
    assert retry_after(httpx.Headers({"retry-after": past}), now=now.timestamp()) == 0.0


def test_backoff_with_jitter_and_caps() -> None:
    low = RetryPolicy(random=lambda: 1.0)
    assert [low.delay(n) for n in range(6)] == [0.375, 0.75, 1.5, 3.0, 6.0, 6.0]
    high = RetryPolicy(random=lambda: 0.0)
    assert [high.delay(n) for n in range(6)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]
    assert high.delay(0, httpx.Headers({"retry-after": "600"})) == 60.0
    assert all(
        0.375 <= RetryPolicy().delay(0) <= 0.5 for _ in range(50)
    )  # real randomness stays in bounds
    with pytest.raises(ValueError, match="max_retries"):
        RetryPolicy(max_retries=-1)
    assert [
        RetryPolicy().is_retryable_status(s) for s in (400, 401, 404, 408, 409, 429, 500, 529)
    ] == [
        False,
        False,
        False,
        True,
        True,
        True,
        True,
        True,
    ]


# -- streaming ------------------------------------------------------------------------------


class _Broken(httpx.SyncByteStream, httpx.AsyncByteStream):
    """Sends some bytes, then the connection drops."""

    def __iter__(self) -> Iterator[bytes]:
        yield b"data: 1\n\n"
        raise httpx.ReadError("connection reset")

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield b"data: 1\n\n"
        raise httpx.ReadError("connection reset")


async def collect(shell: HttpShell, is_async: bool) -> list[ServerSentEvent]:
    if is_async:
        return [event async for event in shell.astream_sse("chat", {"stream": True})]
    return list(shell.stream_sse("chat", {"stream": True}))


@pytest.mark.parametrize("is_async", [False, True])
async def test_stream_retries_before_the_first_byte(is_async: bool) -> None:
    handler, seen = scripted(
        httpx.ConnectError("refused"),
        httpx.Response(503, json={"error": {"message": "busy"}}),
        httpx.Response(200, content=b"data: a\n\ndata: b\n\n"),
    )
    recorder = Recorder()
    shell = shells(handler, recorder)[is_async]
    assert [e.data for e in await collect(shell, is_async)] == ["a", "b"]
    assert len(seen) == 3 and recorder.waits == [0.5, 1.0]


@pytest.mark.parametrize("is_async", [False, True])
async def test_stream_interrupted_after_first_byte_is_not_retried(is_async: bool) -> None:
    handler, seen = scripted(httpx.Response(200, stream=_Broken()), httpx.Response(200))
    recorder = Recorder()
    shell = shells(handler, recorder)[is_async]
    received: list[str] = []
    with pytest.raises(ModelError, match="Acme stream was interrupted: ReadError") as info:
        if is_async:
            async for event in shell.astream_sse("chat", {}):
                received.append(event.data)
        else:
            for event in shell.stream_sse("chat", {}):
                received.append(event.data)
    assert received == ["1"]
    assert isinstance(info.value.__cause__, httpx.ReadError)
    assert len(seen) == 1 and recorder.waits == []


@pytest.mark.parametrize("is_async", [False, True])
async def test_stream_error_status_maps_to_model_error(is_async: bool) -> None:
    handler, _ = scripted(
        httpx.Response(404, json={"error": {"message": "no model", "code": "model_not_found"}})
    )
    shell = shells(handler, Recorder())[is_async]
    with pytest.raises(ModelError) as info:
        await collect(shell, is_async)
    assert (info.value.status_code, info.value.code) == (404, "model_not_found")


def test_created_client_is_owned_and_closed_injected_one_is_not() -> None:
    shell = HttpShell(provider="Acme", base_url="http://localhost", headers={}, timeout=5.0)
    client = shell.client
    assert client.timeout == httpx.Timeout(5.0)
    shell.close()
    assert client.is_closed
    with httpx.Client() as injected:
        shell = HttpShell(
            provider="Acme", base_url="http://localhost", headers={}, http_client=injected
        )
        shell.close()
        assert not injected.is_closed


async def test_created_async_clients_are_owned_and_closed_injected_ones_are_not() -> None:
    shell = HttpShell(provider="Acme", base_url="http://localhost", headers={}, timeout=5.0)
    async_client = shell.async_client
    await shell.aclose()
    assert async_client.is_closed
    async with httpx.AsyncClient() as injected:
        shell = HttpShell(
            provider="Acme", base_url="http://localhost", headers={}, async_http_client=injected
        )
        await shell.aclose()
        assert not injected.is_closed


@pytest.mark.parametrize("is_async", [False, True])
@pytest.mark.parametrize("streaming", [False, True])
async def test_error_body_cut_off_counts_as_a_transient_failure(
    is_async: bool, streaming: bool
) -> None:
    handler, seen = scripted(
        httpx.Response(500, stream=_Broken()),
        httpx.Response(200, content=b'data: {"ok": 1}\n\n' if streaming else b'{"ok": 1}'),
    )
    recorder = Recorder()
    shell = shells(handler, recorder)[is_async]
    if streaming:
        result: Any = [e.json() for e in await collect(shell, is_async)]
    elif is_async:
        result = [await shell.apost_json("chat", {})]
    else:
        result = [shell.post_json("chat", {})]
    assert result == [{"ok": 1}]
    assert len(seen) == 2 and recorder.waits == [0.5]
