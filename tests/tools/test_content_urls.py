"""Links in what tools return (issue 40, finding 4: server-side request forgery through content).

A part by URL is fetched by the model's server: a self-hosted one (vLLM, llama.cpp) fetches from
its own network. A link from a tool or an MCP server is forwarded only as its source's
`content_urls` allows (`https://` to public hosts by default); anything else becomes a note the
model reads, recorded on the result. One check (`_content_urls`) serves every path: `@tool`
(blocking and async), `SchemaTool`, MCP (a server built with the official SDK, over stdio), and
so the loop: nothing the check refuses reaches a real OpenAI-compatible server's request.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from compatible_server import compatible_server
from dns_support import PUBLIC, resolving
from loop_drivers import DRIVERS, drive

from agentforge_typed import (
    AiMessage,
    ChatMessage,
    DocumentContent,
    FunctionModel,
    ImageContent,
    MCPServer,
    OpenAIChatModel,
    SchemaTool,
    TextContent,
    ToolCall,
    ToolResultMessage,
    ToolReturn,
    ToolService,
    ToolSpecification,
    tool,
)
from agentforge_typed.tools import ContentURLs
from agentforge_typed.tools import _content_urls as content_urls
from agentforge_typed.tools._base import ToolContext
from agentforge_typed.tools._content_urls import aguard_content, guard_content

pytest.importorskip("mcp")

SERVER = str(Path(__file__).parents[1] / "mcp_content_server.py")
sys.path.insert(0, str(Path(__file__).parents[1]))
from mcp_content_server import HOSTILE_LINKS, PUBLIC_LINKS  # noqa: E402

NAMES = {
    "cdn.example.com": PUBLIC,
    "rebound.example.com": "127.0.0.1",
    "v6.example.com": "::1",
    "metadata.example.com": "169.254.169.254",
}
"""What the test resolver answers (every other name goes to the real one)."""


@pytest.fixture(autouse=True)
def _names(monkeypatch: pytest.MonkeyPatch) -> None:
    resolving(monkeypatch, NAMES)


def checked(url: str, policy: ContentURLs = "https") -> str | None:
    """The note left in place of an image at `url`, or `None` when the link is forwarded."""
    part = ImageContent(url=url)
    parts, notes = guard_content([part], policy)
    if parts == (part,):
        assert notes == ()
        return None
    assert parts == (TextContent(text=notes[0]),)
    return notes[0]


REFUSED = {
    "http://169.254.169.254/latest/meta-data/": "only https:// links from this tool are forwarded",
    "ftp://cdn.example.com/a.png": "only https:// links from this tool are forwarded",
    "file:///etc/passwd": "a file: link is never forwarded",
    "FILE:///etc/passwd": "a file: link is never forwarded",
    "https://169.254.169.254/latest/": "its host 169.254.169.254 is a link-local address",
    "https://127.0.0.1:8080/a.png": "its host 127.0.0.1 is a loopback address",
    "https://2130706433/a.png": "its host 2130706433 is a loopback address",
    "https://0x7f.1/a.png": "its host 0x7f.1 is a loopback address",
    "https://0x7F000001/a.png": "its host 0x7f000001 is a loopback address",
    "https://0177.0.0.1/a.png": "its host 0177.0.0.1 is a loopback address",
    "https://127.1/a.png": "its host 127.1 is a loopback address",
    "https://127.0.0.1./a.png": "its host 127.0.0.1. is a loopback address",
    "https://[::ffff:127.0.0.1]/a.png": "its host ::ffff:127.0.0.1 is a loopback address",
    "https://[::ffff:7f00:1]/a.png": "its host ::ffff:7f00:1 is a loopback address",
    "https://[::1]/a.png": "its host ::1 is a loopback address",
    "https://[fe80::1%25eth0]/a.png": "its host fe80::1%25eth0 is a link-local address",
    "https://[fd00::1]/a.png": "its host fd00::1 is a private address",
    "https://[2002:a00:1::]/a.png": "its host 2002:a00:1:: is a private address",
    "https://[64:ff9b::a9fe:a9fe]/a.png": "its host 64:ff9b::a9fe:a9fe is a link-local address",
    "https://10.0.0.5/a.png": "its host 10.0.0.5 is a private address",
    "https://172.16.0.1/a.png": "its host 172.16.0.1 is a private address",
    "https://192.168.1.1/a.png": "its host 192.168.1.1 is a private address",
    "https://100.64.0.1/a.png": "its host 100.64.0.1 is not a public address",
    "https://0.0.0.0/a.png": "its host 0.0.0.0 is an unspecified address",
    "https://224.0.0.1/a.png": "its host 224.0.0.1 is a multicast address",
    "https://localhost/a.png": "its host localhost is a loopback name",
    "https://LOCALHOST./a.png": "its host localhost. is a loopback name",
    "https://api.localhost/a.png": "its host api.localhost is a loopback name",
    "https://127\u30020\u30020\u30021/a.png": "its host 127\u30020\u30020\u30021 is a loopback address",
    "https://intranet/a.png": "its host intranet is a name without a domain (resolved inside "
    "a local network)",
    "https://user@cdn.example.com/a.png": "a link with a user name in it is not forwarded",
    "https://cdn.example.com\\@127.0.0.1/a.png": "not a valid URL",
    "https://cdn.example.com /a.png": "not a valid URL",
    "https://cdn.example.com:99999/a.png": "not a valid URL",
    "https://[zz]/a.png": "not a valid URL",
    "https://1.2.3.4.5/a.png": "its host 1.2.3.4.5 is not a valid host",
    "https://256.1.1.1/a.png": "its host 256.1.1.1 is not a valid host",
    "https://rebound.example.com/a.png": "its host rebound.example.com resolves to 127.0.0.1, a "
    "loopback address",
    "https://v6.example.com/a.png": "its host v6.example.com resolves to ::1, a loopback address",
    "https://metadata.example.com/a.png": "its host metadata.example.com resolves to "
    "169.254.169.254, a link-local address",
    "https://nowhere.invalid/a.png": "its host nowhere.invalid could not be resolved",
}


@pytest.mark.parametrize("url", sorted(REFUSED))
def test_a_link_to_a_host_that_is_not_public_is_left_out_with_a_note(url: str) -> None:
    assert checked(url) == f"[image by URL: left out: {REFUSED[url]}]"


FORWARDED = (
    "https://cdn.example.com/a.png",
    "https://CDN.example.com./a.png",
    f"https://{PUBLIC}/a.png",
    "https://[2606:4700:4700::1111]/a.png",
    "data:image/png;base64,iVBORw0KGgo=",
    "data:image/svg+xml,%3Csvg%3E",
)


@pytest.mark.parametrize("url", FORWARDED)
def test_a_link_to_a_public_host_and_a_data_url_go_as_they_are(url: str) -> None:
    assert checked(url) is None


def test_http_goes_where_the_source_allows_it_and_any_trusts_every_link_but_file() -> None:
    assert checked("http://cdn.example.com/a.png", "http") is None
    assert checked("http://127.0.0.1/a.png", "http") == (
        "[image by URL: left out: its host 127.0.0.1 is a loopback address]"
    )
    assert checked("ftp://cdn.example.com/a.png", "http") == (
        "[image by URL: left out: only http:// and https:// links from this tool are forwarded]"
    )
    for trusted in ("http://127.0.0.1:8000/a.png", "gs://bucket/a.png", "https://intranet/a"):
        assert checked(trusted, "any") is None
    assert checked("file:///srv/a.png", "any") == (
        "[image by URL: left out: a file: link is never forwarded]"
    )


def test_a_name_that_takes_too_long_to_resolve_is_left_out_in_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    resolving(monkeypatch, {**NAMES, "slow.example.com": 3.0})
    monkeypatch.setattr(content_urls, "RESOLVE_TIMEOUT", 0.2)
    started = time.monotonic()
    assert checked("https://slow.example.com/a.png") == (
        "[image by URL: left out: its host slow.example.com could not be resolved within 0.2 s]"
    )
    assert time.monotonic() - started < 1.5


async def test_names_resolve_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """While a link's name resolves (0.5 s here), the event loop keeps running other tasks."""
    resolving(monkeypatch, {**NAMES, "slow.example.com": 0.5})
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticker = asyncio.ensure_future(tick())
    try:
        _, notes = await aguard_content([ImageContent(url="https://slow.example.com/a")], "https")
    finally:
        ticker.cancel()
    assert notes == ("[image by URL: left out: its host slow.example.com could not be resolved]",)
    assert ticks >= 20


