"""One scriptable HTTP server for the tests: a real socket on 127.0.0.1 (a free port), served on
threads, for sync and async tests alike.

A test routes paths to replies and reads back what was asked:

    with ScriptedServer() as server:
        server.route("/v1/chat/completions", Reply(429), Reply.json({"choices": []}))
        ...  # a client at server.url: a 429 first, then the JSON for every request after
        assert server.requests[0].json() == {...}

A route's answers are given in order, the last one repeating; an answer is a `Reply` or a
callable that makes one from the `Request` (what it raises is a 500 whose body names it). A
reply's body is bytes (sent with its length) or chunks: written one by one, `delay` seconds
before each, framed as `chunked` says or ended by closing the connection, and cut by a reset
where `reset` says; an endless iterable (`itertools.repeat`) streams until the client leaves or
the server closes. `raw` chunks are the whole response, status line and headers included. (An
iterator is used up by the requests it answers: a list is sent whole each time.)

Each response closes its connection, unless the server is made with `keep_alive=True`. The
`http_server` fixture (this module is a pytest plugin) is one such server for a test. On exit
the server stops listening, cuts every open connection and ends every reply it is sending (its
wait, delays and endless body); a callable answer still running ends on its own thread (one that
waits should wait on the server's `closing` event).
"""

from __future__ import annotations

import json
import socket
import struct
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, TypeAlias
from urllib.parse import urlsplit

import httpx
import pytest


@dataclass(frozen=True)
class Request:
    """One request as the server received it."""

    method: str
    path: str
    """The request target as sent: the path, quoted as it came, and the query."""
    headers: httpx.Headers
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass(frozen=True)
class Reply:
    """What the server answers one request with."""

    status: int = 200
    body: bytes | Iterable[bytes] = b""
    """Bytes, sent with a `content-length`, or chunks, sent as they come."""
    headers: Mapping[str, str] = field(default_factory=dict)
    reason: str | None = None
    """The status line's phrase (the standard one by default)."""
    wait: float = 0.0
    """Seconds of silence before the response starts."""
    delay: float = 0.0
    """Seconds before each chunk of the body."""
    chunked: bool = False
    """Frame the chunks with `transfer-encoding: chunked`; else the body ends with the
    connection."""
    reset: bool = False
    """After the chunks, reset the connection (a TCP RST) instead of ending the body."""
    raw: bool = False
    """The chunks are the whole response, status line and headers included."""

    @classmethod
    def json(cls, payload: Any, status: int = 200, **options: Any) -> Reply:
        headers = {"content-type": "application/json", **options.pop("headers", {})}
        return cls(status, json.dumps(payload).encode(), headers, **options)

    @classmethod
    def sse(cls, events: Iterable[Any], *, done: bool = False, **options: Any) -> Reply:
        """An event stream of one `data:` frame per JSON value of `events` (then `[DONE]`)."""
        frames = [f"data: {json.dumps(event)}\n\n".encode() for event in events]
        if done:
            frames.append(b"data: [DONE]\n\n")
        headers = {"content-type": "text/event-stream", **options.pop("headers", {})}
        return cls(200, frames, headers, **options)


_TEXT = {"content-type": "text/plain"}

Answer: TypeAlias = "Reply | Callable[[Request], Reply]"


