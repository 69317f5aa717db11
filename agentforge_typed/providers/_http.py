"""The HTTP shell every vendor provider shares: POST JSON, retry transient failures, map errors.

Providers keep their wire logic sans-IO and hand this shell a path, a JSON payload and the parse
step (a function for a whole answer, a stream parser for a stream); it owns the `httpx` clients,
the retry loop and the one boundary every `ModelError` leaves through. Secrets (API keys) live
only in the request headers, and that boundary scrubs them from every error's message, body and
code, whichever layer raised it (the shell, or the wire's parsing of a body or a stream), before
it cuts long text down to size (the package's one `Redactor`). The log records of httpx and
httpcore, which quote what a server sent (a reason phrase, headers), are scrubbed the same way as
they are logged. Each attempt is one exchange of `_exchange`: one deadline (`total_timeout`) from
connecting to the last byte, headers included, and bodies read up to their cap.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import (
    AsyncGenerator,
    Awaitable,
    Callable,
    Generator,
    Iterable,
    Iterator,
    Mapping,
)
from contextlib import contextmanager
from typing import Any, ClassVar, Protocol, TypeVar

import httpx
import pydantic_core

from .._content import BinaryContent, ContentKind
from .._exceptions import ModelError
from .._model import ResponseComplete, StreamEvent
from .._response import ChatResponse
from .._transport._exchange import Deadline, aread_body, bound, read_body
from .._transport._redaction import FRAGMENT, Redactor
from ._admission import (
    DEFAULT_MAX_CONNECTIONS,
    SHARD_CONNECTIONS,
    AsyncGate,
    LoopClients,
    SyncGate,
    pool_size,
)
from ._retry import RetryPolicy, retry_after
from ._sse import (
    DEFAULT_MAX_LINE_LENGTH,
    DEFAULT_MAX_STREAM_BYTES,
    ServerSentEvent,
    aiter_sse,
    iter_sse,
)
from ._tracing import note_admission_wait

__all__ = [
    "DEFAULT_MAX_RESPONSE_BYTES",
    "HttpShell",
    "StreamParser",
    "WireBase",
    "error_details",
    "error_from_body",
    "logger",
]

logger = logging.getLogger("agentforge_typed.providers")

DEFAULT_MAX_RESPONSE_BYTES = 32 * 1024 * 1024
"""The most bytes (after content decoding) a whole answer's body may hold: 32 MiB, far above any
real answer, base64 images included."""

ParsedT = TypeVar("ParsedT")


class StreamParser(Protocol):
    """A provider's sans-IO stream aggregation, fed decoded server-sent events."""

    @property
    def done(self) -> bool:
        """Whether the stream's own end marker arrived (later events are not read)."""
        ...

    def take(self, event: ServerSentEvent) -> list[StreamEvent]:
        """The deltas one event carries."""
        ...

    def end(self) -> list[StreamEvent]:
        """The events owed once the bytes stop (the final `ResponseComplete`, unless already
        given); raises `ModelError` for a stream cut off before its answer was complete."""
        ...


def error_details(body: Any) -> tuple[str | None, str | None]:
    """Find the provider's error message and code (or type) in an error body.

    Understands OpenAI's `{"error": {"message", "type", "code"}}`, Anthropic's
    `{"type": "error", "error": {"type", "message"}}`, and the flatter shapes compatible servers
    send (`{"error": "..."}`, `{"message": ..., "type": ...}`, `{"detail": ...}`).
    """
    if not isinstance(body, Mapping):
        return None, None
    error = body.get("error")
    if isinstance(error, Mapping):
        body = error
    elif isinstance(error, str):
        return error, _code(body)
    message = body.get("message", body.get("detail"))
    return (None if message is None else str(message)), _code(body)


