"""`HttpTool`: a tool backed by one HTTP endpoint.

The request is built from a fixed template — method, absolute URL with `{path}` parameters, and
which arguments go to the query string, the JSON body or headers — so the model fills in values
but never chooses where the request goes: path values are percent-encoded as single segments,
scheme and host come from the template, and credentials come from configuration or the
`ToolContext`, never from arguments. The request is prepared and the response interpreted by pure
functions shared by the sync (`execute`) and async (`aexecute`) shells.

Each call is one exchange under one deadline (`_exchange`: `timeout` covers connecting, the
headers, every redirect and the body), and everything it returns goes through the tool's
`Redactor`: the configured secrets (credential headers, `auth`, secret query parameters and path
segments of the URL, `secrets=`) never reach the model, an error, or httpx's log records.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import parse_qsl, quote, urlsplit

import httpx
import pydantic
import pydantic_core

from .._exceptions import ArgumentProblem
from .._messages import ToolCall
from .._records import ToolExecutionResult
from .._request import ToolSpecification
from .._transport._exchange import Body, Deadline, aread_body, bound, read_body
from .._transport._redaction import Redactor, given_secrets, header_secrets, url_secrets
from ._argument_errors import json_path
from ._arguments import ArgumentsValidator
from ._base import ApprovalPolicy, ConfiguredTool, ExtraArguments, ReturnBehavior, ToolContext
from ._budget import DEFAULT_MAX_RESULT_CHARS, check_max_result_chars, cut_result
from ._outcomes import (
    arguments_error_result,
    execution_error_result,
    failure_result,
    redacted_result,
)
from ._result_text import result_text
from ._schema_arguments import DecodedArguments, SchemaArguments
from ._schema_tool import valid_arguments
from ._signature import ToolJsonSchema, close_nested

__all__ = ["HeadersFactory", "HttpTool"]

HeadersFactory = Callable[[ToolContext[Any]], Mapping[str, str]]
"""Computes configured headers (e.g. `Authorization`) per call from the `ToolContext`."""

DEFAULT_MAX_RESPONSE_BYTES = 8 * 1024 * 1024
"""The most bytes of a response body read from the network (8 MiB); the rest is never read."""
ERROR_BODY_CHARS = 500
"""How much of a non-2xx response body the error result quotes."""

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_BODYLESS_METHODS = frozenset({"GET", "HEAD", "DELETE", "OPTIONS"})
# Headers that decide where a request goes or who sends it: never filled from model arguments.
_RESERVED_HEADERS = frozenset(
    {
        "authorization",
        "connection",
        "content-length",
        "content-type",
        "cookie",
        "host",
        "proxy-authorization",
        "transfer-encoding",
    }
)
# What httpx sends on its own: not configuration, so an argument may still choose `Accept`.
_HTTPX_DEFAULT_HEADERS = frozenset({"accept", "accept-encoding", "connection", "user-agent"})
_DEFAULT_PORTS = {"http": 80, "https": 443}
_NO_AUTH = httpx.Auth()  # sends each request as it is
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_UNSENDABLE_IN_HEADER_VALUE = re.compile(r"[^\t\x20-\x7e]")
_HEADER_VALUE_RULE = "a header value may hold only printable ASCII characters, spaces and tabs"


class HttpTool(ConfiguredTool):
    """A tool that calls one HTTP endpoint and returns the response as text.

    ```python
    get_item = HttpTool(
        "get_item",
        "Fetch an item by id.",
        url="https://api.example.com/items/{item_id}",
        parameters={
            "type": "object",
            "properties": {"item_id": {"type": "string"}, "fields": {"type": "string"}},
            "required": ["item_id"],
        },
        query=["fields"],
        default_headers=lambda ctx: {"Authorization": f"Bearer {ctx.deps.token}"},
    )
    ```

    Arguments are validated before any request is made (against `parameters` with `jsonschema`,
    or strictly with `args_model`). Each argument goes to exactly one place: a `{placeholder}` of
    the URL path, `query`, `headers`, or the JSON `body`; arguments not named anywhere go to the
    query string for GET/HEAD/DELETE/OPTIONS and to the body otherwise (or wherever `"rest"` says).
    Only the properties `parameters` declares are sent: any other key is an arguments error,
    unless the schema explicitly allows more (`additionalProperties`, `patternProperties`), and
    then `query="rest"` or `body="rest"` must say where they go. The URL's own query string is
    always sent, and no argument may set one of its parameters.

    A 2xx response becomes the result: JSON as compact JSON (the parsed value kept as `value`),
    anything else as text. At most `max_response_bytes` bytes of the body are read (the text
    then ends with a marker saying the rest was not read), and the text the model reads is cut
    to the result budget (`max_result_chars`). A non-2xx status, a connection failure or a
    timeout becomes an error result. `timeout` bounds the whole exchange: connecting, the
    headers, every redirect and the body.

    Secrets never reach the model: the values of configured headers that carry credentials
    (`Authorization`, `Cookie`, a name with `key`, `token`, `secret`… in it, or a random-looking
    value), what `auth` sends, the URL's password, its query parameters named so or
    random-looking, its random-looking path segments, and `secrets` are replaced by
    `[redacted]` in every result (text, value), error and exception, and in httpx's log records.

    Redirects are followed only when the injected client follows them (`follow_redirects=True`,
    up to its `max_redirects`), and only within the URL's origin (scheme, host and port; or an
    upgrade from `http` to `https` on the same host and default ports, as httpx allows for
    `Authorization`). A redirect to another origin is an error result: followed, it would carry
    the configured headers there, and let an open redirect on the API send the request wherever
    an argument says.

    Args:
        name: The tool name the model calls.
        description: What the tool does, for the model.
        url: Absolute `http(s)` URL; `{name}` placeholders are allowed in the path only.
        method: HTTP method.
        parameters: JSON Schema of the arguments. Default (without `args_model`): one required
            string per path placeholder and nothing else.
        args_model: A pydantic model of the arguments instead of `parameters` (strict validation).
        query: Arguments sent as query parameters (lists repeat the parameter), or `"rest"`.
        body: Arguments sent as the JSON object body, or `"rest"`.
        headers: Arguments sent as headers, `{argument: header_name}`. Reserved headers
            (`Authorization`, `Host`, `Cookie`, …) and configured ones (in `default_headers` or
            set on an injected client) cannot be targeted; names compare case-insensitively.
        default_headers: Headers from configuration added to every request — a mapping, or a
            callable computing them from the `ToolContext` (e.g. a token from `deps`). They
            replace any argument header of the same name.
        auth: An `httpx.Auth` applied to every request.
        http_client: Client for `execute`; default: a fresh client per call.
        async_http_client: Client for `aexecute`; default: a fresh client per call.
        timeout: Seconds the whole exchange may take — connecting, sending, the response's
            headers, every redirect and its body — and each of its phases: a server still
            sending (even a byte at a time) after it is a timeout.
        max_response_bytes: The most bytes of a response body read from the network (default
            8 MiB); a longer body is read that far and the text says the rest was not read.
        max_result_chars: The most characters of the result's text the model reads (a longer
            one keeps its head and tail around a marker); `None` (default): the service's
            budget, else 100,000.
        return_behavior: What the loop does with the result.
        max_retries: How many invalid-arguments attempts the loop tolerates.
        sequential: Never run this tool concurrently with other calls of its round.
        extra_arguments: `"forbid"` (default) reports arguments the schema does not declare;
            `"ignore"` drops them before the request is built, each drop recorded in `repairs`.
        requires_approval: Pause a `ToolService` run on its calls until a person decides
            (`True`, or a sync or async `(call, context) -> bool` deciding per call).
        secrets: Further values never to show (e.g. a token in the URL's path that does not
            look random), beside those found in the configuration.

    Raises:
        ValueError: On an inconsistent declaration: a placeholder outside the path, an argument
            routed twice or not declared, a reserved or configured header, an argument that
            would set a parameter of the URL's query, additional properties with no `"rest"`
            to go to, an invalid schema; or a `max_result_chars` under 100.
    """

    def __init__(
        self,
        name: str,
        description: str = "",
        *,
        url: str,
        method: str = "GET",
        parameters: dict[str, Any] | None = None,
        args_model: type[pydantic.BaseModel] | None = None,
        query: Sequence[str] | Literal["rest"] | None = None,
        body: Sequence[str] | Literal["rest"] | None = None,
        headers: Mapping[str, str] | None = None,
        default_headers: Mapping[str, str] | HeadersFactory | None = None,
        auth: httpx.Auth | None = None,
        http_client: httpx.Client | None = None,
        async_http_client: httpx.AsyncClient | None = None,
        timeout: float = 10.0,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        max_result_chars: int | None = None,
        return_behavior: ReturnBehavior = ReturnBehavior.TO_LLM,
        max_retries: int = 2,
        sequential: bool = False,
        extra_arguments: ExtraArguments = "forbid",
        requires_approval: ApprovalPolicy = False,
        secrets: Sequence[str] = (),
    ) -> None:
        self.method = method.upper()
        self.url = url
        self._path_parameters = _check_url_template(name, url)
        if parameters is not None and args_model is not None:
            raise ValueError(f"HttpTool {name!r}: pass `parameters` or `args_model`, not both")
        self._validator: SchemaArguments | _ModelArguments
        if args_model is not None:
            self._validator = _ModelArguments(args_model, extra_arguments)
        else:
            if parameters is None:
                parameters = _path_only_schema(self._path_parameters)
            self._validator = SchemaArguments(
                parameters, tool_name=name, extra_arguments=extra_arguments
            )
        # What is enforced: undeclared keys are refused where the schema leaves them out.
        parameters = self._validator.schema
        self._specification = ToolSpecification(
            name=name, description=description, parameters=parameters
        )
        self._routes = _Routes.build(
            name,
            declared=list(parameters.get("properties", {})),
            undeclared_allowed=_allows_undeclared(parameters),
            path=self._path_parameters,
            fixed_query=frozenset(key for key, _ in parse_qsl(urlsplit(url).query, True)),
            query=query,
            body=body,
            headers=dict(headers or {}),
            bodyless=self.method in _BODYLESS_METHODS,
        )
        configured = (
            {h.lower() for h in default_headers} if isinstance(default_headers, Mapping) else set()
        )
        for client in (http_client, async_http_client):
            if client is not None:
                configured |= {h.lower() for h in client.headers} - _HTTPX_DEFAULT_HEADERS
        clash = sorted(h for h in self._routes.headers.values() if h.lower() in configured)
        if clash:
            raise ValueError(f"HttpTool {name!r}: header {clash[0]!r} is configured")
        self.default_headers = default_headers
        self.auth = auth
        # Clients passed in keep their settings; their connections honour the call's deadline.
        self.http_client = None if http_client is None else bound(http_client)
        self.async_http_client = None if async_http_client is None else bound(async_http_client)
        self._redactor = Redactor(
            [
                *given_secrets(secrets),
                *url_secrets(url),
                *(header_secrets(default_headers) if isinstance(default_headers, Mapping) else ()),
                *_auth_secrets(auth),
                *(
                    secret
                    for client in (http_client, async_http_client)
                    if client is not None
                    for secret in (*header_secrets(client.headers), *_auth_secrets(client.auth))
                ),
            ]
        )
        """The secrets known from the configuration; a call adds those of its headers."""
        self._redactor.watch_logs()
        self.timeout = timeout
        if max_response_bytes < 1:
            raise ValueError(f"HttpTool {name!r}: max_response_bytes must be at least 1")
        self.max_response_bytes = max_response_bytes
        self.max_result_chars = check_max_result_chars(max_result_chars)
        """The tool's own result budget (`None`: the service's, else the default)."""
        self._max_result = (
            DEFAULT_MAX_RESULT_CHARS if max_result_chars is None else max_result_chars
        )
        self._return_behavior = return_behavior
        self._max_retries = max_retries
        self._sequential = sequential
        self.requires_approval = requires_approval

    def __repr__(self) -> str:
        return f"HttpTool({self.name!r}, {self.method} {self._redactor.replace(self.url)})"

    def validate_arguments(self, arguments: str | bytes) -> dict[str, Any]:
        """Decode and validate raw JSON arguments, sending nothing.

        Raises:
            ToolArgumentsError: Listing every problem (`path`, `message`, `input`).
        """
        return valid_arguments(self.name, self._validator.validate(arguments))

    def execute(self, call: ToolCall, context: ToolContext[Any]) -> ToolExecutionResult:
        """Validate, send the request, and convert the response; never raises for a failed call."""
        prepared = self._prepare(call, context)
        if isinstance(prepared, ToolExecutionResult):
            return prepared
        with self._exchange(prepared) as outcome:
            if self.http_client is not None:
                outcome.result = self._send(self.http_client, prepared)
            else:
                with bound(httpx.Client()) as client:
                    outcome.result = self._send(client, prepared)
        return redacted_result(outcome.result, prepared.redactor)

    async def aexecute(self, call: ToolCall, context: ToolContext[Any]) -> ToolExecutionResult:
        """Like `execute`, on an `httpx.AsyncClient`."""
        prepared = self._prepare(call, context)
        if isinstance(prepared, ToolExecutionResult):
            return prepared
        with self._exchange(prepared) as outcome:
            if self.async_http_client is not None:
                outcome.result = await self._asend(self.async_http_client, prepared)
            else:
                async with bound(httpx.AsyncClient()) as client:
                    outcome.result = await self._asend(client, prepared)
        return redacted_result(outcome.result, prepared.redactor)

    @contextmanager
    def _exchange(self, prepared: _Prepared) -> Iterator[_Outcome]:
        """Where one call's exchange runs: its secrets kept out of the HTTP libraries' logs, and
        whatever it raises turned into an error result."""
        outcome = _Outcome()
        with prepared.redactor.watching_logs():
            try:
                yield outcome
            except httpx.HTTPError as exc:
                outcome.result = self._transport_error(exc, prepared.repairs)
            except Exception as exc:  # e.g. a URL too long for httpx: a result, never a raise
                outcome.result = failure_result(self.name, exc, prepared.repairs)

    def _send(self, client: httpx.Client, prepared: _Prepared) -> ToolExecutionResult:
        deadline = Deadline(self.timeout, self._overtime)
        request = prepared.build(client, deadline)
        auth = self.auth or httpx.USE_CLIENT_DEFAULT
        response = client.send(request, auth=auth, stream=True, follow_redirects=False)
        prepared.sent(response.request)
        hops = 0
        while isinstance(redirect := _redirect(client, response), httpx.Request):
            response.close()
            _count_hop(client, redirect, hops)
            hops += 1
            deadline.check()
            # `auth` was applied to the first request, whose headers the redirect carries (as
            # httpx's own following does). Not `auth=None`: that would send userinfo in the
            # Location, the server's choice, as Basic credentials.
            response = client.send(redirect, auth=_NO_AUTH, stream=True, follow_redirects=False)
        body = read_body(deadline.watch(response), self._read_limit(response))
        return self._response_result(response, body, prepared.repairs, redirect)

    async def _asend(self, client: httpx.AsyncClient, prepared: _Prepared) -> ToolExecutionResult:
        deadline = Deadline(self.timeout, self._overtime)
        request = prepared.build(client, deadline)
        auth = self.auth or httpx.USE_CLIENT_DEFAULT
        response = await client.send(request, auth=auth, stream=True, follow_redirects=False)
        prepared.sent(response.request)
        hops = 0
        while isinstance(redirect := _redirect(client, response), httpx.Request):
            await response.aclose()
            _count_hop(client, redirect, hops)
            hops += 1
            deadline.check()
            response = await client.send(
                redirect, auth=_NO_AUTH, stream=True, follow_redirects=False
            )
        body = await aread_body(deadline.watch(response), self._read_limit(response))
        return self._response_result(response, body, prepared.repairs, redirect)

    def _overtime(self) -> httpx.TimeoutException:
        return httpx.ReadTimeout(f"the exchange took longer than {self.timeout:g}s")

    def _read_limit(self, response: httpx.Response) -> int:
        """The bytes of the body to read: `max_response_bytes`, or, for an error, enough for the
        characters its text quotes (in any UTF-8) and one more to know that more followed."""
        if response.is_success:
            return self.max_response_bytes
        return min(self.max_response_bytes, ERROR_BODY_CHARS * 4 + 1)

    def _prepare(
        self, call: ToolCall, context: ToolContext[Any]
    ) -> _Prepared | ToolExecutionResult:
        try:
            decoded = self._validator.validate(call.arguments)
        except BaseException as exc:  # an `args_model`'s own validator code raised
            return failure_result(self.name, exc)
        if decoded.arguments is None:
            return decoded.error_result(self.name)
        routed = self._routes.apply(self.url, decoded.arguments)
        if isinstance(routed, tuple):
            return arguments_error_result(self.name, routed, decoded.repairs)
        try:
            configured = self.default_headers
            if callable(configured):
                configured = configured(context)
            configured = dict(configured or {})
        except BaseException as exc:  # all but the uncontained: see `failure_result`
            return failure_result(self.name, exc, decoded.repairs)
        for name, value in configured.items():
            problem = _header_problem(name, value)
            if problem is not None:
                reason = f"the configured header {name!r} cannot be sent: {problem}"
                return execution_error_result(self.name, reason, repairs=decoded.repairs)
            # Set last, replacing an argument header of the same name in any case: no argument
            # sets, duplicates or overrides a configured header.
            routed.headers[name] = value
        redactor = self._redactor
        if callable(self.default_headers):
            redactor = redactor.with_secrets(header_secrets(configured))
        chosen = {h.lower() for h in self._routes.headers.values()} - {
            h.lower() for h in configured
        }
        return _Prepared(self.method, routed, decoded.repairs, redactor, frozenset(chosen))

    def _response_result(
        self,
        response: httpx.Response,
        body: Body,
        repairs: tuple[str, ...],
        refused: str | None,
    ) -> ToolExecutionResult:
        """The result of the final `response`; `refused` names the other origin of a redirect
        the client would have followed."""
        charset = response.charset_encoding or "utf-8"
        try:
            text = body.content.decode(charset, errors="replace")
        except (LookupError, ValueError) as exc:  # unknown, or not a text codec (`base64`)
            reason = (
                f"the response (HTTP {response.status_code}) declares charset {charset!r}, "
                "which Python cannot decode text with"
            )
            return execution_error_result(self.name, reason, exception=exc, repairs=repairs)
        if not response.is_success:
            quoted = text if len(text) <= ERROR_BODY_CHARS else text[:ERROR_BODY_CHARS] + "…"
            message = f"HTTP {response.status_code} {response.reason_phrase}"
            if refused is not None:
                message += f", not followed: a redirect to another origin ({refused})"
            error = httpx.HTTPStatusError(message, request=response.request, response=response)
            return ToolExecutionResult.error(
                f"{message}: {quoted}" if quoted else message,
                "execution",
                exception=error,
                repairs=repairs,
            )
        value: Any = text or None
        content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
        is_json = content_type == "application/json" or content_type.endswith("+json")
        if is_json and text and not body.truncated:
            try:
                value = pydantic_core.from_json(text)
            except ValueError:
                pass  # a server lying about its content type: keep the text
            else:
                text = result_text(value) if not isinstance(value, str) else text
        elif not text:
            text = result_text(None)
        if body.truncated:
            text += (
                f"… [the response exceeds max_response_bytes={self.max_response_bytes} bytes; "
                "the rest was not read]"
            )
        if len(text) > self._max_result:
            return cut_result(text, self._max_result, value, repairs)
        return ToolExecutionResult(text=text, value=value, repairs=repairs)

    def _transport_error(
        self, exc: httpx.HTTPError, repairs: tuple[str, ...]
    ) -> ToolExecutionResult:
        if isinstance(exc, httpx.TimeoutException):
            text = f"Request to `{self.name}` timed out after {self.timeout:g}s"
            return ToolExecutionResult.error(text, "timeout", exception=exc, repairs=repairs)
        text = f"Request to `{self.name}` failed: {type(exc).__name__}: {exc}"
        return ToolExecutionResult.error(text, "execution", exception=exc, repairs=repairs)


@dataclass
class _Routed:
    url: str
    params: list[tuple[str, str]]
    headers: httpx.Headers
    json: dict[str, Any] | None


@dataclass
class _Prepared:
    method: str
    routed: _Routed
    repairs: tuple[str, ...]
    redactor: Redactor
    """The tool's secrets and this call's."""
    chosen: frozenset[str]
    """The headers the model's arguments set (lower case): not secrets."""

    def build(self, client: httpx.Client | httpx.AsyncClient, deadline: Deadline) -> httpx.Request:
        return client.build_request(
            self.method,
            _with_query(self.routed.url, self.routed.params),
            headers=self.routed.headers,
            json=self.routed.json,
            timeout=deadline.timeout(httpx.Timeout(deadline.seconds)),
        )

    def sent(self, request: httpx.Request) -> None:
        """Add the secrets of the request as sent (what an `auth` flow added) to `redactor`."""
        sent = [(k, v) for k, v in request.headers.items() if k.lower() not in self.chosen]
        self.redactor = self.redactor.with_secrets(header_secrets(sent))


