"""One decision per call: `execution.decision` records which rule allowed, asked or refused each
call, in the documented order (selection, a person's decision, `CallRule`s, the tool's own
`requires_approval`, guardrails, `before_tool_call`); a rule that raises refuses."""

from __future__ import annotations

from collections.abc import Sequence
from importlib.metadata import version
from typing import Any

import pytest
from loop_drivers import DRIVERS, drive

from agentforge_typed import (
    AiMessage,
    CallDecision,
    CallRule,
    ChatMessage,
    ChatRequestParameters,
    FunctionModel,
    ToolAnnotations,
    ToolCall,
    ToolFailed,
    ToolResultMessage,
    ToolService,
    available_tools_handler,
    tool,
)

ran: list[str] = []


@tool
def pay(cents: int) -> str:
    """Pay an amount."""
    ran.append(f"pay {cents}")
    return f"paid {cents}"


@tool(requires_approval=True)
def wire(cents: int) -> str:
    """Wire an amount."""
    ran.append(f"wire {cents}")
    return f"wired {cents}"


@tool(requires_approval=lambda call, context: '"cents": 1' not in call.arguments)
def refund(cents: int) -> str:
    """Refund an amount."""
    ran.append(f"refund {cents}")
    return f"refunded {cents}"


@tool(external=True)
def ship(address: str) -> str:
    """Ship to an address (done elsewhere)."""
    raise AssertionError("an external tool never runs here")


@tool(annotations=ToolAnnotations(read_only=True))
def balance() -> str:
    """Read the balance."""
    ran.append("balance")
    return "12"


@pytest.fixture(autouse=True)
def _fresh() -> None:
    ran.clear()


