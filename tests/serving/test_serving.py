"""`ToolServer` against the official Python SDK's client, in process (the SDK connects a `Client`
to a low-level `Server` directly): what `tools/list` declares, what `tools/call` answers,
approvals, questions, progress, logging, deps, timeouts and bounds, at a handshake revision and
at the stateless one."""

from __future__ import annotations

import asyncio
import logging
import warnings
from dataclasses import dataclass
from datetime import date
from typing import Any

import anyio
import mcp_types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from pydantic import BaseModel

from agentforge_typed import (
    DocumentContent,
    ImageContent,
    ModelRetry,
    ToolAnnotations,
    ToolCall,
    ToolContext,
    ToolReturn,
    ToolService,
    tool,
)
from agentforge_typed.serving import ToolServer, ask_client
from agentforge_typed.serving._catalog import SCHEMA_DIALECT

HANDSHAKE = "legacy"
STATELESS = "2026-07-28"
REVISIONS = [pytest.param(HANDSHAKE, id="2025-11-25"), pytest.param(STATELESS, id="2026-07-28")]


class Address(BaseModel):
    street: str
    city: str


class Person(BaseModel):
    name: str
    born: date
    address: Address


@tool
def register(person: Person, copies: int = 1) -> Person:
    """Register a person.

    Args:
        person: Who.
        copies: How many copies to keep.
    """
    return person


@tool
def double(n: int) -> int:
    """Double a number."""
    return 2 * n


@tool
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


@tool
def fails() -> str:
    """Always fails."""
    raise ValueError("the disk is full")


@tool
def retries() -> str:
    """Asks the model to try again."""
    raise ModelRetry("Give a shorter name.")


PNG = b"\x89PNG\r\n\x1a\n-not-really"


@tool
def picture() -> ToolReturn[Address]:
    """A picture and the address it shows."""
    return ToolReturn(
        Address(street="Main", city="Oslo"),
        content=[ImageContent(data=PNG, media_type="image/png")],
    )


@tool(content_urls="any")  # its link is never resolved: this machine may have no DNS
def report() -> list[str | DocumentContent | ImageContent]:
    """A report: text, a PDF, a text file and an image by URL."""
    return [
        "See the attachments.",
        DocumentContent(data=b"%PDF-1.4 ...", media_type="application/pdf", title="r.pdf"),
        DocumentContent(data=b"plain words", media_type="text/plain"),
        ImageContent(url="https://example.com/chart.png"),
    ]


@tool(result_converter=lambda value: "***")
def masked() -> Address:
    """Its converter hides the value."""
    return Address(street="Secret", city="Hidden")


@tool
def lies() -> Address:
    """Declares an address, returns something else."""
    return {"street": 5}  # type: ignore[return-value]


async def call(
    server: ToolServer[Any], mode: str, name: str, arguments: Any = None, **client: Any
) -> mcp_types.CallToolResult:
    async with Client(server.sdk_server, mode=mode, **client) as session:
        return await session.call_tool(name, arguments)


def text(result: mcp_types.CallToolResult) -> str:
    first = result.content[0]
    assert isinstance(first, mcp_types.TextContent)
    return first.text


# -- tools/list --------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", REVISIONS)
async def test_the_listing_declares_each_tool_as_the_library_renders_it(mode: str) -> None:
    server = ToolServer([register, double, shout, masked])
    async with Client(server.sdk_server, mode=mode) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
    assert list(listed) == ["register", "double", "shout", "masked"]
    declared = listed["register"]
    assert declared.description == "Register a person."
    assert declared.input_schema == {"$schema": SCHEMA_DIALECT, **register.specification.parameters}
    assert declared.input_schema["additionalProperties"] is False
    assert declared.input_schema["$defs"]["Address"]["additionalProperties"] is False
    # A model's own fields, as serialized: the value's JSON is the structured content.
    assert declared.output_schema is not None
    assert declared.output_schema["type"] == "object"
    assert declared.output_schema["properties"]["born"] == {
        "format": "date",
        "title": "Born",
        "type": "string",
    }
    # A number is wrapped, as structured content is an object.
    assert listed["double"].output_schema == {
        "type": "object",
        "properties": {"result": {"type": "integer"}},
        "required": ["result"],
    }
    assert listed["shout"].output_schema is None  # text
    assert listed["masked"].output_schema is None  # the program chose what to show


