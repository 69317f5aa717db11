"""Static-typing contract of human approval and external tools."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from typing_extensions import assert_type

from agentforge_typed import (
    AiMessage,
    Approval,
    Approved,
    ChatMessage,
    ChatRequestParameters,
    Elicitation,
    ElicitationAnswer,
    FunctionModel,
    PendingCall,
    ToolCall,
    ToolContext,
    ToolFailed,
    ToolService,
    tool,
)
from agentforge_typed.loop import PendingReason
from agentforge_typed.tools import SchemaTool, ToolSpecification


def over_100(call: ToolCall, context: ToolContext[Any]) -> bool:
    return '"amount": 1000' in call.arguments


async def ask_service(call: ToolCall, context: ToolContext[Any]) -> bool:
    return True


@tool(requires_approval=True)
def transfer(to: str, amount: int) -> str:
    return "sent"


@tool(requires_approval=over_100)
def pay(amount: int) -> str:
    return "paid"


@tool(requires_approval=ask_service)
def delete(path: str) -> None:
    pass


@tool(external=True)
def open_page(url: str) -> str:
    return ""


assert_type(transfer("bob", 5), str)
assert_type(open_page.external, bool)
SchemaTool(
    ToolSpecification(name="t", description="", parameters={}), dict, requires_approval=over_100
)


def reply(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
    return AiMessage(text="hi")


async def main() -> None:
    service = ToolService([transfer, open_page])
    model = FunctionModel(reply)
    paused = service.chat(model, "pay bob")
    assert_type(paused.conversation_id, str | None)
    assert_type(paused.pending, Sequence[PendingCall])
    assert_type(paused.pending[0].call, ToolCall)
    assert_type(paused.pending[0].reason, PendingReason)
    assert_type(paused.pending[0].elicitation, Elicitation | None)
    assert_type(paused.pending[0].digest, str | None)
    assert_type(paused.pending[0].approve(), Approved)
    assert_type(paused.pending[0].approve({"to": "bob", "amount": 5}), Approved)
    assert_type(paused.pending[0].answer({"name": "Ada"}), ElicitationAnswer)
    assert_type(paused.pending[0].answer(action="decline"), ElicitationAnswer)
    paused.pending[0].answer(action="skip")  # type: ignore[arg-type]
    assert_type(Approved(digest=paused.pending[0].digest).digest, str | None)
    assert_type(ElicitationAnswer({"name": "Ada"}, digest="sha256:00").digest, str | None)
    ToolService([transfer], digest_secret=b"0123456789abcdef")
    ToolService([transfer], digest_secret="a secret of 16 chars or more")
    ToolService([transfer], digest_secret=16)  # type: ignore[arg-type]
    question = paused.pending[0].elicitation
    if question is not None:
        assert_type(question.key, str | None)
        assert_type(question.answer({"name": "Ada"}), ElicitationAnswer)
        question.answer(action="skip")  # type: ignore[arg-type]

    decisions: dict[str, Approval] = {
        "a": True,
        "b": False,
        "c": "too much",
        "d": Approved(arguments={"to": "bob", "amount": 5}),
        "f": ElicitationAnswer({"name": "Ada"}),
        "g": ElicitationAnswer(action="decline"),
    }
    service.chat(model, paused.messages, approvals=decisions, external_results={"e": {"x": 1}})
    await service.achat(model, paused.messages, external_results={"e": ToolFailed("404")})
    for _ in service.stream(model, paused.messages, approvals={"a": True}):
        pass
    async for _ in service.astream(model, paused.messages, approvals={"a": Approved()}):
        pass

    service.chat(model, paused.messages, approvals={"a": 1.5})  # type: ignore[dict-item]
    ElicitationAnswer(action="ignore")  # type: ignore[arg-type]
    service.chat(model, paused.messages, approvals=["a"])  # type: ignore[call-overload]


def wrong_arity(call: ToolCall) -> bool:
    return True


tool(requires_approval="yes")  # type: ignore[call-overload]
tool(requires_approval=wrong_arity)  # type: ignore[arg-type]
