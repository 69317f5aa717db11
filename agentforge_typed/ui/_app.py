"""The ASGI app: the chat page, the two protocols' endpoints, and what guards them.

Each endpoint reads its request into a `Turn` (its protocol's module), runs the loop
(`ToolService.astream`) and streams what `RunReader` reads of it through its protocol's renderer;
only the reading of the request and the rendering differ. With a store, the run is the
conversation's (`conversation_id` = the thread), and the request adds only its new user messages
or its answers; without one, the client's history (sealed, see `_seal`) is the conversation.

Guards, before anything runs: the `Host` header must name the loopback or a host the app was
told of (a page elsewhere cannot reach a local server through a name it controls: DNS
rebinding), an `Origin` header likewise (421 and 403); a bearer token when one is set (401); a
JSON body (415) of at most `max_body_bytes` (413); at most `max_runs` runs at once (503). While it
streams: a client that goes away, or reads nothing for `send_timeout` seconds, ends the run (the
loop cancels its model call and its tools' calls, and gives back what it holds).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import importlib.resources
import logging
import re
from base64 import b64encode
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from starlette.responses import Response
from typing_extensions import TypedDict, Unpack

from .._messages import ChatMessage
from .._transport._asgi import ASGIApp, Receive, Scope, Send, is_loopback
from ..providers._base import secrets_of
from ..tools._base import check_options
from . import _agui, _vercel
from ._conversation import Turn
from ._errors import InputError
from ._reader import RunReader
from ._seal import Sealer
from ._secrets import Scrub

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request

    from .._model import ChatModel
    from ..loop._service import ToolService
    from ..stores import ConversationStore

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_MAX_RUNS",
    "DEFAULT_SEND_TIMEOUT",
    "UIOptions",
    "create_app",
    "serve",
]

logger = logging.getLogger("agentforge_typed.ui")

DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
"""The largest request body taken: 4 MiB (a client sends the whole conversation without a
store)."""
DEFAULT_MAX_RUNS = 1000
"""The most runs streaming at once; a request past it is refused with 503."""
DEFAULT_SEND_TIMEOUT = 30.0
"""Seconds a client may leave the stream unread (its buffers full) before the run is ended."""

_LOOPBACK = ("127.0.0.1", "localhost", "[::1]", "::1")


class UIOptions(TypedDict, total=False):
    """The keyword options of `create_app`."""

    instructions: str | None
    """The system message every conversation starts with (default: none). Clients cannot send
    one."""
    secret: str | bytes | None
    """The key that seals what the server hands a client that holds its conversation (at least
    16 bytes). Default: a random one, good for this process: a conversation held by a browser is
    refused after a restart. Unused with a store."""
    deps: Callable[[Request], Any] | None
    """Called with each request (say, to read who is signed in); its value is the run's
    `deps`. Default: none."""
    token: str | None
    """Require `Authorization: Bearer <token>` on the endpoints (the page asks for it)."""
    host: str
    """The address the server binds: a name or an address other than a wildcard is also an
    accepted `Host` (default `127.0.0.1`)."""
    allowed_hosts: Sequence[str] | None
    """`Host` values accepted besides the loopback's: `name:port`, or `name:*` for any port."""
    max_body_bytes: int
    """The largest request body (default 4 MiB); one byte more is refused with 413."""
    max_runs: int
    """The most runs at once (default 1000); one more is refused with 503."""
    send_timeout: float
    """Seconds the stream may wait for a client that reads nothing (default 30)."""
    title: str
    """The page's title (default: "agentforge")."""


