"""Links in what tools return: which URLs a content part from a tool or an MCP server may carry
to the model's provider.

A part by URL is fetched by whoever the request goes to: a hosted API fetches from the internet,
but a self-hosted server (vLLM, llama.cpp, a gateway) fetches from its own network, where a link
to `169.254.169.254` or `localhost` reaches what the internet cannot (server-side request
forgery). So a part's URL from a tool is forwarded only as its source's `content_urls` allows:

- `"https"` (the default): an `https://` URL whose host is public: neither an address nor a name
  of a loopback, link-local, private, shared, reserved, multicast or unspecified address (IP
  literals in every form resolvers accept: `2130706433`, `0x7f.1`, `0177.0.0.1`, IPv4-mapped and
  6to4/NAT64 IPv6), not `localhost` or a name under it, not a name without a domain, and a name
  that resolves, within `RESOLVE_TIMEOUT` seconds, to public addresses only;
- `"http"`: the same, `http://` too;
- `"any"`: any URL, unchecked and unresolved, for a source you trust whose links point into your
  own network (or at a provider's file store, `gs://…`).

A `file:` URL is never forwarded, and a `data:` URL is not a link (it holds its bytes, which the
result budget counts). Anything else becomes a text part in the part's place saying what was
left out and why, also recorded on the result (`ToolExecutionResult.content_notes`).
`guard_content` (blocking) and `aguard_content` (async: the names are resolved off the event
loop) are the one check, used by every path that turns a tool's URL into a part.

What it cannot see: a server whose resolver answers differently from this process's (split DNS),
a name that changes its answer between the check and the fetch (DNS rebinding), and a public URL
that redirects into a private network. Where the model's server may fetch such links, run it
where it cannot reach what it must not.
"""

from __future__ import annotations

import concurrent.futures
import ipaddress
import re
import socket
import threading
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from .._content import BinaryContent, Content, TextContent
from .._sync import start_daemon_thread
from ._base import ContentURLs

__all__ = ["RESOLVE_TIMEOUT", "aguard_content", "guard_content"]

RESOLVE_TIMEOUT = 2.0
"""Seconds the names of one result's links may take to resolve, together; a name not resolved by
then is taken as unresolvable."""

MAX_LOOKUPS = 32
"""Name lookups in flight at once, in the whole process (each in a daemon thread, so that a
resolver that never answers cannot hold up exit); a link whose name finds no free slot is left
out as unresolvable."""

_LOOKUPS = threading.BoundedSemaphore(MAX_LOOKUPS)
_SCHEMES: dict[ContentURLs, tuple[str, ...]] = {"https": ("https",), "http": ("http", "https")}
_SHOWN_HOST = 100
"""The most characters of a host a note repeats."""
_UNSAFE = re.compile(r"[\x00-\x20\x7f\\]")
"""Characters URL parsers disagree on (whitespace, controls, backslashes): refused outright."""
_DECIMAL = re.compile(r"[0-9]+")
_OCTAL = re.compile(r"0[0-7]*")
_HEX = re.compile(r"0[xX][0-9a-fA-F]*")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")

_Address = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True, slots=True)
class _Lookup:
    """A link forwarded only if its host's name resolves to public addresses alone."""

    host: str
    shown: str


def guard_content(
    parts: Sequence[Content], policy: ContentURLs, limit: int | None = None
) -> tuple[tuple[Content, ...], tuple[str, ...]]:
    """`parts` with each link `policy` does not allow replaced by a note, and the notes; names are
    resolved here, blocking (at most `RESOLVE_TIMEOUT` seconds). Only the first `limit` parts are
    checked (the rest are past the result's part cap)."""
    screened = _screen(parts, policy, limit)
    if screened is None:
        return tuple(parts), ()
    lookups = _start(screened[1])
    concurrent.futures.wait([f for f in lookups.values() if f is not None], RESOLVE_TIMEOUT)
    return _apply(parts, screened[0], lookups)


