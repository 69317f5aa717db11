"""Asking the client before a call that needs approval runs.

At the handshake revisions (2025-06-18 to 2025-11-25) the question is an `elicitation/create`
request sent during the call, on the call's own stream, answered within `approval_timeout`
seconds. At the stateless revision (2026-07-28) the server cannot send requests: the call is
answered with an `input_required` result holding the question, and the client sends the call
again with the answer (`inputResponses`) and the server's `requestState` (see `Approvals`).

Either way the question is a form with one required boolean, `approve`: only an accepted answer
whose `approve` is `true` runs the call. A declined, cancelled or unanswered question, `approve:
false`, or a client that cannot be asked (it declares no form elicitation, or its connection has
no way back for a request: stateless HTTP) ends the call with an error result, and the tool's
body never runs.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from typing import Any

import anyio
import mcp_types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError

from .._messages import cut_text

__all__ = [
    "APPROVAL_KEY",
    "APPROVAL_SCHEMA",
    "MAX_PENDING_APPROVALS",
    "Approvals",
    "approval_message",
    "ask",
    "can_ask",
    "denied_text",
]

APPROVAL_KEY = "approval"
"""The key of the question in an `input_required` result (and of its answer)."""
APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approve": {
            "type": "boolean",
            "title": "Approve",
            "description": "Run this call: true to run it, false to refuse it.",
        }
    },
    "required": ["approve"],
}
"""The form a client shows: one required boolean, with no default (a client that fills in
defaults and accepts must not approve by accident)."""
MAX_PENDING_APPROVALS = 10_000
"""The most questions asked at the stateless revision and not answered yet, in one server."""
_MAX_SHOWN_ARGUMENTS = 2000
_STATE_PREFIX = "agentforge-approval:"


def approval_message(name: str, arguments: str) -> str:
    """What the person is shown: the tool and its arguments (the first 2,000 characters)."""
    shown = cut_text(arguments, _MAX_SHOWN_ARGUMENTS)
    return f"The tool `{name}` needs your approval to run with these arguments:\n{shown}"


def denied_text(name: str) -> str:
    """The error result of a call the person refused (the loop's wording)."""
    return f"The user denied the call to `{name}`."


def _refusal(name: str, why: str) -> str:
    return f"Tool `{name}` requires approval, and {why}; it did not run."


def approved(answer: object) -> bool:
    """Whether an answer approves the call: accepted, with `approve` exactly `true`."""
    return (
        isinstance(answer, mcp_types.ElicitResult)
        and answer.action == "accept"
        and isinstance(answer.content, dict)
        and answer.content.get("approve") is True
    )


def can_ask(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether the client declared that it answers form questions."""
    capabilities = ctx.session.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    if elicitation is None:
        return False
    # A bare `elicitation: {}` means forms; a client naming modes must name `form`.
    return elicitation.form is not None or elicitation.url is None


async def ask(
    ctx: ServerRequestContext[Any, Any], name: str, arguments: str, seconds: float
) -> str | None:
    """Ask during the call (the handshake revisions); `None` when the call is approved, else
    the error text that ends it."""
    if not can_ask(ctx):
        return _refusal(name, "this client cannot be asked (it declares no form elicitation)")
    if not ctx.session.can_send_request:
        return _refusal(name, "this connection cannot carry a question to the client")
    try:
        with anyio.fail_after(seconds):
            answer = await ctx.session.elicit_form(
                approval_message(name, arguments),
                APPROVAL_SCHEMA,
                related_request_id=ctx.request_id,
            )
    except TimeoutError:
        return _refusal(name, f"no answer came within {seconds:g} seconds")
    except MCPError as exc:
        return _refusal(name, f"asking the client failed ({exc.error.message})")
    return None if approved(answer) else denied_text(name)


def cannot_ask(name: str) -> str:
    """The error text for a stateless-revision client that cannot be asked."""
    return _refusal(name, "this client cannot be asked (it declares no form elicitation)")


class Approvals:
    """The questions asked at the stateless revision, until answered or expired.

    The `requestState` of a question names it by a random nonce; the SDK's
    `RequestStateBoundary` seals it and binds it to the tool and a digest of the arguments, so an
    answer cannot approve another call. The nonce is spent by the first answer that comes back
    with it, so one approval runs the body once, however often the client replays it.
    """

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self._asked: OrderedDict[str, float] = OrderedDict()

    def question(self, name: str, arguments: str) -> mcp_types.InputRequiredResult | str:
        """The `input_required` result asking to approve a call, or the error text when too many
        questions wait."""
        self._expire()
        if len(self._asked) >= MAX_PENDING_APPROVALS:
            return _refusal(name, "too many approvals are pending on this server")
        nonce = secrets.token_urlsafe(16)
        self._asked[nonce] = time.monotonic() + self.ttl
        form = mcp_types.ElicitRequestFormParams(
            message=approval_message(name, arguments), requested_schema=APPROVAL_SCHEMA
        )
        return mcp_types.InputRequiredResult(
            input_requests={APPROVAL_KEY: mcp_types.ElicitRequest(params=form)},
            request_state=_STATE_PREFIX + nonce,
        )

    def answer(self, params: mcp_types.CallToolRequestParams) -> bool | None:
        """What a call sent again says: `True` approved, `False` refused, `None` when it answers
        no open question (ask it)."""
        state = params.request_state
        if state is None or not state.startswith(_STATE_PREFIX):
            return None
        if self._asked.pop(state.removeprefix(_STATE_PREFIX), None) is None:
            return None  # spent, expired, or never ours
        responses = params.input_responses or {}
        if APPROVAL_KEY not in responses:
            return None
        return approved(responses[APPROVAL_KEY])

    def _expire(self) -> None:
        now = time.monotonic()
        while self._asked:
            nonce, expires = next(iter(self._asked.items()))
            if expires > now:
                break
            del self._asked[nonce]