def test_only_the_parts_within_the_part_cap_are_checked() -> None:
    """Past `limit` parts nothing is resolved: the budget leaves those out anyway."""
    parts = [ImageContent(url=f"https://host{n}.invalid/a.png") for n in range(3)]
    kept, notes = guard_content(parts, "https", limit=1)
    assert kept[1:] == tuple(parts[1:])
    assert notes == ("[image by URL: left out: its host host0.invalid could not be resolved]",)


# -- every path that turns a tool's link into a part ---------------------------------------------

HOSTILE = "https://metadata.example.com/latest/meta-data/"
NOTE = (
    "[image by URL: left out: its host metadata.example.com resolves to 169.254.169.254, a "
    "link-local address]"
)
CONTEXT: ToolContext[None] = ToolContext(None, "c1", "t")


def call(name: str) -> ToolCall:
    return ToolCall(id="c1", name=name, arguments="{}")


@tool
def peek() -> ToolReturn[str]:
    """A page and what it links to."""
    return ToolReturn("page", ["Links:", ImageContent(url=HOSTILE)])


@tool(content_urls="any")
def trusted_peek() -> ImageContent:
    """A link into our own network."""
    return ImageContent(url="http://10.0.0.5/chart.png")


async def test_a_typed_tool_checks_its_links_blocking_and_async() -> None:
    for result in (peek.execute(call("peek")), await peek.aexecute(call("peek"))):
        assert result.content == (
            TextContent(text="page"),
            TextContent(text="Links:"),
            TextContent(text=NOTE),
        )
        assert result.content_notes == (NOTE,)
        assert result.text == f"page\nLinks:\n{NOTE}"
        assert result.value == "page"
    forwarded = trusted_peek.execute(call("trusted_peek"))
    assert forwarded.content == (ImageContent(url="http://10.0.0.5/chart.png"),)
    assert forwarded.content_notes == ()