async def aguard_content(
    parts: Sequence[Content], policy: ContentURLs, limit: int | None = None
) -> tuple[tuple[Content, ...], tuple[str, ...]]:
    """`guard_content` for async code: names are resolved off the event loop."""
    screened = _screen(parts, policy, limit)
    if screened is None:
        return tuple(parts), ()
    lookups = _start(screened[1])
    if any(f is not None for f in lookups.values()):
        import asyncio

        waiting = [asyncio.wrap_future(f) for f in lookups.values() if f is not None]
        await asyncio.wait(waiting, timeout=RESOLVE_TIMEOUT)
    return _apply(parts, screened[0], lookups)


_Verdicts = dict[int, "str | _Lookup"]


def _screen(
    parts: Sequence[Content], policy: ContentURLs, limit: int | None
) -> tuple[_Verdicts, set[str]] | None:
    """Per part by URL that is not plainly allowed, why it is refused or the lookup it waits on;
    the names to look up. `None` when every part may go as it is."""
    if policy == "any" and not any(_is_file_link(part) for part in parts):
        return None
    verdicts: _Verdicts = {}
    hosts: set[str] = set()
    for index, part in enumerate(parts[:limit]):
        if isinstance(part, TextContent) or part.url is None:
            continue
        verdict = _check(part.url, policy)
        if verdict is None:
            continue
        verdicts[index] = verdict
        if isinstance(verdict, _Lookup):
            hosts.add(verdict.host)
    return (verdicts, hosts) if verdicts else None


def _is_file_link(part: Content) -> bool:
    return isinstance(part, BinaryContent) and _scheme(part.url or "") == "file"


def _scheme(url: str) -> str:
    scheme, colon, _ = url.partition(":")
    return scheme.lower() if colon else ""


def _check(url: str, policy: ContentURLs) -> str | _Lookup | None:
    """`None`: `url` may go; a reason it may not; or the lookup that decides."""
    scheme = _scheme(url)
    if scheme == "data":
        return None
    if scheme == "file":
        return "a file: link is never forwarded"
    if policy == "any":
        return None
    allowed = _SCHEMES[policy]
    if scheme not in allowed:
        return f"only {' and '.join(f'{s}://' for s in allowed)} links from this tool are forwarded"
    if _UNSAFE.search(url):
        return "not a valid URL"
    from urllib.parse import urlsplit  # on first use: `import agentforge_typed` stays cheap

    try:
        split = urlsplit(url)
        split.port  # noqa: B018 - raises ValueError for a port that is not a number
        host = split.hostname
    except ValueError:
        return "not a valid URL"
    if not host:
        return "not a valid URL"
    if "@" in split.netloc:
        # Parsers disagree on where such a host starts: never guess which one the fetcher uses.
        return "a link with a user name in it is not forwarded"
    shown = host[:_SHOWN_HOST]
    if host.endswith("."):
        host = host[:-1]
    try:
        literal = _ip_literal(host)
        if literal is None:
            host = host.encode("idna").decode("ascii").lower()
            literal = _ip_literal(host)  # full-width dots spell an address too
    except (ValueError, UnicodeError):
        return f"its host {shown} is not a valid host"
    if literal is not None:
        kind = _not_public(literal)
        return None if kind is None else f"its host {shown} is {kind}"
    if host == "localhost" or host.endswith(".localhost"):
        return f"its host {shown} is a loopback name"
    if "." not in host:
        return f"its host {shown} is a name without a domain (resolved inside a local network)"
    return _Lookup(host, shown)