def calling(*calls: tuple[str, str]) -> FunctionModel:
    """A model that makes `calls` in one round, then says it is done."""

    def answer(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        if isinstance(messages[-1], ToolResultMessage):
            return AiMessage(text="done")
        return AiMessage(
            tool_calls=[
                ToolCall(id=f"c{i}", name=name, arguments=arguments)
                for i, (name, arguments) in enumerate(calls)
            ]
        )

    return FunctionModel(answer)


def decisions(result: Any) -> list[tuple[str, str]]:
    return [(e.decision.outcome, e.decision.rule) for e in result.tool_executions]


ALL = [pay, wire, refund, ship, balance]


# -- without rules: what each existing mechanism decided, now recorded ---------------------------


@pytest.mark.parametrize("driver", DRIVERS)
def test_without_rules_every_call_runs_as_before_and_its_decision_is_recorded(driver: str) -> None:
    service = ToolService(ALL)
    model = calling(("pay", '{"cents": 5}'), ("refund", '{"cents": 1}'), ("balance", "{}"))
    result = drive(driver, service, model, "go")
    assert sorted(ran) == ["balance", "pay 5", "refund 1"]
    assert decisions(result) == [("allowed", "default")] * 3
    assert result.tool_executions[0].decision == CallDecision("allowed", "default")


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_person_and_an_external_result_decide_a_resumed_call(driver: str) -> None:
    service = ToolService(ALL)
    model = calling(
        ("wire", '{"cents": 5}'), ("refund", '{"cents": 9}'), ("ship", '{"address": "x"}')
    )
    paused = drive(driver, service, model, "go")
    assert [(p.call.name, p.reason) for p in paused.pending] == [
        ("wire", "approval"),
        ("refund", "approval"),
        ("ship", "external"),
    ]
    ids = [p.call.id for p in paused.pending]
    result = drive(
        driver,
        service,
        model,
        paused.messages,
        approvals={ids[0]: True, ids[1]: "not today"},
        external_results={ids[2]: ToolFailed("no courier")},
    )
    assert ran == ["wire 5"]
    assert [(e.decision.outcome, e.decision.rule) for e in result.tool_executions] == [
        ("allowed", "approval"),
        ("refused", "approval"),
        ("allowed", "external"),
    ]


def test_a_call_held_again_is_asked_and_a_hook_answer_is_recorded() -> None:
    service = ToolService(
        [pay, wire], before_tool_call=lambda call, context: "cached" if call.name == "pay" else None
    )
    result = service.chat(calling(("pay", '{"cents": 1}'), ("wire", '{"cents": 2}')), "go")
    assert ran == []
    (execution,) = result.tool_executions
    assert execution.decision == CallDecision("allowed", "before_tool_call")
    assert execution.result.text == "cached"
    refusing = ToolService(
        [pay], before_tool_call=lambda call, context: af_error("denied by the hook")
    )
    refused = refusing.chat(calling(("pay", '{"cents": 1}')), "go")
    assert refused.tool_executions[0].decision == CallDecision("refused", "before_tool_call")


def af_error(text: str) -> Any:
    from agentforge_typed import ToolExecutionResult

    return ToolExecutionResult.error(text, "denied")


def test_a_call_the_run_does_not_offer_is_refused_by_selection() -> None:
    service = ToolService([pay, balance], unknown_tool_handler=available_tools_handler)
    result = service.chat(calling(("pay", '{"cents": 1}')), "go", tools=["balance"])
    assert ran == []
    assert result.tool_executions[0].decision == CallDecision("refused", "selection")


# -- rules ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_refusing_rule_answers_the_model_and_the_body_never_runs(driver: str) -> None:
    rule = CallRule.refuse(["pay"], reason="payments are frozen")
    result = drive(driver, ToolService(ALL, rules=[rule]), calling(("pay", '{"cents": 5}')), "go")
    assert ran == []
    (execution,) = result.tool_executions
    assert execution.result.text == "The call to `pay` was refused: payments are frozen"
    assert execution.result.error_kind == "denied"
    assert execution.decision == CallDecision("refused", "rule:refuse pay", "payments are frozen")


@pytest.mark.parametrize("driver", DRIVERS)
def test_an_asking_rule_holds_a_call_and_the_person_decides_it(driver: str) -> None:
    rule = CallRule.ask(["pay"], when=lambda arguments: arguments.cents > 100, name="big")
    service = ToolService(ALL, rules=[rule])
    model = calling(("pay", '{"cents": 500}'), ("pay", '{"cents": 5}'))
    paused = drive(driver, service, model, "go")
    assert ran == ["pay 5"]
    assert [p.call.arguments for p in paused.pending] == ['{"cents": 500}']
    result = drive(
        driver, service, model, paused.messages, approvals={paused.pending[0].call.id: True}
    )
    assert ran == ["pay 5", "pay 500"]
    assert decisions(result) == [("allowed", "approval")]


@pytest.mark.parametrize("driver", DRIVERS)
def test_an_allowing_rule_runs_a_call_its_tool_would_hold(driver: str) -> None:
    rule = CallRule.allow(["wire"], when=lambda arguments: arguments.cents <= 10)
    service = ToolService(ALL, rules=[rule])
    result = drive(
        driver, service, calling(("wire", '{"cents": 10}'), ("wire", '{"cents": 11}')), "go"
    )
    assert ran == ["wire 10"]
    assert decisions(result) == [("allowed", "rule:allow wire")]
    assert [p.call.arguments for p in result.pending] == ['{"cents": 11}']


def test_the_first_rule_that_matches_decides() -> None:
    rules = [
        CallRule.allow(["pay"], when=lambda a: a.cents < 10, name="small"),
        CallRule.refuse(["pay"], name="rest"),
    ]
    result = ToolService(ALL, rules=rules).chat(
        calling(("pay", '{"cents": 5}'), ("pay", '{"cents": 50}')), "go"
    )
    assert ran == ["pay 5"]
    assert decisions(result) == [("allowed", "rule:small"), ("refused", "rule:rest")]


def test_a_rule_on_a_group_and_on_every_tool() -> None:
    service = ToolService(groups={"money": [pay, wire]}, rules=[CallRule.refuse(["group:money"])])
    service.register(balance)
    result = service.chat(calling(("pay", '{"cents": 1}'), ("balance", "{}")), "go")
    assert decisions(result) == [("refused", "rule:refuse group:money"), ("allowed", "default")]
    everything = ToolService([pay, balance], rules=[CallRule.refuse(name="lockdown")])
    locked = everything.chat(calling(("pay", '{"cents": 1}'), ("balance", "{}")), "go")
    assert decisions(locked) == [("refused", "rule:lockdown")] * 2
    assert ran == ["balance"]


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_rule_that_raises_refuses_the_call(driver: str) -> None:
    def broken(arguments: Any) -> bool:
        raise KeyError("the rule's own bug")

    service = ToolService(ALL, rules=[CallRule.allow(["pay"], when=broken, name="broken")])
    result = drive(driver, service, calling(("pay", '{"cents": 1}')), "go")
    assert ran == []
    (execution,) = result.tool_executions
    assert execution.decision == CallDecision("refused", "rule:broken", "the rule raised KeyError")
    assert execution.result.text == "The call to `pay` was refused: the rule raised KeyError"


def test_a_rule_that_answers_anything_but_a_bool_refuses() -> None:
    sloppy: Any = lambda arguments: "yes"  # noqa: E731 - typed Any: what a program may pass anyway
    rule = CallRule.allow(["pay"], when=sloppy, name="sloppy")
    result = ToolService(ALL, rules=[rule]).chat(calling(("pay", '{"cents": 1}')), "go")
    assert result.tool_executions[0].decision.reason == "the rule answered str, not bool"
    assert ran == []


def test_a_rule_does_not_match_invalid_arguments_which_run_nothing() -> None:
    rule = CallRule.allow(["wire"], when=lambda arguments: True)
    result = ToolService(ALL, rules=[rule]).chat(calling(("wire", '{"cents": "x"}')), "go")
    # Not matched: the tool's own policy decides, and an invalid call is never held.
    assert ran == [] and not result.pending
    assert result.tool_executions[0].result.error_kind == "arguments"


def test_an_external_call_waits_for_its_result_whatever_a_rule_says() -> None:
    service = ToolService(ALL, rules=[CallRule.allow(["ship"]), CallRule.ask(["ship"])])
    result = service.chat(calling(("ship", '{"address": "x"}')), "go")
    assert [p.reason for p in result.pending] == ["external"]
    refusing = ToolService(ALL, rules=[CallRule.refuse(["ship"])])
    refused = refusing.chat(calling(("ship", '{"address": "x"}')), "go")
    assert decisions(refused) == [("refused", "rule:refuse ship")] and not refused.pending


def test_a_rule_on_an_annotation_reads_what_a_program_declares() -> None:
    service = ToolService(ALL, rules=[CallRule.allow(annotation="read_only"), CallRule.refuse()])
    result = service.chat(calling(("balance", "{}"), ("pay", '{"cents": 1}')), "go")
    assert decisions(result) == [("allowed", "rule:allow *"), ("refused", "rule:refuse *")]


@pytest.mark.skipif(version("mcp").startswith("1."), reason="SDK 2's low-level `Server`")
@pytest.mark.parametrize("trusted", [True, False])
def test_a_rule_on_an_annotation_trusts_an_mcp_servers_hints_only_when_trusted(
    trusted: bool,
) -> None:
    pytest.importorskip("mcp")
    from test_mcp import listing_server
    from test_mcp_annotations import TOOLS

    names = [t.name for t in TOOLS]
    rules = [CallRule.refuse(annotation="destructive"), CallRule.allow(name="rest")]
    with listing_server(*TOOLS, trusted=trusted) as server:
        service = ToolService([server], rules=rules)
        result = service.chat(calling(*((name, "{}") for name in names)), "go")
    refused = [e.call.name for e in result.tool_executions if e.decision.outcome == "refused"]
    if trusted:  # what says it may destroy, says nothing, or contradicts itself
        assert refused == ["delete", "plain", "liar"]
    else:  # hints from a server that may lie are not taken: MCP's defaults for all
        assert refused == names


def test_rules_are_checked_when_the_service_is_built_and_when_a_run_starts() -> None:
    with pytest.raises(TypeError, match="rules take CallRule objects, not function"):
        ToolService([pay], rules=[lambda call: True])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="outcome is 'allow', 'ask' or 'refuse'"):
        ToolService([pay], rules=[CallRule("maybe", ())])  # type: ignore[arg-type]
    script = calling(("pay", '{"cents": 1}'))
    service = ToolService([pay], rules=[CallRule.refuse(["group:mony"])])
    with pytest.raises(ValueError, match="names the group 'mony', which is not registered"):
        service.chat(script, "go")
    assert ran == []


