"""Workflows, tools and a scripted model for the Temporal tests (and the worker process one of
them starts, through `main`).

Every tool body appends a line to the ledger file named in `deps`, so the tests count executions
outside Temporal. The model is a `FunctionModel` whose script is chosen by the first user message.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sys
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

import httpx
from pydantic import BaseModel, field_validator
from temporalio import activity, workflow
from temporalio.common import RetryPolicy

from agentforge_typed import (
    AiMessage,
    Block,
    ChatMessage,
    ChatRequestParameters,
    FunctionModel,
    ImageContent,
    ModelError,
    OpenAIChatModel,
    Redact,
    SchemaTool,
    ToolAnnotations,
    ToolCall,
    ToolChatResult,
    ToolContext,
    ToolResultMessage,
    ToolSearch,
    ToolService,
    ToolSpecification,
    UserMessage,
    input_guardrail,
    keep_last_rounds,
    max_cost_per_call,
    redact_secrets,
    result_guardrail,
    tool,
)
from agentforge_typed.temporal import (
    ActivityOptions,
    AgentForgePlugin,
    PayloadTooLargeError,
    TemporalToolService,
)


class Ledger(BaseModel):
    """The run's deps: where tool bodies record that they ran."""

    path: str
    gate: str | None = None
    """A file `reserve` waits for after recording itself (the test stops a worker meanwhile)."""


def record(ledger: Ledger, line: str) -> None:
    """Append one line to the ledger."""
    with open(ledger.path, "a", encoding="utf-8") as file:
        file.write(line + "\n")


def entries(path: Path) -> list[str]:
    """The ledger's lines."""
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


@tool
async def reserve(city: str, ctx: ToolContext[Ledger]) -> str:
    """Reserve a table.

    Args:
        city: Where.
    """
    record(ctx.deps, f"reserve {city} {ctx.conversation_id}")
    if ctx.deps.gate is not None:
        for _ in range(400):
            if await asyncio.to_thread(os.path.exists, ctx.deps.gate):
                break
            await asyncio.sleep(0.025)
    return f"table reserved in {city}"


@tool
def pay(amount: int, ctx: ToolContext[Ledger]) -> str:
    """Pay for the table.

    Args:
        amount: Euros.
    """
    record(ctx.deps, f"pay {amount}")
    return f"paid {amount} EUR"


@tool(cache=60, annotations=ToolAnnotations(read_only=True))
def rate(currency: str, ctx: ToolContext[Ledger]) -> str:
    """Today's exchange rate (cached: the worker runs it once per conversation).

    Args:
        currency: Which.
    """
    record(ctx.deps, f"rate {currency}")
    return "1.08"


@tool(timeout=0.3)
async def linger(seconds: float, ctx: ToolContext[Ledger]) -> str:
    """Wait (longer than the tool's own timeout)."""
    record(ctx.deps, "linger")
    await asyncio.sleep(seconds)
    return "lingered"


@tool
async def stall(ctx: ToolContext[Ledger]) -> str:
    """Wait past the activity's timeout."""
    record(ctx.deps, "stall")
    await asyncio.sleep(30)
    return "stalled"


@tool
async def survey(ctx: ToolContext[Ledger]) -> str:
    """Take a while (longer than the activity's heartbeat timeout)."""
    await asyncio.sleep(4.0)
    record(ctx.deps, "survey")
    return "surveyed"


class Receipt:
    """A return value pydantic cannot serialise."""

    def __init__(self, number: int) -> None:
        self.number = number

    def __str__(self) -> str:
        return f"receipt #{self.number}"


@tool(result_converter=str)
def receipt(number: int, ctx: ToolContext[Ledger]) -> Receipt:
    """Issue a receipt.

    Args:
        number: The receipt's number.
    """
    record(ctx.deps, "receipt")
    return Receipt(number)


@tool(result_converter=str)
def post(amount: int, ctx: ToolContext[Ledger]) -> dict[str, object]:
    """Post a ledger entry; it refers to itself, so it has no JSON form (not even by `str`).

    Args:
        amount: What to post.
    """
    record(ctx.deps, "post")
    entry: dict[str, object] = {"amount": amount}
    entry["self"] = entry
    return entry


@tool(max_result_chars=3_000_000)  # the whole text travels: the payload limit is what is tested
def dump(size: int, ctx: ToolContext[Ledger]) -> str:
    """Return `size` characters (a large result).

    Args:
        size: How many.
    """
    record(ctx.deps, f"dump {size}")
    return "x" * size


