"""The MCP client against the reference "everything" server
(`@modelcontextprotocol/server-everything`, Node, from `tests/js`; fixtures in
tests/everything_support.py), over stdio and streamable HTTP, through a `ToolService` run driven
by a `FunctionModel`: which of its tools register for the capabilities the client offers, what
the model reads of each kind of content, progress, a call cut off by its timeout or by a
cancelled run (the server told); and, each a pause of the run that an `ElicitationAnswer`
resumes, its elicitation form (SEP-1330 multi-selects, SEP-1034 defaults), its URL-mode
questions (asked mid-call, or by failing the call with -32042), and the question its task-only
tool asks while it runs as a task.

The server speaks the handshake revisions only (2025-11-25 and older): the client's probe of the
stateless revision falls back to the handshake, where the server asks its questions mid-call.
Most tests share one entered server per transport (`everything_mcp`): each leaves nothing open on
the session (a question it asks is answered before it ends)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gzip
import json
import re
import sys
import urllib.parse
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from everything_support import EVERYTHING, Entered, Everything, skipped_tools, stdio_server
from everything_support import everything as everything  # the fixtures
from everything_support import everything_mcp as everything_mcp
from js_support import node as node
from pydantic import TypeAdapter

from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatRequestParameters,
    DocumentContent,
    Elicitation,
    ElicitationAnswer,
    FileContent,
    FinalResultEvent,
    FunctionModel,
    ImageContent,
    MCPServer,
    TextContent,
    ToolAnnotations,
    ToolArgumentsError,
    ToolCall,
    ToolChatResult,
    ToolProgressEvent,
    ToolResultMessage,
    ToolService,
)

pytestmark = [
    pytest.mark.slow,  # Node servers
    pytest.mark.skipif(sys.platform == "win32", reason="records the stdio wire through sh"),
]

ALWAYS = frozenset(
    {
        *("echo", "get-annotated-message", "get-env", "get-resource-links"),
        *("get-resource-reference", "get-structured-content", "get-sum", "get-tiny-image"),
        *("gzip-file-as-resource", "toggle-simulated-logging", "toggle-subscriber-updates"),
        "trigger-long-running-operation",
    }
)
"""The tools the server lists to any client."""
LONG = "trigger-long-running-operation"
"""Sleeps `duration` seconds in `steps`, reporting progress after each when asked."""
GZIP = "gzip-file-as-resource"
"""Fetches a URL (`data:` too) and returns it gzipped, embedded or as a link."""
FORM = "trigger-elicitation-request"
"""Listed to a client that offers elicitation (any mode)."""
URL_MODE = "trigger-url-elicitation"
"""Listed to a client that offers URL-mode elicitation (`elicitation.url`)."""
TASK_ONLY = "simulate-research-query"
"""Listed to every client, callable only as a task (`execution.taskSupport: "required"`)."""
NEVER = frozenset(
    {
        *("trigger-sampling-request", "get-roots-list"),  # sampling, roots
        *("trigger-sampling-request-async", "trigger-elicitation-request-async"),  # client tasks
    }
)
"""Listed only to a client offering sampling, roots, or tasks of its own requests."""
OFFERED = ALWAYS | {FORM, URL_MODE, TASK_ONLY}
"""What a `ToolService` offers the model of the server's tools: the client offers form and
URL-mode elicitation, and calls task-only tools as tasks."""
HISTORY: TypeAdapter[list[ChatMessage]] = TypeAdapter(list[ChatMessage])


def calls(tool: str, arguments: Any = None) -> FunctionModel:
    """A model that calls `tool` once (call id `c1`), then says what the tool said."""

    def reply(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        results = [m for m in messages if isinstance(m, ToolResultMessage)]
        if results:
            return AiMessage(text=f"the tool said: {results[-1].text}")
        given = json.dumps(arguments if arguments is not None else {})
        return AiMessage(tool_calls=[ToolCall(id="c1", name=tool, arguments=given)])

    return FunctionModel(reply)


def model_reads(server: MCPServer, tool: str, arguments: Any = None) -> ToolResultMessage:
    """The tool result message the model reads after calling `tool` in a `ToolService` run."""
    done = ToolService([server]).chat(calls(tool, arguments), "go")
    assert done.pending == ()
    (read,) = [m for m in done.messages if isinstance(m, ToolResultMessage)]
    return read


def round_trip(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    return HISTORY.validate_json(HISTORY.dump_json(list(messages)))


# -- what registers ------------------------------------------------------------------------------


def test_every_tool_the_server_lists_for_our_capabilities_is_offered_to_the_model(
    everything_mcp: Entered,
) -> None:
    offered: list[str] = []

    def look(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        offered.extend(spec.name for spec in parameters.tools or ())
        return AiMessage(text="nothing to do")

    ToolService([everything_mcp.server]).chat(FunctionModel(look), "what can you do?")
    assert sorted(offered) == sorted(OFFERED)
    assert not OFFERED & NEVER  # no sampling, roots or client-side tasks offered
    # Each listed tool's inputSchema was accepted: none was skipped.
    assert skipped_tools(everything_mcp.warnings) == {}
    tools = {tool.name: tool for tool in everything_mcp.server.tools()}
    echo = tools["echo"].specification
    assert (echo.description, echo.parameters["required"]) == (
        "Echoes back the input string",
        ["message"],
    )
    assert echo.parameters["properties"]["message"] == {
        "type": "string",
        "description": "Message to echo",
    }
    assert echo.parameters["additionalProperties"] is False  # the server leaves it out
    assert echo.annotations == ToolAnnotations(
        title="Echo Tool", read_only=True, destructive=False, idempotent=True, open_world=False
    )
    assert tools[FORM].specification.annotations == ToolAnnotations(
        title="Trigger Elicitation Request Tool",
        read_only=False,
        destructive=False,
        idempotent=False,
        open_world=False,
    )


def test_tools_needing_sampling_or_roots_are_not_listed(everything_mcp: Entered) -> None:
    # The client offers no sampling and no roots: the server does not register these.
    names = {tool.name for tool in everything_mcp.server.tools()}
    assert not names & NEVER


def test_the_server_process_sees_only_the_environment_it_was_given(
    everything_mcp: Entered,
) -> None:
    # `get-env` returns the server's whole environment: the fixtures give it its own.
    shown = json.loads(model_reads(everything_mcp.server, "get-env").text)
    assert shown["GZIP_ALLOWED_DOMAINS"] == "invalid"
    if everything_mcp.transport == "http":
        assert set(shown) == {"GZIP_ALLOWED_DOMAINS", "PORT"}
    else:  # and the MCP SDK's default environment for a stdio server
        assert set(shown) - {"GZIP_ALLOWED_DOMAINS"} <= {
            *("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"),
        }


def listening(port: int) -> set[str]:
    """The local addresses (hex, as /proc/net/tcp* write them) listening on `port`."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(FileNotFoundError), open(table) as lines:
            for line in list(lines)[1:]:
                local, state = line.split()[1], line.split()[3]
                address, _, hex_port = local.partition(":")
                if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                    found.add(address)
    return found


