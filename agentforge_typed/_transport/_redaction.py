"""One redactor: secrets kept out of what leaves the package.

Every path that holds a secret — a provider's API key, an `HttpTool`'s configured headers and
URL, an MCP server's URL and headers, the key the CLI runs with — gives it to a `Redactor`, and
everything that leaves through that path goes through it: errors (message, body, code, the
exception chain), the text and value a model reads, what the CLI prints, and the log records of
the HTTP libraries, which quote what a server sent (a reason phrase, a URL, headers) and so what
it echoes. A secret is replaced whole, and so is every run of `FRAGMENT` of its characters, so
that a server or a library that shortens long values cannot leave most of a key behind.

What counts as a secret where no one names it: the value of a header or query parameter whose
name says so (`Authorization`, `X-Api-Key`, `api_key`, `access_token`…), a URL's password, and
a long random-looking URL path segment or query value (`looks_random`).
"""

from __future__ import annotations

import base64
import binascii
import logging
import re
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from urllib.parse import unquote, urlsplit

__all__ = [
    "FRAGMENT",
    "MAX_TEXT",
    "REDACTED",
    "Redactor",
    "StreamRedactor",
    "given_secrets",
    "header_secrets",
    "looks_random",
    "url_secrets",
]

REDACTED = "[redacted]"
MAX_TEXT = 2000
"""Characters `Redactor.scrub` keeps of a text (an error's message, a non-JSON body, each string
in a JSON body); the rest is replaced by a count."""
FRAGMENT = 12
"""A run of this many characters of a secret is redacted like the whole secret: libraries that
shorten long values (pydantic quoting an input, a server's `...`) must not leave most of a key."""
_PROBE = FRAGMENT // 2
"""Every run of `FRAGMENT` characters of a secret holds one of its pieces of this length that
start at a multiple of it: a text holding none of them holds no run, and is left as it is."""

_SECRET_WORDS = frozenset(
    {
        "apikey",
        "auth",
        "authorization",
        "cookie",
        "credential",
        "credentials",
        "key",
        "pass",
        "passwd",
        "password",
        "pwd",
        "secret",
        "session",
        "sig",
        "signature",
        "token",
    }
)
"""Words that make a header or query parameter a secret when its name holds one (`X-Api-Key`,
`access_token`, `apiKey`, `Proxy-Authorization`; not `author` or `keyword`)."""
_WORDS = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_RANDOM = re.compile(r"[A-Za-z0-9_\-]{24,}")
_HTTP_LOGGERS = (
    "agentforge_typed.mcp",
    "httpx",
    "httpcore.connection",
    "httpcore.http11",
    "httpcore.http2",
    "httpcore.proxy",
    "httpcore.socks",
    "httpx2",
    "httpcore2.connection",
    "httpcore2.http11",
    "httpcore2.http2",
    "httpcore2.proxy",
    "httpcore2.socks",
    "mcp.client.streamable_http",
    "mcp.client.sse",
    "mcp.client.auth.oauth2",
)
"""The loggers whose records quote what a server sent or where a request went: httpx logs each
answer's URL and status line (its reason phrase as the server wrote it), httpcore at DEBUG each
answer's headers; `httpx2`/`httpcore2` are the MCP SDK's, whose OAuth client logs a failed flow
with its traceback (an authorization server's answer quoted); the package's MCP warnings quote the
errors of a connection. A logger's filter sees only the records made on it, so each is named."""