def _ip_literal(host: str) -> _Address | None:
    """The address `host` spells, in any form resolvers accept, or `None` for a name; raises
    `ValueError` for an address that is not valid (`1.2.3.4.5`, `0x1ffffffff`)."""
    if ":" in host:
        return ipaddress.IPv6Address(host.partition("%")[0])
    labels = host.split(".")
    if labels[-1] == "" and len(labels) > 1:
        labels.pop()
    # As the WHATWG URL standard (and `inet_aton`): a host whose last label is a number is an
    # IPv4 address, each label decimal, octal (`0…`) or hexadecimal (`0x…`), the last one
    # filling the bytes the others leave.
    if not (_DECIMAL.fullmatch(labels[-1]) or _HEX.fullmatch(labels[-1])):
        return None
    if len(labels) > 4:
        raise ValueError(host)
    numbers = [_number(label) for label in labels]
    if any(n > 255 for n in numbers[:-1]) or numbers[-1] >= 256 ** (5 - len(numbers)):
        raise ValueError(host)
    value = numbers[-1]
    for position, number in enumerate(numbers[:-1]):
        value += number << (8 * (3 - position))
    return ipaddress.IPv4Address(value)


def _number(label: str) -> int:
    if _HEX.fullmatch(label):
        return int(label[2:] or "0", 16)
    if _OCTAL.fullmatch(label):
        return int(label, 8)
    if _DECIMAL.fullmatch(label):
        return int(label)
    raise ValueError(label)


def _not_public(address: _Address) -> str | None:
    """What kind of address `address` is when it is not a public one, else `None`."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or address.sixtofour
        if embedded is None and (address in _NAT64 or address in _IPV4_COMPATIBLE):
            embedded = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if embedded is not None and int(embedded) > 1:
            kind = _not_public(embedded)
            if kind is not None:
                return kind
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_unspecified:
        return "an unspecified address"
    if address.is_multicast:
        return "a multicast address"
    if address.is_private:
        return "a private address"
    if address.is_reserved or not address.is_global:
        return "not a public address"
    return None


_Found = list[_Address] | str
"""A name's addresses, or why it has none."""


def _start(hosts: Collection[str]) -> dict[str, concurrent.futures.Future[_Found] | None]:
    """A lookup per name, each in a daemon thread (`None` where no slot was free)."""
    lookups: dict[str, concurrent.futures.Future[_Found] | None] = {}
    for host in hosts:
        if not _LOOKUPS.acquire(blocking=False):
            lookups[host] = None
            continue
        try:
            lookups[host] = start_daemon_thread(_lookup, (host,), {})
        except BaseException:  # no thread: its slot is free again
            _LOOKUPS.release()
            raise
    return lookups


def _lookup(host: str) -> _Found:
    """`host`'s addresses; never raises (an abandoned future's exception would be logged)."""
    try:
        found = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
        return [ipaddress.ip_address(str(entry[4][0]).partition("%")[0]) for entry in found]
    except (OSError, UnicodeError, ValueError):
        return "could not be resolved"
    finally:
        _LOOKUPS.release()


def _apply(
    parts: Sequence[Content],
    verdicts: _Verdicts,
    lookups: Mapping[str, concurrent.futures.Future[_Found] | None],
) -> tuple[tuple[Content, ...], tuple[str, ...]]:
    kept = list(parts)
    notes: list[str] = []
    for index, verdict in verdicts.items():
        reason = _resolved(verdict, lookups) if isinstance(verdict, _Lookup) else verdict
        if reason is None:
            continue
        part = parts[index]
        assert isinstance(part, BinaryContent)
        note = f"[{part.kind} by URL: left out: {reason}]"
        kept[index] = TextContent(text=note)
        notes.append(note)
    return tuple(kept), tuple(notes)


def _resolved(
    lookup: _Lookup, lookups: Mapping[str, concurrent.futures.Future[_Found] | None]
) -> str | None:
    future = lookups[lookup.host]
    if future is None:
        return f"its host {lookup.shown} could not be resolved (too many lookups at once)"
    if not future.done():
        return f"its host {lookup.shown} could not be resolved within {RESOLVE_TIMEOUT:g} s"
    found = future.result()
    if isinstance(found, str):
        return f"its host {lookup.shown} {found}"
    if not found:
        return f"its host {lookup.shown} could not be resolved"
    for address in found:
        kind = _not_public(address)
        if kind is not None:
            return f"its host {lookup.shown} resolves to {address}, {kind}"
    return None