@pytest.mark.parametrize("everything", ["http"], indirect=True)
def test_the_http_server_listens_on_loopback_only(everything: Everything) -> None:
    if not Path("/proc/net/tcp").exists():
        pytest.skip("reads the listening sockets from /proc/net")
    assert everything.url is not None
    port = urllib.parse.urlsplit(everything.url).port
    assert port is not None
    assert listening(port) == {"0100007F"}  # 127.0.0.1; not 0.0.0.0 nor ::


# -- content -------------------------------------------------------------------------------------


def test_text_results(everything_mcp: Entered) -> None:
    echoed = model_reads(everything_mcp.server, "echo", {"message": "hello, everything"})
    assert (echoed.text, echoed.content, echoed.is_error) == ("Echo: hello, everything", (), False)
    summed = model_reads(everything_mcp.server, "get-sum", {"a": 2, "b": 40.5})
    assert (summed.text, summed.content) == ("The sum of 2 and 40.5 is 42.5.", ())


def test_an_invalid_argument_never_reaches_the_server(everything_mcp: Entered) -> None:
    refused = model_reads(everything_mcp.server, "get-sum", {"a": 2, "b": "40"})
    assert refused.is_error
    assert refused.text == (
        "Invalid arguments for tool `get-sum`:\n"
        '- $.b: Input should be of type number (input: "40")\n'
        "Correct the arguments and call `get-sum` again."
    )