def error_from_body(
    provider: str,
    body: Any,
    *,
    status_code: int | None = None,
    streaming: bool = False,
    fallback: str = "unknown error",
) -> ModelError:
    """A `ModelError` for an error body: an HTTP error response, an error sent inside a stream
    (`streaming`), or an error object in a successful response.

    The message reads `"<provider> API error <status>: <provider's message>"`, `"<provider> stream
    error: ..."` or `"<provider> returned an error: ..."`; `code` is the provider's error code or
    type.
    """
    message, code = error_details(body)
    if message is None:
        message = (body if isinstance(body, str) else "") or fallback
    if status_code is not None:
        where = f"API error {status_code}"
    else:
        where = "stream error" if streaming else "returned an error"
    return ModelError(
        f"{provider} {where}: {message}", status_code=status_code, body=body, code=code
    )


def _code(body: Mapping[str, Any]) -> str | None:
    """The error's code, else its type; a number is taken last: servers such as llama.cpp repeat
    the HTTP status in `code` and name the error class in `type` (`exceed_context_size_error`)."""
    number = None
    for key in ("code", "type"):
        value = body.get(key)
        if value is None or value == "error" or isinstance(value, bool):
            continue
        if isinstance(value, int | float):
            number = number or str(value)
            continue
        return str(value)
    return number


class WireBase:
    """The parts of a `Wire` most vendors share: one fixed endpoint (`path`), and error bodies
    read the shared way. A wire class subclasses it and overrides what its vendor does otherwise."""

    path: ClassVar[str]
    """The endpoint, relative to the base URL."""
    user_content: ClassVar[frozenset[ContentKind]] = frozenset()
    """The kinds of parts beyond text the API takes in user messages."""
    tool_result_content: ClassVar[frozenset[ContentKind]] = frozenset()
    """The kinds of parts beyond text the API takes in tool results."""

    def refuse_part(self, part: BinaryContent) -> str | None:
        """None: the API takes every part of the kinds it takes, by any source."""
        return None

    def request_path(self, model: str, *, stream: bool) -> str:
        """`path`, whatever the model and the mode."""
        return self.path

    def retry_hint(self, body: Any) -> float | None:
        """None: the wait comes from the `Retry-After` header, or the backoff."""
        return None

    def refine_error(self, error: ModelError) -> ModelError:
        """`error` as the shared reading of the body made it."""
        return error