class ScriptedServer:
    """A real HTTP/1.1 server on 127.0.0.1, listening from construction until `close()` (or
    the end of its `with` block). It records every request in `requests`, and closes each
    connection after its response unless `keep_alive`."""

    def __init__(self, *, keep_alive: bool = False) -> None:
        self.keep_alive = keep_alive
        self.requests: list[Request] = []
        self.closing = threading.Event()
        """Set when the server closes: a callable answer that waits should wait on it."""
        self._routes: dict[str, list[Answer]] = {}
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._httpd = _Listener(self)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    def route(self, path: str, *answers: Answer) -> ScriptedServer:
        """Answer requests for `path` (the query left out; a trailing `*` matches every path
        that starts with the rest) with `answers` in turn, the last one for good."""
        if not answers:
            raise ValueError("a route needs at least one answer")
        with self._lock:
            self._routes[path] = list(answers)
        return self

    def close(self) -> None:
        self.closing.set()
        self._httpd.shutdown()
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            with suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        self._httpd.server_close()
        self._thread.join()

    def __enter__(self) -> ScriptedServer:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _reply(self, request: Request) -> Reply:
        self.requests.append(request)
        path = urlsplit(request.path).path
        with self._lock:
            answers = self._routes.get(path)
            if answers is None:
                prefixes = [p for p in self._routes if p.endswith("*")]
                matching = [p for p in prefixes if path.startswith(p[:-1])]
                answers = self._routes[max(matching, key=len)] if matching else None
            if answers is None:
                return Reply(404, f"no route for {request.method} {path}".encode(), _TEXT)
            answer = answers.pop(0) if len(answers) > 1 else answers[0]
        if isinstance(answer, Reply):
            return answer
        try:
            return answer(request)
        except Exception as error:
            return Reply(500, f"{type(error).__name__}: {error}".encode(), _TEXT)


class _Listener(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, owner: ScriptedServer) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.owner = owner


class _Handler(BaseHTTPRequestHandler):
    server: _Listener
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        with self.server.owner._lock:
            self.server.owner._connections.add(self.connection)

    def finish(self) -> None:
        with self.server.owner._lock:
            self.server.owner._connections.discard(self.connection)
        with suppress(OSError):  # the client went, or the reply reset the connection
            super().finish()

    def handle_one_request(self) -> None:
        try:
            super().handle_one_request()
        except OSError:  # the client went, or the server closed the connection
            self.close_connection = True

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self._answer()

    def do_PUT(self) -> None:
        self._answer()

    def do_PATCH(self) -> None:
        self._answer()

    def do_DELETE(self) -> None:
        self._answer()

    def _answer(self) -> None:
        owner = self.server.owner
        headers = httpx.Headers(list(self.headers.items()))
        request = Request(self.command, self.path, headers, self._body())
        self._send(owner._reply(request), owner.closing)

    def _body(self) -> bytes:
        if self.headers.get("transfer-encoding", "").lower() != "chunked":
            return self.rfile.read(int(self.headers.get("content-length") or 0))
        body = b""
        while size := int(self.rfile.readline().split(b";")[0], 16):
            body += self.rfile.read(size)
            self.rfile.readline()
        self.rfile.readline()  # the empty line after the last chunk (no trailers)
        return body

    def _send(self, reply: Reply, closing: threading.Event) -> None:
        if reply.wait and closing.wait(reply.wait):
            self.close_connection = True
            return
        body = reply.body
        chunks: Iterable[bytes] = [body] if isinstance(body, bytes) else body
        if not reply.raw:
            self.send_response(reply.status, reply.reason)
            for name, value in reply.headers.items():
                self.send_header(name, value)
            named = {name.lower() for name in reply.headers}
            if reply.chunked:
                if "transfer-encoding" not in named:
                    self.send_header("transfer-encoding", "chunked")
            elif isinstance(body, bytes):
                if "content-length" not in named:
                    self.send_header("content-length", str(len(body)))
            if not (self.server.owner.keep_alive and (reply.chunked or isinstance(body, bytes))):
                self.send_header("connection", "close")  # also where the body ends with it
                self.close_connection = True
            self.end_headers()
        for chunk in chunks:
            if closing.wait(reply.delay) if reply.delay else closing.is_set():
                self.close_connection = True
                return
            if reply.chunked and not chunk:
                continue  # an empty chunk would end the body
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk) if reply.chunked else chunk)
            self.wfile.flush()
        if reply.reset:
            # SO_LINGER with a zero timeout: closing sends a reset, not an orderly end.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
            self.close_connection = True
        elif reply.chunked:
            self.wfile.write(b"0\r\n\r\n")
        if reply.raw:
            self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def http_server() -> Iterator[ScriptedServer]:
    """A `ScriptedServer` for the test, closed after it."""
    with ScriptedServer() as server:
        yield server