def test_structured_content_is_the_value(everything_mcp: Entered) -> None:
    done = ToolService([everything_mcp.server]).chat(
        calls("get-structured-content", {"location": "Chicago"}), "weather?"
    )
    (execution,) = done.tool_executions
    weather = {"temperature": 36, "conditions": "Light rain / drizzle", "humidity": 82}
    assert execution.result.value == weather  # checked against its outputSchema
    assert json.loads(execution.result.text) == weather  # the model reads the server's text
    assert done.text == f"the tool said: {execution.result.text}"


def tiny_image() -> bytes:
    """The server's image (`MCP_TINY_IMAGE` in its get-tiny-image.js)."""
    source = (EVERYTHING / "tools" / "get-tiny-image.js").read_text()
    found = re.search(r'MCP_TINY_IMAGE = "([A-Za-z0-9+/=]+)"', source)
    assert found is not None
    return base64.b64decode(found.group(1))


def test_an_image_is_an_image_part(everything_mcp: Entered) -> None:
    read = model_reads(everything_mcp.server, "get-tiny-image")
    png = tiny_image()
    assert png.startswith(b"\x89PNG")
    assert read.content == (
        TextContent(text="Here's the image you requested:"),
        ImageContent(data=png, media_type="image/png"),
        TextContent(text="The image above is the MCP logo."),
    )
    assert read.text == (
        f"Here's the image you requested:\n[image: image/png, {len(png):,} bytes]\n"
        "The image above is the MCP logo."
    )


def test_resource_links_the_provider_could_not_fetch_are_stand_ins(everything_mcp: Entered) -> None:
    # `demo://` links: no provider can fetch them, so none is forwarded as a part.
    read = model_reads(everything_mcp.server, "get-resource-links", {"count": 3})
    assert (read.content, read.is_error) == ((), False)
    assert read.text == (
        "Here are 3 resource links to resources available in this server:\n"
        "[resource: demo://resource/dynamic/blob/1]\n"
        "[resource: demo://resource/dynamic/text/2]\n"
        "[resource: demo://resource/dynamic/blob/3]"
    )


def test_embedded_resources(everything_mcp: Entered) -> None:
    text = model_reads(everything_mcp.server, "get-resource-reference")  # defaults: Text, 1
    lines = text.text.splitlines()
    assert lines[0] == "Returning resource reference for Resource 1:"
    assert re.fullmatch(r"Resource 1: This is a plaintext resource created at .+", lines[1])
    assert lines[2:] == [
        "You can access this resource using the URI: demo://resource/dynamic/text/1"
    ]
    assert text.content == ()
    blob = model_reads(
        everything_mcp.server, "get-resource-reference", {"resourceType": "Blob", "resourceId": 2}
    )
    first, document, last = blob.content
    assert (first, last) == (
        TextContent(text="Returning resource reference for Resource 2:"),
        TextContent(
            text="You can access this resource using the URI: demo://resource/dynamic/blob/2"
        ),
    )
    assert isinstance(document, DocumentContent)  # a text/plain blob: a document to read
    assert (document.media_type, document.title) == ("text/plain", "2")
    assert document.data is not None
    assert re.fullmatch(rb"Resource 2: This is a base64 blob created at .+", document.data)


def test_annotated_content(everything_mcp: Entered) -> None:
    # Content annotations (audience, priority) are hints for the client's display: the model
    # reads every block, the user's among them.
    read = model_reads(
        everything_mcp.server,
        "get-annotated-message",
        {"messageType": "error", "includeImage": True},
    )
    assert read.content == (
        TextContent(text="Error: Operation failed"),
        ImageContent(data=tiny_image(), media_type="image/png"),
    )
    debug = model_reads(everything_mcp.server, "get-annotated-message", {"messageType": "debug"})
    assert (debug.text, debug.content) == ("Debug: Cache hit ratio 0.95, latency 150ms", ())