def test_a_person_approving_a_call_is_not_overruled_by_a_rule_that_asks() -> None:
    service = ToolService(ALL, rules=[CallRule.ask(["pay"])])
    model = calling(("pay", '{"cents": 3}'))
    paused = service.chat(model, "go")
    (pending,) = paused.pending
    assert pending.reason == "approval" and ran == []
    left = service.chat(model, paused.messages)  # undecided: held again by the rule
    assert [p.call.id for p in left.pending] == [pending.call.id]
    done = service.chat(model, paused.messages, approvals={pending.call.id: True})
    assert ran == ["pay 3"] and decisions(done) == [("allowed", "approval")]


def test_an_async_requires_approval_is_recorded_under_an_async_run() -> None:
    import asyncio

    async def big(call: ToolCall, context: Any) -> bool:
        return '"cents": 500' in call.arguments

    @tool(requires_approval=big)
    def send(cents: int) -> str:
        """Send."""
        ran.append(f"send {cents}")
        return "sent"

    model = calling(("send", '{"cents": 500}'), ("send", '{"cents": 5}'))
    result = asyncio.run(ToolService([send]).achat(model, "go"))
    assert ran == ["send 5"] and decisions(result) == [("allowed", "default")]
    assert [p.call.arguments for p in result.pending] == ['{"cents": 500}']
