"""`_exchange`: one deadline for a whole exchange, carried to the sockets; one bounded reader."""

from __future__ import annotations

import gzip
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from agentforge_typed._transport._exchange import Deadline, aread_body, bound, read_body


class OvertimeError(Exception):
    pass


def test_a_deadline_caps_every_phase_and_travels_with_the_request() -> None:
    deadline = Deadline(2.5, OvertimeError)
    timeout = deadline.timeout(httpx.Timeout(60, read=0.1, pool=None))
    assert timeout.as_dict() == {"connect": 2.5, "read": 0.1, "write": 2.5, "pool": 2.5}
    request = httpx.Client().build_request("GET", "http://127.0.0.1:9/", timeout=timeout)
    carried = request.extensions["timeout"]["read"]
    assert getattr(carried, "at", None) == deadline.at


def test_bound_wraps_a_client_once_and_leaves_a_mock_transport_alone() -> None:
    client = httpx.Client()
    assert bound(bound(client)) is client
    backend = client._transport._pool._network_backend  # type: ignore[attr-defined]
    assert type(backend).__name__ == "_Backend"
    assert type(backend._backend).__name__ == "SyncBackend"
    mocked = httpx.Client(transport=httpx.MockTransport(lambda r: httpx.Response(200)))
    assert bound(mocked).get("http://x/").status_code == 200


@pytest.fixture
def dripping() -> Iterator[str]:
    """A server that answers each connection with a status line a byte every 0.05 s."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            with connection:
                connection.recv(65536)
                for byte in b"HTTP/1.1 200 OK\r\n" + b"x: 1\r\n" * 200:
                    if stop.wait(0.05):
                        break
                    try:
                        connection.sendall(bytes([byte]))
                    except OSError:
                        break

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/"
    stop.set()
    thread.join()
    listener.close()


def test_a_bound_client_ends_dripped_headers_at_the_deadline(dripping: str) -> None:
    with bound(httpx.Client()) as client:
        deadline = Deadline(0.5, OvertimeError)
        request = client.build_request("GET", dripping, timeout=deadline.timeout(httpx.Timeout(10)))
        started = time.monotonic()
        with pytest.raises(httpx.TimeoutException):
            client.send(request)
        assert time.monotonic() - started < 0.5 + 1.0
        assert deadline.passed()


async def test_a_bound_async_client_ends_dripped_headers_at_the_deadline(dripping: str) -> None:
    async with bound(httpx.AsyncClient()) as client:
        deadline = Deadline(0.5, OvertimeError)
        request = client.build_request("GET", dripping, timeout=deadline.timeout(httpx.Timeout(10)))
        started = time.monotonic()
        with pytest.raises(httpx.TimeoutException):
            await client.send(request)
        assert time.monotonic() - started < 0.5 + 1.0


def _response(body: bytes, **headers: str) -> httpx.Response:
    request = httpx.Request("GET", "http://x/")
    return httpx.Response(200, headers=headers, stream=httpx.ByteStream(body), request=request)


def test_read_body_refuses_or_keeps_the_head() -> None:
    def refuse(size: str) -> Exception:
        return OvertimeError(size)

    assert read_body(_response(b"abcd"), 4, refuse).content == b"abcd"
    with pytest.raises(OvertimeError, match=r"^5$"):  # by its Content-Length, before reading
        read_body(_response(b"abcde", **{"content-length": "5"}), 4, refuse)
    with pytest.raises(OvertimeError, match=r"^more than 4$"):
        read_body(_response(b"abcde"), 4, refuse)
    kept = read_body(_response(b"abcde"), 4)
    assert (kept.content, kept.truncated) == (b"abcd", True)
    # Counted after decoding: 1 MiB of zeros in a few kilobytes of gzip.
    bomb = _response(gzip.compress(b"0" * (1 << 20)), **{"content-encoding": "gzip"})
    assert read_body(bomb, 1000).content == b"0" * 1000


async def test_aread_body_keeps_the_head() -> None:
    kept = await aread_body(_response(b"abcde"), 4)
    assert (kept.content, kept.truncated) == (b"abcd", True)


def test_watch_ends_a_body_once_the_deadline_passed() -> None:
    def slow() -> Iterator[bytes]:
        for _ in range(100):
            time.sleep(0.02)
            yield b"x"

    deadline = Deadline(0.2, OvertimeError)
    response = httpx.Response(200, content=slow())
    started = time.monotonic()
    with pytest.raises(OvertimeError):
        read_body(deadline.watch(response), 1000)
    assert time.monotonic() - started < 1.0