def test_a_compressed_file_as_a_file_part_or_a_link(everything_mcp: Entered) -> None:
    # A `data:` URI: the server fetches nothing from the network.
    given = {"name": "hello.txt.gz", "data": "data:text/plain;base64,aGVsbG8sIGV2ZXJ5dGhpbmc="}
    embedded = model_reads(everything_mcp.server, GZIP, {**given, "outputType": "resource"})
    (part,) = embedded.content
    assert isinstance(part, FileContent)
    assert (part.media_type, part.filename) == ("application/gzip", "hello.txt.gz")
    assert part.data is not None and gzip.decompress(part.data) == b"hello, everything"
    assert embedded.text == f"[file: application/gzip, {len(part.data)} bytes]"
    linked = model_reads(everything_mcp.server, GZIP, {**given, "outputType": "resourceLink"})
    assert (linked.text, linked.content) == ("[resource: demo://resource/session/hello.txt.gz]", ())


def test_the_server_fetches_from_no_host(everything_mcp: Entered) -> None:
    refused = model_reads(everything_mcp.server, GZIP, {"data": "https://example.com/a.txt"})
    assert (refused.is_error, refused.text) == (
        True,
        "Error processing file https://example.com/a.txt: Domain example.com is not in the "
        "allowed domains list.",
    )


def test_a_tool_error_the_server_reports_is_what_the_model_reads(everything_mcp: Entered) -> None:
    refused = model_reads(everything_mcp.server, GZIP, {"data": "file:///etc/passwd"})
    assert refused.is_error
    assert refused.text == (
        "Error processing file file:///etc/passwd: Unsupported URL protocol for "
        "file:///etc/passwd. Only http, https, and data URLs are supported."
    )


async def test_progress_reaches_the_stream(everything_mcp: Entered) -> None:
    service = ToolService([everything_mcp.server])
    model = calls(LONG, {"duration": 0.3, "steps": 3})
    events = [event async for event in service.astream(model, "go")]
    progress = [
        (event.call.id, event.progress, event.total, event.message)
        for event in events
        if isinstance(event, ToolProgressEvent)
    ]
    assert progress == [("c1", 1.0, 3.0, None), ("c1", 2.0, 3.0, None), ("c1", 3.0, 3.0, None)]
    final = events[-1]
    assert isinstance(final, FinalResultEvent)
    (result,) = [m for m in final.result.messages if isinstance(m, ToolResultMessage)]
    assert result.text == "Long running operation completed. Duration: 0.3 seconds, Steps: 3."


def sent(wire: Path) -> list[dict[str, Any]]:
    """What the client sent a stdio server, message by message."""
    return [json.loads(line) for line in wire.read_text().splitlines()]


def test_a_call_over_its_timeout_is_cut_off_and_the_server_told(
    everything: Everything, tmp_path: Path
) -> None:
    wire = tmp_path / "wire.jsonl" if everything.transport == "stdio" else None
    with everything.server(timeout=0.5, wire=wire) as server:
        service = ToolService([server])
        slow = calls(LONG, {"duration": 1.5, "steps": 3})
        done = service.chat(slow, "go")
        (execution,) = done.tool_executions
        assert (execution.result.error_kind, execution.result.text) == (
            "timeout",
            "Tool `trigger-long-running-operation` timed out after 0.5 seconds.",
        )
        # The session goes on: the server's late progress and answer confuse nothing.
        after = model_reads(server, "echo", {"message": "still here"})
        assert after.text == "Echo: still here"
    if wire is not None:  # the server was told, on the wire
        messages = sent(wire)
        (call,) = [m for m in messages if m.get("params", {}).get("name") == LONG]
        cancelled = [m for m in messages if m.get("method") == "notifications/cancelled"]
        ids = [m["params"]["requestId"] for m in cancelled]
        assert ids[:1] == [call["id"]]
        # Cancelling the research run may catch a poll of its task in flight, which the SDK
        # tells the server of too; the task itself is stopped by `tasks/cancel`, and the call
        # that made it is never cancelled (its answer named the task).
        requests = {m["id"]: m["method"] for m in messages if "id" in m and "method" in m}
        assert {requests[id] for id in ids[1:]} <= {"tasks/get", "tasks/result"}, ids


