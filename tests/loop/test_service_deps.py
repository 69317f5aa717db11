"""Typed dependencies: `ToolService(deps_type=...)` checks tools at registration and deps at run
start, before any model call."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from typing import Annotated, Any, Protocol

import pytest

from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatRequestParameters,
    FunctionModel,
    ToolCall,
    ToolContext,
    ToolService,
    tool,
)


class Db:
    def user(self) -> str:
        return "ada"


class TestDb(Db):
    pass


class Cache:
    pass


class HasUser(Protocol):
    def user(self) -> str: ...


@tool
def needs_db(ctx: ToolContext[Db]) -> str:
    return ctx.deps.user()


@tool
def needs_test_db(ctx: ToolContext[TestDb]) -> str:
    return ctx.deps.user()


@tool
def needs_cache(ctx: ToolContext[Cache]) -> str:
    return "cached"


@tool
def optional_db(ctx: Annotated[ToolContext[Db | None], "injected"]) -> str:
    return ctx.deps.user() if ctx.deps else "nobody"


@tool
def any_deps(ctx: ToolContext[Any]) -> str:
    return "any"


@tool
def bare(ctx: ToolContext) -> str:
    return "bare"


@tool
def by_protocol(ctx: ToolContext[HasUser]) -> str:
    return ctx.deps.user()


@tool
def no_context(x: int) -> int:
    return x


def test_a_tool_knows_the_deps_type_its_context_takes() -> None:
    assert needs_db.deps_type is Db
    assert optional_db.deps_type == Db | None
    assert any_deps.deps_type is Any
    assert bare.deps_type is Any and no_context.deps_type is Any


@pytest.mark.parametrize(
    "accepted", [needs_db, optional_db, any_deps, bare, by_protocol, no_context]
)
def test_registration_accepts_a_context_that_takes_the_deps_type(accepted: Any) -> None:
    ToolService([accepted], deps_type=TestDb)
    ToolService(deps_type=Db).register(accepted)


@pytest.mark.parametrize(
    ("refused", "expected"), [(needs_cache, "Cache"), (needs_test_db, "TestDb")]
)
def test_registration_refuses_a_context_that_does_not_take_the_deps_type(
    refused: Any, expected: str
) -> None:
    message = (
        f"tool '{refused.name}' takes ToolContext[{expected}], which does not accept this "
        "service's deps type Db"
    )
    with pytest.raises(TypeError) as caught:
        ToolService(deps_type=Db).register(refused)
    assert str(caught.value) == message
    with pytest.raises(TypeError, match="does not accept"):
        ToolService([needs_db, refused], deps_type=Db)


def test_methods_of_an_object_are_checked_too() -> None:
    class Tools:
        @tool
        def cached(self, ctx: ToolContext[Cache]) -> str:
            return "c"

        @tool
        def stored(self, ctx: ToolContext[Db]) -> str:
            return "s"

    service = ToolService(deps_type=Db)
    with pytest.raises(TypeError, match="'cached' takes ToolContext\\[Cache\\]"):
        service.register(Tools())
    assert service.tools == ()  # a source registers whole or not at all


def test_without_deps_type_nothing_is_checked() -> None:
    ToolService([needs_db, needs_cache])


def _counting_model(name: str = "needs_db") -> tuple[FunctionModel, list[int]]:
    calls: list[int] = []

    def reply(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
        calls.append(1)
        if len(calls) == 1:
            return AiMessage(tool_calls=[ToolCall(id="c", name=name, arguments="{}")])
        return AiMessage(text="done")

    return FunctionModel(reply), calls


WRONG = "deps must be an instance of Db (this service's deps_type), not "


@pytest.mark.parametrize("deps", [None, Cache(), "db"])
async def test_wrong_deps_are_refused_before_any_model_call(deps: Any) -> None:
    service = ToolService([needs_db], deps_type=Db)
    model, calls = _counting_model()
    expected = re.escape(WRONG + type(deps).__qualname__)
    with pytest.raises(TypeError) as caught:
        await asyncio.to_thread(lambda: service.chat(model, "hi", deps=deps))
    assert str(caught.value) == WRONG + type(deps).__qualname__
    with pytest.raises(TypeError, match=expected):
        await service.achat(model, "hi", deps=deps)
    with pytest.raises(TypeError, match=expected):
        await asyncio.to_thread(lambda: list(service.stream(model, "hi", deps=deps)))
    with pytest.raises(TypeError, match=expected):
        [event async for event in service.astream(model, "hi", deps=deps)]
    assert calls == []


def test_deps_of_a_subclass_are_accepted() -> None:
    service = ToolService([needs_db], deps_type=Db)
    model, calls = _counting_model()
    result = service.chat(model, "hi", deps=TestDb())
    assert result.tool_executions[0].result.text == "ada" and len(calls) == 2


def test_a_protocol_deps_type_is_not_checked_at_run_time() -> None:
    # `isinstance` cannot check a protocol that is not runtime-checkable: mypy does.
    service = ToolService([by_protocol], deps_type=HasUser)
    model, _ = _counting_model("by_protocol")
    assert service.chat(model, "hi", deps=Db()).text == "done"


# -- the CLI -----------------------------------------------------------------------------------


def test_cli_run_refuses_tools_that_need_deps_when_none_are_given() -> None:
    from test_cli import cli

    done = cli("run", "tests.fixtures.deps_targets:needy", "hi")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        "agentforge-typed: error: whoami (ToolContext[Account]) needs deps, and none are given: "
        "pass --deps module:attribute, or define `deps` in TARGET's module\n"
    )
    # Deps given, or tools that accept `None`: the run goes ahead.
    assert (
        cli("run", "tests.fixtures.deps_targets:needy", "hi", "--deps", "account").returncode == 0
    )
    optional = cli("run", "tests.fixtures.deps_targets:optional", "hi")
    assert optional.returncode == 0 and "<- greeting" in optional.stdout


@pytest.mark.parametrize(
    ("target", "deps", "message"),
    [
        ("needy", "wrong", "--deps wrong gave str, but whoami takes ToolContext[Account]"),
        # The service's `deps_type` refused the run with a traceback before.
        ("typed", "wrong", "--deps wrong gave str, but whoami takes ToolContext[Account]"),
        (
            "needy",
            "no_account",
            "--deps no_account: calling the factory failed: RuntimeError: no database",
        ),
    ],
)
def test_cli_run_refuses_deps_its_tools_cannot_take_in_one_line(
    target: str, deps: str, message: str
) -> None:
    from test_cli import cli

    done = cli("run", f"tests.fixtures.deps_targets:{target}", "hi", "--deps", deps)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"agentforge-typed: error: {message}\n"


def test_cli_run_calls_a_deps_factory() -> None:
    from test_cli import cli

    done = cli("run", "tests.fixtures.deps_targets:needy", "hi", "--deps", "make_account")
    assert done.returncode == 0, done.stderr
    assert "<- whoami" in done.stdout and "): grace" in done.stdout