@tool(max_result_chars=3_000_000)
def dump_rows(count: int, ctx: ToolContext[Ledger]) -> list[str]:
    """Return `count` rows of 100 characters (a large structured result).

    Args:
        count: How many.
    """
    record(ctx.deps, f"dump_rows {count}")
    return ["y" * 100] * count


PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
"""The screenshot's bytes: every byte value, so a lossy round trip shows."""


@tool(max_result_chars=3_000_000)
def euros(count: int, ctx: ToolContext[Ledger]) -> str:
    """Return `count` euro signs: 3 bytes each in UTF-8, 1 character.

    Args:
        count: How many.
    """
    record(ctx.deps, f"euros {count}")
    return "€" * count


@tool(max_result_chars=3_000_000)
def euro_page(count: int, ctx: ToolContext[Ledger]) -> list[str | ImageContent]:
    """A page of `count` euro signs, and its screenshot (content parts).

    Args:
        count: How many.
    """
    record(ctx.deps, f"euro_page {count}")
    return ["€" * count, ImageContent(data=PNG, media_type="image/png")]


@tool
def screenshot(page: str, ctx: ToolContext[Ledger]) -> list[str | ImageContent]:
    """A screenshot of a page.

    Args:
        page: Which page.
    """
    record(ctx.deps, f"screenshot {page}")
    return [f"The {page} page:", ImageContent(data=PNG, media_type="image/png")]


class Order(BaseModel):
    """An item whose own validator raises on an unknown sku (a `KeyError`, not a
    `ValidationError`)."""

    sku: str

    @field_validator("sku")
    @classmethod
    def known(cls, value: str) -> str:
        return {"a": "A"}[value]


@tool
def order(item: Order, ctx: ToolContext[Ledger]) -> str:
    """Order an item.

    Args:
        item: What.
    """
    record(ctx.deps, f"order {item.sku}")
    return "ordered"


class Reservation(BaseModel):
    """The structured answer of the `output` scenario."""

    city: str
    guests: int


def _call(call_id: str, name: str, arguments: str) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


_SCRIPTS: dict[str, list[list[ToolCall]]] = {
    "parallel": [[_call("c1", "reserve", '{"city":"Paris"}'), _call("c2", "pay", '{"amount":12}')]],
    "invalid": [
        [_call("c1", "reserve", '{"city":5}')],
        [_call("c2", "reserve", '{"city":"Oslo"}')],
    ],
    "timeout": [[_call("c1", "linger", '{"seconds":30}'), _call("c2", "stall", "{}")]],
    "heartbeat": [[_call("c1", "survey", "{}")]],
    "cached": [
        [_call("c1", "rate", '{"currency":"USD"}'), _call("c2", "rate", '{"currency":"USD"}')],
        [_call("c3", "rate", '{"currency":"USD"}')],
    ],
    "exhausted": [[_call(f"c{i}", "reserve", '{"city":5}')] for i in range(1, 4)],
    "receipt": [[_call("c1", "receipt", '{"number":7}')]],
    "post": [[_call("c1", "post", '{"amount":5}')]],
    "output": [
        [_call("c1", "reserve", '{"city":"Paris"}')],
        [_call("c2", "final_result", '{"city":"Paris","guests":"two"}')],
        [_call("c3", "final_result", '{"city":"Paris","guests":2}')],
    ],
    "durable": [
        [_call("c1", "reserve", '{"city":"Paris"}')],
        [_call("c2", "pay", '{"amount":12}')],
    ],
    "search": [
        [_call("c1", "search_tools", '{"query":"pay for the table"}')],
        [_call("c2", "pay", '{"amount":12}')],
    ],
    "mixed": [
        [
            _call("c1", "reserve", '{"city":"Paris"}'),
            _call("c2", "transfer", '{"to":"bob","amount":250}'),
            _call("c3", "open_page", '{"url":"https://example.com"}'),
        ]
    ],
    "transfer": [[_call("c1", "transfer", '{"to":"bob","amount":250}')]],
    "image": [[_call("c1", "screenshot", '{"page":"home"}')]],
    "big": [[_call("c1", "dump", '{"size":1200000}')]],
    "big_rows": [[_call("c1", "dump_rows", '{"count":12000}')]],
    "huge": [[_call("c1", "dump", '{"size":2100000}')]],
    # 900,000 characters, 2.7 MB in UTF-8; 700,000 as a text part beside an image (2.1 MB).
    "euros": [[_call("c1", "euros", '{"count":900000}')]],
    "euro_page": [[_call("c1", "euro_page", '{"count":700000}')]],
    "keyerror": [[_call("c1", "order", '{"item":{"sku":"zzz"}}')]],
    # 3,000 distinct objects under `uniqueItems`: validated in the workflow task, which must not
    # outlast Temporal's deadlock detector (2 s).
    "unique": [
        [_call("c1", "tag", json.dumps({"items": [{"id": i, "n": "x" * 10} for i in range(3000)]}))]
    ],
    # A server that repeats ids: two transfers with one id, and the id again next round.
    "twins": [
        [
            _call("c1", "transfer", '{"to":"bob","amount":5}'),
            _call("c1", "transfer", '{"to":"mallory","amount":999999}'),
        ],
        [_call("c1", "transfer", '{"to":"eve","amount":7}')],
    ],
}


