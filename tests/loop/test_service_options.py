"""The run options (`RunOptions`): declared once, accepted by every driver, and a misspelt one is
refused at run time as well as by mypy."""

from __future__ import annotations

import ast
import inspect
import itertools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, get_type_hints

import pytest
from loop_drivers import DRIVERS, drive
from typing_extensions import Unpack

import agentforge_typed
from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatRequestParameters,
    FunctionModel,
    RunOptions,
    ToolCall,
    ToolContext,
    ToolResultMessage,
    ToolService,
    UsageLimitExceededError,
    UsageLimits,
    UserMessage,
    tool,
)

ROOT = Path(__file__).resolve().parents[2]
OPTIONS = ["tools", "conversation_id", "approvals", "external_results", "usage_limits"]


def test_every_driver_takes_the_one_option_list() -> None:
    assert list(get_type_hints(RunOptions)) == OPTIONS
    assert RunOptions.__optional_keys__ == frozenset(OPTIONS)
    for name in DRIVERS:
        driver = getattr(ToolService, name)
        parameters = list(inspect.signature(driver).parameters.values())
        assert [p.name for p in parameters] == [
            "self",
            "model",
            "messages",
            "parameters",
            "deps",
            "output_type",
            "options",
        ], name
        assert parameters[-1].kind is inspect.Parameter.VAR_KEYWORD
        assert get_type_hints(driver)["options"] == Unpack[RunOptions], name


def test_each_run_option_is_documented() -> None:
    """Every field carries a docstring, the drivers point to them, and the guide names it."""
    source = (ROOT / "agentforge_typed" / "loop" / "_options.py").read_text(encoding="utf-8")
    body = next(
        node.body
        for node in ast.parse(source).body
        if isinstance(node, ast.ClassDef) and node.name == "RunOptions"
    )
    documented = [
        field.target.id
        for field, doc in itertools.pairwise(body)
        if isinstance(field, ast.AnnAssign)
        and isinstance(field.target, ast.Name)
        and isinstance(doc, ast.Expr)
        and isinstance(doc.value, ast.Constant)
        and str(doc.value.value).strip()
    ]
    assert documented == OPTIONS
    assert "RunOptions" in (ToolService.chat.__doc__ or "")
    guide = (ROOT / "docs" / "guide" / "service.md").read_text(encoding="utf-8")
    for option in OPTIONS:
        assert f"`{option}`" in guide, option
    assert "RunOptions" in agentforge_typed.__all__


@tool(requires_approval=True)
def charge(amount: int, ctx: ToolContext[None]) -> str:
    """Charge the card."""
    return f"charged {amount} in {ctx.conversation_id}"


@tool(external=True)
def browse(url: str) -> str:
    """Open a page in the user's browser."""
    raise AssertionError("an external tool never runs in the loop")


@tool
def hidden() -> str:
    """Registered, but not offered to this run."""
    return "never"


PAUSED: list[ChatMessage] = [
    UserMessage(content="Charge 5 and open the page"),
    AiMessage(
        tool_calls=[
            ToolCall(id="c1", name="charge", arguments=json.dumps({"amount": 5})),
            ToolCall(id="c2", name="browse", arguments=json.dumps({"url": "https://x.test"})),
        ]
    ),
]


@pytest.mark.parametrize("driver", DRIVERS)
def test_every_option_reaches_the_run_under_every_driver(driver: str) -> None:
    offered: list[list[str]] = []

    def answer(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        offered.append([spec.name for spec in parameters.tools or ()])
        results = [m.text for m in messages if isinstance(m, ToolResultMessage)]
        return AiMessage(text=" / ".join(results))

    # The service's own limits would stop the run at its first request; the run's replace them.
    service = ToolService([charge, browse, hidden], usage_limits=UsageLimits(request_limit=0))
    result = drive(
        driver,
        service,
        FunctionModel(answer),
        PAUSED,
        tools=["charge", "browse"],
        conversation_id="conv-7",
        approvals={"c1": True},
        external_results={"c2": "<h1>Hello</h1>"},
        usage_limits=UsageLimits(request_limit=1),
    )
    assert result.text == "charged 5 in conv-7 / <h1>Hello</h1>"
    assert offered == [["charge", "browse"]]
    assert result.pending == ()


@pytest.mark.parametrize("driver", DRIVERS)
def test_options_given_as_none_are_the_defaults(driver: str) -> None:
    service = ToolService([hidden], usage_limits=UsageLimits(request_limit=0))
    none: dict[str, Any] = dict.fromkeys(OPTIONS)
    with pytest.raises(UsageLimitExceededError):
        drive(driver, service, FunctionModel(lambda m, p: AiMessage(text="hi")), "hi", **none)


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("keyword", ["usage_limit", "conversation", "tool", "Approvals", "limits"])
def test_a_misspelt_option_is_refused_before_any_model_call(driver: str, keyword: str) -> None:
    """A keyword a run does not know must not be dropped silently: a misspelt `usage_limits`
    would run the conversation without its caps."""
    called: list[int] = []

    def answer(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        called.append(1)
        return AiMessage(text="hi")

    wrong: dict[str, Any] = {keyword: UsageLimits(request_limit=0)}
    with pytest.raises(TypeError, match=f"unexpected keyword argument '{keyword}'"):
        drive(driver, ToolService([hidden]), FunctionModel(answer), "hi", **wrong)
    assert called == []


def test_a_wrapper_forwards_the_options_typed() -> None:
    def offered(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        return AiMessage(text=",".join(spec.name for spec in parameters.tools or ()))

    def ask(service: ToolService[None], prompt: str, **options: Unpack[RunOptions]) -> str | None:
        return service.chat(FunctionModel(offered), prompt, **options).text

    service = ToolService([charge, hidden])
    assert ask(service, "hi") == "charge,hidden"
    assert ask(service, "hi", tools=["hidden"]) == "hidden"