class Redactor:
    """Replaces a set of secrets, and every run of `FRAGMENT` of their characters, in texts,
    JSON values, exceptions and (once `watch_logs` is called) the HTTP libraries' log records.

    Falsy when it has no secret: every method then returns its input as it is.
    """

    __slots__ = ("__weakref__", "_longest", "_needles", "_probes", "_shortest", "secrets")

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        whole = sorted({secret for secret in secrets if secret}, key=len, reverse=True)
        self.secrets: tuple[str, ...] = tuple(whole)
        """The secrets, longest first."""
        self._needles = (
            *whole,
            *dict.fromkeys(
                s[i : i + FRAGMENT] for s in whole for i in range(len(s) - FRAGMENT + 1)
            ),
        )
        """What is replaced: each secret, then every run of `FRAGMENT` of its characters."""
        self._probes = tuple(
            dict.fromkeys(
                piece
                for s in whole
                for piece in (
                    [s]
                    if len(s) < FRAGMENT
                    else [s[i : i + _PROBE] for i in range(0, len(s) - _PROBE + 1, _PROBE)]
                )
            )
        )
        self._shortest = min(map(len, self._needles), default=0)
        self._longest = max(map(len, whole), default=0)

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def __repr__(self) -> str:
        return f"Redactor({len(self.secrets)} secrets)"

    def with_secrets(self, more: Iterable[str | None]) -> Redactor:
        """A redactor of these secrets and `more` (this one when `more` adds none)."""
        added = {secret for secret in more if secret} - set(self.secrets)
        return Redactor((*self.secrets, *added)) if added else self

    @classmethod
    def joined(cls, redactors: Iterable[Redactor]) -> Redactor:
        """One redactor of the secrets of all `redactors`."""
        return cls(secret for redactor in redactors for secret in redactor.secrets)

    # -- texts and values ---------------------------------------------------------------------

    def replace(self, text: str) -> str:
        """`text` with each secret, and each run of `FRAGMENT` of its characters, replaced."""
        if not self._needles or len(text) < self._shortest:
            return text
        if not any(probe in text for probe in self._probes):
            return text  # the common case, at a sixth of the searches
        found: list[tuple[int, int]] = []
        for needle in self._needles:
            start = text.find(needle)
            while start >= 0:
                found.append((start, start + len(needle)))
                start = text.find(needle, start + 1)
        if not found:
            return text
        # Every occurrence found in the text as given, overlapping ones replaced as one: a run
        # replaced first cannot leave the rest of its secret too short to be found.
        found.sort()
        kept: list[str] = []
        shown = 0
        start, end = found[0]
        for next_start, next_end in found[1:]:
            if next_start < end:
                end = max(end, next_end)
                continue
            kept += (text[shown:start], REDACTED)
            shown, start, end = end, next_start, next_end
        kept += (text[shown:start], REDACTED, text[end:])
        return "".join(kept)

    def scrub(self, text: str) -> str:
        """`text` with secrets replaced, then cut to `MAX_TEXT` characters (in that order: a
        secret straddling the cut cannot leave half of itself behind)."""
        shown = MAX_TEXT + self._longest + FRAGMENT  # past this nothing is shown: nothing leaks
        head = self.replace(text[:shown])
        more = len(head) - MAX_TEXT + max(len(text) - shown, 0)
        return head if more <= 0 else f"{head[:MAX_TEXT]}… [{more} more characters]"

    def redact(self, value: Any) -> Any:
        """`value` with every text replaced (`replace`), looking inside JSON containers, keys
        included; other values as they are."""
        return _each_text(value, self.replace) if self._needles else value

    def scrub_value(self, value: Any) -> Any:
        """`redact`, with each text cut as `scrub` cuts it."""
        return _each_text(value, self.scrub)

    # -- exceptions ---------------------------------------------------------------------------

    def mentions(self, error: BaseException) -> bool:
        """Whether `error`'s own text, or that of an exception in its chain, holds a secret."""
        if not self._needles:
            return False
        seen: set[int] = set()
        cause: BaseException | None = error
        while cause is not None and id(cause) not in seen:
            seen.add(id(cause))
            text = f"{_text(cause)}{_text(cause, repr)}"
            if self.replace(text) != text:
                return True
            cause = cause.__cause__ or cause.__context__
        return False

    def clean(self, error: BaseException) -> BaseException:
        """`error`, its text arguments redacted in place, and its chain dropped when any of it
        holds a secret (a logged traceback prints the chain); returned for chaining."""
        if not self.mentions(error):
            return error
        error.args = tuple(self.scrub_value(arg) for arg in error.args)
        error.__cause__ = error.__context__ = None
        error.__suppress_context__ = True
        return error

    # -- streams and logs ---------------------------------------------------------------------

    def stream(self) -> StreamRedactor:
        """A redactor of one text that arrives in pieces (a streamed answer)."""
        return StreamRedactor(self)

    def watch_logs(self) -> None:
        """Redact these secrets from the HTTP libraries' log records for as long as this
        redactor lives (its owner keeps it)."""
        if self:
            _LOG_REDACTION.watch(self)

    @contextmanager
    def watching_logs(self) -> Iterator[None]:
        """Redact these secrets from the HTTP libraries' log records within the block (and
        after it, when they were watched before it)."""
        if not self or not _LOG_REDACTION.watch(self):
            yield
            return
        try:
            yield
        finally:
            _LOG_REDACTION.forget(self)

    def safe_cut(self, text: str, cut: int) -> int:
        """The greatest index at or before `cut` that no secret or run of one spans."""
        window = text[max(cut - self._longest + 1, 0) : cut + self._longest - 1]
        if not any(probe in window for probe in self._probes):
            return cut  # any secret or run of one spanning the cut would hold a probe
        moved = True
        while moved and cut > 0:
            moved = False
            for needle in self._needles:
                start = text.find(needle, max(cut - len(needle) + 1, 0), cut + len(needle) - 1)
                if 0 <= start < cut:
                    cut, moved = start, True
        return cut


class StreamRedactor:
    """Redacts one text given in pieces: the end of what it was given is held back until no
    secret can start there, so that a secret sent a few characters at a time (as a model's
    tokens arrive) is replaced whole."""

    __slots__ = ("_held", "_keep", "_redactor")

    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor
        self._held = ""
        self._keep = max(redactor._longest - 1, 0)

    def feed(self, text: str) -> str:
        """What may be shown of the text so far that was not shown yet."""
        if not self._keep:
            return text
        held = self._held + text
        cut = self._redactor.safe_cut(held, len(held) - self._keep)
        if cut <= 0:
            self._held = held
            return ""
        self._held = held[cut:]
        return self._redactor.replace(held[:cut])

    def end(self) -> str:
        """The rest, once the text is complete."""
        held, self._held = self._held, ""
        return self._redactor.replace(held)