async def test_a_schema_tool_checks_its_links_blocking_and_async() -> None:
    spec = ToolSpecification(name="t", description="", parameters={"type": "object"})
    hostile = SchemaTool(spec, lambda arguments: [DocumentContent(url=HOSTILE)])
    note = NOTE.replace("[image", "[document")
    for result in (hostile.execute(call("t"), CONTEXT), await hostile.aexecute(call("t"), CONTEXT)):
        assert (result.content, result.content_notes) == ((TextContent(text=note),), (note,))
    trusting = SchemaTool(spec, lambda _: [DocumentContent(url=HOSTILE)], content_urls="any")
    assert trusting.execute(call("t"), CONTEXT).content == (DocumentContent(url=HOSTILE),)


def test_an_option_that_is_not_a_policy_is_refused() -> None:
    def page() -> None: ...

    with pytest.raises(
        ValueError, match="content_urls must be 'https', 'http' or 'any', got 'all'"
    ):
        tool(content_urls="all")(page)  # type: ignore[call-overload]
    spec = ToolSpecification(name="t", description="", parameters={"type": "object"})
    with pytest.raises(ValueError, match="content_urls must be"):
        SchemaTool(spec, lambda _: None, content_urls="public")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="content_urls must be"):
        MCPServer.stdio(sys.executable, [SERVER], content_urls=True)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def hostile_server() -> Iterator[MCPServer]:
    with MCPServer.stdio(sys.executable, [SERVER]) as server:
        yield server