def test_a_task_whose_call_times_out_is_cancelled_on_the_server(
    everything: Everything, tmp_path: Path
) -> None:
    # The research task takes 4 s (four stages of 1 s each, whatever it is asked).
    wire = tmp_path / "wire.jsonl" if everything.transport == "stdio" else None
    with everything.server(timeout=1.5, wire=wire) as server:
        done = ToolService([server]).chat(calls(TASK_ONLY, {"topic": "tides"}), "research")
        (execution,) = done.tool_executions
        assert (execution.result.error_kind, execution.result.text) == (
            "timeout",
            f"Tool `{TASK_ONLY}` timed out after 1.5 seconds.",
        )
        after = model_reads(server, "echo", {"message": "still here"})
        assert after.text == "Echo: still here"
    if wire is not None:  # the task was created, then cancelled, on the wire
        messages = sent(wire)
        (created,) = [m for m in messages if m.get("params", {}).get("name") == TASK_ONLY]
        assert (created["params"]["arguments"], created["params"]["task"]) == (
            {"topic": "tides"},
            {},
        )
        (cancel,) = [m for m in messages if m.get("method") == "tasks/cancel"]
        assert re.fullmatch(r"[0-9a-f]{32}", cancel["params"]["taskId"])
        polled = {m["params"]["taskId"] for m in messages if m.get("method") == "tasks/get"}
        assert polled <= {cancel["params"]["taskId"]}
        assert not [m for m in messages if m.get("method") == "tasks/result"]


async def test_a_run_cancelled_mid_call_tells_the_server(
    everything: Everything, tmp_path: Path
) -> None:
    # The run's task is cancelled (here by `wait_for`) while a call waits on the server, then
    # while a task-only tool's task runs (its research takes 4 s).
    wire = tmp_path / "wire.jsonl" if everything.transport == "stdio" else None
    async with everything.server(wire=wire) as server:
        service = ToolService([server])
        long, research = calls(LONG, {"duration": 3, "steps": 3}), calls(TASK_ONLY, {"topic": "x"})
        for model, seconds in ((long, 1.0), (research, 2.0)):  # the task made (at once) by then
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(service.achat(model, "go"), seconds)
        after = await service.achat(calls("echo", {"message": "still here"}), "go")
        assert after.text == "the tool said: Echo: still here"
    if wire is not None:
        messages = sent(wire)
        (call,) = [m for m in messages if m.get("params", {}).get("name") == LONG]
        cancelled = [m for m in messages if m.get("method") == "notifications/cancelled"]
        assert [m["params"]["requestId"] for m in cancelled] == [call["id"]]
        (cancel,) = [m for m in messages if m.get("method") == "tasks/cancel"]
        assert re.fullmatch(r"[0-9a-f]{32}", cancel["params"]["taskId"])


# -- elicitation ---------------------------------------------------------------------------------

ANSWER = {
    "name": "Ada Lovelace",
    "check": True,
    "email": "ada@example.com",
    "untitledMultipleSelectEnum": ["Piano", "Drums"],
    "titledMultipleSelectEnum": ["fish-2", "fish-3"],
}
"""An answer that leaves out every field with a default but the multi-selects."""
DEFAULTS = {
    "firstLine": "It was a dark and stormy night.",
    "integer": 42,
    "number": 3.14,
    "untitledSingleSelectEnum": "Monica",
    "untitledMultipleSelectEnum": ["Guitar"],
    "titledSingleSelectEnum": "hero-1",
    "titledMultipleSelectEnum": ["fish-1"],
    "legacyTitledEnum": "pet-1",
}
"""The requested schema's defaults."""


def elicited(done: ToolChatResult[Any]) -> tuple[str, dict[str, Any]]:
    """What the server says it received: the summary, and the raw result it echoes."""
    text = done.final_response.ai_message.text or ""
    summary, _, raw = text.removeprefix("the tool said: ").partition("\n\nRaw result: ")
    return summary, json.loads(raw)


