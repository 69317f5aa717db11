"""Authorization for HTTP MCP servers: the tokens an `auth=` flow (the MCP SDK's OAuth
providers) obtains are secrets, added to the server's redactor as its token storage sees them,
so that they never show in its warnings, log records, errors or tools' results; a 2025-03-26
server's authorization server named by the issuer it gives (`accept_legacy_issuer`); and
`LocalRedirect`, the person's side of the authorization-code grant on their own machine."""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncGenerator, Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

__all__ = ["LocalRedirect", "accept_legacy_issuer", "watch_tokens"]

logger = logging.getLogger("agentforge_typed.mcp")

Found = Callable[[Iterable[str | None]], None]
"""Told of the secrets a storage holds: tokens, a client secret."""


def watch_tokens(auth: Any, found: Found) -> None:
    """Route `auth`'s token storage (an SDK `OAuthClientProvider`'s, or a subclass's) through
    one `_Watched`, and have `found` hear of every token stored or loaded from now on, and of
    those the flow holds already; a flow of another kind is left as it is (its secrets are the
    user's to name in `secrets=`).

    A provider shared by several servers is wrapped once: each server's `found` joins the
    wrapper's listeners (held weakly, each once), so every server learns every token whichever
    server's request obtained it, and using the provider again adds no wrapper."""
    context: Any = getattr(auth, "context", None)
    storage = getattr(context, "storage", None)
    if storage is None:
        return
    if not isinstance(storage, _Watched):
        storage = context.storage = _Watched(storage, context)
    storage.listen(found)


class _Watched:
    """A `TokenStorage` that tells its listeners of each secret passing through it.

    With a storage of this package (`MemoryTokens`, `StoreTokens`) it also keeps where the
    tokens came from, beside them: the SDK takes tokens it loads for valid until the server
    refuses them, then authorizes anew (a person's authorization too), since it has not yet
    discovered the authorization server whose token endpoint a refresh needs. Given back that
    discovery (for the same MCP server URL) and the seconds the token has left, a flow that
    loads an expired token refreshes it instead."""

    def __init__(self, storage: Any, context: Any = None) -> None:
        self._storage = storage
        self._context = context
        self._listeners: list[Callable[[], Found | None]] = []
        """Each server's `found`, held weakly (a server gone is dropped)."""
        self._last: dict[str, list[str | None]] = {}
        """The secrets of each kind it saw last (tokens, a client secret), for a listener that
        joins later."""

    def listen(self, found: Found) -> None:
        """Tell `found` of every secret from now on (once, however often it is given), and of
        those the flow holds already."""
        import weakref

        held: Callable[[], Found | None]
        if hasattr(found, "__self__"):
            held = weakref.WeakMethod(found)
        else:  # a plain function: it lives as long as the provider
            held = functools.partial(_same, found)
        self._listeners = [ref for ref in self._listeners if ref() not in (None, found)]
        self._listeners.append(held)
        context = self._context
        tokens = getattr(context, "current_tokens", None)
        info = getattr(context, "client_info", None)
        last = [secret for secrets in self._last.values() for secret in secrets]
        found([*last, *_secrets_of(tokens), getattr(info, "client_secret", None)])

    def _found(self, kind: str, secrets: list[str | None]) -> None:
        if not any(secrets):
            return
        self._last[kind] = secrets
        for ref in list(self._listeners):
            found = ref()
            if found is not None:
                found(secrets)

    async def get_tokens(self) -> Any:
        tokens = await self._storage.get_tokens()
        self._found("tokens", _secrets_of(tokens))
        recall = getattr(self._storage, "_recall_discovery", None)
        context = self._context
        if tokens is not None and recall is not None and context is not None:
            if context.oauth_metadata is None and _restore_discovery(context, await recall()):
                if tokens.expires_in is not None:
                    context.update_token_expiry(tokens)
        return tokens

    async def set_tokens(self, tokens: Any) -> None:
        self._found("tokens", _secrets_of(tokens))
        await self._storage.set_tokens(tokens)
        remember = getattr(self._storage, "_remember_discovery", None)
        if remember is not None and self._context is not None:
            await remember(_discovery(self._context))

    async def get_client_info(self) -> Any:
        info = await self._storage.get_client_info()
        self._found("client", [getattr(info, "client_secret", None)])
        return info

    async def set_client_info(self, client_info: Any) -> None:
        self._found("client", [getattr(client_info, "client_secret", None)])
        await self._storage.set_client_info(client_info)