def script(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
    """The next turn of the scenario named by the first user message; last, a summary."""
    first = next(m for m in messages if isinstance(m, UserMessage))
    turns = _SCRIPTS[str(first.content)]
    done = sum(isinstance(m, AiMessage) for m in messages)
    if done < len(turns):
        return AiMessage(tool_calls=turns[done])
    results = [
        f"{m.tool_name}: {_short(m.text)}{_digest(m)}"
        for m in messages
        if isinstance(m, ToolResultMessage)
    ]
    return AiMessage(text="; ".join(results))


def _digest(message: ToolResultMessage) -> str:
    """The SHA-256 of the bytes a result's images hold, to show they arrived intact."""
    # `getattr`: the worker process of another test imports the installed package, which may
    # predate `content` (a worktree's tests run against the main checkout's install).
    parts = getattr(message, "content", ())
    data = [part.data for part in parts if isinstance(part, ImageContent) and part.data]
    if not data:
        return ""
    return f" sha256={hashlib.sha256(b''.join(d for d in data if d is not None)).hexdigest()}"


def _short(text: str) -> str:
    """A result as the summary quotes it: a large one by its size."""
    return text if len(text) <= 1000 else f"<{len(text)} characters>"


def _tag(arguments: dict[str, object]) -> str:
    return f"tagged {len(arguments['items'])}"  # type: ignore[arg-type]


TAG = SchemaTool(
    ToolSpecification(
        name="tag",
        description="Tag distinct items.",
        parameters={
            "type": "object",
            "properties": {
                "items": {
                    "type": "array",
                    "uniqueItems": True,
                    "items": {
                        "type": "object",
                        "properties": {"id": {"type": "integer"}, "n": {"type": "string"}},
                    },
                }
            },
            "required": ["items"],
        },
    ),
    _tag,
)
"""A schema tool whose arguments a model can make large: `uniqueItems` over objects."""

service = ToolService(
    [
        reserve,
        pay,
        linger,
        stall,
        survey,
        receipt,
        post,
        dump,
        dump_rows,
        order,
        TAG,
        screenshot,
        euros,
        euro_page,
        rate,
    ]
)
durable = TemporalToolService(
    service,
    FunctionModel(script),
    name="booking",
    deps_type=Ledger,
    tool_options={
        "stall": ActivityOptions(
            start_to_close_timeout=timedelta(seconds=1),
            retry_policy=RetryPolicy(maximum_attempts=1),
        ),
        "survey": ActivityOptions(
            heartbeat_timeout=timedelta(seconds=2),
            retry_policy=RetryPolicy(maximum_attempts=1),
        ),
    },
)


@workflow.defn
class BookingWorkflow:
    """Runs one scenario durably and returns the conversation's last text."""

    @workflow.run
    async def run(self, scenario: str, ledger: Ledger) -> list[str]:
        tools = ToolSearch(core=["reserve"], max_results=1) if scenario == "search" else None
        result = await durable.chat(scenario, deps=ledger, tools=tools)
        failed = [e.call.id for e in result.tool_executions if e.failed]
        return [result.text or "", ",".join(failed)]


@workflow.defn
class ReservationWorkflow:
    """Asks for a structured answer; returns it with the values the tools returned."""

    @workflow.run
    async def run(self, ledger: Ledger) -> tuple[Reservation, list[str]]:
        result = await durable.chat("output", deps=ledger, output_type=Reservation)
        assert not result.paused
        return result.output, [e.call.name for e in result.tool_executions]


@workflow.defn
class ReceiptWorkflow:
    """Returns what the loop recorded as the `receipt` tool's value."""

    @workflow.run
    async def run(self, ledger: Ledger) -> list[str]:
        result = await durable.chat("receipt", deps=ledger)
        value = result.tool_executions[0].result.value
        return [result.text or "", repr(value)]


@workflow.defn
class WrongDepsWorkflow:
    """Passes deps that are not a `Ledger`."""

    @workflow.run
    async def run(self) -> list[str]:
        result = await durable.chat("receipt", deps={"ledger": "nowhere"})
        return [result.text or "", ",".join(e.call.id for e in result.tool_executions if e.failed)]


@workflow.defn
class OpaqueDepsWorkflow:
    """Passes deps pydantic cannot serialise."""

    @workflow.run
    async def run(self) -> str:
        result = await durable.chat("parallel", deps=object())
        return result.text or ""


OPENAI_REPLIES: list[httpx.Response] = []
"""What the mock OpenAI endpoint answers, one response per request, in order."""
OPENAI_REQUESTS: list[httpx.Request] = []


def _openai(request: httpx.Request) -> httpx.Response:
    OPENAI_REQUESTS.append(request)
    return OPENAI_REPLIES.pop(0)


def openai_answer(text: str) -> httpx.Response:
    """A Chat Completions answer as OpenAI sends it."""
    body = {
        "id": "chatcmpl-AfN2x",
        "object": "chat.completion",
        "created": 1733000000,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 21, "completion_tokens": 3, "total_tokens": 24},
        "system_fingerprint": "fp_0ba0d124f1",
    }
    return httpx.Response(200, json=body)