def run(server: MCPServer, name: str) -> Any:
    (found,) = [t for t in server.tools() if t.name == name]
    return found.execute(call(name), ToolContext(None, "c1", name))


def test_an_mcp_servers_links_to_private_hosts_become_notes(hostile_server: MCPServer) -> None:
    result = run(hostile_server, "links")
    *hostile, chart, pdf, passwd = result.content
    assert all(isinstance(part, TextContent) for part in hostile)
    assert [part.text for part in hostile] == list(result.content_notes)
    assert len(hostile) == len(HOSTILE_LINKS)
    assert result.content_notes[:3] == (
        "[image by URL: left out: only https:// links from this tool are forwarded]",
        "[image by URL: left out: its host 169.254.169.254 is a link-local address]",
        "[image by URL: left out: its host 127.0.0.1 is a loopback address]",
    )
    assert "its host rebound.example.com resolves to 127.0.0.1" in result.content_notes[-3]
    assert (chart, pdf) == (
        ImageContent(url=PUBLIC_LINKS[0], media_type="image/png"),
        DocumentContent(url=PUBLIC_LINKS[1], media_type="application/pdf", title="q3.pdf"),
    )
    assert passwd == TextContent(text="[resource: file:///etc/passwd]")


def test_a_server_trusted_with_any_link_forwards_them_but_file() -> None:
    with MCPServer.stdio(sys.executable, [SERVER], content_urls="any") as server:
        result = run(server, "links")
    assert result.content_notes == ()
    urls = [getattr(part, "url", None) for part in result.content]
    assert urls[: len(HOSTILE_LINKS)] == list(HOSTILE_LINKS)
    assert result.content[-1] == TextContent(text="[resource: file:///etc/passwd]")


def test_no_private_link_reaches_a_self_hosted_models_request(hostile_server: MCPServer) -> None:
    """End to end: a model server (OpenAI-compatible, as vLLM) asked to read the results of the
    hostile server's tool gets notes, and no URL of a private host to fetch."""
    service = ToolService()
    service.register(hostile_server)
    with compatible_server() as server:
        model = OpenAIChatModel("local", base_url=server.url, profile="vllm", max_retries=0)
        result = service.chat(model, "What does it link to?", tools=["links"])
    assert result.text == "Done."
    sent = json.dumps(server.requests[-1])
    for link in HOSTILE_LINKS:
        assert link not in sent
    assert sent.count('"type": "image_url"') == 1  # the public chart alone
    assert PUBLIC_LINKS[0] in sent


@pytest.mark.parametrize("driver", DRIVERS)
def test_an_external_results_links_are_checked_as_its_tools(driver: str) -> None:
    """An external call's result, computed elsewhere (a browser, another service), carries links
    like a tool's: checked as its tool's `content_urls` allows, when the round runs."""

    @tool(external=True)
    def snapshot(page: str) -> ImageContent:
        """A snapshot of a page, taken by the browser."""
        raise AssertionError("external")

    def reply(messages: Sequence[ChatMessage], _: object) -> AiMessage:
        if isinstance(messages[-1], ToolResultMessage):
            return AiMessage(text="Seen.")
        return AiMessage(tool_calls=[ToolCall(id="s1", name="snapshot", arguments='{"page": "x"}')])

    service = ToolService([snapshot])
    waiting = service.chat(FunctionModel(reply), "Look.")
    snapshots = {"s1": [ImageContent(url=HOSTILE), ImageContent(url="https://cdn.example.com/a")]}
    done = drive(
        driver, service, FunctionModel(reply), waiting.messages, external_results=snapshots
    )
    (answer,) = [m for m in done.messages if isinstance(m, ToolResultMessage)]
    assert answer.content == (TextContent(text=NOTE), ImageContent(url="https://cdn.example.com/a"))
    assert done.tool_executions[0].result.content_notes == (NOTE,)
