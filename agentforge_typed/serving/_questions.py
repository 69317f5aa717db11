"""Questions a served tool asks its client while it runs: a form for the person (`ask_client`,
MCP elicitation) or a completion of the client's model (`ask_client_model`, MCP sampling).

At the handshake revisions the question goes out during the call, on the call's own stream, and
the tool awaits the answer (within the server's `approval_timeout`: wrap the call in
`anyio.fail_after` for less). At
the stateless revision (2026-07-28) a server cannot send requests: the call ends with an
`input_required` result holding the question, the client sends the call again with its answer,
and the tool runs again from the start, each question it asked before answered at once from the
answers so far (the `requestState` carries them, sealed by the SDK and bound to the tool and its
arguments). Code before a question therefore runs once per round at that revision; keep effects
after the questions.

Bounded: a call asks at most `MAX_QUESTIONS` questions, an answer is at most `MAX_ANSWER_CHARS`
characters of JSON, and a requested schema at most `MAX_SCHEMA_CHARS`.
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import mcp_types
import pydantic_core
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from pydantic import ValidationError

from .._records import ElicitationAnswer
from ..tools.mcp._results import OutputSchema
from ._approval import can_ask

__all__ = [
    "MAX_ANSWER_CHARS",
    "MAX_QUESTIONS",
    "MAX_SCHEMA_CHARS",
    "CannotAskError",
    "InputNeeded",
    "Questions",
    "ask_client",
    "ask_client_model",
    "questions",
]

MAX_QUESTIONS = 10
"""The most questions one call may ask its client."""
MAX_ANSWER_CHARS = 64_000
"""The longest answer (as JSON) a client may give to one question."""
MAX_SCHEMA_CHARS = 10_000
"""The largest requested schema (as JSON) a tool may send."""
STATE_PREFIX = "agentforge-questions:"

Kind = Literal["elicitation", "sampling"]


class CannotAskError(RuntimeError):
    """The client cannot be asked: the tool runs outside a served call, the client declares no
    such capability, or its connection cannot carry a request to it."""


class InputNeeded(Exception):  # noqa: N818 - a control-flow signal, as `ModelRetry`
    """Raised through a tool at the stateless revision: the call ends with the question."""

    def __init__(
        self, kind: Kind, request: mcp_types.ElicitRequest | mcp_types.CreateMessageRequest
    ):
        super().__init__("the client must answer a question first")
        self.kind = kind
        self.request = request


@dataclass
class Questions:
    """The questions of one served call: where they go, and (stateless revision) the answers the
    client gave in earlier rounds."""

    ctx: ServerRequestContext[Any, Any]
    seconds: float
    """How long a question waits for its answer (the server's `approval_timeout`)."""
    modern: bool
    answers: list[dict[str, Any]] = field(default_factory=list)
    """The answers so far, oldest first (`{"kind": ..., "answer": {...}}`)."""
    asked: int = 0

    def replayed(self, kind: Kind) -> dict[str, Any] | None:
        """The recorded answer to the next question, if the client gave it already."""
        if self.asked >= MAX_QUESTIONS:
            raise CannotAskError(f"a call may ask its client at most {MAX_QUESTIONS} questions")
        position, self.asked = self.asked, self.asked + 1
        if position >= len(self.answers):
            return None
        recorded = self.answers[position]
        if recorded.get("kind") != kind:
            raise CannotAskError("the answers the client sent back do not match the questions")
        answer = recorded.get("answer")
        return answer if isinstance(answer, dict) else None

    def state(self) -> str:
        """The `requestState` carrying the answers so far."""
        return STATE_PREFIX + pydantic_core.to_json(self.answers).decode()

    def take(self, params: mcp_types.CallToolRequestParams) -> None:
        """Read the answers a call sent again carries (its state, and the answer to the question
        the last round asked).

        Raises:
            CannotAskError: They are malformed or over the bounds.
        """
        state = params.request_state
        if state is None or not state.startswith(STATE_PREFIX):
            return
        try:
            answers = pydantic_core.from_json(state.removeprefix(STATE_PREFIX))
        except ValueError:
            raise CannotAskError("the request state sent back is not ours") from None
        if not isinstance(answers, list) or len(answers) >= MAX_QUESTIONS:
            raise CannotAskError("the request state sent back is not ours")
        latest = (params.input_responses or {}).get(_key(len(answers)))
        if latest is not None:
            answer = latest.model_dump(mode="json", by_alias=True, exclude_none=True)
            if len(pydantic_core.to_json(answer)) > MAX_ANSWER_CHARS:
                raise CannotAskError(f"the client's answer is over {MAX_ANSWER_CHARS} characters")
            kind: Kind = "elicitation" if isinstance(latest, mcp_types.ElicitResult) else "sampling"
            answers.append({"kind": kind, "answer": answer})
        self.answers = answers

    def input_required(self, needed: InputNeeded) -> mcp_types.InputRequiredResult:
        """The result asking `needed`'s question, carrying the answers so far."""
        return mcp_types.InputRequiredResult(
            input_requests={_key(len(self.answers)): needed.request}, request_state=self.state()
        )


def _key(position: int) -> str:
    return f"q{position + 1}"


_current: contextvars.ContextVar[Questions | None] = contextvars.ContextVar(
    "agentforge_typed.serving.questions", default=None
)


def questions() -> contextvars.ContextVar[Questions | None]:
    """The context variable holding the questions of the call running in this context."""
    return _current


def _questions() -> Questions:
    found = _current.get()
    if found is None:
        raise CannotAskError("only a tool called through a ToolServer can ask its MCP client")
    return found


async def ask_client(message: str, schema: Mapping[str, Any]) -> ElicitationAnswer:
    """Ask the person at the calling MCP client to fill in a form (elicitation), from an async
    tool a `ToolServer` serves.

    Args:
        message: What the person is shown.
        schema: The JSON Schema of the answer: an object of string, number, integer, boolean
            and enum properties (the MCP specification's requested schema).

    Returns:
        The answer: `action` `"accept"` with `content` matching `schema`, or `"decline"` /
        `"cancel"` without content.

    Raises:
        CannotAskError: No client can be asked (see the class), or it did not answer in time.
        ValueError: The schema is over `MAX_SCHEMA_CHARS`, or the client's answer does not
            match it.
    """
    asking = _questions()
    requested = dict(schema)
    checked = OutputSchema(requested, tool_name="ask_client")
    if len(pydantic_core.to_json(requested)) > MAX_SCHEMA_CHARS:
        raise ValueError(f"the requested schema is over {MAX_SCHEMA_CHARS} characters of JSON")
    if not can_ask(asking.ctx):
        raise CannotAskError("the client declares no form elicitation: it cannot be asked")
    if asking.modern:
        recorded = asking.replayed("elicitation")
        if recorded is None:
            form = mcp_types.ElicitRequestFormParams(message=message, requested_schema=requested)
            raise InputNeeded("elicitation", mcp_types.ElicitRequest(params=form))
        try:
            answer = mcp_types.ElicitResult.model_validate(recorded)
        except ValidationError:
            raise CannotAskError("the client's answer is not an elicitation result") from None
    else:
        answer = await _send(
            asking,
            mcp_types.ElicitRequest(
                params=mcp_types.ElicitRequestFormParams(
                    message=message, requested_schema=requested
                )
            ),
            mcp_types.ElicitResult,
        )
    if answer.action != "accept":
        return ElicitationAnswer(None, answer.action)
    content = answer.content or {}
    problems = checked.problems(content)
    if problems is not None:
        raise ValueError(f"the client's answer does not match the requested schema:\n{problems}")
    return ElicitationAnswer(content, "accept")


async def ask_client_model(
    prompt: str,
    *,
    system: str | None = None,
    max_tokens: int = 1000,
) -> str:
    """Ask the calling MCP client's model for a completion of `prompt` (sampling), from an async
    tool a `ToolServer` serves; the client may show it to the person first.

    Returns:
        The text the model answered.

    Raises:
        CannotAskError: No client can be asked (it declares no sampling), or it did not answer
            in time.
        ValueError: The model answered with something other than text.
    """
    asking = _questions()
    capabilities = asking.ctx.session.client_capabilities
    if capabilities is None or capabilities.sampling is None:
        raise CannotAskError("the client declares no sampling: its model cannot be asked")
    request = mcp_types.CreateMessageRequest(
        params=mcp_types.CreateMessageRequestParams(
            messages=[
                mcp_types.SamplingMessage(role="user", content=mcp_types.TextContent(text=prompt))
            ],
            system_prompt=system,
            max_tokens=max_tokens,
        )
    )
    if asking.modern:
        recorded = asking.replayed("sampling")
        if recorded is None:
            raise InputNeeded("sampling", request)
        try:
            answer = mcp_types.CreateMessageResult.model_validate(recorded)
        except ValidationError:
            raise CannotAskError("the client's answer is not a sampling result") from None
    else:
        answer = await _send(asking, request, mcp_types.CreateMessageResult)
    if not isinstance(answer.content, mcp_types.TextContent):
        raise ValueError(f"the client's model answered with {answer.content.type}, not text")
    return answer.content.text


async def _send(asking: Questions, request: Any, result_type: Any) -> Any:
    session = asking.ctx.session
    if not session.can_send_request:
        raise CannotAskError("this connection cannot carry a question to the client")
    seconds = asking.seconds
    metadata = ServerMessageMetadata(related_request_id=asking.ctx.request_id)
    try:
        with anyio.fail_after(seconds):
            return await session.send_request(request, result_type, metadata=metadata)
    except TimeoutError:
        raise CannotAskError(f"the client gave no answer within {seconds:g} seconds") from None
    except MCPError as exc:
        raise CannotAskError(f"asking the client failed: {exc.error.message}") from None