def test_the_form_pauses_the_run_and_an_answer_with_defaults_left_out_resumes_it(
    everything_mcp: Entered,
) -> None:
    service = ToolService([everything_mcp.server])
    paused = service.chat(calls(FORM), "ask me")
    (pending,) = paused.pending
    assert (pending.call.id, pending.reason) == ("c1", "elicitation")
    question = pending.elicitation
    assert question is not None
    assert question.message == "Please provide inputs for the following fields:"
    assert (question.key, question.state) == (None, None)  # asked mid-call: the call waits open
    schema = question.schema
    assert (schema["type"], schema["required"]) == ("object", ["name"])
    properties = schema["properties"]
    assert {n: p["default"] for n, p in properties.items() if "default" in p} == DEFAULTS
    # SEP-1330: multi-selects, untitled (`items.enum`) and titled (`items.anyOf`).
    assert properties["untitledMultipleSelectEnum"] == {
        "type": "array",
        "title": "Untitled Multiple Select Enum",
        "description": "Choose your favorite instruments",
        "minItems": 1,
        "maxItems": 3,
        "items": {"type": "string", "enum": ["Guitar", "Piano", "Violin", "Drums", "Bass"]},
        "default": ["Guitar"],
    }
    assert properties["titledMultipleSelectEnum"]["items"] == {
        "anyOf": [
            {"const": "fish-1", "title": "Tuna"},
            {"const": "fish-2", "title": "Salmon"},
            {"const": "fish-3", "title": "Trout"},
        ]
    }
    assert properties["titledSingleSelectEnum"]["oneOf"][0] == {
        "const": "hero-1",
        "title": "Superman",
    }
    assert properties["legacyTitledEnum"]["enumNames"][0] == "Cats"
    # The paused history survives JSON; the same service resumes it.
    history = round_trip(paused.messages)
    done = service.chat(calls(FORM), history, approvals={"c1": ElicitationAnswer(ANSWER)})
    assert done.pending == ()
    summary, raw = elicited(done)
    # SEP-1034: the defaults were filled in before the answer was sent.
    assert raw == {"action": "accept", "content": {**DEFAULTS, **ANSWER}}
    assert summary == (
        "✅ User provided the requested information!\n"
        "User inputs:\n"
        "- Name: Ada Lovelace\n"
        "- Agreed to terms: true\n"
        "- Email: ada@example.com\n"
        "- Favorite Integer: 42\n"
        "- Favorite Number: 3.14"
    )


def test_an_answer_the_form_refuses_is_never_sent(everything_mcp: Entered) -> None:
    service = ToolService([everything_mcp.server])
    paused = service.chat(calls(FORM), "ask me")
    too_many = {"name": "A", "untitledMultipleSelectEnum": ["Guitar", "Piano", "Violin", "Bass"]}
    not_a_choice = {"name": "A", "titledMultipleSelectEnum": ["fish-9"]}
    for wrong, problem in [
        (too_many, "$.untitledMultipleSelectEnum: Input should have at most 3 items"),
        (
            not_a_choice,
            "$.titledMultipleSelectEnum[0]: Input should match at least one of "
            '[{"const":"fish-1","title":"Tuna"},{"const":"fish-2","title":"Salmon"},'
            '{"const":"fish-3","title":"Trout"}]',
        ),
    ]:
        with pytest.raises(ToolArgumentsError) as refused:
            service.chat(calls(FORM), paused.messages, approvals={"c1": ElicitationAnswer(wrong)})
        assert str(refused.value) == f"invalid arguments for tool '{FORM}': {problem}"
    # The question is still open: an answer the form takes goes through.
    done = service.chat(
        calls(FORM), paused.messages, approvals={"c1": ElicitationAnswer({"name": "A"})}
    )
    assert elicited(done)[1] == {"action": "accept", "content": {**DEFAULTS, "name": "A"}}


@pytest.mark.parametrize(
    ("action", "said"),
    [
        ("decline", "❌ User declined to provide the requested information."),
        ("cancel", "⚠️ User cancelled the elicitation dialog."),
    ],
)
def test_a_refused_form(everything_mcp: Entered, action: Any, said: str) -> None:
    service = ToolService([everything_mcp.server])
    paused = service.chat(calls(FORM), "ask me")
    refusal = ElicitationAnswer(action=action)
    done = service.chat(calls(FORM), round_trip(paused.messages), approvals={"c1": refusal})
    assert elicited(done) == (said, {"action": action})


