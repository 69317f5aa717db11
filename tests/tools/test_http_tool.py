"""`HttpTool` against a real HTTP server on 127.0.0.1 (stdlib `http.server` in a thread)."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Generator, Iterator, Mapping
from typing import Annotated, Any, Literal
from urllib.parse import parse_qsl, urlencode, urlsplit

import httpx
import pytest
from http_server import Reply, Request, ScriptedServer
from pydantic import BaseModel, Field

from agentforge_typed import (
    HttpTool,
    ToolArgumentsError,
    ToolCall,
    ToolContext,
    ToolExecutionResult,
)
from agentforge_typed.tools._base import ToolLike
from agentforge_typed.tools._http import _keeps_origin

Mode = Literal["sync", "async"]
MODES: list[Mode] = ["sync", "async"]


def _redirect(request: Request) -> Reply:
    """A 302 to the query's `to`: a URL, or a path of this server's."""
    to = dict(parse_qsl(urlsplit(request.path).query))["to"]
    location = to if "://" in to else f"http://{request.headers['host']}{to}"
    return Reply(302, headers={"Location": location})


def _charset(request: Request) -> Reply:
    """`/charset/<status>/<charset>`: a body that is not text in that charset."""
    status, charset = urlsplit(request.path).path.removeprefix("/charset/").split("/")
    return Reply(int(status), b"\xff\xfeok", {"Content-Type": f"text/plain; charset={charset}"})


PLAIN = {"Content-Type": "text/plain"}


def serve() -> Iterator[ScriptedServer]:
    with ScriptedServer() as served:
        served.route("*", Reply(418, b"unexpected path", PLAIN))
        served.route("/items/*", lambda request: Reply.json({"raw_path": request.path}))
        served.route(
            "/search",
            lambda request: Reply.json({"query": parse_qsl(urlsplit(request.path).query)}),
        )
        served.route(
            "/orders",
            lambda request: Reply.json(
                {"created": request.json(), "auth": request.headers.get("Authorization")}, 201
            ),
        )
        served.route("/missing", Reply(404, b"no such item", PLAIN))
        served.route("/boom", Reply(500, b"E" * 2000, PLAIN))
        served.route("/slow", Reply(200, b"late", PLAIN, wait=3.0))
        served.route("/big", Reply(200, b"x" * 100_000, PLAIN))
        served.route("/big-json", Reply.json({"items": list(range(20_000))}))
        served.route(
            "/text", Reply(200, "héllo".encode(), {"Content-Type": "text/plain; charset=utf-8"})
        )
        served.route("/empty", Reply(204))
        served.route("/redirect", _redirect)
        served.route("/headers", lambda request: Reply.json({"headers": dict(request.headers)}))
        served.route("/charset/*", _charset)
        yield served


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    yield from serve()


@pytest.fixture(scope="module")
def other_server() -> Iterator[ScriptedServer]:
    yield from serve()


@pytest.fixture
def other(other_server: ScriptedServer) -> ScriptedServer:
    """A second origin: the same server on another port."""
    other_server.requests.clear()
    return other_server


@pytest.fixture
def srv(server: ScriptedServer) -> ScriptedServer:
    server.requests.clear()
    return server


def context(deps: Any = None) -> ToolContext[Any]:
    return ToolContext(deps=deps, tool_call_id="call_1", tool_name="t")


async def run(tool: HttpTool, arguments: str, mode: Mode, deps: Any = None) -> ToolExecutionResult:
    call = ToolCall(id="call_1", name=tool.name, arguments=arguments)
    if mode == "sync":
        return tool.execute(call, context(deps))
    return await tool.aexecute(call, context(deps))


ITEM_SCHEMA = {
    "type": "object",
    "properties": {"item_id": {"type": "string"}},
    "required": ["item_id"],
}


def item_tool(base: str) -> HttpTool:
    return HttpTool(
        "get_item", "Fetch an item.", url=base + "/items/{item_id}", parameters=ITEM_SCHEMA
    )


def test_satisfies_tool_like(srv: ScriptedServer) -> None:
    tool: ToolLike = item_tool(srv.url)
    assert tool.name == "get_item"
    # Keys the schema does not declare are refused, and the model is told so.
    assert tool.specification.parameters == {**ITEM_SCHEMA, "additionalProperties": False}
    assert (tool.max_retries, tool.sequential) == (2, False)


@pytest.mark.parametrize("mode", MODES)
async def test_get_with_query(srv: ScriptedServer, mode: Mode) -> None:
    tool = HttpTool(
        "search",
        url=srv.url + "/search",
        parameters={
            "type": "object",
            "properties": {
                "q": {"type": "string"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "limit": {"type": "integer"},
                "exact": {"type": "boolean"},
            },
            "required": ["q"],
        },
    )
    result = await run(
        tool, '{"q": "red shoes&x=1", "tags": ["a", "b"], "limit": 5, "exact": true}', mode
    )
    assert srv.requests[0].method == "GET"
    assert srv.requests[0].path == ("/search?q=red+shoes%26x%3D1&tags=a&tags=b&limit=5&exact=true")
    assert srv.requests[0].body == b""
    expected = {
        "query": [
            ["q", "red shoes&x=1"],
            ["tags", "a"],
            ["tags", "b"],
            ["limit", "5"],
            ["exact", "true"],
        ]
    }
    assert result.value == expected
    assert result.text == json.dumps(expected, separators=(",", ":"))
    assert not result.is_error


@pytest.mark.parametrize("mode", MODES)
async def test_post_with_json_body_headers_and_auth_from_context(
    srv: ScriptedServer, mode: Mode
) -> None:
    tool = HttpTool(
        "create_order",
        url=srv.url + "/orders",
        method="POST",
        parameters={
            "type": "object",
            "properties": {
                "item": {"type": "string"},
                "quantity": {"type": "integer"},
                "request_id": {"type": "string"},
            },
            "required": ["item", "quantity"],
        },
        headers={"request_id": "X-Request-Id"},
        default_headers=lambda ctx: {"Authorization": f"Bearer {ctx.deps['token']}"},
    )
    result = await run(
        tool, '{"item": "pen", "quantity": 3, "request_id": "r-1"}', mode, deps={"token": "s3cret"}
    )
    received = srv.requests[0]
    assert (received.method, received.path) == ("POST", "/orders")
    assert json.loads(received.body) == {"item": "pen", "quantity": 3}
    assert received.headers["Content-Type"] == "application/json"
    assert received.headers["X-Request-Id"] == "r-1"
    assert received.headers["Authorization"] == "Bearer s3cret"
    # The server echoed the token: the model reads it redacted.
    assert result.value == {"created": {"item": "pen", "quantity": 3}, "auth": "[redacted]"}


@pytest.mark.parametrize("mode", MODES)
async def test_path_parameter_is_percent_encoded(srv: ScriptedServer, mode: Mode) -> None:
    result = await run(item_tool(srv.url), '{"item_id": "a b/c?d#e%f"}', mode)
    assert srv.requests[0].path == "/items/a%20b%2Fc%3Fd%23e%25f"
    assert result.value == {"raw_path": "/items/a%20b%2Fc%3Fd%23e%25f"}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("item_id", "raw_path"),
    [
        ("http://evil.example/", "/items/http%3A%2F%2Fevil.example%2F"),
        ("@evil.example", "/items/%40evil.example"),
        ("../../admin", "/items/..%2F..%2Fadmin"),
        ("//evil.example/x", "/items/%2F%2Fevil.example%2Fx"),
    ],
)
async def test_arguments_cannot_change_host_or_path(
    srv: ScriptedServer, mode: Mode, item_id: str, raw_path: str
) -> None:
    result = await run(item_tool(srv.url), json.dumps({"item_id": item_id}), mode)
    # The request reached our server, on the templated path, with the value as one segment.
    assert [r.path for r in srv.requests] == [raw_path]
    assert srv.requests[0].headers["Host"] == srv.url.removeprefix("http://")
    assert result.value == {"raw_path": raw_path}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("item_id", ["..", ".", ""])
async def test_dot_and_empty_segments_are_refused(
    srv: ScriptedServer, mode: Mode, item_id: str
) -> None:
    result = await run(item_tool(srv.url), json.dumps({"item_id": item_id}), mode)
    assert result.error_kind == "arguments"
    assert f"- $.item_id: Invalid path segment (input: {json.dumps(item_id)})" in result.text
    assert srv.requests == []


def test_template_cannot_put_placeholders_outside_the_path() -> None:
    for url in (
        "https://{host}/items",
        "https://api.example.com{path}",
        "https://api.example.com/items?id={item_id}",
        "{base}/items",
        "ftp://api.example.com/x",
    ):
        with pytest.raises(ValueError, match="url"):
            HttpTool("t", url=url)


def test_headers_cannot_target_reserved_or_configured_headers() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    for header in ("Host", "authorization", "Cookie"):
        with pytest.raises(ValueError, match="cannot come from arguments"):
            HttpTool("t", url="https://x.example/", parameters=schema, headers={"a": header})
    with pytest.raises(ValueError, match="is configured"):
        HttpTool(
            "t",
            url="https://x.example/",
            parameters=schema,
            headers={"a": "X-Tenant"},
            default_headers={"x-tenant": "acme"},
        )


async def test_configured_headers_win_over_argument_headers(srv: ScriptedServer) -> None:
    tool = HttpTool(
        "get_item",
        url=srv.url + "/items/{item_id}",
        parameters={
            **ITEM_SCHEMA,
            "properties": {"item_id": {"type": "string"}, "t": {"type": "string"}},
        },
        headers={"t": "X-Tenant"},
        default_headers=lambda ctx: {"X-Tenant": "from-config"},
    )
    await run(tool, '{"item_id": "1", "t": "from-model"}', "async")
    assert srv.requests[0].headers["X-Tenant"] == "from-config"


def test_routing_mistakes_are_refused() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}
    with pytest.raises(ValueError, match="'c' is not a declared parameter"):
        HttpTool(
            "t",
            url="https://x.example/",
            parameters=schema,
            query=["c"],
            body="rest",
            method="POST",
        )
    with pytest.raises(ValueError, match="routed to both query and body"):
        HttpTool(
            "t", url="https://x.example/", parameters=schema, query=["a"], body=["a"], method="POST"
        )
    with pytest.raises(ValueError, match="'b' is not sent anywhere"):
        HttpTool(
            "t", url="https://x.example/", parameters=schema, query=["a"], body=[], method="POST"
        )
    with pytest.raises(ValueError, match="'item_id' is not a declared parameter"):
        HttpTool("t", url="https://x.example/{item_id}", parameters=schema)


@pytest.mark.parametrize("mode", MODES)
async def test_invalid_arguments_send_nothing(srv: ScriptedServer, mode: Mode) -> None:
    result = await run(item_tool(srv.url), '{"item_id": 5}', mode)
    assert result.error_kind == "arguments"
    assert result.text == (
        "Invalid arguments for tool `get_item`:\n"
        "- $.item_id: Input should be of type string (input: 5)\n"
        "Correct the arguments and call `get_item` again."
    )
    assert srv.requests == []


@pytest.mark.parametrize("mode", MODES)
async def test_404_is_an_error_result_with_status_and_body(srv: ScriptedServer, mode: Mode) -> None:
    tool = HttpTool("missing", url=srv.url + "/missing")
    result = await run(tool, "{}", mode)
    assert (result.is_error, result.error_kind) == (True, "execution")
    assert result.text == "HTTP 404 Not Found: no such item"
    assert isinstance(result.exception, httpx.HTTPStatusError)
    assert result.exception.response.status_code == 404
    assert result.repairs == ()


@pytest.mark.parametrize("mode", MODES)
async def test_500_body_is_truncated(srv: ScriptedServer, mode: Mode) -> None:
    result = await run(HttpTool("boom", url=srv.url + "/boom"), "", mode)
    assert result.error_kind == "execution"
    assert result.text == "HTTP 500 Internal Server Error: " + "E" * 500 + "…"
    assert result.repairs == ("empty arguments read as {}",)


@pytest.mark.parametrize("mode", MODES)
async def test_timeout(srv: ScriptedServer, mode: Mode) -> None:
    tool = HttpTool("slow", url=srv.url + "/slow", timeout=0.2)
    started = time.monotonic()
    result = await run(tool, "{}", mode)
    assert time.monotonic() - started < 2.5
    assert (result.error_kind, result.text) == ("timeout", "Request to `slow` timed out after 0.2s")
    assert isinstance(result.exception, httpx.TimeoutException)


@pytest.mark.parametrize("mode", MODES)
async def test_connection_error(mode: Mode) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = await run(HttpTool("down", url=f"http://127.0.0.1:{port}/x"), "{}", mode)
    assert result.error_kind == "execution"
    assert result.text.startswith("Request to `down` failed: ConnectError: ")
    assert isinstance(result.exception, httpx.ConnectError)


@pytest.mark.parametrize("mode", MODES)
async def test_a_body_over_max_response_bytes_is_read_that_far(
    srv: ScriptedServer, mode: Mode
) -> None:
    tool = HttpTool("big", url=srv.url + "/big", max_response_bytes=1000)
    result = await run(tool, "{}", mode)
    marker = "… [the response exceeds max_response_bytes=1000 bytes; the rest was not read]"
    assert (result.text, result.value) == ("x" * 1000 + marker, "x" * 1000)
    json_tool = HttpTool("big_json", url=srv.url + "/big-json", max_response_bytes=1000)
    result = await run(json_tool, "{}", mode)
    # Cut before its end, the body cannot be parsed: the model reads the start of it as text.
    assert result.text.startswith('{"items": [0, 1, 2,')
    assert result.text.endswith(marker)
    assert len(result.text) == 1000 + len(marker)


@pytest.mark.parametrize("mode", MODES)
async def test_a_text_over_max_result_chars_keeps_its_head_and_tail(
    srv: ScriptedServer, mode: Mode
) -> None:
    tool = HttpTool("big", url=srv.url + "/big", max_result_chars=1000)
    result = await run(tool, "{}", mode)
    assert result.text == "x" * 487 + "… [99027 characters cut] …" + "x" * 486
    assert result.value == result.full_text == "x" * 100_000
    json_tool = HttpTool("big_json", url=srv.url + "/big-json", max_result_chars=1000)
    result = await run(json_tool, "{}", mode)
    # Parsed whole: the program gets the value, the model the JSON's head and tail.
    assert result.value == {"items": list(range(20_000))}
    assert result.full_text == json.dumps(result.value, separators=(",", ":"))
    assert result.text.startswith('{"items":[0,1,2,')
    assert result.text.endswith(",19998,19999]}")
    assert len(result.text) <= 1000


@pytest.mark.parametrize("mode", MODES)
async def test_text_and_empty_responses(srv: ScriptedServer, mode: Mode) -> None:
    text = await run(HttpTool("text", url=srv.url + "/text"), "{}", mode)
    assert (text.text, text.value) == ("héllo", "héllo")
    empty = await run(HttpTool("empty", url=srv.url + "/empty", method="DELETE"), "{}", mode)
    assert (empty.text, empty.value, empty.is_error) == ("Success", None, False)
    assert srv.requests[-1].method == "DELETE"


class SearchArgs(BaseModel):
    q: str
    limit: int = 10


@pytest.mark.parametrize("mode", MODES)
async def test_args_model_is_validated_strictly(srv: ScriptedServer, mode: Mode) -> None:
    tool = HttpTool("search", url=srv.url + "/search", args_model=SearchArgs)
    # Unknown keys are refused although `SearchArgs` does not say so: the schema says it.
    assert tool.specification.parameters == {
        "title": "SearchArgs",
        "type": "object",
        "properties": {"q": {"type": "string"}, "limit": {"default": 10, "type": "integer"}},
        "required": ["q"],
        "additionalProperties": False,
    }
    result = await run(tool, '{"q": "pens"}', mode)
    assert srv.requests[0].path == "/search?q=pens&limit=10"
    invalid = await run(tool, '{"q": "pens", "limit": "5"}', mode)
    assert invalid.error_kind == "arguments"
    assert '- $.limit: Input should be a valid integer (input: "5")' in invalid.text
    assert len(srv.requests) == 1
    assert result.value == {"query": [["q", "pens"], ["limit", "10"]]}


class Window(BaseModel):
    start: int
    end: int


class RangeArgs(BaseModel):
    window: Window
    tags: list[Window] = []


@pytest.mark.parametrize("mode", MODES)
async def test_args_model_refuses_unknown_keys_at_every_depth(
    srv: ScriptedServer, mode: Mode
) -> None:
    tool = HttpTool("range", url=srv.url + "/search", method="POST", args_model=RangeArgs)
    nested = tool.specification.parameters["$defs"]["Window"]
    assert nested["additionalProperties"] is False
    sneaky = '{"window": {"start": 1, "end": 2, "admin": true}, "tags": [{"start": 0, "end": 1, "x": 0}]}'
    refused = await run(tool, sneaky, mode)
    assert refused.error_kind == "arguments"
    assert "- $.window.admin: Extra inputs are not permitted (input: true)" in refused.text
    assert "- $.tags[0].x: Extra inputs are not permitted (input: 0)" in refused.text
    assert srv.requests == []
    # The user's classes are left as they were.
    assert Window.model_validate({"start": 1, "end": 2, "admin": True}) == Window(start=1, end=2)
    dropping = HttpTool(
        "range",
        url=srv.url + "/search",
        method="POST",
        args_model=RangeArgs,
        extra_arguments="ignore",
    )
    dropped = await run(dropping, sneaky, mode)
    assert dropped.is_error is False
    assert json.loads(srv.requests[0].body) == {
        "window": {"start": 1, "end": 2},
        "tags": [{"start": 0, "end": 1}],
    }
    assert dropped.repairs == (
        "$.window.admin: unknown property dropped",
        "$.tags[0].x: unknown property dropped",
    )


async def test_injected_clients_are_used(srv: ScriptedServer) -> None:
    tool_args: dict[str, Any] = {"url": srv.url + "/items/{item_id}", "parameters": ITEM_SCHEMA}
    with httpx.Client(headers={"User-Agent": "sync-client"}) as client:
        tool = HttpTool("get_item", http_client=client, **tool_args)
        await run(tool, '{"item_id": "1"}', "sync")
    async with httpx.AsyncClient(headers={"User-Agent": "async-client"}) as aclient:
        tool = HttpTool("get_item", async_http_client=aclient, **tool_args)
        await run(tool, '{"item_id": "2"}', "async")
    assert [r.headers["User-Agent"] for r in srv.requests] == ["sync-client", "async-client"]


async def test_httpx_auth_is_applied(srv: ScriptedServer) -> None:
    tool = HttpTool("get_item", url=srv.url + "/items/{item_id}", auth=httpx.BasicAuth("u", "p"))
    await run(tool, '{"item_id": "1"}', "async")
    assert srv.requests[0].headers["Authorization"] == "Basic dTpw"


def test_default_schema_is_the_path_parameters() -> None:
    tool = HttpTool("get_item", url="https://api.example.com/items/{item_id}")
    assert tool.specification.parameters == {
        "type": "object",
        "properties": {"item_id": {"type": "string"}},
        "required": ["item_id"],
        "additionalProperties": False,
    }


# -- the template's fixed query ------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_the_templates_fixed_query_is_always_sent(srv: ScriptedServer, mode: Mode) -> None:
    tool = HttpTool(
        "search",
        url=srv.url + "/search?tenant=acme&api-version=2024-01-01",
        parameters={
            "type": "object",
            "properties": {"q": {"type": "string"}, "tags": {"type": "array"}},
        },
    )
    await run(tool, '{"q": "red shoes", "tags": ["a", "b"]}', mode)
    await run(tool, "{}", mode)
    assert [r.path for r in srv.requests] == [
        "/search?tenant=acme&api-version=2024-01-01&q=red+shoes&tags=a&tags=b",
        "/search?tenant=acme&api-version=2024-01-01",
    ]


def test_an_argument_cannot_override_the_fixed_query() -> None:
    url = "https://x.example/search?tenant=acme"
    schema = {"type": "object", "properties": {"tenant": {"type": "string"}}}
    with pytest.raises(ValueError, match="'tenant' would override the URL's query parameter"):
        HttpTool("t", url=url, parameters=schema)
    with pytest.raises(ValueError, match="'tenant' would override the URL's query parameter"):
        HttpTool("t", url=url, parameters=schema, query=["tenant"], method="POST")
    # In the body it is another thing.
    HttpTool("t", url=url, parameters=schema, method="POST")


@pytest.mark.parametrize("mode", MODES)
async def test_an_additional_argument_cannot_override_the_fixed_query(
    srv: ScriptedServer, mode: Mode
) -> None:
    tool = HttpTool(
        "search",
        url=srv.url + "/search?tenant=acme",
        parameters={"type": "object", "additionalProperties": {"type": "string"}},
        query="rest",
    )
    refused = await run(tool, '{"tenant": "evil", "q": "x"}', mode)
    assert refused.error_kind == "arguments"
    assert '- $.tenant: The tool fixes this query parameter (input: "evil")' in refused.text
    await run(tool, '{"q": "x"}', mode)
    assert [r.path for r in srv.requests] == ["/search?tenant=acme&q=x"]


# -- configured headers --------------------------------------------------------------------------


def recording_client(requests: list[httpx.Request]) -> httpx.Client:
    def handle(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        return httpx.Response(200, json={})

    return httpx.Client(transport=httpx.MockTransport(handle))


@pytest.mark.parametrize("configured_name", ["X-Tenant", "x-tenant", "X-TENANT"])
def test_a_callable_configured_header_is_never_duplicated_or_overridden(
    configured_name: str,
) -> None:
    requests: list[httpx.Request] = []
    tool = HttpTool(
        "t",
        url="https://x.example/",
        parameters={"type": "object", "properties": {"t": {"type": "string"}}},
        headers={"t": "X-Tenant"},
        default_headers=lambda ctx: {configured_name: "from-config"},
        http_client=recording_client(requests),
    )
    result = tool.execute(ToolCall(id="1", name="t", arguments='{"t": "from-model"}'), context())
    assert not result.is_error
    assert requests[0].headers.get_list("x-tenant") == ["from-config"]


def test_configured_headers_are_compared_case_insensitively_at_construction() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}
    with pytest.raises(ValueError, match="is configured"):
        HttpTool(
            "t",
            url="https://x.example/",
            parameters=schema,
            headers={"a": "X-TENANT"},
            default_headers={"x-Tenant": "acme"},
        )
    with pytest.raises(ValueError, match="header 'x-id' is the target of both 'a' and 'b'"):
        HttpTool(
            "t", url="https://x.example/", parameters=schema, headers={"a": "X-Id", "b": "x-id"}
        )
    for client in (httpx.Client(headers={"X-Api-Key": "k"}), None):
        aclient = httpx.AsyncClient(headers={"x-api-key": "k"}) if client is None else None
        with pytest.raises(ValueError, match="'X-API-KEY' is configured"):
            HttpTool(
                "t",
                url="https://x.example/",
                parameters=schema,
                headers={"a": "X-API-KEY"},
                http_client=client,
                async_http_client=aclient,
            )
    with pytest.raises(ValueError, match="not a valid header name"):
        HttpTool("t", url="https://x.example/", parameters=schema, headers={"a": "X Id"})
    # httpx's own defaults are not configuration: an argument may choose the `Accept` header.
    HttpTool(
        "t",
        url="https://x.example/",
        parameters=schema,
        headers={"a": "Accept"},
        http_client=httpx.Client(),
    )


# -- only declared arguments are sent ------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("method", ["GET", "POST"])
async def test_undeclared_arguments_are_an_arguments_error(
    srv: ScriptedServer, mode: Mode, method: str
) -> None:
    tool = HttpTool(
        "t",
        url=srv.url + ("/search" if method == "GET" else "/orders"),
        method=method,
        parameters={"type": "object", "properties": {"q": {"type": "string"}}},
    )
    result = await run(tool, '{"q": "x", "is_admin": true, "price": 0}', mode)
    assert result.error_kind == "arguments"
    assert result.text == (
        "Invalid arguments for tool `t`:\n"
        "- $.is_admin: Unexpected argument (input: true)\n"
        "- $.price: Unexpected argument (input: 0)\n"
        "Correct the arguments and call `t` again."
    )
    assert srv.requests == []


def test_a_schema_allowing_additional_properties_must_say_where_they_go() -> None:
    for schema in (
        {"type": "object", "additionalProperties": True},
        {"type": "object", "additionalProperties": {"type": "string"}},
        {"type": "object", "patternProperties": {"^x_": {"type": "string"}}},
    ):
        with pytest.raises(ValueError, match="allows arguments it does not declare"):
            HttpTool("t", url="https://x.example/", parameters=schema)


@pytest.mark.parametrize("mode", MODES)
async def test_additional_properties_go_where_rest_says(srv: ScriptedServer, mode: Mode) -> None:
    tool = HttpTool(
        "create_order",
        url=srv.url + "/orders",
        method="POST",
        parameters={
            "type": "object",
            "properties": {"item": {"type": "string"}, "tag": {"type": "string"}},
            "additionalProperties": {"type": "integer"},
        },
        query=["tag"],
        body="rest",
    )
    await run(tool, '{"item": "pen", "tag": "t", "quantity": 3}', mode)
    assert srv.requests[0].path == "/orders?tag=t"
    assert json.loads(srv.requests[0].body) == {"item": "pen", "quantity": 3}


# -- execute never raises ------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("value", ["café", "a\x00b", "a\x7fb", "line\nbreak", "\u2028"])
async def test_an_unsendable_configured_header_value_is_an_execution_error(
    srv: ScriptedServer, mode: Mode, value: str
) -> None:
    tool = HttpTool(
        "get_item",
        url=srv.url + "/items/{item_id}",
        default_headers=lambda ctx: {"Authorization": ctx.deps},
    )
    result = await run(tool, '{"item_id": "1"}', mode, deps=value)
    assert (result.is_error, result.error_kind) == (True, "execution")
    assert result.text == (
        "Tool `get_item` failed: the configured header 'Authorization' cannot be sent: "
        "a header value may hold only printable ASCII characters, spaces and tabs"
    )
    assert value not in result.text  # a configured value may be a secret
    assert srv.requests == []


@pytest.mark.parametrize("mode", MODES)
async def test_an_unsendable_configured_header_name_is_an_execution_error(
    srv: ScriptedServer, mode: Mode
) -> None:
    tool = HttpTool(
        "get_item", url=srv.url + "/items/{item_id}", default_headers=lambda ctx: {"X Bad": "1"}
    )
    result = await run(tool, '{"item_id": "1"}', mode)
    assert result.error_kind == "execution"
    assert "'X Bad' is not a valid header name" in result.text
    assert srv.requests == []


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("value", ["café", "a\x00b", "\t\x1b[31m"])
async def test_an_unsendable_argument_header_value_is_an_arguments_error(
    srv: ScriptedServer, mode: Mode, value: str
) -> None:
    tool = HttpTool(
        "t",
        url=srv.url + "/search",
        parameters={"type": "object", "properties": {"rid": {"type": "string"}}},
        headers={"rid": "X-Request-Id"},
    )
    result = await run(tool, json.dumps({"rid": value}), mode)
    assert result.error_kind == "arguments"
    assert (
        "- $.rid: A header value may hold only printable ASCII characters, spaces and tabs"
        in result.text
    )
    assert srv.requests == []


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("status", [200, 503])
@pytest.mark.parametrize("charset", ["x-no-such-charset", "base64", "rot13", "idna", "punycode"])
async def test_an_upstream_charset_that_cannot_decode_is_an_execution_error(
    srv: ScriptedServer, mode: Mode, status: int, charset: str
) -> None:
    tool = HttpTool("t", url=f"{srv.url}/charset/{status}/{charset}")
    result = await run(tool, "{}", mode)
    assert (result.is_error, result.error_kind) == (True, "execution")
    assert result.text == (
        f"Tool `t` failed: the response (HTTP {status}) declares charset {charset!r}, "
        "which Python cannot decode text with"
    )


@pytest.mark.parametrize("mode", MODES)
async def test_a_url_too_long_for_httpx_is_an_execution_error(
    srv: ScriptedServer, mode: Mode
) -> None:
    result = await run(item_tool(srv.url), json.dumps({"item_id": "a" * 70_000}), mode)
    assert (result.error_kind, result.text) == (
        "execution",
        "Tool `get_item` failed: InvalidURL: URL too long",
    )
    assert srv.requests == []


# -- regular expressions ---------------------------------------------------------------------------


def test_a_pattern_the_linear_engine_cannot_run_is_refused() -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string", "pattern": "^(?!admin)"}}}
    with pytest.raises(ValueError, match="cannot run on the linear-time regex engine"):
        HttpTool("search", url="https://x.example/search", parameters=schema)


@pytest.mark.parametrize("mode", MODES)
async def test_a_catastrophic_pattern_answers_at_once(srv: ScriptedServer, mode: Mode) -> None:
    tool = HttpTool(
        "search",
        url=srv.url + "/search",
        parameters={"type": "object", "properties": {"q": {"pattern": r"^(\w+\s?)*$"}}},
    )
    started = time.monotonic()
    result = await run(tool, json.dumps({"q": "a" * 30 + "!"}), mode)
    assert time.monotonic() - started < 1.0  # a backtracking engine takes minutes
    assert result.error_kind == "arguments"
    assert srv.requests == []


def order_tool(base: str, **options: Any) -> HttpTool:
    """POST /orders of an item with options, whose schema leaves `additionalProperties` out."""
    return HttpTool(
        "create_order",
        url=base + "/orders",
        method="POST",
        parameters={
            "type": "object",
            "properties": {
                "item": {"type": "string"},
                "options": {"type": "object", "properties": {"gift": {"type": "boolean"}}},
            },
        },
        **options,
    )


@pytest.mark.parametrize("mode", MODES)
async def test_extra_arguments_ignore_drops_undeclared_arguments(
    srv: ScriptedServer, mode: Mode
) -> None:
    tool = order_tool(srv.url, extra_arguments="ignore")
    result = await run(
        tool, '{"item": "pen", "price": 0, "options": {"gift": true, "discount": 100}}', mode
    )
    assert json.loads(srv.requests[0].body) == {"item": "pen", "options": {"gift": True}}
    assert sorted(result.repairs) == [
        "dropped unknown argument `options.discount`",
        "dropped unknown argument `price`",
    ]


@pytest.mark.parametrize("mode", MODES)
async def test_nested_undeclared_arguments_are_an_arguments_error(
    srv: ScriptedServer, mode: Mode
) -> None:
    result = await run(order_tool(srv.url), '{"options": {"gift": true, "discount": 100}}', mode)
    assert result.error_kind == "arguments"
    assert "- $.options.discount: Unexpected argument (input: 100)" in result.text
    assert srv.requests == []


@pytest.mark.parametrize("mode", MODES)
async def test_args_model_extra_arguments_ignore(srv: ScriptedServer, mode: Mode) -> None:
    tool = HttpTool(
        "search", url=srv.url + "/search", args_model=SearchArgs, extra_arguments="ignore"
    )
    result = await run(tool, '{"q": "pens", "admin": true}', mode)
    assert srv.requests[0].path == "/search?q=pens&limit=10"
    assert result.repairs == ("dropped unknown argument `admin`",)
    refused = await run(
        HttpTool("search", url=srv.url + "/search", args_model=SearchArgs),
        '{"q": "pens", "admin": true}',
        mode,
    )
    assert refused.error_kind == "arguments"
    assert len(srv.requests) == 1


def test_unknown_arguments_of_an_args_model_are_told_the_names_the_schema_offers() -> None:
    class Query(BaseModel):
        city: Annotated[str, Field(validation_alias="City")]

    weather = HttpTool("weather", url="http://127.0.0.1:9/weather", query="rest", args_model=Query)
    assert list(weather.specification.parameters["properties"]) == ["City"]
    with pytest.raises(ToolArgumentsError) as caught:
        weather.validate_arguments('{"city": "Oslo"}')
    messages = [error.message for error in caught.value.errors]
    assert "Unexpected argument; this tool takes: City" in messages


class KeyAuth(httpx.Auth):
    """An `auth` that sets a secret header of its own."""

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["X-Auth-Key"] = "auth-secret"
        yield request


SECRETS = {
    "x-api-key": "configured-secret",
    "x-auth-key": "auth-secret",
    "x-client-key": "client-secret",
    "cookie": "session=cookie-secret",
}


async def fetch(
    url: str,
    mode: Mode,
    arguments: str = "{}",
    *,
    query: list[str] | None = None,
    **client: Any,
) -> ToolExecutionResult:
    """Call a tool with configured headers of every kind, through an injected client."""
    schema = {"type": "object", "properties": {name: {"type": "string"} for name in query or []}}
    tool_args: dict[str, Any] = {
        "url": url,
        "parameters": schema,
        "query": query or [],
        "default_headers": {"X-Api-Key": "configured-secret"},
        "auth": KeyAuth(),
    }
    headers = {"X-Client-Key": "client-secret"}
    cookies = {"session": "cookie-secret"}
    if mode == "sync":
        with httpx.Client(headers=headers, cookies=cookies, **client) as sync_client:
            return await run(
                HttpTool("fetch", http_client=sync_client, **tool_args), arguments, mode
            )
    async with httpx.AsyncClient(headers=headers, cookies=cookies, **client) as async_client:
        tool = HttpTool("fetch", async_http_client=async_client, **tool_args)
        return await run(tool, arguments, mode)


def redirect_url(srv: ScriptedServer, to: str) -> str:
    return srv.url + "/redirect?" + urlencode({"to": to})


def lower(headers: Mapping[str, str]) -> dict[str, str]:
    return {name.lower(): value for name, value in headers.items()}


@pytest.mark.parametrize("mode", MODES)
async def test_a_redirect_to_another_origin_is_refused(
    srv: ScriptedServer, other: ScriptedServer, mode: Mode
) -> None:
    result = await fetch(redirect_url(srv, other.url + "/headers"), mode, follow_redirects=True)
    assert result.error_kind == "execution"
    assert (
        result.text == f"HTTP 302 Found, not followed: a redirect to another origin ({other.url})"
    )
    assert isinstance(result.exception, httpx.HTTPStatusError)
    assert other.requests == []  # neither the configured headers nor the request went there
    (first,) = srv.requests
    assert lower(first.headers).items() >= SECRETS.items()


@pytest.mark.parametrize("mode", MODES)
async def test_an_argument_cannot_steer_an_open_redirect_elsewhere(
    srv: ScriptedServer, other: ScriptedServer, mode: Mode
) -> None:
    # The template fixes scheme and host; an open redirect on the API must not undo that.
    arguments = json.dumps({"to": other.url.replace("http://", "http://u:p@") + "/headers"})
    result = await fetch(
        srv.url + "/redirect", mode, arguments, query=["to"], follow_redirects=True
    )
    assert (
        result.text == f"HTTP 302 Found, not followed: a redirect to another origin ({other.url})"
    )
    assert other.requests == []


@pytest.mark.parametrize("mode", MODES)
async def test_a_redirect_within_the_origin_is_followed_as_httpx_would(
    srv: ScriptedServer, mode: Mode
) -> None:
    result = await fetch(redirect_url(srv, "/headers"), mode, follow_redirects=True)
    assert not result.is_error, result.text
    first, followed = srv.requests
    assert lower(first.headers).items() >= SECRETS.items()
    assert lower(followed.headers).items() >= SECRETS.items()
    # The server echoed every header: the configured secrets reach the model redacted.
    shown = {k: "[redacted]" if k.lower() in SECRETS else v for k, v in followed.headers.items()}
    assert result.value == {"headers": shown}


@pytest.mark.parametrize("mode", MODES)
async def test_userinfo_in_a_redirect_is_not_sent_as_credentials(
    srv: ScriptedServer, mode: Mode
) -> None:
    target = srv.url.replace("http://", "http://attacker:chosen@") + "/headers"
    result = await fetch(redirect_url(srv, target), mode, follow_redirects=True)
    assert not result.is_error, result.text
    _, followed = srv.requests
    assert "authorization" not in lower(followed.headers)


@pytest.mark.parametrize("mode", MODES)
async def test_a_redirect_leaving_the_origin_later_in_the_chain_is_refused(
    srv: ScriptedServer, other: ScriptedServer, mode: Mode
) -> None:
    url = redirect_url(srv, "/redirect?" + urlencode({"to": other.url + "/headers"}))
    result = await fetch(url, mode, follow_redirects=True)
    assert (
        result.text == f"HTTP 302 Found, not followed: a redirect to another origin ({other.url})"
    )
    assert len(srv.requests) == 2 and other.requests == []


@pytest.mark.parametrize("mode", MODES)
async def test_redirects_follow_the_clients_settings(srv: ScriptedServer, mode: Mode) -> None:
    result = await fetch(redirect_url(srv, "/headers"), mode)
    assert (result.error_kind, result.text) == ("execution", "HTTP 302 Found")
    assert len(srv.requests) == 1

    srv.requests.clear()
    looping = srv.url + "/redirect?to=/redirect%3Fto%3D/redirect"
    result = await fetch(looping, mode, follow_redirects=True, max_redirects=1)
    assert result.error_kind == "execution"
    assert result.text == (
        "Request to `fetch` failed: TooManyRedirects: Exceeded maximum allowed redirects."
    )
    assert len(srv.requests) == 2


@pytest.mark.parametrize(
    ("source", "target", "keeps"),
    [
        ("http://a.test/x", "http://a.test:80/y", True),
        ("https://a.test/x", "https://a.test:443/y", True),
        ("http://a.test/x", "https://a.test/y", True),  # an upgrade, as httpx keeps Authorization
        ("http://a.test:8080/x", "https://a.test/y", False),
        ("https://a.test/x", "http://a.test/y", False),
        ("http://a.test/x", "http://a.test:8080/y", False),
        ("http://a.test/x", "http://b.a.test/y", False),
        ("http://a.test/x", "https://b.test/y", False),
    ],
)
def test_which_redirects_keep_the_origin(source: str, target: str, keeps: bool) -> None:
    assert _keeps_origin(httpx.URL(source), httpx.URL(target)) is keeps