def openai_error(status: int, message: str) -> httpx.Response:
    """An OpenAI error body."""
    error = {"message": message, "type": "invalid_request_error", "param": None, "code": None}
    return httpx.Response(status, json={"error": error})


openai_durable = TemporalToolService(
    ToolService([pay]),
    OpenAIChatModel(
        "gpt-4o-mini",
        api_key="sk-proj-TESTKEY0123456789abcdefXYZ",
        async_http_client=httpx.AsyncClient(transport=httpx.MockTransport(_openai)),
        max_retries=2,
    ),
    name="openai-booking",
    model_options=ActivityOptions(
        start_to_close_timeout=timedelta(seconds=10),
        retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=50), maximum_attempts=3),
    ),
)


@workflow.defn
class OpenAIWorkflow:
    """One question to the (mock) OpenAI model, durably."""

    @workflow.run
    async def run(self, question: str) -> str:
        # `pay` needs a ledger, though this conversation never calls it.
        result = await openai_durable.chat(question, deps=Ledger(path=os.devnull))
        return result.text or ""


@tool(requires_approval=True)
def transfer(to: str, amount: int, ctx: ToolContext[Ledger]) -> str:
    """Move money.

    Args:
        to: Who gets it.
        amount: Euros.
    """
    record(ctx.deps, f"transfer {to} {amount}")
    return f"sent {amount} to {to}"


@tool(external=True)
def open_page(url: str) -> str:
    """Open a page in the user's browser (the client does it)."""
    raise NotImplementedError


approving = TemporalToolService(
    ToolService([reserve, transfer, open_page]),
    FunctionModel(script),
    name="approving",
    deps_type=Ledger,
)


class Outcome(BaseModel):
    """What an approval workflow's run ended with."""

    text: str
    failed: list[str]
    pending: list[str]
    messages: list[ChatMessage]

    @classmethod
    def of(cls, result: ToolChatResult[None]) -> Outcome:
        """The outcome of `result`."""
        return cls(
            text=result.text or "",
            failed=[e.call.id for e in result.tool_executions if e.failed],
            pending=[p.call.id for p in result.pending],
            messages=list(result.messages),
        )


@workflow.defn
class ApprovalWorkflow:
    """Runs a scenario whose calls wait for decisions (`timeout`: the approval timeout)."""

    @workflow.run
    async def run(self, scenario: str, ledger: Ledger, timeout: float | None) -> Outcome:
        limit = None if timeout is None else timedelta(seconds=timeout)
        result = await approving.chat(scenario, deps=ledger, approval_timeout=limit)
        return Outcome.of(result)