async def test_annotations_are_what_the_tool_declares_and_never_read_only_when_approval_waits() -> (
    None
):
    hints = ToolAnnotations(title="Look up", read_only=True, idempotent=True, open_world=False)

    @tool(annotations=hints)
    def look_up(key: str) -> str:
        """Look a key up."""
        return key

    @tool(annotations=hints, requires_approval=True)
    def guarded(key: str) -> str:
        """Look a key up, after approval."""
        return key

    @tool(annotations=hints, requires_approval=lambda call, context: False)
    def sometimes(key: str) -> str:
        """Approval decided per call."""
        return key

    server = ToolServer([look_up, guarded, sometimes, shout])
    async with Client(server.sdk_server, mode=HANDSHAKE) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
    plain = listed["look_up"]
    assert plain.title == "Look up"
    assert plain.annotations == mcp_types.ToolAnnotations(
        title="Look up", read_only_hint=True, idempotent_hint=True, open_world_hint=False
    )
    for name in ("guarded", "sometimes"):
        annotations = listed[name].annotations
        assert annotations is not None and annotations.read_only_hint is False, name
    assert listed["shout"].annotations is None


async def test_a_selection_serves_only_what_it_names_and_the_rest_is_unknown() -> None:
    service: ToolService[None] = ToolService(groups={"maths": [double]})
    service.register(shout)
    server = ToolServer(service, select=["group:maths"])
    async with Client(server.sdk_server, mode=HANDSHAKE) as client:
        assert [t.name for t in (await client.list_tools()).tools] == ["double"]
        with pytest.raises(MCPError) as raised:
            await client.call_tool("shout", {"text": "hi"})
    assert raised.value.error.code == mcp_types.INVALID_PARAMS
    assert raised.value.error.message == "Unknown tool: shout"
    with pytest.raises(ValueError, match="no registered tool named 'nope'"):
        ToolServer(service, select=["nope"])


def test_an_external_tool_cannot_be_served() -> None:
    @tool(external=True)
    def elsewhere() -> str:
        """Runs in the program."""
        return ""

    with pytest.raises(ValueError, match="'elsewhere' is external"):
        ToolServer([elsewhere])
    assert ToolServer(ToolService([elsewhere, shout]), select=["shout"]).declarations()


# -- tools/call --------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", REVISIONS)
async def test_a_structured_result_is_the_value_s_own_json_beside_the_same_text(mode: str) -> None:
    server = ToolServer([register, double])
    person = {
        "name": "Ada",
        "born": "1815-12-10",
        "address": {"street": "St James", "city": "London"},
    }
    result = await call(server, mode, "register", {"person": person})
    assert not result.is_error
    assert result.structured_content == person
    assert (
        text(result)
        == '{"name":"Ada","born":"1815-12-10","address":{"street":"St James","city":"London"}}'
    )
    doubled = await call(server, mode, "double", {"n": 21})
    assert doubled.structured_content == {"result": 42}
    assert text(doubled) == "42"


@pytest.mark.parametrize("mode", REVISIONS)
async def test_invalid_arguments_are_the_error_text_the_loop_gives_a_model(mode: str) -> None:
    server = ToolServer([register, double])
    arguments = {
        "person": {"name": "Ada", "born": "1815-12-10", "address": {"street": 5}},
        "extra": 1,
    }
    result = await call(server, mode, "register", arguments)
    assert result.is_error and result.structured_content is None
    expected = register.execute(ToolCall(id="1", name="register", arguments=_json(arguments)))
    assert text(result) == expected.text
    assert "$.person.address.street" in text(result) and "$.extra" in text(result)
    # Strict, as everywhere: "5" is not an integer.
    coerced = await call(server, mode, "double", {"n": "5"})
    assert coerced.is_error
    assert (
        text(coerced)
        == double.execute(ToolCall(id="1", name="double", arguments='{"n": "5"}')).text
    )


async def test_missing_arguments_are_an_empty_object() -> None:
    server = ToolServer([double, picture])
    async with Client(server.sdk_server, mode=HANDSHAKE) as client:
        result = await client.session.call_tool("double", None)
    assert result.is_error and "$.n: Field required" in text(result)


@pytest.mark.parametrize("mode", REVISIONS)
async def test_a_tool_s_failure_is_an_error_result_never_a_protocol_error(mode: str) -> None:
    server = ToolServer([fails, retries, lies])
    failed = await call(server, mode, "fails")
    assert failed.is_error and text(failed) == "Tool `fails` failed: ValueError: the disk is full"
    retried = await call(server, mode, "retries")
    assert retried.is_error and text(retried) == "Give a shorter name."
    lied = await call(server, mode, "lies")
    assert lied.is_error and lied.structured_content is None
    assert text(lied).startswith("Tool `lies` failed: its result does not match its outputSchema:")