@dataclass
class _Outcome:
    result: ToolExecutionResult = dataclasses.field(init=False)


@dataclass(frozen=True)
class _Routes:
    """Where each argument goes, fixed at construction."""

    path: tuple[str, ...]
    query: tuple[str, ...]
    headers: Mapping[str, str]
    body: tuple[str, ...] | None
    query_rest: bool
    body_rest: bool
    declared: frozenset[str]
    undeclared_allowed: bool
    fixed_query: frozenset[str]

    @classmethod
    def build(
        cls,
        tool: str,
        *,
        declared: list[str],
        undeclared_allowed: bool,
        path: tuple[str, ...],
        fixed_query: frozenset[str],
        query: Sequence[str] | Literal["rest"] | None,
        body: Sequence[str] | Literal["rest"] | None,
        headers: dict[str, str],
        bodyless: bool,
    ) -> _Routes:
        if query == "rest" and body == "rest":
            raise ValueError(f"HttpTool {tool!r}: only one of `query` and `body` can be 'rest'")
        query_rest = query == "rest" or (query is None and body != "rest" and bodyless)
        body_rest = body == "rest" or (body is None and query != "rest" and not bodyless)
        query_names = () if query in (None, "rest") else tuple(query or ())
        body_names = () if body in (None, "rest") else tuple(body or ())
        seen: dict[str, str] = {}
        for where, names in (
            ("path", path),
            ("query", query_names),
            ("body", body_names),
            ("headers", tuple(headers)),
        ):
            for argument in names:
                if argument not in declared:
                    raise ValueError(
                        f"HttpTool {tool!r}: {where} argument {argument!r} is not a declared parameter"
                    )
                if argument in seen:
                    raise ValueError(
                        f"HttpTool {tool!r}: argument {argument!r} is routed to both "
                        f"{seen[argument]} and {where}"
                    )
                seen[argument] = where
        targeted: dict[str, str] = {}
        for argument, header in headers.items():
            if not _HEADER_NAME.fullmatch(header):
                raise ValueError(f"HttpTool {tool!r}: {header!r} is not a valid header name")
            if header.lower() in _RESERVED_HEADERS:
                raise ValueError(f"HttpTool {tool!r}: header {header!r} cannot come from arguments")
            if (other := targeted.setdefault(header.lower(), argument)) != argument:
                raise ValueError(
                    f"HttpTool {tool!r}: header {header!r} is the target of both "
                    f"{other!r} and {argument!r}"
                )
        if not (query_rest or body_rest):
            unrouted = [argument for argument in declared if argument not in seen]
            if unrouted:
                raise ValueError(
                    f"HttpTool {tool!r}: argument {unrouted[0]!r} is not sent anywhere; name it "
                    "in `query`, `body` or `headers`, or pass 'rest'"
                )
        if undeclared_allowed and "rest" not in (query, body):
            raise ValueError(
                f"HttpTool {tool!r}: the schema allows arguments it does not declare; pass "
                "query='rest' or body='rest' to say where they go, or forbid them "
                '("additionalProperties": false)'
            )
        to_query = [*query_names, *(a for a in declared if a not in seen and query_rest)]
        overriding = [argument for argument in to_query if argument in fixed_query]
        if overriding:
            raise ValueError(
                f"HttpTool {tool!r}: argument {overriding[0]!r} would override the URL's query "
                "parameter of that name"
            )
        sends_body = body_rest or bool(body_names)
        return cls(
            path=path,
            query=query_names,
            headers=headers,
            body=body_names if sends_body else None,
            query_rest=query_rest,
            body_rest=body_rest,
            declared=frozenset(declared),
            undeclared_allowed=undeclared_allowed,
            fixed_query=fixed_query,
        )

    def apply(
        self, template: str, arguments: dict[str, Any]
    ) -> _Routed | tuple[ArgumentProblem, ...]:
        """Fill the template from validated arguments, or report arguments that cannot be sent."""
        errors: list[ArgumentProblem] = []

        def segment(match: re.Match[str]) -> str:
            name = match.group(1)
            value = arguments.get(name)
            text = "" if value is None else _scalar_text(value)
            # `.`/`..` would be resolved away by URL normalization and an empty segment changes
            # the endpoint, so they are refused rather than sent somewhere else.
            if text in ("", ".", ".."):
                errors.append(ArgumentProblem(json_path([name]), "Invalid path segment", value))
            return quote(text, safe="")

        url = _PLACEHOLDER.sub(segment, template)
        for name, value in arguments.items():
            if name not in self.declared and not self.undeclared_allowed:
                errors.append(ArgumentProblem(json_path([name]), "Unexpected argument", value))
            elif name not in self.declared and self.query_rest and name in self.fixed_query:
                message = "The tool fixes this query parameter"
                errors.append(ArgumentProblem(json_path([name]), message, value))
        routed_elsewhere = {*self.path, *self.query, *self.headers, *(self.body or ())}
        rest = [name for name in arguments if name not in routed_elsewhere]
        params: list[tuple[str, str]] = []
        for name in [*self.query, *(rest if self.query_rest else ())]:
            value = arguments.get(name)
            items = value if isinstance(value, list) else [value]
            params.extend((name, _scalar_text(item)) for item in items if item is not None)
        headers = httpx.Headers()
        for name, header in self.headers.items():
            if (value := arguments.get(name)) is None:
                continue
            text = _scalar_text(value)
            if _UNSENDABLE_IN_HEADER_VALUE.search(text):
                message = _HEADER_VALUE_RULE[0].upper() + _HEADER_VALUE_RULE[1:]
                errors.append(ArgumentProblem(json_path([name]), message, value))
                continue
            headers[header] = text
        json: dict[str, Any] | None = None
        if self.body is not None:
            names = [*self.body, *(rest if self.body_rest else ())]
            json = {name: arguments[name] for name in names if name in arguments}
        if errors:
            return tuple(errors)
        return _Routed(url=url, params=params, headers=headers, json=json)