def create_app(
    service: ToolService[Any],
    model: ChatModel,
    store: ConversationStore | None = None,
    **options: Unpack[UIOptions],
) -> Starlette:
    """A Starlette app serving a chat page (`GET /`) and the loop over AG-UI (`POST /ag-ui`) and
    the AI SDK's UI message stream (`POST /api/chat`); see `UIOptions` and the UI guide.

    Args:
        service: The tools and the loop's options.
        model: The model every run uses.
        store: Keeps each conversation (the thread id is its id): clients send only their new
            messages and their answers, a page finds its conversation again after a reload,
            and a decision given after a restart resumes the run. The service must use it too
            (`ToolService(..., store=store)`). Default: the client holds the conversation.

    Raises:
        ValueError: An option out of range, or a store the service does not use.
    """
    from starlette.applications import Starlette
    from starlette.routing import Route

    check_options(options, UIOptions, "create_app")
    if store is not None and getattr(service, "store", None) is not store:
        raise ValueError(
            "create_app(store=...) serves the conversations of the service's own store: "
            "ToolService(..., store=store)"
        )
    host = options.get("host", "127.0.0.1")
    if options.get("token") is None and not is_loopback(host):
        logger.warning(
            "serving on %s without a token: anyone who can reach this address can run the tools "
            "(give one: token=..., or --token-env VAR)",
            host,
        )
    endpoints = _Endpoints(service, model, store, options)
    routes = [
        Route("/", endpoints.page, methods=["GET"]),
        Route("/ag-ui", endpoints.ag_ui, methods=["POST"]),
        Route("/ag-ui/threads/{thread_id:path}", endpoints.thread, methods=["GET"]),
        Route("/api/chat", endpoints.chat, methods=["POST"]),
    ]
    app = Starlette(routes=routes)
    app.add_middleware(
        _Guard,
        hosts=_hosts(host, options.get("allowed_hosts")),
        token=options.get("token"),
    )
    return app