@pytest.mark.parametrize("mode", REVISIONS)
async def test_returned_parts_become_content_blocks(mode: str) -> None:
    server = ToolServer([picture, report])
    shown = await call(server, mode, "picture")
    assert [block.type for block in shown.content] == ["text", "image"]
    image = shown.content[1]
    assert isinstance(image, mcp_types.ImageContent) and image.mime_type == "image/png"
    assert image.data == "iVBORw0KGgotbm90LXJlYWxseQ=="
    assert shown.structured_content == {"street": "Main", "city": "Oslo"}
    reported = await call(server, mode, "report")
    kinds = [block.type for block in reported.content]
    assert kinds == ["text", "resource", "resource", "resource_link"]
    pdf, plain, link = reported.content[1], reported.content[2], reported.content[3]
    assert isinstance(pdf, mcp_types.EmbeddedResource)
    assert isinstance(pdf.resource, mcp_types.BlobResourceContents)
    assert (
        pdf.resource.mime_type == "application/pdf" and pdf.resource.uri == "attachment://1/r.pdf"
    )
    assert isinstance(plain, mcp_types.EmbeddedResource)
    assert isinstance(plain.resource, mcp_types.TextResourceContents)
    assert plain.resource.text == "plain words"
    assert isinstance(link, mcp_types.ResourceLink) and link.uri == "https://example.com/chart.png"
    assert link.name == "chart.png"


# -- approval ----------------------------------------------------------------------------------

RAN: list[str] = []


@tool(requires_approval=True)
def delete(path: str) -> str:
    """Delete a file."""
    RAN.append(path)
    return f"deleted {path}"


def answering(answer: mcp_types.ElicitResult, asked: list[Any] | None = None) -> Any:
    async def callback(context: Any, params: Any) -> mcp_types.ElicitResult:
        if asked is not None:
            asked.append(params)
        return answer

    return callback


APPROVE = mcp_types.ElicitResult(action="accept", content={"approve": True})


@pytest.fixture(autouse=True)
def _ran() -> None:
    RAN.clear()


@pytest.mark.parametrize("mode", REVISIONS)
async def test_an_approved_call_runs_once_after_the_client_is_asked(mode: str) -> None:
    asked: list[Any] = []
    server = ToolServer([delete])
    result = await call(
        server, mode, "delete", {"path": "/tmp/x"}, elicitation_callback=answering(APPROVE, asked)
    )
    assert not result.is_error and text(result) == "deleted /tmp/x"
    assert RAN == ["/tmp/x"]
    assert len(asked) == 1
    assert asked[0].message.startswith("The tool `delete` needs your approval")
    assert '{"path":"/tmp/x"}' in asked[0].message
    assert asked[0].requested_schema["required"] == ["approve"]


@pytest.mark.parametrize("mode", REVISIONS)
@pytest.mark.parametrize(
    "answer",
    [
        mcp_types.ElicitResult(action="decline"),
        mcp_types.ElicitResult(action="cancel"),
        mcp_types.ElicitResult(action="accept", content={"approve": False}),
        mcp_types.ElicitResult(action="accept", content={}),
    ],
    ids=["decline", "cancel", "approve-false", "accept-without-approve"],
)
async def test_a_refused_call_never_runs(mode: str, answer: mcp_types.ElicitResult) -> None:
    server = ToolServer([delete])
    result = await call(
        server, mode, "delete", {"path": "/x"}, elicitation_callback=answering(answer)
    )
    assert result.is_error and text(result) == "The user denied the call to `delete`."
    assert RAN == []


@pytest.mark.parametrize("mode", REVISIONS)
async def test_a_client_that_cannot_be_asked_gets_an_error_and_the_body_never_runs(
    mode: str,
) -> None:
    server = ToolServer([delete])
    result = await call(server, mode, "delete", {"path": "/x"})
    assert result.is_error
    assert "requires approval" in text(result) and "cannot be asked" in text(result)
    assert RAN == []