class HttpShell:
    """Sync and async POST of JSON to one provider, with retries and error mapping.

    Clients passed in are used as they are (their own timeout and limits apply) and never closed
    here; clients created here get `timeout` and a pool of `max_connections` connections, all
    kept alive, and are closed by `close()` / `aclose()` (an async one also when the event loop
    it was created for shuts down: each loop gets its own). At most `max_concurrent_requests`
    requests are in flight at once (by default, as many as the pool has connections); the others
    wait their turn, in order, before the pool sees them (`_admission`), and the wait counts in
    no timeout.
    """

    def __init__(
        self,
        *,
        provider: str,
        base_url: str,
        headers: Mapping[str, str],
        secrets: Iterable[str | None] = (),
        http_client: httpx.Client | None = None,
        async_http_client: httpx.AsyncClient | None = None,
        timeout: float | httpx.Timeout | None = 60.0,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        asleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        total_timeout: float | None = None,
        max_line_length: int = DEFAULT_MAX_LINE_LENGTH,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        max_stream_bytes: int = DEFAULT_MAX_STREAM_BYTES,
        retry_hint: Callable[[Any], float | None] | None = None,
        refine_error: Callable[[ModelError], ModelError] | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        max_concurrent_requests: int | None = None,
        label: str | None = None,
    ) -> None:
        for name, value in (
            ("max_connections", max_connections),
            ("max_concurrent_requests", max_concurrent_requests),
        ):
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"{name} must be a positive integer, not {value!r}")
        self.provider = provider
        self.label = label
        """The name errors give the server, when not the API's (`"llamacpp"` for a compatible
        server reached through `get_model`)."""
        self._retry_hint = retry_hint
        """The wait an error body asks for (seconds), for vendors that say so there rather than
        in a `Retry-After` header."""
        self._refine_error = refine_error
        """A vendor's reading of its own error bodies (e.g. a status name as the code)."""
        self.base_url = base_url.rstrip("/")
        self._headers = {"content-type": "application/json", **headers}
        self.redactor = Redactor(secrets)
        """What every error, and every log record of the HTTP libraries, is scrubbed of."""
        self.redactor.watch_logs()
        self._answers = Redactor(s for s in self.redactor.secrets if len(s) >= FRAGMENT)
        """What a successful answer is scrubbed of: the secrets long enough not to stand in a
        model's text by chance (a test's `api_key="k"` would take every `k` out of it)."""
        # A client passed in keeps its own settings; its connections honour `total_timeout`.
        self._client = http_client if http_client is None else bound(http_client)
        self._owns_client = http_client is None
        self._async_client = (
            async_http_client if async_http_client is None else bound(async_http_client)
        )
        """The async client passed in, used on every loop; `None`: one is created per loop."""
        self._loops: dict[asyncio.AbstractEventLoop, LoopClients] = {}
        """By event loop (not weakly: some loops, uvloop's, take no weak references); a closed
        loop's entry goes when the next loop's is added."""
        self._loopless: LoopClients | None = None
        """The state of `async_client` read outside any running loop."""
        self._sync_gate: SyncGate | None = None
        self.max_connections = max_connections
        self.max_concurrent_requests = max_concurrent_requests
        self.timeout = timeout
        self.retry = retry or RetryPolicy()
        self._sleep = sleep
        self._asleep = asleep
        self.total_timeout = total_timeout
        """Seconds one attempt may take, from sending the request to the last byte read."""
        self.max_line_length = max_line_length
        self.max_response_bytes = max_response_bytes
        """The most bytes a body read whole may hold (a blocking answer, an error body, a JSON
        document answering a stream request); see `_read`."""
        self.max_stream_bytes = max_stream_bytes
        """The most bytes an event stream may hold in all."""

    def __repr__(self) -> str:
        return f"HttpShell(provider={self.provider!r}, base_url={self.base_url!r})"

    # -- sync ---------------------------------------------------------------------------------

    @property
    def client(self) -> httpx.Client:
        """The sync client, created on first use when none was passed in."""
        if self._client is None:
            self._client = bound(httpx.Client(timeout=self.timeout, limits=self._limits()))
        return self._client

    def _limits(self, size: int | None = None) -> httpx.Limits:
        size = size or self.max_connections
        return httpx.Limits(max_connections=size, max_keepalive_connections=size)

    def _admission_limit(self, client: httpx.Client | httpx.AsyncClient | None, owned: bool) -> int:
        """How many requests may be in flight: as configured, else as many as the pool serves."""
        if self.max_concurrent_requests is not None:
            return self.max_concurrent_requests
        if owned or client is None:
            return self.max_connections
        return pool_size(client) or DEFAULT_MAX_CONNECTIONS

    def post_json(
        self,
        path: str,
        payload: Mapping[str, Any],
        parse: Callable[[Any], ParsedT] = lambda body: body,
    ) -> ParsedT:
        """POST `payload` and return `parse` of the JSON answer (the JSON itself by default).

        Raises:
            ModelError: non-2xx status (after retries), network failure, malformed JSON, or
                whatever `parse` raises.
        """
        with self.redacting():
            return parse(self._answers.redact(self._json(self._send(path, payload, stream=False))))

    def stream(
        self, path: str, payload: Mapping[str, Any], parser: StreamParser
    ) -> Iterator[StreamEvent]:
        """POST `payload` and yield what `parser` makes of the server-sent events of the answer,
        up to its end marker, then what it owes at the end.

        Retries happen only before a 2xx response starts; a failure after that raises `ModelError`.
        """
        with self.redacting():
            events = self._events(path, payload)
            try:
                for event in events:
                    yield from map(self._redacted, parser.take(event))
                    if parser.done:
                        break
            finally:
                events.close()
            yield from map(self._redacted, parser.end())

    def stream_sse(
        self, path: str, payload: Mapping[str, Any]
    ) -> Generator[ServerSentEvent, None, None]:
        """POST `payload` and yield the raw server-sent events of the answer."""
        with self.redacting():
            yield from self._events(path, payload)

    def _events(
        self, path: str, payload: Mapping[str, Any]
    ) -> Generator[ServerSentEvent, None, None]:
        response = self._send(path, payload, stream=True)
        gate = self.sync_gate
        try:
            if _not_an_event_stream(response):
                self._read(response)
                raise self._not_a_stream_error(response)
            try:
                yield from iter_sse(
                    response,
                    max_line_length=self.max_line_length,
                    max_bytes=self.max_stream_bytes,
                    source=self.provider,
                )
            except httpx.HTTPError as exc:
                raise self._transport_error(exc, streaming=True) from exc
            finally:
                response.close()
        finally:
            # Read to the end, failed, or closed by its consumer: the slot is free again.
            gate.release()

    def close(self) -> None:
        """Close the sync client if this shell created it."""
        if self._owns_client and self._client is not None:
            self._client.close()
            self._client = None

    @property
    def sync_gate(self) -> SyncGate:
        """The admission gate of blocking calls."""
        if self._sync_gate is None:
            client = self.client
            self._sync_gate = SyncGate(self._admission_limit(client, self._owns_client))
        return self._sync_gate

    def _send(self, path: str, payload: Mapping[str, Any], *, stream: bool) -> httpx.Response:
        """Send with retries. Each attempt holds an admission slot; a successful stream keeps its
        slot, which the caller releases once the stream is read or closed."""
        content = pydantic_core.to_json(payload)
        client, gate = self.client, self.sync_gate
        retries = 0
        while True:
            _admitted(self.provider, gate.acquire())
            keep = False
            try:
                request, deadline = self._request(client, path, content)
                try:
                    response = self._watched(
                        client.send(request, stream=True, follow_redirects=False), deadline
                    )
                    if not (stream and response.is_success):
                        self._read(response)
                except httpx.HTTPError as exc:
                    outcome = self._settle(retries, path, exc, deadline)
                else:
                    outcome = self._settle(retries, path, response)
                if isinstance(outcome, httpx.Response):
                    keep = stream
                    return outcome
            finally:
                if not keep:
                    gate.release()
            self._sleep(outcome)
            retries += 1

    # -- async --------------------------------------------------------------------------------

    @property
    def async_client(self) -> httpx.AsyncClient:
        """The (first) async client of the running event loop: the one passed in, or one created
        for this loop on first use (a client's connections belong to the loop they were opened
        on)."""
        return self._loop_clients().client(0)

    def _loop_clients(self) -> LoopClients:
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        clients = self._loopless if loop is None else self._loops.get(loop)
        if clients is not None:
            return clients
        injected = self._async_client
        if injected is not None:
            gate = AsyncGate(self._admission_limit(injected, owned=False))
            clients = LoopClients(gate, client=injected)
        else:
            size = min(SHARD_CONNECTIONS, self.max_connections)
            shards = -(-self.max_connections // size)
            limits = self._limits(size)
            clients = LoopClients(
                AsyncGate(self._admission_limit(None, owned=True)),
                make=lambda: bound(httpx.AsyncClient(timeout=self.timeout, limits=limits)),
                shards=shards,
            )
        if loop is None:
            self._loopless = clients
        else:
            self._loops = {
                known: kept for known, kept in self._loops.items() if not known.is_closed()
            }
            self._loops[loop] = clients
        return clients

    async def apost_json(
        self,
        path: str,
        payload: Mapping[str, Any],
        parse: Callable[[Any], ParsedT] = lambda body: body,
    ) -> ParsedT:
        """Async `post_json`."""
        with self.redacting():
            response, _ = await self._asend(path, payload, stream=False)
            return parse(self._answers.redact(self._json(response)))

    async def astream(
        self, path: str, payload: Mapping[str, Any], parser: StreamParser
    ) -> AsyncGenerator[StreamEvent, None]:
        """Async `stream`."""
        with self.redacting():
            events = self._aevents(path, payload)
            try:
                async for event in events:
                    for stream_event in parser.take(event):
                        yield self._redacted(stream_event)
                    if parser.done:
                        break
            finally:
                await events.aclose()
            for stream_event in parser.end():
                yield self._redacted(stream_event)

    async def astream_sse(
        self, path: str, payload: Mapping[str, Any]
    ) -> AsyncGenerator[ServerSentEvent, None]:
        """Async `stream_sse`."""
        with self.redacting():
            events = self._aevents(path, payload)
            try:
                async for event in events:
                    yield event
            finally:
                await events.aclose()

    async def _aevents(
        self, path: str, payload: Mapping[str, Any]
    ) -> AsyncGenerator[ServerSentEvent, None]:
        clients = self._loop_clients()
        response, slot = await self._asend(path, payload, stream=True, clients=clients)
        try:
            if _not_an_event_stream(response):
                await self._aread(response)
                raise self._not_a_stream_error(response)
            try:
                async for event in aiter_sse(
                    response,
                    max_line_length=self.max_line_length,
                    max_bytes=self.max_stream_bytes,
                    source=self.provider,
                ):
                    yield event
            except httpx.HTTPError as exc:
                raise self._transport_error(exc, streaming=True) from exc
            finally:
                await response.aclose()
        finally:
            # Read to the end, failed, or closed by its consumer (an abandoned stream is closed
            # by the loop's async generator finalizer): the slot is free again.
            clients.release(slot)

    async def aclose(self) -> None:
        """Close the async clients this shell created for the running loop (and the sync one)."""
        for clients in (self._loops.pop(asyncio.get_running_loop(), None), self._loopless):
            if clients is not None:
                await clients.aclose()
        self._loopless = None
        self.close()

    async def _asend(
        self,
        path: str,
        payload: Mapping[str, Any],
        *,
        stream: bool,
        clients: LoopClients | None = None,
    ) -> tuple[httpx.Response, int]:
        """Async `_send`: the response, and the slot it holds when it is a stream."""
        content = pydantic_core.to_json(payload)
        clients = clients or self._loop_clients()
        retries = 0
        while True:
            waited, slot = await clients.acquire()
            _admitted(self.provider, waited)
            keep = False
            try:
                client = clients.client(slot)
                request, deadline = self._request(client, path, content)
                try:
                    response = await client.send(request, stream=True, follow_redirects=False)
                    response = self._watched(response, deadline)
                    if not (stream and response.is_success):
                        await self._aread(response)
                except httpx.HTTPError as exc:
                    outcome = self._settle(retries, path, exc, deadline)
                else:
                    outcome = self._settle(retries, path, response)
                if isinstance(outcome, httpx.Response):
                    keep = stream
                    return outcome, slot
            finally:
                if not keep:
                    clients.release(slot)
            await self._asleep(outcome)
            retries += 1

    # -- bounded reads ------------------------------------------------------------------------

    def _read(self, response: httpx.Response) -> None:
        """Read the body of `response` whole, then close it: at most `max_response_bytes` bytes,
        counted after content decoding (a small gzip body may inflate without end)."""
        body = read_body(response, self.max_response_bytes, self._refusal(response))
        response._content = body.content  # what `read()` would have set

    async def _aread(self, response: httpx.Response) -> None:
        """Async `_read`."""
        body = await aread_body(response, self.max_response_bytes, self._refusal(response))
        response._content = body.content

    def _refusal(self, response: httpx.Response) -> Callable[[str], ModelError] | None:
        """A successful answer over the limit is refused; an error answer keeps its first
        `max_response_bytes` bytes, enough to read the error (its status still decides retries
        and the error raised)."""
        if not response.is_success:
            return None
        return lambda size: self._too_large(response, size)

    def _too_large(self, response: httpx.Response, size: str) -> ModelError:
        return ModelError(
            f"{self.provider} answered with a body of {size} bytes, over the limit of "
            f"max_response_bytes={self.max_response_bytes}; pass a larger max_response_bytes= "
            "to the model to accept it",
            status_code=response.status_code,
        )

    # -- shared decisions ---------------------------------------------------------------------

    def _settle(
        self,
        retries: int,
        path: str,
        attempt: httpx.Response | httpx.HTTPError,
        deadline: Deadline | None = None,
    ) -> httpx.Response | float:
        """What one attempt comes to: the successful response, or the seconds to wait before the
        next attempt; raises `ModelError` when the failure is final (no retry left, or none
        allowed, or the attempt ran out its `total_timeout`: a timeout it caused is not a
        transient failure to try again)."""
        if isinstance(attempt, httpx.HTTPError):
            if deadline is not None and deadline.passed():
                raise self._overtime() from attempt
            delay = self._retry_delay(retries, path, error=attempt)
            if delay is None:
                raise self._transport_error(attempt) from attempt
            return delay
        if attempt.is_success:
            return attempt
        delay = self._retry_delay(retries, path, response=attempt)
        if delay is None:
            raise self._status_error(attempt)
        return delay

    def _url(self, path: str) -> str:
        path = path.lstrip("/")
        if self.base_url.endswith("/v1") and path.startswith("v1/"):
            path = path[len("v1/") :]  # a base URL given with the version the path repeats
        return f"{self.base_url}/{path}"

    def _request(
        self, client: httpx.Client | httpx.AsyncClient, path: str, content: bytes
    ) -> tuple[httpx.Request, Deadline | None]:
        """One attempt's request, and its deadline when `total_timeout` is set.

        Every phase's timeout is capped at `total_timeout`, and the request carries the deadline
        to each socket operation (`_exchange`): a server dripping its headers or its body a byte
        at a time ends there; between reads, `_watched` checks it too, whatever the transport.
        """
        timeout = client.timeout
        deadline = None
        if self.total_timeout is not None:
            deadline = Deadline(self.total_timeout, self._overtime)
            timeout = deadline.timeout(timeout)
        request = client.build_request(
            "POST", self._url(path), content=content, headers=self._headers, timeout=timeout
        )
        return request, deadline

    @staticmethod
    def _watched(response: httpx.Response, deadline: Deadline | None) -> httpx.Response:
        """`response`, its body raising `ModelError` once `deadline` has passed."""
        return response if deadline is None else deadline.watch(response)

    def _overtime(self) -> ModelError:
        return ModelError(
            f"{self.provider} call took longer than total_timeout={self.total_timeout}s"
        )

    def _retry_delay(
        self,
        retries: int,
        path: str,
        *,
        response: httpx.Response | None = None,
        error: httpx.HTTPError | None = None,
    ) -> float | None:
        """The wait before the next attempt, or `None` when this failure is final."""
        if retries >= self.retry.max_retries:
            return None
        if response is not None:
            if not self.retry.is_retryable_response(response):
                return None
            delay = self.retry.delay(retries, self._retry_headers(response))
            failure = f"HTTP {response.status_code}"
        else:
            if error is None or not self.retry.is_retryable_error(error):
                return None
            delay = self.retry.delay(retries)
            failure = type(error).__name__
        logger.info(
            "%s request to %s failed (%s); retry %d of %d in %.2fs",
            self.provider,
            path,
            failure,
            retries + 1,
            self.retry.max_retries,
            delay,
        )
        return delay

    def _json(self, response: httpx.Response) -> Any:
        try:
            return pydantic_core.from_json(response.content)
        except ValueError as exc:
            raise ModelError(
                f"{self.provider} returned malformed JSON: {exc}",
                status_code=response.status_code,
                body=response.text,
            ) from exc

    def _retry_headers(self, response: httpx.Response) -> httpx.Headers:
        """The response's headers, with the wait its body asks for as `Retry-After` when the
        wire reads one there and no header says otherwise (the policy honours and caps it)."""
        if self._retry_hint is None or retry_after(response.headers) is not None:
            return response.headers
        hint = self._retry_hint(_parsed_body(response))
        if hint is None:
            return response.headers
        return httpx.Headers({**response.headers, "retry-after": str(hint)})

    def _status_error(self, response: httpx.Response) -> ModelError:
        error = error_from_body(
            self.provider,
            _parsed_body(response),
            status_code=response.status_code,
            fallback=response.reason_phrase,
        )
        return self._refine_error(error) if self._refine_error is not None else error

    def _not_a_stream_error(self, response: httpx.Response) -> ModelError:
        kind = response.headers.get("content-type", "")
        body = _parsed_body(response)
        message, code = error_details(body)
        what = message if message is not None else body if isinstance(body, str) else "a JSON body"
        return ModelError(
            f"{self.provider} answered a stream request with {kind} instead of server-sent "
            f"events: {what}",
            status_code=response.status_code,
            body=body,
            code=code,
        )

    def _transport_error(self, exc: httpx.HTTPError, *, streaming: bool = False) -> ModelError:
        what = "stream was interrupted" if streaming else f"request{_origin(exc)} failed"
        detail = str(exc) or type(exc).__name__
        return ModelError(f"{self.provider} {what}: {type(exc).__name__}: {detail}")

    # -- the boundary -------------------------------------------------------------------------

    def _redacted(self, event: StreamEvent) -> StreamEvent:
        """`event`, and the whole answer a stream ends with redacted of the secrets (a server
        that echoes the key puts it in the history, the stores and the next tool's arguments
        otherwise). The deltas pass as they come: a key cut into pieces shorter than the
        redactor's fragment is only whole in the answer."""
        if type(event) is not ResponseComplete or not self._answers:
            return event
        answer = event.response.model_dump(mode="json", by_alias=True)
        redacted = self._answers.redact(answer)
        if redacted == answer:
            return event
        return ResponseComplete(response=ChatResponse.model_validate(redacted))

    @contextmanager
    def redacting(self) -> Iterator[None]:
        """The boundary every `ModelError` leaves the provider through: secrets are replaced in
        its message, body and code (the error is changed in place, so its traceback and cause
        stay), then each text is cut to `MAX_TEXT` characters, so a secret straddling the cut
        cannot leave half of itself behind. A cause whose own text holds a secret (a parse
        error quoting the body) is dropped from the chain: a logged traceback prints it."""
        try:
            yield
        except ModelError as error:
            if self.label is not None and error.message.startswith(f"{self.provider} "):
                # The server the user chose, not the API it speaks: "llamacpp API error 400".
                error.message = self.label + error.message[len(self.provider) :]
            redactor = self.redactor
            error.message = redactor.scrub(error.message)
            error.args = (error.message,)
            error.body = redactor.scrub_value(error.body)
            error.code = redactor.scrub_value(error.code)
            if redactor.mentions(error):
                error.__cause__ = error.__context__ = None
                error.__suppress_context__ = True
            raise

    def scrub(self, text: str) -> str:
        """`text` as the boundary leaves an error's: secrets replaced, then cut to size (for
        callers that show what a server sent other than through an error)."""
        return self.redactor.scrub(text)


def _origin(exc: httpx.HTTPError) -> str:
    """` to <scheme>://<host>[:port]` of the request that failed (the server the user chose, to
    check), or nothing when the error carries no request. Never its path or query."""
    try:
        url = exc.request.url
    except RuntimeError:  # an error raised without its request
        return ""
    port = f":{url.port}" if url.port is not None else ""
    return f" to {url.scheme}://{url.host}{port}"


def _admitted(provider: str, waited: float) -> None:
    """Make a wait for an admission slot visible: a debug log line, and the model call's span."""
    if waited:
        logger.debug("%s request waited %.3fs for an admission slot", provider, waited)
        note_admission_wait(waited)


def _parsed_body(response: httpx.Response) -> Any:
    """The body of a response read in full: its JSON when it parses, else its text."""
    try:
        return pydantic_core.from_json(response.content)
    except ValueError:
        return response.text


def _not_an_event_stream(response: httpx.Response) -> bool:
    """Whether a successful answer to a stream request is a whole JSON or HTML document (an error
    page, a gateway's message) instead of an event stream. Other types are decoded as events:
    some compatible servers label their streams loosely."""
    kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
    return kind in ("application/json", "text/html") or kind.endswith("+json")