class _Endpoints:
    def __init__(
        self,
        service: ToolService[Any],
        model: ChatModel,
        store: ConversationStore | None,
        options: UIOptions,
    ) -> None:
        self.service = service
        self.model = model
        self.store = store
        self.instructions = options.get("instructions")
        self.deps = options.get("deps")
        self.sealer = None if store is not None else Sealer(options.get("secret"))
        self.max_body_bytes = int(
            _positive(options.get("max_body_bytes", DEFAULT_MAX_BODY_BYTES), "max_body_bytes")
        )
        self.max_runs = int(_positive(options.get("max_runs", DEFAULT_MAX_RUNS), "max_runs"))
        self.send_timeout = _positive(
            options.get("send_timeout", DEFAULT_SEND_TIMEOUT), "send_timeout"
        )
        self.running = 0
        self.redactor = secrets_of(model)
        self.page_html, self.page_policy = _page(
            options.get("title", "agentforge"), stored=store is not None
        )

    # -- the page ------------------------------------------------------------------------------

    async def page(self, request: Request) -> Response:
        from starlette.responses import HTMLResponse

        headers = {
            "content-security-policy": self.page_policy,
            "x-content-type-options": "nosniff",
            "referrer-policy": "no-referrer",
            "cache-control": "no-store",
        }
        return HTMLResponse(self.page_html, headers=headers)

    async def thread(self, request: Request) -> Response:
        """A stored conversation as AG-UI messages and the interrupts it waits on (the page's
        reload); 404 without a store."""
        from starlette.responses import JSONResponse

        from ._conversation import waiting_calls

        if self.store is None:
            return _refused(InputError(404, "no store: the client holds its conversation"))
        thread_id = request.path_params["thread_id"]
        if not thread_id or len(thread_id) > 256:
            return _refused(InputError(400, "threadId must be 1 to 256 characters"))
        stored = await self.store.aload(thread_id)
        history: Sequence[ChatMessage] = stored.messages if stored is not None else ()
        interrupts = _agui.interrupts(waiting_calls(history))
        return JSONResponse(
            {
                "threadId": thread_id,
                "messages": _agui.thread_messages(history),
                "interrupts": [i.model_dump(mode="json", by_alias=True) for i in interrupts],
            }
        )

    # -- the protocols -------------------------------------------------------------------------

    async def ag_ui(self, request: Request) -> Response:
        return await self._run(request, _AG_UI)

    async def chat(self, request: Request) -> Response:
        return await self._run(request, _UI_STREAM)

    async def _run(self, request: Request, protocol: _Protocol) -> Response:
        """Read the request into a turn (or refuse it), then stream its run."""
        try:
            parsed = protocol.parse(await self._body(request))
            turn = protocol.turn(
                parsed,
                sealer=self.sealer,
                stored=await self._stored(protocol.thread(parsed)),
                instructions=self.instructions,
            )
        except InputError as refused:
            return _refused(refused)
        renderer, group = protocol.renderer(parsed, turn)
        reader = RunReader(turn, sealer=self.sealer, group=group, redactor=self.redactor)
        return self._stream(request, turn, reader, renderer, protocol.headers)

    async def _stored(self, thread_id: str) -> Sequence[ChatMessage] | None:
        if self.store is None:
            return None
        if not thread_id or len(thread_id) > 256:
            raise InputError(400, "the thread id must be 1 to 256 characters")
        stored = await self.store.aload(thread_id)
        return stored.messages if stored is not None else ()

    async def _body(self, request: Request) -> bytes:
        kind = request.headers.get("content-type", "").partition(";")[0].strip().lower()
        if kind != "application/json":
            raise InputError(415, "the body must be JSON (Content-Type: application/json)")
        declared = request.headers.get("content-length")
        too_large = InputError(
            413, f"the body is over {self.max_body_bytes:,} bytes (create_app(max_body_bytes=...))"
        )
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            raise too_large
        pieces: list[bytes] = []
        size = 0
        async for piece in request.stream():
            size += len(piece)
            if size > self.max_body_bytes:
                raise too_large
            pieces.append(piece)
        return b"".join(pieces)

    def _stream(
        self,
        request: Request,
        turn: Turn,
        reader: RunReader,
        renderer: Renderer,
        headers: Mapping[str, str],
    ) -> Response:
        if self.running >= self.max_runs:
            return _refused(
                InputError(503, f"{self.max_runs} runs are streaming: try again shortly")
            )
        deps = self.deps(request) if self.deps is not None else None
        self.running += 1
        return _EventStream(
            self._events(turn, reader, renderer, deps),
            {"cache-control": "no-cache", "x-accel-buffering": "no", **headers},
            self.send_timeout,
            self._ended,
        )

    def _ended(self) -> None:
        self.running -= 1

    async def _events(
        self,
        turn: Turn,
        reader: RunReader,
        renderer: Renderer,
        deps: Any,
    ) -> AsyncGenerator[bytes, None]:
        stream = self.service.astream(
            self.model,
            turn.history if self.store is None else turn.new,
            conversation_id=turn.thread_id,
            approvals=turn.approvals or None,
            external_results=turn.external_results or None,
            deps=deps,
        )
        scrub = Scrub(self.redactor)
        try:
            yield renderer.start()
            try:
                async for event in stream:
                    frames = renderer.render(scrub(reader.feed(event)))
                    if frames:
                        yield frames
            except Exception as error:
                if not reader.explains(error):
                    logger.error("a run failed", exc_info=self.redactor.clean(error))
                yield renderer.render(scrub(reader.failed(error)))
            yield renderer.end()
        finally:
            await stream.aclose()


Renderer = _agui.AGUIRenderer | _vercel.VercelRenderer
"""A protocol's renderer: `start()`, `render(moments)`, `end()`, each the bytes to send."""


@dataclass(frozen=True)
class _Protocol:
    """What differs between the endpoints: how a request is read, and how its run is shown."""

    parse: Callable[[bytes], Any]
    thread: Callable[[Any], str]
    turn: Callable[..., Turn]
    renderer: Callable[[Any, Turn], tuple[Renderer, str | None]]
    headers: Mapping[str, str]


_AG_UI = _Protocol(_agui.parse, lambda r: r.thread_id, _agui.turn, _agui.renderer, {})
_UI_STREAM = _Protocol(
    _vercel.parse, lambda r: r.id, _vercel.turn, _vercel.renderer, _vercel.HEADERS
)