async def test_invalid_arguments_of_a_guarded_tool_are_reported_without_asking() -> None:
    asked: list[Any] = []
    server = ToolServer([delete])
    result = await call(
        server, HANDSHAKE, "delete", {"path": 5}, elicitation_callback=answering(APPROVE, asked)
    )
    assert result.is_error and "$.path: Input should be a valid string" in text(result)
    assert asked == [] and RAN == []


async def test_an_unanswered_question_times_out_and_the_body_never_runs() -> None:
    async def never(context: Any, params: Any) -> mcp_types.ElicitResult:
        await anyio.sleep(30)
        raise AssertionError("unreachable")

    server = ToolServer([delete], approval_timeout=0.2)
    with anyio.fail_after(10):
        result = await call(server, HANDSHAKE, "delete", {"path": "/x"}, elicitation_callback=never)
    assert result.is_error and "no answer came within 0.2 seconds" in text(result)
    assert RAN == []


async def test_a_stateless_approval_is_spent_by_its_first_answer() -> None:
    server = ToolServer([delete])
    # The callback only declares the capability: the rounds are driven by hand.
    async with Client(
        server.sdk_server, mode=STATELESS, elicitation_callback=answering(APPROVE)
    ) as client:
        session = client.session
        first = await session.call_tool("delete", {"path": "/x"}, allow_input_required=True)
        assert isinstance(first, mcp_types.InputRequiredResult)
        assert first.input_requests is not None and list(first.input_requests) == ["approval"]
        responses: mcp_types.InputResponses = {"approval": APPROVE}
        again, replayed = [
            await session.call_tool(
                "delete",
                {"path": "/x"},
                input_responses=responses,
                request_state=first.request_state,
                allow_input_required=True,
            )
            for _ in range(2)
        ]
        assert isinstance(again, mcp_types.CallToolResult) and not again.is_error
    # The same approval sent again is a new question, not a second run.
    assert isinstance(replayed, mcp_types.InputRequiredResult)
    assert RAN == ["/x"]


async def test_a_stateless_approval_cannot_run_other_arguments() -> None:
    server = ToolServer([delete])
    async with Client(
        server.sdk_server, mode=STATELESS, elicitation_callback=answering(APPROVE)
    ) as client:
        first = await client.session.call_tool("delete", {"path": "/a"}, allow_input_required=True)
        assert isinstance(first, mcp_types.InputRequiredResult)
        with pytest.raises(MCPError) as raised:
            await client.session.call_tool(
                "delete",
                {"path": "/etc"},
                input_responses={"approval": APPROVE},
                request_state=first.request_state,
                allow_input_required=True,
            )
    assert raised.value.error.code == mcp_types.INVALID_PARAMS
    assert RAN == []


# -- questions ---------------------------------------------------------------------------------

STEPS: list[str] = []


@tool
async def interview() -> str:
    """Ask for a name, then a colour."""
    STEPS.append("start")
    name = await ask_client(
        "Your name?", {"type": "object", "properties": {"name": {"type": "string"}}}
    )
    colour = await ask_client(
        "Your colour?", {"type": "object", "properties": {"colour": {"type": "string"}}}
    )
    STEPS.append("end")
    return f"{(name.content or {}).get('name')} likes {(colour.content or {}).get('colour')}"


@pytest.mark.parametrize("mode", REVISIONS)
async def test_a_tool_asks_its_client_questions(mode: str) -> None:
    async def answer(context: Any, params: Any) -> mcp_types.ElicitResult:
        key = next(iter(params.requested_schema["properties"]))
        return mcp_types.ElicitResult(
            action="accept", content={key: {"name": "Ada", "colour": "green"}[key]}
        )

    STEPS.clear()
    server = ToolServer([interview])
    result = await call(server, mode, "interview", elicitation_callback=answer)
    assert text(result) == "Ada likes green"
    # Statelessly, each answer is a new round: the tool runs again from the start.
    assert STEPS == (["start", "end"] if mode == HANDSHAKE else ["start"] * 3 + ["end"])


async def test_an_answer_that_breaks_the_schema_fails_the_tool() -> None:
    server = ToolServer([interview])
    wrong = mcp_types.ElicitResult(action="accept", content={"name": 5})
    result = await call(server, HANDSHAKE, "interview", elicitation_callback=answering(wrong))
    assert result.is_error and "does not match the requested schema" in text(result)


async def test_asking_outside_a_served_call_is_refused() -> None:
    from agentforge_typed.serving import CannotAskError

    with pytest.raises(CannotAskError, match="only a tool called through a ToolServer"):
        await ask_client("?", {"type": "object", "properties": {}})