async def test_the_form_under_achat(everything: Everything) -> None:
    async with everything.server() as server:
        service = ToolService([server])
        paused = await service.achat(calls(FORM), "ask me")
        (pending,) = paused.pending
        assert pending.elicitation is not None
        answer = pending.elicitation.answer({"name": "Bo", "integer": 7})
        done = await service.achat(
            calls(FORM), round_trip(paused.messages), approvals={"c1": answer}
        )
    content = {**DEFAULTS, "name": "Bo", "integer": 7}
    assert elicited(done)[1] == {"action": "accept", "content": content}


# -- the wire (stdio) ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def recorded(
    node: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[MCPServer, Path]]:
    """The server over stdio, with what the client sends it recorded."""
    wire = tmp_path_factory.mktemp("everything") / "wire.jsonl"
    with stdio_server(node, wire=wire) as server:
        yield server, wire


def test_the_client_offers_form_and_url_mode_elicitation(recorded: tuple[MCPServer, Path]) -> None:
    # Nothing else: no sampling, no roots, no tasks of the server's requests.
    server, wire = recorded
    (initialize,) = [m for m in sent(wire) if m.get("method") == "initialize"]
    assert initialize["params"]["capabilities"] == {"elicitation": {"form": {}, "url": {}}}
    assert initialize["params"]["clientInfo"]["name"] == "agentforge-typed"
    assert server.protocol_version == "2025-11-25"


def test_the_list_changes_the_server_announces_at_the_start_change_nothing(
    everything_mcp: Entered,
) -> None:
    # The server registers the tools that depend on the client's capabilities once initialized,
    # announcing each (`notifications/tools/list_changed`) before it answers the first listing:
    # that listing already holds them, and listing again brings the same list. (It offers no
    # other change of its tools.)
    model_reads(everything_mcp.server, "echo", {"message": "a round"})  # a listing settles
    assert everything_mcp.server.tools_version == 1
    assert {tool.name for tool in everything_mcp.server.tools()} == OFFERED


# -- URL-mode questions --------------------------------------------------------------------------


def url_question(paused: ToolChatResult[Any]) -> Elicitation:
    (pending,) = paused.pending
    assert (pending.call.id, pending.reason) == ("c1", "elicitation")
    assert pending.elicitation is not None
    return pending.elicitation


def test_a_url_question_asked_mid_call_pauses_the_run_and_the_user_s_word_resumes_it(
    everything_mcp: Entered,
) -> None:
    arguments = {
        "url": "https://example.com/consent?flow=mid-call",
        "message": "Sign in to the example",
        "elicitationId": "consent-1",
    }
    service = ToolService([everything_mcp.server])
    paused = service.chat(calls(URL_MODE, arguments), "sign me in")
    question = url_question(paused)
    assert (question.message, question.url, question.elicitation_id) == (
        "Sign in to the example",
        "https://example.com/consent?flow=mid-call",
        "consent-1",
    )
    assert (question.schema, question.key, question.state) == ({}, None, None)
    went = ElicitationAnswer()  # the user went through the page: no content
    done = service.chat(
        calls(URL_MODE, arguments), round_trip(paused.messages), approvals={"c1": went}
    )
    assert elicited(done) == (
        "✅ User completed the URL elicitation flow.\n"
        "Elicitation ID: consent-1\n"
        "URL: https://example.com/consent?flow=mid-call",
        {"action": "accept"},
    )


@pytest.mark.parametrize(
    ("action", "said"),
    [
        ("decline", "❌ User declined to open the URL (Elicitation ID: consent-2)."),
        ("cancel", "⚠️ User cancelled the URL elicitation (Elicitation ID: consent-2)."),
    ],
)
def test_a_url_question_refused(everything_mcp: Entered, action: Any, said: str) -> None:
    arguments = {"url": "https://example.com/consent?flow=refused", "elicitationId": "consent-2"}
    service = ToolService([everything_mcp.server])
    paused = service.chat(calls(URL_MODE, arguments), "sign me in")
    assert url_question(paused).elicitation_id == "consent-2"
    refusal = ElicitationAnswer(action=action)
    done = service.chat(calls(URL_MODE, arguments), paused.messages, approvals={"c1": refusal})
    assert elicited(done) == (said, {"action": action})