class _ModelArguments:
    """Strict pydantic validation of arguments declared by an `args_model` (as typed tools do)."""

    def __init__(self, model: type[pydantic.BaseModel], extra_arguments: ExtraArguments) -> None:
        # pydantic ignores unknown keys by default; as for `@tool` functions, they are refused
        # (or dropped and recorded, under "ignore") at every depth, never silently. A private
        # subclass is closed: the user's classes are left as they are.
        config = pydantic.ConfigDict(extra=model.model_config.get("extra") or "forbid")
        namespace = {"model_config": config, "__module__": model.__module__}
        model = type(model.__name__, (model,), namespace)
        close_nested(model)
        self.schema = model.model_json_schema(schema_generator=ToolJsonSchema)
        """The model's JSON Schema, closed where the validator refuses undeclared keys."""
        self._validator = ArgumentsValidator.of_model(
            model, strict=True, extra_arguments=extra_arguments
        )

    def validate(self, raw: str | bytes) -> DecodedArguments:
        outcome = self._validator.validate(raw)
        if outcome.arguments is None:
            return outcome
        arguments = outcome.arguments.model_dump(mode="json", by_alias=True)
        return DecodedArguments(arguments, repairs=outcome.repairs)


def _redirect(
    client: httpx.Client | httpx.AsyncClient, response: httpx.Response
) -> httpx.Request | str | None:
    """The request that follows `response`: httpx builds it (method, body, cookies: as when it
    follows redirects itself). `None` when `response` is the answer; the other origin, as
    `scheme://host[:port]`, for a redirect the client would follow but that leaves the origin."""
    following = response.next_request
    if following is None or not client.follow_redirects:
        return None
    if not _keeps_origin(response.request.url, following.url):
        return f"{following.url.scheme}://{following.url.netloc.decode('ascii')}"
    return following