# -- progress, logging -------------------------------------------------------------------------


@tool
async def busy(context: ToolContext[None]) -> str:
    """Reports progress and logs."""
    for step in range(3):
        context.report_progress(step, 2, f"step {step}")
        logging.getLogger("agentforge_typed.tool.busy").info("working on %d", step)
        logging.getLogger("httpx").info("not for the client")
        await asyncio.sleep(0)
    return "done"


@tool
def busy_sync(context: ToolContext[None]) -> str:
    """Reports progress from its worker thread."""
    for step in range(3):
        context.report_progress(step, 2)
    return "done"


async def test_progress_and_tool_logs_reach_the_client_before_the_result() -> None:
    progress: list[tuple[float, float | None, str | None]] = []
    logs: list[mcp_types.LoggingMessageNotificationParams] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    reporter: Any = on_progress  # the SDK's `ProgressFnT` protocol names its parameters

    async def on_log(params: mcp_types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    server = ToolServer([busy, busy_sync])
    async with Client(server.sdk_server, mode=HANDSHAKE, logging_callback=on_log) as client:
        result = await client.call_tool("busy", {}, progress_callback=reporter)
        assert text(result) == "done"
        # No log messages before the client asks for them.
        assert logs == []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await client.set_logging_level("info")
        progress.clear()
        await client.call_tool("busy", {}, progress_callback=reporter)
        assert progress == [(0, 2, "step 0"), (1, 2, "step 1"), (2, 2, "step 2")]
        assert [(m.level, m.logger, m.data) for m in logs] == [
            ("info", "agentforge_typed.tool.busy", f"working on {step}") for step in range(3)
        ]
        progress.clear()
        await client.call_tool("busy_sync", {}, progress_callback=reporter)
        assert [p[0] for p in progress] == [0, 1, 2]


# -- deps, timeouts, bounds ----------------------------------------------------------------------


@dataclass
class Db:
    session: int


@tool
def whoami(context: ToolContext[Db]) -> str:
    """The session's number."""
    return str(context.deps.session)


async def test_deps_are_made_once_per_session_or_per_call() -> None:
    made: list[int] = []

    def factory() -> Db:
        made.append(len(made) + 1)
        return Db(made[-1])

    service: ToolService[Db] = ToolService([whoami], deps_type=Db)
    server = ToolServer(service, deps=factory)
    for _ in range(2):
        async with Client(server.sdk_server, mode=HANDSHAKE) as client:
            answers = {text(await client.call_tool("whoami", {})) for _ in range(3)}
        assert len(answers) == 1
    assert made == [1, 2]
    per_call = ToolServer(service, deps=factory, deps_scope="call")
    async with Client(per_call.sdk_server, mode=HANDSHAKE) as client:
        answers = {text(await client.call_tool("whoami", {})) for _ in range(3)}
    assert len(answers) == 3


async def test_deps_that_fail_or_do_not_fit_end_the_call_with_an_error() -> None:
    def broken() -> Db:
        raise ConnectionError("the database is down")

    service: ToolService[Db] = ToolService([whoami], deps_type=Db)
    failed = await call(ToolServer(service, deps=broken), HANDSHAKE, "whoami", {})
    assert failed.is_error
    # The type alone: a factory's message may name a password, and the client is not ours.
    assert text(failed) == "Tool `whoami` did not run: making its deps failed (ConnectionError)"

    def not_db() -> Any:
        return "db"

    wrong = await call(ToolServer(service, deps=not_db), HANDSHAKE, "whoami", {})
    assert wrong.is_error and "made a str, not the Db the tools take" in text(wrong)


def test_tools_that_need_deps_are_refused_without_a_factory() -> None:
    with pytest.raises(TypeError, match=r"whoami \(ToolContext\[Db\]\) needs deps"):
        ToolServer([whoami])


@tool
async def sleepy(seconds: float) -> str:
    """Sleeps."""
    await asyncio.sleep(seconds)
    return "awake"


@tool(timeout=0.1)
async def impatient() -> str:
    """Times out by its own limit."""
    await asyncio.sleep(10)
    return "never"


async def test_timeouts_hold_the_tool_s_own_and_the_server_s() -> None:
    server = ToolServer([sleepy, impatient], call_timeout=0.3)
    with anyio.fail_after(10):
        own = await call(server, HANDSHAKE, "impatient", {})
        overall = await call(server, HANDSHAKE, "sleepy", {"seconds": 10})
    assert own.is_error and text(own) == "Tool `impatient` timed out after 0.1 seconds."
    assert overall.is_error and text(overall) == "Tool `sleepy` timed out after 0.3 seconds."


async def test_calls_past_the_concurrency_bound_are_refused_at_once() -> None:
    server = ToolServer([sleepy], max_concurrent_calls=2)
    async with Client(server.sdk_server, mode=HANDSHAKE) as client:
        results: list[mcp_types.CallToolResult] = []

        async def one() -> None:
            results.append(await client.call_tool("sleepy", {"seconds": 0.5}))

        async with anyio.create_task_group() as tasks:
            for _ in range(4):
                tasks.start_soon(one)
    busy_results = [r for r in results if r.is_error]
    assert len(busy_results) == 2
    assert all("the server is busy (2 calls in flight)" in text(r) for r in busy_results)


async def test_a_cancelled_request_cancels_the_tool_s_task() -> None:
    cancelled = anyio.Event()
    started = anyio.Event()

    @tool
    async def forever() -> str:
        """Runs until cancelled."""
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    server = ToolServer([forever])
    async with Client(server.sdk_server, mode=HANDSHAKE) as client:
        with anyio.move_on_after(5):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(client.call_tool, "forever", {})
                await started.wait()
                tasks.cancel_scope.cancel()
        with anyio.fail_after(5):
            await cancelled.wait()
        assert server._running == 0


def test_options_are_checked() -> None:
    with pytest.raises(TypeError, match="unknown ToolServer option"):
        ToolServer([shout], colour="blue")  # type: ignore[call-overload]
    with pytest.raises(ValueError, match="max_concurrent_calls must be a positive integer"):
        ToolServer([shout], max_concurrent_calls=0)
    with pytest.raises(ValueError, match="call_timeout must be a positive number"):
        ToolServer([shout], call_timeout=0)
    with pytest.raises(ValueError, match="deps_scope must be"):
        ToolServer([shout], deps_scope="forever")  # type: ignore[call-overload]


def _json(value: Any) -> str:
    import json

    return json.dumps(value)


# -- another MCP server's tools, behind a filter --------------------------------------------------


async def test_an_mcp_server_s_tools_are_served_behind_its_filter() -> None:
    import sys

    from agentforge_typed import MCPServer, MCPToolFilter

    sys.path.insert(0, "tests")
    try:
        from mcp_memory import in_memory
    finally:
        sys.path.pop(0)

    upstream = ToolServer([register, double, delete])
    client: MCPServer = in_memory(
        upstream.sdk_server,
        label="upstream",
        tool_filter=MCPToolFilter(allow=["register", "delete"]),
        requires_approval={"delete": True},
        tool_prefix="up_",
    )
    async with client:
        server = ToolServer(client)
        async with Client(server.sdk_server, mode=HANDSHAKE) as session:
            listed = {t.name: t for t in (await session.list_tools()).tools}
            assert list(listed) == ["up_register", "up_delete"]
            # The upstream's output schema travels with its tool.
            assert listed["up_register"].output_schema == upstream.declarations()[0]["outputSchema"]
            person = {"name": "Ada", "born": "1815-12-10", "address": {"street": "S", "city": "L"}}
            result = await session.call_tool("up_register", {"person": person})
            assert result.structured_content == person and not result.is_error
            with pytest.raises(MCPError, match="Unknown tool: up_double"):
                await session.call_tool("up_double", {"n": 1})
            # The proxy's approval policy is asked of this server's client.
            refused = await session.call_tool("up_delete", {"path": "/x"})
    assert refused.is_error and "requires approval" in text(refused)
    assert RAN == []


async def test_tools_that_change_into_ones_that_cannot_be_served_leave_the_listing_as_it_was(
    caplog: pytest.LogCaptureFixture,
) -> None:
    service: ToolService[None] = ToolService([double])
    server = ToolServer(service)

    @tool(external=True)
    def elsewhere() -> str:
        """Runs in the program."""
        return ""

    service.register(elsewhere)  # as a watched source's new tools arrive between requests
    async with Client(server.sdk_server, mode=HANDSHAKE) as client:
        listed = [t.name for t in (await client.list_tools()).tools]
        assert listed == ["double"]
        assert (await client.call_tool("double", {"n": 2})).structured_content == {"result": 4}
    assert "the changed tools cannot be served, the former stay" in caplog.text