NO_SECRETS = Redactor()
"""The redactor of a path that holds no secret."""


# -- what counts as a secret -------------------------------------------------------------------


def given_secrets(secrets: Iterable[str]) -> list[str]:
    """A `secrets=` option's values, checked: a lone string is refused (it is a collection of its
    characters: every `a` would be redacted), and so is a value that is not a string."""
    if isinstance(secrets, str):
        raise TypeError("secrets must be a collection of strings, not a str")
    given = list(secrets)
    for secret in given:
        if not isinstance(secret, str):
            raise TypeError(f"secrets must hold strings, not {type(secret).__name__}")
    return given


def looks_random(text: str) -> bool:
    """Whether `text` looks like a generated token: 24 characters or more of letters, digits,
    `-` and `_` (hex, base64url, a UUID), with letters and digits both."""
    return (
        _RANDOM.fullmatch(text) is not None
        and any(c.isdigit() for c in text)
        and any(c.isalpha() for c in text)
    )


def _names_a_secret(name: str) -> bool:
    return any(word.lower() in _SECRET_WORDS for word in _WORDS.findall(name))


def header_secrets(headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> list[str]:
    """The secrets among headers: the values of those whose name says so, and values that look
    random; of an `Authorization` value, its credentials alone too (and a Basic one's password,
    decoded), as a server may echo them without the scheme."""
    items = headers.items() if isinstance(headers, Mapping) else headers
    found: list[str] = []
    for name, value in items:
        if not isinstance(name, str) or not isinstance(value, str) or not value:
            continue
        if not (_names_a_secret(name) or looks_random(value)):
            continue
        found.append(value)
        scheme, _, credentials = value.strip().partition(" ")
        if credentials:
            found.append(credentials.strip())
            if scheme.lower() == "basic":
                found.extend(_basic_secrets(credentials.strip()))
    return found


def _basic_secrets(credentials: str) -> list[str]:
    try:
        decoded = base64.b64decode(credentials, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return []
    _, _, password = decoded.partition(":")
    return [decoded, password]


def url_secrets(url: str) -> list[str]:
    """The secrets in a URL: its password, the values of query parameters whose name says so or
    that look random, and path segments that look random; each as written and decoded."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return []
    found: list[str] = [] if password is None else [password]
    for pair in parts.query.split("&"):
        name, _, value = pair.partition("=")
        if value and (_names_a_secret(unquote(name)) or looks_random(unquote(value))):
            found.append(value)
    found += [segment for segment in parts.path.split("/") if looks_random(unquote(segment))]
    return [*found, *(unquote(secret) for secret in found)]


# -- logs --------------------------------------------------------------------------------------


class _LogRedaction(logging.Filter):
    """Scrubs the secrets of every watched redactor from the HTTP libraries' log records;
    attached to their loggers when a first redactor is watched."""

    def __init__(self) -> None:
        super().__init__()
        self._redactors: weakref.WeakSet[Redactor] = weakref.WeakSet()
        self._lock = threading.Lock()  # redactors are watched on any thread, and log on any

    def watch(self, redactor: Redactor) -> bool:
        """Watch `redactor`; whether it was not watched already."""
        with self._lock:
            for name in _HTTP_LOGGERS:
                logger = logging.getLogger(name)
                if self not in logger.filters:
                    logger.addFilter(self)
            added = redactor not in self._redactors
            self._redactors.add(redactor)
            return added

    def forget(self, redactor: Redactor) -> None:
        with self._lock:
            self._redactors.discard(redactor)

    def filter(self, record: logging.LogRecord) -> bool:
        with self._lock:
            redactors = list(self._redactors)
        if redactors:
            text = scrubbed = record.getMessage()
            for redactor in redactors:
                scrubbed = redactor.replace(scrubbed)
            if scrubbed != text:
                record.msg, record.args = scrubbed, None
            if record.exc_info and not record.exc_text:
                # What a formatter prints of the traceback: it uses `exc_text` once set.
                shown = logging.Formatter().formatException(record.exc_info)
                for redactor in redactors:
                    shown = redactor.replace(shown)
                record.exc_text = shown
        return True


_LOG_REDACTION = _LogRedaction()


def _each_text(value: Any, change: Callable[[str], str]) -> Any:
    """`value` with `change` applied to every text in it, JSON containers' keys included."""
    if isinstance(value, str):
        return change(value)
    if isinstance(value, dict):
        return {_each_text(key, change): _each_text(item, change) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_each_text(item, change) for item in value)
    return value


def _text(error: BaseException, show: Any = str) -> str:
    try:
        return str(show(error))
    except Exception:  # an exception whose __str__ or __repr__ raises shows nothing
        return ""
