"""Tools that act for the signed-in user, through `ToolContext` deps the model never sees.

Who the user is must not come from the model (it could be talked into asking for someone
else's data), so the tools take a `ToolContext[SupportDeps]` parameter: it is injected at run
time, from `deps=` of `ToolService.chat`, and is not part of the schema the model sees.

    agentforge-typed run examples/support.py:tools "Why was I charged twice?"

The CLI passes this module's `deps` attribute as `deps=` (or pass `--deps module:attribute`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import date

from pydantic import BaseModel

from agentforge_typed import ToolContext, tool


class TicketStatus(str, enum.Enum):
    """Where a support ticket stands."""

    OPEN = "open"
    CLOSED = "closed"


class Ticket(BaseModel):
    """A support ticket."""

    id: str
    subject: str
    status: TicketStatus
    opened: date


class Account(BaseModel):
    """The signed-in user's account."""

    user_id: str
    name: str
    plan: str


@dataclass
class SupportDeps:
    """Everything the tools need at run time: the user, and the data they may see."""

    user_id: str
    accounts: dict[str, Account] = field(default_factory=dict)
    tickets: dict[str, list[Ticket]] = field(default_factory=dict)


@tool
def get_my_account(ctx: ToolContext[SupportDeps]) -> Account:
    """Get the signed-in user's account: name and plan."""
    return ctx.deps.accounts[ctx.deps.user_id]


@tool
def list_my_tickets(
    ctx: ToolContext[SupportDeps], status: TicketStatus | None = None
) -> list[Ticket]:
    """List the signed-in user's support tickets, newest first.

    Args:
        status: Only tickets with this status; all tickets when omitted.
    """
    tickets = ctx.deps.tickets.get(ctx.deps.user_id, [])
    chosen = [t for t in tickets if status is None or t.status is status]
    return sorted(chosen, key=lambda t: t.opened, reverse=True)


tools = [get_my_account, list_my_tickets]
"""The TARGET for the CLI: `examples/support.py:tools`."""

deps = SupportDeps(
    user_id="u-1001",
    accounts={"u-1001": Account(user_id="u-1001", name="Ada Lovelace", plan="pro")},
    tickets={
        "u-1001": [
            Ticket(
                id="T-17",
                subject="Charged twice in May",
                status=TicketStatus.OPEN,
                opened=date(2025, 5, 3),
            ),
            Ticket(
                id="T-9",
                subject="Export to CSV",
                status=TicketStatus.CLOSED,
                opened=date(2025, 2, 11),
            ),
        ]
    },
)
"""What the CLI passes as `deps=` when running this module's tools."""
