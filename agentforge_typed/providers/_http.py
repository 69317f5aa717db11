"""The HTTP shell every vendor provider shares: POST JSON, retry transient failures, map errors.

Providers keep their wire logic sans-IO and hand this shell a path, a JSON payload and the parse
step (a function for a whole answer, a stream parser for a stream); it owns the `httpx` clients,
the retry loop and the one boundary every `ModelError` leaves through. Secrets (API keys) live
only in the request headers, and that boundary scrubs them from every error's message, body and
code, whichever layer raised it (the shell, or the wire's parsing of a body or a stream), before
it cuts long text down to size.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
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

from .._events import StreamEvent
from .._exceptions import ModelError
from ._retry import RetryPolicy, retry_after
from ._sse import DEFAULT_MAX_LINE_LENGTH, ServerSentEvent, aiter_sse, iter_sse

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

_REDACTED = "[redacted]"
_MAX_TEXT = 2000
"""Characters kept of each text an error carries (its message, a non-JSON body, each string in a
JSON body); the rest is replaced by a count."""
_FRAGMENT = 12
"""A run of this many characters of a secret is redacted like the whole secret: libraries that
shorten long values (pydantic quoting an input, a server's `...`) must not leave most of a key."""

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
    for key in ("code", "type"):
        value = body.get(key)
        if value is not None and value != "error" and not isinstance(value, bool):
            return str(value)
    return None


class WireBase:
    """The parts of a `Wire` most vendors share: one fixed endpoint (`path`), and error bodies
    read the shared way. A wire class subclasses it and overrides what its vendor does otherwise."""

    path: ClassVar[str]
    """The endpoint, relative to the base URL."""

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

    Clients passed in are used as they are (their own timeout applies) and never closed here;
    clients created here get `timeout` and are closed by `close()` / `aclose()`.
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
        retry_hint: Callable[[Any], float | None] | None = None,
        refine_error: Callable[[ModelError], ModelError] | None = None,
    ) -> None:
        self.provider = provider
        self._retry_hint = retry_hint
        """The wait an error body asks for (seconds), for vendors that say so there rather than
        in a `Retry-After` header."""
        self._refine_error = refine_error
        """A vendor's reading of its own error bodies (e.g. a status name as the code)."""
        self.base_url = base_url.rstrip("/")
        self._headers = {"content-type": "application/json", **headers}
        whole = sorted({secret for secret in secrets if secret}, key=len, reverse=True)
        self._needles = (
            *whole,
            *dict.fromkeys(
                s[i : i + _FRAGMENT] for s in whole for i in range(len(s) - _FRAGMENT + 1)
            ),
        )
        """What redaction replaces: each secret, then every run of `_FRAGMENT` of its characters."""
        self._shortest = min(map(len, self._needles), default=0)
        self._margin = max(map(len, whole), default=0) + _FRAGMENT
        self._client = http_client
        self._owns_client = http_client is None
        self._async_client = async_http_client
        self._owns_async_client = async_http_client is None
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

    def __repr__(self) -> str:
        return f"HttpShell(provider={self.provider!r}, base_url={self.base_url!r})"

    # -- sync ---------------------------------------------------------------------------------

    @property
    def client(self) -> httpx.Client:
        """The sync client, created on first use when none was passed in."""
        if self._client is None:
            self._client = httpx.Client(timeout=self.timeout)
        return self._client

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
            return parse(self._json(self._send(path, payload, stream=False)))

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
                    yield from parser.take(event)
                    if parser.done:
                        break
            finally:
                events.close()
            yield from parser.end()

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
        if _not_an_event_stream(response):
            self._read(response)
            raise self._not_a_stream_error(response)
        try:
            yield from iter_sse(
                response, max_line_length=self.max_line_length, source=self.provider
            )
        except httpx.HTTPError as exc:
            raise self._transport_error(exc, streaming=True) from exc
        finally:
            response.close()

    def close(self) -> None:
        """Close the sync client if this shell created it."""
        if self._owns_client and self._client is not None:
            self._client.close()
            self._client = None

    def _send(self, path: str, payload: Mapping[str, Any], *, stream: bool) -> httpx.Response:
        content = pydantic_core.to_json(payload)
        retries = 0
        while True:
            request, deadline = self._request(self.client, path, content)
            try:
                response = self._bounded(self.client.send(request, stream=True), deadline)
                if not (stream and response.is_success):
                    self._read(response)
            except httpx.HTTPError as exc:
                outcome = self._settle(retries, path, exc)
            else:
                outcome = self._settle(retries, path, response)
            if isinstance(outcome, httpx.Response):
                return outcome
            self._sleep(outcome)
            retries += 1

    # -- async --------------------------------------------------------------------------------

    @property
    def async_client(self) -> httpx.AsyncClient:
        """The async client, created on first use when none was passed in."""
        if self._async_client is None:
            self._async_client = httpx.AsyncClient(timeout=self.timeout)
        return self._async_client

    async def apost_json(
        self,
        path: str,
        payload: Mapping[str, Any],
        parse: Callable[[Any], ParsedT] = lambda body: body,
    ) -> ParsedT:
        """Async `post_json`."""
        with self.redacting():
            return parse(self._json(await self._asend(path, payload, stream=False)))

    async def astream(
        self, path: str, payload: Mapping[str, Any], parser: StreamParser
    ) -> AsyncGenerator[StreamEvent, None]:
        """Async `stream`."""
        with self.redacting():
            events = self._aevents(path, payload)
            try:
                async for event in events:
                    for stream_event in parser.take(event):
                        yield stream_event
                    if parser.done:
                        break
            finally:
                await events.aclose()
            for stream_event in parser.end():
                yield stream_event

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
        response = await self._asend(path, payload, stream=True)
        if _not_an_event_stream(response):
            await self._aread(response)
            raise self._not_a_stream_error(response)
        try:
            async for event in aiter_sse(
                response, max_line_length=self.max_line_length, source=self.provider
            ):
                yield event
        except httpx.HTTPError as exc:
            raise self._transport_error(exc, streaming=True) from exc
        finally:
            await response.aclose()

    async def aclose(self) -> None:
        """Close the async client (and the sync one) if this shell created them."""
        if self._owns_async_client and self._async_client is not None:
            await self._async_client.aclose()
            self._async_client = None
        self.close()

    async def _asend(
        self, path: str, payload: Mapping[str, Any], *, stream: bool
    ) -> httpx.Response:
        content = pydantic_core.to_json(payload)
        retries = 0
        while True:
            request, deadline = self._request(self.async_client, path, content)
            try:
                response = await self.async_client.send(request, stream=True)
                response = self._bounded(response, deadline)
                if not (stream and response.is_success):
                    await self._aread(response)
            except httpx.HTTPError as exc:
                outcome = self._settle(retries, path, exc)
            else:
                outcome = self._settle(retries, path, response)
            if isinstance(outcome, httpx.Response):
                return outcome
            await self._asleep(outcome)
            retries += 1

    # -- bounded reads ------------------------------------------------------------------------

    def _read(self, response: httpx.Response) -> None:
        """Read the body of `response` whole, then close it: at most `max_response_bytes` bytes,
        counted after content decoding (a small gzip body may inflate without end)."""
        try:
            body = _BoundedBody(self, response)
            for chunk in response.iter_bytes():
                if body.full(chunk):
                    break
            body.keep()
        finally:
            response.close()

    async def _aread(self, response: httpx.Response) -> None:
        """Async `_read`."""
        try:
            body = _BoundedBody(self, response)
            async for chunk in response.aiter_bytes():
                if body.full(chunk):
                    break
            body.keep()
        finally:
            await response.aclose()

    def _too_large(self, response: httpx.Response, size: str) -> ModelError:
        return ModelError(
            f"{self.provider} answered with a body of {size} bytes, over the limit of "
            f"max_response_bytes={self.max_response_bytes}; pass a larger max_response_bytes= "
            "to the model to accept it",
            status_code=response.status_code,
        )

    # -- shared decisions ---------------------------------------------------------------------

    def _settle(
        self, retries: int, path: str, attempt: httpx.Response | httpx.HTTPError
    ) -> httpx.Response | float:
        """What one attempt comes to: the successful response, or the seconds to wait before the
        next attempt; raises `ModelError` when the failure is final (no retry left, or none
        allowed)."""
        if isinstance(attempt, httpx.HTTPError):
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
    ) -> tuple[httpx.Request, float | None]:
        """One attempt's request, and its deadline when `total_timeout` is set.

        Every phase's timeout is capped at `total_timeout`, so that no single wait (for the
        headers, or for the next bytes) can outlast it; between reads, `_bounded` checks the
        deadline itself.
        """
        timeout = client.timeout
        deadline = None
        if self.total_timeout is not None:
            deadline = time.monotonic() + self.total_timeout
            timeout = httpx.Timeout(
                **{
                    phase: self.total_timeout if limit is None else min(limit, self.total_timeout)
                    for phase, limit in timeout.as_dict().items()
                }
            )
        request = client.build_request(
            "POST", self._url(path), content=content, headers=self._headers, timeout=timeout
        )
        return request, deadline

    def _bounded(self, response: httpx.Response, deadline: float | None) -> httpx.Response:
        """`response`, its body raising `ModelError` once `deadline` has passed."""
        if deadline is not None:
            response.stream = _DeadlineStream(response.stream, deadline, self._overtime)
        return response

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
        what = "stream was interrupted" if streaming else "request failed"
        detail = str(exc) or type(exc).__name__
        return ModelError(f"{self.provider} {what}: {type(exc).__name__}: {detail}")

    # -- the boundary -------------------------------------------------------------------------

    @contextmanager
    def redacting(self) -> Iterator[None]:
        """The boundary every `ModelError` leaves the provider through: secrets are replaced in
        its message, body and code (the error is changed in place, so its traceback and cause
        stay), then each text is cut to `_MAX_TEXT` characters, so a secret straddling the cut
        cannot leave half of itself behind. A cause whose own text holds a secret (a parse
        error quoting the body) is dropped from the chain: a logged traceback prints it."""
        try:
            yield
        except ModelError as error:
            error.message = self._scrub(error.message)
            error.args = (error.message,)
            error.body = self._redact(error.body)
            error.code = self._redact(error.code)
            if self._chain_mentions_secret(error):
                error.__cause__ = error.__context__ = None
                error.__suppress_context__ = True
            raise

    def _chain_mentions_secret(self, error: BaseException) -> bool:
        seen: set[int] = set()
        cause = error.__cause__ or error.__context__
        while cause is not None and id(cause) not in seen:
            seen.add(id(cause))
            text = f"{cause!s}{cause!r}"
            if any(needle in text for needle in self._needles):
                return True
            cause = cause.__cause__ or cause.__context__
        return False

    def _redact(self, value: Any) -> Any:
        """`value` with every text scrubbed, looking inside JSON containers, keys included."""
        if isinstance(value, str):
            return self._scrub(value)
        if isinstance(value, dict):
            return {self._redact(key): self._redact(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(self._redact(item) for item in value)
        return value

    def _scrub(self, text: str) -> str:
        """`text` with secrets replaced, then cut to `_MAX_TEXT` characters (in that order)."""
        shown = _MAX_TEXT + self._margin  # past this nothing is shown, so nothing can leak
        head = text[:shown]
        if self._needles and len(head) >= self._shortest:
            for needle in self._needles:
                if needle in head:
                    head = head.replace(needle, _REDACTED)
            while _REDACTED * 2 in head:
                head = head.replace(_REDACTED * 2, _REDACTED)
        more = len(head) - _MAX_TEXT + max(len(text) - shown, 0)
        return head if more <= 0 else f"{head[:_MAX_TEXT]}… [{more} more characters]"


def _parsed_body(response: httpx.Response) -> Any:
    """The body of a response read in full: its JSON when it parses, else its text."""
    try:
        return pydantic_core.from_json(response.content)
    except ValueError:
        return response.text


class _BoundedBody:
    """The chunks of one body read whole, up to the shell's `max_response_bytes`.

    A successful answer over the limit is refused (`ModelError`), before any byte is read when
    its `Content-Length` says so; an error answer keeps its first `max_response_bytes` bytes,
    enough to read the error (its status still decides retries and the error raised).
    """

    __slots__ = ("_chunks", "_limit", "_response", "_shell", "_size")

    def __init__(self, shell: HttpShell, response: httpx.Response) -> None:
        self._shell = shell
        self._response = response
        self._limit = shell.max_response_bytes
        self._chunks: list[bytes] = []
        self._size = 0
        declared = response.headers.get("content-length", "")
        if (
            response.is_success
            and declared.isdigit()
            and "content-encoding" not in response.headers
            and int(declared) > self._limit
        ):
            raise shell._too_large(response, declared)

    def full(self, chunk: bytes) -> bool:
        """Take one chunk; `True` once the limit is reached (stop reading)."""
        room = self._limit - self._size
        if len(chunk) <= room:
            self._chunks.append(chunk)
            self._size += len(chunk)
            return False
        if self._response.is_success:
            raise self._shell._too_large(self._response, f"more than {self._limit}")
        self._chunks.append(chunk[:room])
        self._size = self._limit
        return True

    def keep(self) -> None:
        """Make the chunks the response's content (what `read()` would have set)."""
        self._response._content = b"".join(self._chunks)


def _not_an_event_stream(response: httpx.Response) -> bool:
    """Whether a successful answer to a stream request is a whole JSON or HTML document (an error
    page, a gateway's message) instead of an event stream. Other types are decoded as events:
    some compatible servers label their streams loosely."""
    kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
    return kind in ("application/json", "text/html") or kind.endswith("+json")


class _DeadlineStream(httpx.SyncByteStream, httpx.AsyncByteStream):
    """A response body that raises once its call's deadline has passed: a server trickling
    keep-alives or single bytes never trips a read timeout, so the time is checked per read."""

    def __init__(
        self,
        stream: httpx.SyncByteStream | httpx.AsyncByteStream,
        deadline: float,
        overtime: Callable[[], ModelError],
    ) -> None:
        self._stream = stream
        self._deadline = deadline
        self._overtime = overtime

    def __iter__(self) -> Iterator[bytes]:
        assert isinstance(self._stream, httpx.SyncByteStream)
        for chunk in self._stream:
            if time.monotonic() > self._deadline:
                raise self._overtime()
            yield chunk

    async def __aiter__(self) -> AsyncIterator[bytes]:
        assert isinstance(self._stream, httpx.AsyncByteStream)
        async for chunk in self._stream:
            if time.monotonic() > self._deadline:
                raise self._overtime()
            yield chunk

    def close(self) -> None:
        if isinstance(self._stream, httpx.SyncByteStream):
            self._stream.close()

    async def aclose(self) -> None:
        if isinstance(self._stream, httpx.AsyncByteStream):
            await self._stream.aclose()