@workflow.defn
class ResumeWorkflow:
    """Resumes a stored history with approvals."""

    @workflow.run
    async def run(
        self, messages: list[ChatMessage], approvals: dict[str, bool | str], ledger: Ledger
    ) -> Outcome:
        result = await approving.chat(messages, deps=ledger, approvals=approvals)
        return Outcome.of(result)


@workflow.defn
class TwoRunsWorkflow:
    """Runs two scenarios at once in one workflow, both waiting for decisions."""

    @workflow.run
    async def run(self, scenarios: list[str], ledger: Ledger) -> list[Outcome]:
        results = await asyncio.gather(*(approving.chat(s, deps=ledger) for s in scenarios))
        return [Outcome.of(result) for result in results]


def _teller(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
    """The sub-run's model: one transfer (it waits for approval), then what it read."""
    if isinstance(messages[-1], ToolResultMessage):
        return AiMessage(text=f"teller: {messages[-1].text}")
    return AiMessage(tool_calls=[_call("t1", "transfer", '{"to":"bob","amount":250}')])


def _bank(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
    if isinstance(messages[-1], ToolResultMessage):
        return AiMessage(text=f"bank: {messages[-1].text}")
    return AiMessage(tool_calls=[_call("c1", "teller", '{"task":"send bob 250"}')])


delegating = TemporalToolService(
    ToolService(
        [ToolService([transfer]).as_tool(FunctionModel(_teller), name="teller", description="d")]
    ),
    FunctionModel(_bank),
    name="delegating",
    deps_type=Ledger,
)
"""A durable loop whose one tool is a sub-run that waits for an approval."""


@workflow.defn
class SubRunWorkflow:
    """Runs `delegating` once: its sub-run's transfer waits for a decision."""

    @workflow.run
    async def run(self, ledger: Ledger) -> Outcome:
        return Outcome.of(await delegating.chat("send bob 250", deps=ledger))


def _count(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
    return AiMessage(text=f"{len(messages)} messages.")


counting = TemporalToolService(ToolService(), FunctionModel(_count), name="counting")
"""A durable loop whose model answers with the length of the history it was sent."""

HISTORY_LINE = "A line of an earlier conversation, about as long as a real one, repeated here. " * 2


@workflow.defn
class HistoryWorkflow:
    """Runs one round over a history of `size` messages; returns the model's answer."""

    @workflow.run
    async def run(self, size: int) -> str:
        history: list[ChatMessage] = [
            UserMessage(content=f"{HISTORY_LINE}{n}") for n in range(size)
        ]
        result = await counting.chat(history)
        return result.text or ""


def _pay_thrice(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
    # It reads which round it is from the last result it was sent (the history is trimmed).
    last = next((m for m in reversed(messages) if isinstance(m, ToolResultMessage)), None)
    done = 0 if last is None else int(last.tool_call_id.removeprefix("p")) + 1
    if done < 3:
        return AiMessage(tool_calls=[_call(f"p{done}", "pay", f'{{"amount":{done + 1}}}')])
    return AiMessage(text=" ".join(m.role for m in messages))


def _without_results(messages: list[ChatMessage]) -> list[ChatMessage]:
    return [m for m in messages if not isinstance(m, ToolResultMessage)]


trimming = TemporalToolService(
    ToolService([pay], history_processors=[keep_last_rounds(1)]),
    FunctionModel(_pay_thrice),
    name="trimming",
    deps_type=Ledger,
)
"""A durable loop whose model is sent the start of the conversation and its last round."""
splitting = TemporalToolService(
    ToolService([pay], history_processors=[_without_results]),
    FunctionModel(_pay_thrice),
    name="splitting",
    deps_type=Ledger,
)
"""A durable loop whose history processor drops results (and is refused)."""


@workflow.defn
class TrimmedWorkflow:
    """Pays three times through a trimmed history; returns the last answer (the roles the model
    was sent) and the roles of the run's whole history."""

    @workflow.run
    async def run(self, ledger: Ledger, split: bool) -> list[str]:
        result = await (splitting if split else trimming).chat("pay", deps=ledger)
        return [result.text or "", " ".join(m.role for m in result.messages)]


# -- guardrails, in the workflow ---------------------------------------------------------------


def _pay_twice(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
    if isinstance(messages[-1], ToolResultMessage):
        results = [m.text for m in messages if isinstance(m, ToolResultMessage)]
        return AiMessage(text=" | ".join(results))
    return AiMessage(
        tool_calls=[_call("g1", "pay", '{"amount": 1}'), _call("g2", "pay", '{"amount": 500}')]
    )


@input_guardrail
def no_refunds(messages: Sequence[ChatMessage]) -> Block | None:
    return Block("refunds go through a person") if "refund" in str(messages[-1]) else None


guarded = TemporalToolService(
    ToolService(
        [pay],
        guardrails=[
            no_refunds,
            max_cost_per_call(100, "amount"),
            result_guardrail(
                lambda e: Redact(e.result.text.replace("EUR", "[currency]")), name="c"
            ),
            redact_secrets(),
        ],
    ),
    FunctionModel(_pay_twice),
    name="guarded",
    deps_type=Ledger,
)
"""A durable loop with guardrails at the input, each call and each result."""


@workflow.defn
class GuardedWorkflow:
    """Runs `prompt` on `guarded`: the answer, and each execution's decision and guardrails."""

    @workflow.run
    async def run(self, prompt: str, ledger: Ledger) -> list[str]:
        result = await guarded.chat(prompt, deps=ledger)
        decided = [
            f"{e.decision.outcome} {e.decision.rule} {[g.action for g in e.guardrails]}"
            for e in result.tool_executions
        ]
        return [result.text or "", *decided]


# -- what each activity carries ---------------------------------------------------------------


def _grow(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
    """The scenario named by the first user message: `grow <size>` calls `dump` for `size`
    characters every round (the conversation grows without end); `answer <size>` answers with
    `size` characters; `argue <size>` calls `reserve` with a city of `size` characters, `named
    <size>` with an id of `size` characters."""
    first = next(m for m in messages if isinstance(m, UserMessage))
    scenario, size = str(first.content).split()
    rounds = sum(isinstance(m, AiMessage) for m in messages)
    if scenario == "answer":
        return AiMessage(text="€" * int(size))
    if scenario == "argue" and rounds == 0:
        return AiMessage(tool_calls=[_call("a1", "reserve", json.dumps({"city": "x" * int(size)}))])
    if scenario == "named" and rounds == 0:
        return AiMessage(tool_calls=[_call("i" * int(size), "reserve", '{"city":"Oslo"}')])
    if scenario == "grow":
        return AiMessage(tool_calls=[_call(f"g{rounds}", "dump", json.dumps({"size": int(size)}))])
    return AiMessage(text="done")


growing = TemporalToolService(
    service, FunctionModel(_grow), name="growing", deps_type=Ledger, max_payload_bytes=50_000
)
"""A durable loop whose activities may carry 50 kB (the test server enforces no limit)."""
growing_default = TemporalToolService(
    ToolService([dump]), FunctionModel(_grow), name="growing-default", deps_type=Ledger
)
"""The same, with the default bound, for the dev server (whose limit is Temporal's 2 MiB)."""


class Grown(BaseModel):
    """How a run that grew past its bound ended: the error, and the history it carries."""

    error: str
    roles: list[str]
    ran: list[str]


@workflow.defn
class GrowingWorkflow:
    """Runs `scenario` on `growing` (or `growing-default`); keeps the error's history when asked
    to `catch` it, or lets it fail the workflow."""

    @workflow.run
    async def run(self, name: str, scenario: str, ledger: Ledger, catch: bool) -> Grown:
        durable = growing if name == "growing" else growing_default
        try:
            result = await durable.chat(scenario, deps=ledger)
        except PayloadTooLargeError as error:
            if not catch:
                raise
            ran = [e.call.id for e in error.tool_executions]
            return Grown(error=str(error), roles=[m.role for m in error.messages], ran=ran)
        return Grown(error="", roles=[m.role for m in result.messages], ran=[])


# -- deps resolved on the worker ----------------------------------------------------------------

SECRET = "sk-vault-5f1c0e9a7b3d4e2f8a6c"
"""The token the worker adds to the deps: it must never enter a workflow's history."""


class Vault(BaseModel):
    """What `withdraw` sees: the ledger that travelled, and the worker's token."""

    path: str
    token: str


async def unlock(ledger: Ledger) -> Vault:
    """`resolve_deps`: the worker's side of the deps (async, as a secret manager's client is)."""
    await asyncio.sleep(0)
    if ledger.gate == "locked":
        raise RuntimeError("the vault is locked")
    return Vault(path=ledger.path, token=SECRET)


@tool
def withdraw(amount: int, ctx: ToolContext[Vault]) -> str:
    """Withdraw money with the vault's token.

    Args:
        amount: Euros.
    """
    holds = "with" if ctx.deps.token == SECRET else "without"
    record(Ledger(path=ctx.deps.path), f"withdraw {amount} {holds} the token")
    return f"withdrew {amount}"


def _calls_once(name: str, arguments: str) -> FunctionModel:
    """A model that calls `name` once, then answers with the call's result."""

    def turn(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        results = [m for m in messages if isinstance(m, ToolResultMessage)]
        if not results:
            return AiMessage(tool_calls=[_call("c1", name, arguments)])
        return AiMessage(text=results[0].text)

    return FunctionModel(turn)


vaulted = TemporalToolService(
    ToolService([withdraw]),
    _calls_once("withdraw", '{"amount":40}'),
    name="vaulted",
    deps_type=Ledger,
    resolve_deps=unlock,
    tool_options=ActivityOptions(
        retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=50), maximum_attempts=2)
    ),
)
"""A durable loop whose tool's token is resolved on the worker: the workflow sends a `Ledger`."""


@workflow.defn
class VaultWorkflow:
    """Withdraws once; returns the answer."""

    @workflow.run
    async def run(self, ledger: Ledger) -> str:
        result = await vaulted.chat("withdraw", deps=ledger)
        return result.text or ""


# -- once per decision --------------------------------------------------------------------------


def _flaky(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
    """Pays, then fails the first attempt of the next model call (a 503), then answers."""
    results = [m for m in messages if isinstance(m, ToolResultMessage)]
    if not results:
        return AiMessage(tool_calls=[_call("c1", "pay", '{"amount":12}')])
    if activity.info().attempt == 1:
        raise ModelError("The server is overloaded", 503)
    return AiMessage(text=results[0].text)


@tool
async def charge(amount: int, ctx: ToolContext[Ledger]) -> str:
    """Charge a card; the first attempt hangs after the charge went through.

    Args:
        amount: Euros.
    """
    attempt = activity.info().attempt
    record(ctx.deps, f"charge {amount} {ctx.idempotency_key} attempt={attempt}")
    if attempt == 1:
        await asyncio.sleep(30)  # past the activity's start-to-close timeout: it is retried
    return f"charged {amount}"


_QUICK_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=50), maximum_attempts=3)

flaky = TemporalToolService(
    ToolService([pay]),
    FunctionModel(_flaky),
    name="flaky",
    deps_type=Ledger,
    model_options=ActivityOptions(retry_policy=_QUICK_RETRY),
)
"""A durable loop whose model fails once after a tool ran: Temporal retries the model call."""
charging = TemporalToolService(
    ToolService([charge]),
    _calls_once("charge", '{"amount":30}'),
    name="charging",
    deps_type=Ledger,
    tool_options=ActivityOptions(
        start_to_close_timeout=timedelta(seconds=1), retry_policy=_QUICK_RETRY
    ),
)
"""A durable loop whose tool's first attempt does not finish after its side effect."""


@workflow.defn
class OnceWorkflow:
    """Runs `flaky` or `charging` once; returns the answer."""

    @workflow.run
    async def run(self, name: str, ledger: Ledger) -> str:
        result = await (flaky if name == "flaky" else charging).chat(name, deps=ledger)
        return result.text or ""


PLUGIN = AgentForgePlugin(passthrough_modules=[__name__])


async def serve(target: str, task_queue: str, identity: str) -> None:
    """Run a worker for the booking workflow until the process is stopped."""
    from temporalio.client import Client
    from temporalio.worker import Worker

    client = await Client.connect(target, plugins=[PLUGIN])
    worker = Worker(
        client,
        task_queue=task_queue,
        workflows=[BookingWorkflow],
        activities=durable.activities,
        identity=identity,
    )
    print("worker ready", flush=True)
    await worker.run()


def main() -> None:
    """`python -c "import temporal_support; temporal_support.main()" HOST:PORT QUEUE IDENTITY`."""
    asyncio.run(serve(*sys.argv[1:4]))