def _count_hop(
    client: httpx.Client | httpx.AsyncClient, redirect: httpx.Request, followed: int
) -> None:
    if followed >= client.max_redirects:
        raise httpx.TooManyRedirects("Exceeded maximum allowed redirects.", request=redirect)


def _keeps_origin(source: httpx.URL, target: httpx.URL) -> bool:
    """Whether a redirect from `source` to `target` stays within the origin: the same scheme,
    host and port, or (httpx's rule for keeping `Authorization`) an upgrade to https of the same
    host on default ports."""

    def origin(url: httpx.URL) -> tuple[str, str, int | None]:
        return url.scheme, url.host, url.port or _DEFAULT_PORTS.get(url.scheme)

    if origin(source) == origin(target):
        return True
    return (
        source.host == target.host
        and origin(source) == ("http", source.host, 80)
        and origin(target) == ("https", target.host, 443)
    )


def _check_url_template(tool: str, url: str) -> tuple[str, ...]:
    """The template's placeholders, after checking that none can move scheme, host or query."""
    first = _PLACEHOLDER.search(url)
    fixed = url[: first.start()] if first else url
    parts = urlsplit(fixed)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"HttpTool {tool!r}: url must be an absolute http(s) URL, got {url!r}")
    if first and (not parts.path.startswith("/") or "?" in fixed or "#" in fixed):
        raise ValueError(
            f"HttpTool {tool!r}: url placeholders are only allowed in the path, got {url!r}"
        )
    outside = _PLACEHOLDER.sub("", url)
    if "{" in outside or "}" in outside:
        raise ValueError(f"HttpTool {tool!r}: malformed placeholder in {url!r}")
    return tuple(dict.fromkeys(_PLACEHOLDER.findall(url)))