def _discovery(context: Any) -> bytes | None:
    """What the flow discovered for its MCP server (its authorization server's metadata, the
    server's protected resource metadata), as a storage keeps it; `None` when it knows none."""
    import json

    metadata = getattr(context, "oauth_metadata", None)
    if metadata is None:
        return None
    resource = context.protected_resource_metadata
    form = {
        "server_url": context.server_url,
        "auth_server_url": context.auth_server_url,
        "oauth_metadata": metadata.model_dump(mode="json", exclude_none=True),
        "protected_resource_metadata": (
            None if resource is None else resource.model_dump(mode="json", exclude_none=True)
        ),
    }
    return json.dumps(form, separators=(",", ":")).encode()


def _restore_discovery(context: Any, form: bytes | None) -> bool:
    """Give `context` back what `_discovery` kept, if it was kept for its MCP server URL and
    still reads; whether it did."""
    import json

    from mcp.shared.auth import OAuthMetadata, ProtectedResourceMetadata
    from pydantic import ValidationError

    if form is None:
        return False
    try:
        kept = json.loads(form)
        if kept["server_url"] != context.server_url:
            return False
        auth_server_url = kept["auth_server_url"]
        if auth_server_url is not None and not isinstance(auth_server_url, str):
            raise ValueError("auth_server_url is not a URL")
        metadata = OAuthMetadata.model_validate(kept["oauth_metadata"])
        resource = kept["protected_resource_metadata"]
        resource = None if resource is None else ProtectedResourceMetadata.model_validate(resource)
    except (ValueError, TypeError, KeyError, ValidationError) as error:
        logger.warning(
            "the stored discovery of an MCP server's authorization does not read (%s); "
            "ignored: the flow discovers anew",
            type(error).__name__,
        )
        return False
    context.oauth_metadata, context.protected_resource_metadata = metadata, resource
    context.auth_server_url = auth_server_url
    return True


def _secrets_of(tokens: Any) -> list[str | None]:
    """An `OAuthToken`'s secrets (none for `None`)."""
    if tokens is None:
        return []
    return [getattr(tokens, "access_token", None), getattr(tokens, "refresh_token", None)]


def _same(found: Found) -> Found:
    return found


def accept_legacy_issuer(auth: Any) -> None:
    """Let `auth` (an SDK `OAuthClientProvider`, or a subclass) authorize with a 2025-03-26
    server whose authorization server names an issuer with a path on the server's own origin.

    A server of that revision publishes no protected resource metadata; its authorization
    server's metadata is at its origin's well-known URL (the revision's "authorization base
    URL": the MCP server's URL without its path), and the revision places the authorization
    server on that origin. Some name an issuer there with a path (`https://host/oauth`), which
    the SDK refuses: it expects the origin itself (RFC 8414 section 3.3, the issuer the
    metadata URL was built from). This accepts such an issuer on that path alone: no protected
    resource metadata was found (every well-known URL answered 4xx), the metadata came from the
    origin's well-known URL, and the issuer it names is on the same origin (scheme, host,
    port). Whatever names another origin, and every server that publishes protected resource
    metadata (the current revisions), meet the SDK's check unchanged.

    To know the issuer before the SDK checks it, the metadata is read once more, ahead of the
    SDK (one more request, on the legacy path only). A flow of another kind is left as it is.
    """
    context: Any = getattr(auth, "context", None)
    flow = getattr(auth, "async_auth_flow", None)
    expected = getattr(auth, "_expected_issuer", None)
    server_url = getattr(context, "server_url", None)
    if not (callable(flow) and callable(expected) and isinstance(server_url, str)):
        return
    if getattr(auth, "_legacy_issuer_accepted", False):
        return
    origin = _origin(server_url)
    found: list[str] = []
    """The issuer the origin's metadata names, once read ahead on the legacy path."""

    def legacy() -> bool:
        return context.auth_server_url is None and context.protected_resource_metadata is None

    def expected_issuer() -> str:
        issuer: str = found[0] if found and legacy() else expected()
        return issuer

    async def auth_flow(request: Any) -> AsyncGenerator[Any, Any]:
        import httpx2

        steps = flow(request)
        try:
            outgoing = await steps.__anext__()
            while True:
                response = yield outgoing
                if (
                    outgoing is not request
                    and outgoing.url.path == _ROOT_PRM
                    and _origin(str(outgoing.url)) == origin
                    and 400 <= response.status_code < 500
                    and legacy()
                ):
                    # The last place protected resource metadata could be: none, so the SDK
                    # goes on to the origin's authorization server metadata. Read it first.
                    metadata = yield httpx2.Request(
                        "GET", outgoing.url.join(_ROOT_ASM), headers={"Accept": "application/json"}
                    )
                    await metadata.aread()
                    found[:] = _issuer_on(origin, metadata)
                outgoing = await steps.asend(response)
        except StopAsyncIteration:
            return
        finally:
            await steps.aclose()

    auth._expected_issuer = expected_issuer
    auth.async_auth_flow = auth_flow
    auth._legacy_issuer_accepted = True