class _EventStream(Response):
    """A streamed response whose run ends when the client goes away or stops reading.

    The run is produced in a task of its own and ended, when it must be, by cancelling that
    task: the loop then cleans up as under any cancellation (its model call, its tools' calls,
    what it holds), each await of its cleanup running to its end.
    """

    def __init__(
        self,
        chunks: AsyncGenerator[bytes, None],
        headers: Mapping[str, str],
        send_timeout: float,
        ended: Callable[[], None],
    ) -> None:
        self.chunks = chunks
        self.ended = ended
        self.raw_headers = [(b"content-type", b"text/event-stream; charset=utf-8")] + [
            (k.encode(), v.encode()) for k, v in headers.items()
        ]
        self.send_timeout = send_timeout
        self.background = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        import asyncio

        loop = asyncio.get_running_loop()
        channel = _Channel(loop)
        stopped = False

        async def produce() -> None:
            try:
                async for chunk in self.chunks:
                    await channel.put(chunk)
            finally:
                await self.chunks.aclose()
                channel.close()  # ended, or cut short (the client left, or a failure)

        def stop() -> None:
            nonlocal stopped
            if not stopped:  # once: a second cancellation would cut the run's cleanup short
                stopped = True
                producer.cancel()

        async def gone() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            stop()

        sender = asyncio.current_task()
        assert sender is not None
        stalled = False
        sending_since: float | None = None
        watchdog: asyncio.TimerHandle

        def watch() -> None:
            # One timer a stream, not one a write: it fires `send_timeout` after the write in
            # progress began, or that long after the last look when none is.
            nonlocal stalled, watchdog
            now = loop.time()
            if sending_since is not None and now - sending_since >= self.send_timeout:
                stalled = True
                sender.cancel()
                return
            began = now if sending_since is None else sending_since
            watchdog = loop.call_at(began + self.send_timeout, watch)

        watchdog = loop.call_later(self.send_timeout, watch)

        producer = asyncio.ensure_future(produce())
        watcher = asyncio.ensure_future(gone())
        try:
            start = {"type": "http.response.start", "status": 200, "headers": self.raw_headers}
            await send(start)
            # What is ready goes in one write (many clients, one event loop).
            while (body := await channel.take()) is not None:
                sending_since = loop.time()
                try:
                    await send({"type": "http.response.body", "body": body, "more_body": True})
                except asyncio.CancelledError:
                    if not stalled:
                        raise
                    if hasattr(sender, "uncancel"):  # 3.11+: this cancellation is handled
                        sender.uncancel()
                    logger.warning(
                        "a client read nothing for %gs: its run was ended (send_timeout)",
                        self.send_timeout,
                    )
                    return
                finally:
                    sending_since = None
            if not watcher.done():
                # The run's end, or a failure outside the protocol: then the stream ends
                # without its last event, which clients tell apart.
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            watchdog.cancel()
            watcher.cancel()
            stop()
            try:
                # Awaited to its end even if this task is cancelled (the producer finishes on
                # its own).
                await asyncio.wait({producer})
                if not producer.cancelled() and producer.exception() is not None:
                    logger.error("a stream failed", exc_info=producer.exception())
            finally:
                self.ended()


class _Channel:
    """A stream's chunks on their way from its run to its writes: the writer takes what is
    ready at once, joined; the run waits while `limit` chunks wait to be taken."""

    __slots__ = ("_loop", "_room", "_taker", "chunks", "closed", "limit")

    def __init__(self, loop: Any, limit: int = 4) -> None:
        self._loop = loop
        self.limit = limit
        self.chunks: list[bytes] = []
        self.closed = False
        self._taker: Any = None
        self._room: Any = None

    async def put(self, chunk: bytes) -> None:
        while len(self.chunks) >= self.limit:
            self._room = self._loop.create_future()
            await self._room
        self.chunks.append(chunk)
        self._wake()

    def close(self) -> None:
        """No more chunks: the writer takes what is left, then ends."""
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        taker, self._taker = self._taker, None
        if taker is not None and not taker.done():
            taker.set_result(None)

    async def take(self) -> bytes | None:
        """What is ready, joined (waiting for some); `None` once closed and empty."""
        while not self.chunks:
            if self.closed:
                return None
            self._taker = self._loop.create_future()
            await self._taker
        body = b"".join(self.chunks)
        self.chunks.clear()
        room, self._room = self._room, None
        if room is not None and not room.done():
            room.set_result(None)
        return body