def _allows_undeclared(schema: dict[str, Any]) -> bool:
    """Whether `schema` explicitly accepts keys its `properties` do not name (an absent
    `additionalProperties` does not count: such keys are refused, never sent)."""
    return (
        schema.get("additionalProperties", False) is not False
        or bool(schema.get("patternProperties"))
        or schema.get("unevaluatedProperties", False) is not False
    )


def _auth_secrets(auth: object) -> list[str]:
    """What an `httpx.Auth` holds that is secret (a `BasicAuth`'s header, a `DigestAuth`'s
    password, a custom one's `token`…), by the names of its attributes."""
    held = getattr(auth, "__dict__", {})
    return header_secrets(
        (name, value.decode(errors="replace") if isinstance(value, bytes) else value)
        for name, value in held.items()
    )


def _header_problem(name: object, value: object) -> str | None:
    """Why a configured header cannot be sent (without quoting its value: it may be a secret)."""
    if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
        return f"{name!r} is not a valid header name"
    if not isinstance(value, str):
        return f"its value is a {type(value).__name__}, not a str"
    if _UNSENDABLE_IN_HEADER_VALUE.search(value):
        return _HEADER_VALUE_RULE
    return None


def _with_query(url: str, params: list[tuple[str, str]]) -> httpx.URL:
    """`url` with `params` appended to its own query, which is kept as written (httpx's `params=`
    would replace it)."""
    parsed = httpx.URL(url)
    if not params:
        return parsed
    routed = str(httpx.QueryParams(tuple(params))).encode()
    return parsed.copy_with(query=parsed.query + b"&" + routed if parsed.query else routed)


def _path_only_schema(path: tuple[str, ...]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {name: {"type": "string"} for name in path},
        "required": list(path),
        "additionalProperties": False,
    }


def _scalar_text(value: Any) -> str:
    """A value as it appears in a URL or header: strings as is, anything else as JSON."""
    return value if isinstance(value, str) else pydantic_core.to_json(value).decode()