_ROOT_PRM = "/.well-known/oauth-protected-resource"
_ROOT_ASM = "/.well-known/oauth-authorization-server"
_MAX_METADATA = 64 * 1024
"""The most bytes of metadata parsed for its issuer (more: not a legacy issuer)."""


def noting_failures(auth: Any, failed: Callable[[BaseException], None]) -> Any:
    """`auth` as one server's HTTP client uses it, telling `failed` of each failure of its flow
    (one during a call ends the session's transport, and the call only sees the connection
    closed). The flow itself is left as it is: a provider shared by several servers tells each
    of them of its own failures only."""
    import httpx2

    if not isinstance(auth, httpx2.Auth):
        return auth
    return _noted()(auth, failed)


@functools.cache
def _noted() -> type[Any]:
    import httpx2

    class Noted(httpx2.Auth):
        def __init__(self, auth: Any, failed: Callable[[BaseException], None]) -> None:
            self._auth = auth
            self._failed = failed

        async def async_auth_flow(self, request: Any) -> AsyncGenerator[Any, Any]:
            steps = self._auth.async_auth_flow(request)
            try:
                outgoing = await steps.__anext__()
                while True:
                    response = yield outgoing
                    outgoing = await steps.asend(response)
            except StopAsyncIteration:
                return
            except Exception as exc:
                self._failed(exc)
                raise
            finally:
                await steps.aclose()

    return Noted