class _Guard:
    """Refuses requests for other hosts (421), from other origins (403), and without the token
    (401) — the page itself needs none."""

    def __init__(self, app: ASGIApp, hosts: tuple[re.Pattern[str], ...], token: str | None) -> None:
        self.app = app
        self.hosts = hosts
        if token is not None and not token:
            raise ValueError("token must not be empty")
        self.expected = None if token is None else f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        host = headers.get(b"host", b"").decode("latin-1").lower()
        origin = headers.get(b"origin")
        refused = None
        if not any(pattern.fullmatch(host) for pattern in self.hosts):
            refused = InputError(421, "this server does not serve that host")
        elif origin is not None and not self._same_site(origin.decode("latin-1").lower()):
            refused = InputError(403, "requests from another origin are refused")
        elif self.expected is not None and not (scope["method"] == "GET" and scope["path"] == "/"):
            given = headers.get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                refused = InputError(401, "a bearer token is required (Authorization: Bearer ...)")
        if refused is None:
            await self.app(scope, receive, send)
            return
        await _refused(refused)(scope, receive, send)

    def _same_site(self, origin: str) -> bool:
        scheme, _, rest = origin.partition("://")
        return scheme in ("http", "https") and any(p.fullmatch(rest) for p in self.hosts)


def _hosts(host: str, allowed: Sequence[str] | None) -> tuple[re.Pattern[str], ...]:
    names = [*_LOOPBACK]
    if host not in ("0.0.0.0", "::", "") and not is_loopback(host):
        names.append(f"[{host}]" if ":" in host else host)
    patterns = [re.escape(name.lower()) + r"(:\d+)?" for name in names]
    for entry in allowed or ():
        name, _, port = entry.lower().rpartition(":")
        if not name:
            name, port = entry.lower(), ""
        suffix = r":\d+" if port == "*" else (re.escape(":" + port) if port else "")
        patterns.append(re.escape(name) + suffix)
    return tuple(re.compile(p) for p in patterns)


def _positive(value: float, name: str) -> float:
    if not value > 0:
        raise ValueError(f"{name} must be positive, got {value!r}")
    return value


def _refused(error: InputError) -> Response:
    from starlette.responses import JSONResponse

    return JSONResponse({"error": error.message}, status_code=error.status)


@functools.cache
def _page_source() -> str:
    return importlib.resources.files(__package__).joinpath("page.html").read_text("utf-8")


def _page(title: str, *, stored: bool) -> tuple[str, str]:
    """The page (its title filled in, escaped; whether the server keeps conversations) and its
    content security policy: its own inline script and style only (by hash), images from `data:`
    URLs, requests to this server."""
    import html

    page = _page_source().replace("{{title}}", html.escape(title))
    page = page.replace("{{store}}", "yes" if stored else "no")
    hashes = []
    for tag in ("script", "style"):
        body = re.search(rf"<{tag}>(.*?)</{tag}>", page, re.DOTALL)
        assert body is not None
        digest = b64encode(hashlib.sha256(body.group(1).encode()).digest()).decode()
        hashes.append(f"'sha256-{digest}'")
    policy = (
        "default-src 'none'; "
        f"script-src {hashes[0]}; style-src {hashes[1]}; img-src data:; connect-src 'self'; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )
    return page, policy


DEFAULT_MAX_CONNECTIONS = DEFAULT_MAX_RUNS + 100
"""The most connections uvicorn serves at once (`serve`): the runs, and room for the page."""


async def serve(
    app: ASGIApp,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve `app` under uvicorn until cancelled or interrupted; `on_ready` gets its URL once it
    listens (the port it got, for port 0)."""
    import asyncio

    import uvicorn

    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        lifespan="off",
        limit_concurrency=max_connections,
        timeout_graceful_shutdown=5,
        server_header=False,
    )
    runner = uvicorn.Server(config)
    serving = asyncio.ensure_future(runner.serve())
    try:
        while not runner.started and not serving.done():  # noqa: ASYNC110 - uvicorn has a flag
            await asyncio.sleep(0.01)
        if runner.started and on_ready is not None:
            bound = runner.servers[0].sockets[0].getsockname()
            shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
            on_ready(f"http://{shown}:{bound[1]}/")
        await serving
    finally:
        runner.should_exit = True
        await asyncio.wait({serving})