PREREQUISITE = "Open this link to satisfy the prerequisite, then retry the request."
"""What the server's URL-mode question says when it fails a call for it (-32042)."""


def test_a_call_failed_for_a_url_question_is_sent_again_once_the_user_went_through_it(
    everything_mcp: Entered,
) -> None:
    # The server fails the call with URLElicitationRequired (-32042), naming a page; sent again
    # with the same arguments, it proceeds (and asks mid-call for the page it was given).
    arguments = {
        "url": "https://example.com/consent?flow=error-path",
        "elicitationId": "consent-3",
        "errorPath": True,
    }
    service = ToolService([everything_mcp.server])
    paused = service.chat(calls(URL_MODE, arguments), "sign me in")
    first = url_question(paused)
    assert (first.message, first.url) == (PREREQUISITE, "https://modelcontextprotocol.io")
    assert first.elicitation_id is not None
    assert re.fullmatch(r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", first.elicitation_id)
    went = ElicitationAnswer()
    again = service.chat(
        calls(URL_MODE, arguments), round_trip(paused.messages), approvals={"c1": went}
    )
    second = url_question(again)  # the call went again, and its server now asks mid-call
    assert (second.url, second.elicitation_id) == (
        "https://example.com/consent?flow=error-path",
        "consent-3",
    )
    done = service.chat(
        calls(URL_MODE, arguments), round_trip(again.messages), approvals={"c1": went}
    )
    assert elicited(done)[1] == {"action": "accept"}
    assert elicited(done)[0].startswith("✅ User completed the URL elicitation flow.")


def test_a_call_failed_for_a_url_question_the_user_declines_is_not_sent_again(
    everything_mcp: Entered,
) -> None:
    arguments = {"url": "https://example.com/consent?flow=declined", "errorPath": True}
    service = ToolService([everything_mcp.server])
    paused = service.chat(calls(URL_MODE, arguments), "sign me in")
    assert url_question(paused).message == PREREQUISITE
    refusal = ElicitationAnswer(action="decline")
    done = service.chat(calls(URL_MODE, arguments), paused.messages, approvals={"c1": refusal})
    (execution,) = done.tool_executions
    assert execution.result.is_error
    assert execution.result.text == (
        f"Tool `{URL_MODE}` failed: the call was not sent again: the server required the user to go "
        f"through a page first, and the user declined it ({PREREQUISITE!r})"
    )


# -- task-only tools -----------------------------------------------------------------------------


def test_a_task_only_tool_runs_as_a_task_and_its_question_pauses_the_run(
    everything_mcp: Entered,
) -> None:
    # Called as a task: created, polled at the server's interval (1 s), its result fetched; the
    # question the task asks (it went `input_required`) comes on that `tasks/result`. The
    # research takes four stages of 1 s each.
    arguments = {"topic": "python", "ambiguous": True}
    service = ToolService([everything_mcp.server])
    paused = service.chat(calls(TASK_ONLY, arguments), "research python")
    (pending,) = paused.pending
    assert (pending.call.id, pending.reason) == ("c1", "elicitation")
    question = pending.elicitation
    assert question is not None
    assert question.message == (
        'The research query "python" could have multiple interpretations. Please clarify what '
        "you're looking for:"
    )
    assert question.schema["required"] == ["interpretation"]
    assert question.schema["properties"]["interpretation"]["oneOf"] == [
        {"const": "programming", "title": "Python programming language"},
        {"const": "snake", "title": "Python snake species"},
        {"const": "comedy", "title": "Monty Python comedy group"},
    ]
    answer = ElicitationAnswer({"interpretation": "snake"})
    done = service.chat(
        calls(TASK_ONLY, arguments), round_trip(paused.messages), approvals={"c1": answer}
    )
    assert done.pending == ()
    (execution,) = done.tool_executions
    assert not execution.result.is_error
    report = execution.result.text
    assert report.startswith(
        "# Research Report: python (snake)\n\n"
        "## Research Parameters\n"
        "- **Topic**: python\n"
        "- **Clarification**: snake\n"
    )
    assert "3. Status progressed: `working` → `input_required` → `working` → `completed`" in report
    assert 'After receiving clarification ("snake"), the task resumed processing' in report