def _origin(url: str) -> tuple[str, str, int | None]:
    """A URL's scheme, host and port (the default port made explicit), as compared."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port or {"http": 80, "https": 443}.get(scheme)
    except ValueError:
        port = None
    return scheme, (parts.hostname or "").lower(), port


def _issuer_on(origin: tuple[str, str, int | None], response: Any) -> list[str]:
    """The issuer `response` (authorization server metadata) names, as the SDK renders it, when
    it is on `origin` with a path; nothing otherwise."""
    import json

    from pydantic import AnyHttpUrl, TypeAdapter, ValidationError

    if response.status_code != 200 or len(response.content) > _MAX_METADATA:
        return []
    try:
        issuer = json.loads(response.content).get("issuer")
        if not isinstance(issuer, str) or _origin(issuer) != origin:
            return []
        rendered = str(TypeAdapter(AnyHttpUrl).validate_python(issuer))
    except (ValueError, AttributeError, RecursionError, ValidationError):
        return []
    return [rendered] if urlsplit(rendered).path.strip("/") else []


class LocalRedirect:
    """The person's side of the OAuth authorization-code grant, for a program running on the
    person's machine: `open` shows the authorization URL (`show`, by default printed to
    stderr), and `callback` waits on `redirect_uri`, a port of 127.0.0.1, for the browser the
    authorization server sends back with the code. Give both to the MCP SDK's
    `OAuthClientProvider` (`redirect_handler=redirect.open, callback_handler=redirect.callback`)
    and `redirect.redirect_uri` to its client metadata.

    Bounded: the wait ends after `timeout` seconds (`TimeoutError`); a request line or header
    over 8 KiB, or a request that takes over 10 seconds to arrive, is dropped; a request to
    another path is answered 404 and the wait goes on; an `error` redirect (the person refused)
    raises `OAuthFlowError` with the server's `error` (cut to 200 characters).

    Args:
        port: The port to listen on (default 0: a free one, chosen now). It listens only
            from `open` to the end of `callback` (each authorization, a step-up's too).
        path: The redirect URI's path.
        show: Called with the authorization URL (e.g. `webbrowser.open`).
        timeout: Seconds `callback` waits for the redirect.
    """

    def __init__(
        self,
        port: int = 0,
        *,
        path: str = "/callback",
        show: Callable[[str], Any] | None = None,
        timeout: float = 300.0,
    ) -> None:
        import socket

        if not port:  # a free port, kept for every authorization (each listens anew)
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                port = probe.getsockname()[1]
        self.port = port
        self.redirect_uri = f"http://127.0.0.1:{port}{path}"
        """The URI to register: where the browser comes back."""
        self._path = path
        self._show = show or _print
        self.timeout = timeout
        self._server: Any = None
        self._answer: Any = None

    async def open(self, url: str) -> None:
        """Listen on the redirect URI, then show `url` (the SDK's `redirect_handler`)."""
        import asyncio

        if self._server is None:
            self._answer = asyncio.get_running_loop().create_future()
            self._server = await asyncio.start_server(
                self._serve, "127.0.0.1", self.port, limit=_MAX_LINE, reuse_address=True
            )
        shown = self._show(url)
        if asyncio.iscoroutine(shown):
            await shown

    async def callback(self) -> Any:
        """The code the redirect brought (the SDK's `callback_handler`): an
        `AuthorizationCodeResult`, its `state` and `iss` for the SDK to check."""
        import asyncio

        if self._server is None:
            raise RuntimeError("LocalRedirect.callback before open: no one was sent to authorize")
        try:
            return await asyncio.wait_for(asyncio.shield(self._answer), self.timeout)
        except asyncio.TimeoutError:
            raise TimeoutError(
                f"no authorization came back to {self.redirect_uri} within {self.timeout:g} seconds"
            ) from None
        finally:
            self._server.close()
            self._server = None

    async def _serve(self, reader: Any, writer: Any) -> None:
        import asyncio
        from urllib.parse import parse_qs, urlsplit

        try:
            request = await asyncio.wait_for(_read_request(reader), _REQUEST_TIMEOUT)
            target = urlsplit(request[1] if len(request) > 1 else "")
            query = {name: values[0] for name, values in parse_qs(target.query).items()}
            if target.path != self._path or not ({"code", "error"} & query.keys()):
                await _reply(writer, 404, "Not found.")
                return
            refused = "error" in query
            await _reply(writer, 200, "Refused." if refused else "Authorized: close this window.")
            if not self._answer.done():
                if refused:
                    self._answer.set_exception(_refusal(query["error"]))
                else:
                    self._answer.set_result(_code(query))
        except (OSError, ValueError, asyncio.TimeoutError):
            pass  # a request that is not one: dropped
        finally:
            writer.close()


_MAX_LINE = 8_192
"""The longest request line or header the redirect listener reads."""
_REQUEST_TIMEOUT = 10.0


def _print(url: str) -> None:
    import sys

    print(f"Open this URL to authorize: {url}", file=sys.stderr)


async def _read_request(reader: Any) -> list[str]:
    """The request line's words, its headers read past (each bounded by the reader's limit:
    longer is a `ValueError`)."""
    request = (await reader.readline()).decode("latin-1").split()
    while (await reader.readline()).strip():
        pass
    return list(request)


def _code(query: dict[str, str]) -> Any:
    from mcp.client.auth import AuthorizationCodeResult

    return AuthorizationCodeResult(
        code=query["code"], state=query.get("state"), iss=query.get("iss")
    )


def _refusal(error: str) -> Exception:
    from mcp.client.auth import OAuthFlowError

    return OAuthFlowError(f"the authorization was refused: {error[:200]}")


async def _reply(writer: Any, status: int, text: str) -> None:
    body = text.encode()
    head = f"HTTP/1.1 {status} {'OK' if status == 200 else 'Not Found'}\r\n"
    head += f"Content-Type: text/plain; charset=utf-8\r\nContent-Length: {len(body)}\r\n"
    writer.write(f"{head}Connection: close\r\n\r\n".encode() + body)
    await writer.drain()
