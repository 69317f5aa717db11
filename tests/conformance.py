"""The conformance suite's registry: every surface of the package, by axis, as a factory that
each guarantee's tests are parametrised over.

A *surface* is something that reads what a server, a tool, a model or the program's own code
sends: a provider, a tool kind, a loop driver, a CLI command, a history step, a hook. Each is
registered here once, on its *axis*, with a *factory* that builds it (what a factory takes is the
axis's: a provider's builds a model pointed at a base URL, a tool kind's builds a tool of that
kind around a handler, a driver's runs a conversation). A guarantee's test is parametrised over
`AXIS.each("guarantee")`: every registered surface, so a new one is checked by every guarantee
without anyone adding it anywhere. Where a guarantee cannot apply to a surface, its registration
says why (`exempt={"guarantee": "why"}`); that surface is then left out of that guarantee's
parameters, and the reason is data the suite prints (`exemptions()`), never an absent name.

Each axis also *discovers* what the package has (`Axis.discovered()`: the providers `get_model`
builds and the public model classes, the `DeclaredTool` subclasses, the CLI's subcommands, ...);
`test_covers_every_surface` in each `test_conformance_*.py` module calls `assert_registered`, so
a surface the package has and nobody registered fails the suite.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import gc
import inspect
import json
import pkgutil
import re
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any, Generic, TypeVar

import pydantic_core
import pytest
from http_server import Reply, Request, ScriptedServer

import agentforge_typed as af
import agentforge_typed.loop as af_loop
import agentforge_typed.providers as providers
from agentforge_typed import (
    ChatModel,
    FinalResultEvent,
    ImageContent,
    ToolChatResult,
    ToolService,
)

__all__ = [
    "CLI",
    "DRIVER",
    "GUARANTEES",
    "HISTORY",
    "HOOK",
    "PROVIDER",
    "STORE",
    "SERVER",
    "TOOL",
    "UI",
    "WIRE",
    "Axis",
    "Parameters",
    "Surface",
    "assert_covers",
    "assert_linear",
    "assert_registered",
    "cli_commands",
    "composite_models",
    "exemptions",
    "history_steps",
    "store_kinds",
    "server_transports",
    "surfaces",
    "tool_kinds",
    "ui_endpoints",
    "wire_cores",
]

F = TypeVar("F", bound=Callable[..., Any] | None)
TESTS = Path(__file__).parent
CITED_TEST = re.compile(r"tests/([\w/]+\.py)::(\w+)")
"""A test an exemption names, `tests/<folder>/<file>.py::<test>`: `assert_registered` checks it."""

# -- the guarantees ------------------------------------------------------------------------------

GUARANTEES: Mapping[str, str] = {
    "linear": "costs O(input): n and 8n units of input take at most LINEAR_FACTOR x apart",
    "bounded": "everything read has a documented cap; one unit over is an error or a cut",
    "bounded.content": "a tool result's inline content is capped at MAX_CONTENT_BYTES",
    "deadline": "every wait ends within its documented timeout",
    "secret": "the API key never appears in an error, a log record, a span or an output",
    "malformed": "a malformed answer ends with a clear error (one line in the CLI)",
    "contained": "nothing escapes a run as a bare exception; a failed run carries its history",
    "contained.validator": "a validator of the program's own that raises is an error result",
    # Declared for the axes that are being added (scoping, decisions, run-once, content).
    "scoped": "two conversations on one shared object never see each other's state",
    "decided": "a decision runs a call only when it matches the call's pending reason and digest",
    "once": "a body never runs twice for one decision",
    "content": "the content budget measures what each provider sends",
    "printable": "what a CLI command prints of outside text reaches the terminal printable",
}
"""Every guarantee a test may be parametrised over, and what it says. An exemption names one (a
dotted name is a part of the one before the dot: exempt from `bounded`, a surface is exempt from
`bounded.content` too)."""


def _check_guarantee(name: str) -> None:
    if name not in GUARANTEES:
        raise KeyError(f"{name!r} is not a guarantee of the suite; declare it in GUARANTEES")


# -- surfaces and axes ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Surface(Generic[F]):
    """One registered surface: its name (the test id), its factory and what it is exempt from."""

    axis: str
    name: str
    build: F
    """The factory; what it takes and gives is the axis's (see each axis below)."""
    exempt: Mapping[str, str] = field(default_factory=dict)
    """Guarantee -> why it cannot apply to this surface (or where else it is checked)."""
    traits: Mapping[str, Any] = field(default_factory=dict)
    """What a guarantee's test reads of the surface beyond its factory (a provider's wire)."""

    def __getitem__(self, trait: str) -> Any:
        return self.traits[trait]

    def exempt_from(self, guarantee: str) -> str | None:
        """Why `guarantee` cannot apply here, or `None` when it does."""
        while True:
            if guarantee in self.exempt:
                return self.exempt[guarantee]
            guarantee, dot, _ = guarantee.rpartition(".")
            if not dot:
                return None


class Axis(Generic[F]):
    """The registered surfaces of one axis, and what the package has of it."""

    def __init__(self, name: str, discover: Callable[[], Iterable[str]], doc: str) -> None:
        self.name = name
        self._discover = discover
        self.doc = doc
        self.surfaces: dict[str, Surface[F]] = {}

    def register(
        self,
        name: str,
        build: F,
        *,
        exempt: Mapping[str, str] | None = None,
        **traits: Any,
    ) -> Surface[F]:
        """Register the surface `name` with its factory; `exempt` maps guarantees to why they
        cannot apply to it."""
        assert name not in self.surfaces, f"{self.name} surface {name!r} registered twice"
        for guarantee, reason in (exempt or {}).items():
            _check_guarantee(guarantee)
            assert reason.strip(), f"{self.name} {name}: an exemption from {guarantee} needs a why"
        surface = Surface(self.name, name, build, dict(exempt or {}), traits)
        self.surfaces[name] = surface
        return surface

    def discovered(self) -> frozenset[str]:
        """The surfaces of this axis the package has."""
        return frozenset(self._discover())

    def each(self, guarantee: str, **having: Any) -> list[Any]:
        """The surfaces `guarantee`'s test runs over, as `pytest.param`s with their names as
        ids: every registered one that is not exempt from it (and, with `having`, whose traits
        have those values)."""
        _check_guarantee(guarantee)
        return [
            pytest.param(surface, id=surface.name)
            for surface in self.surfaces.values()
            if surface.exempt_from(guarantee) is None
            and all(surface.traits.get(k) == v for k, v in having.items())
        ]

    def names(self, guarantee: str, **having: Any) -> list[str]:
        """The names of the surfaces `each` gives."""
        return [param.values[0].name for param in self.each(guarantee, **having)]

    def __getitem__(self, name: str) -> Surface[F]:
        return self.surfaces[name]


def assert_registered(*axes: Axis[Any]) -> None:
    """Fail when the package has a surface of one of `axes` that nobody registered, or one is
    registered that the package no longer has."""
    for axis in axes:
        have, registered = axis.discovered(), set(axis.surfaces)
        missing, stale = sorted(have - registered), sorted(registered - have)
        assert not missing, (
            f"the {axis.name} surface(s) {', '.join(missing)} are not registered in the "
            "conformance suite: register each in tests/conformance.py (see DEVELOPERS.md, 'The "
            "conformance suite')"
        )
        assert not stale, f"registered {axis.name} surface(s) the package lacks: {stale}"
        for surface in axis.surfaces.values():
            for guarantee, why in surface.exempt.items():
                cited = CITED_TEST.findall(why)
                assert len(cited) == why.count(".py::"), (
                    f"{axis.name} {surface.name}, exempt from {guarantee}: name each test as "
                    f"tests/<folder>/<file>.py::<test>: {why}"
                )
                for path, test in cited:
                    text = (TESTS / path).read_text(encoding="utf-8")
                    assert re.search(rf"^(async )?def {test}\(", text, re.MULTILINE), (
                        f"{axis.name} {surface.name}, exempt from {guarantee}: no test "
                        f"{path}::{test}"
                    )


def exemptions() -> list[tuple[str, str, str, str]]:
    """Every exemption of every axis: (axis, surface, guarantee, why)."""
    return [
        (axis.name, surface.name, guarantee, why)
        for axis in AXES
        for surface in axis.surfaces.values()
        for guarantee, why in surface.exempt.items()
    ]


# -- discovery -----------------------------------------------------------------------------------


def wire_cores() -> frozenset[str]:
    """The provider wire modules (`providers/_<name>_wire.py`), by `<name>`."""
    return frozenset(
        module.name.removeprefix("_").removesuffix("_wire")
        for module in pkgutil.iter_modules(providers.__path__)
        if module.name.startswith("_") and module.name.endswith("_wire")
    )


def _wire_of(model: object) -> str | None:
    """The wire core (`providers/_<name>_wire.py`) a model speaks through, if it has one."""
    wire = getattr(model, "_wire", None)
    if wire is None:
        return None
    return type(wire).__module__.rpartition(".")[2].removeprefix("_").removesuffix("_wire")


def _is_model_class(value: object) -> bool:
    """Whether `value` is a concrete `ChatModel` class: `chat(request)` and the other three
    (not the protocol itself, nor `ToolService`, whose `chat` runs a conversation)."""
    if not isinstance(value, type) or getattr(value, "_is_protocol", False):
        return False
    methods = [getattr(value, name, None) for name in ("chat", "achat", "stream", "astream")]
    if not all(callable(method) for method in methods):
        return False
    chat: Any = value.chat  # type: ignore[attr-defined]
    return list(inspect.signature(chat).parameters) == ["self", "request"]


def _registry_prefixes() -> dict[str, type]:
    """Each `get_model` prefix (`KNOWN_MODEL_PREFIXES`, the compatible servers), by the class it
    builds; a prefix that builds what an earlier one does (an alias) is left out."""
    from agentforge_typed.providers._registry import COMPATIBLE, KNOWN_MODEL_PREFIXES

    found: dict[str, type] = {}
    classes: set[type] = set()
    for known in KNOWN_MODEL_PREFIXES:
        prefix = known.partition(":")[0]
        name = "fake" if prefix == known else f"{prefix}:m"
        options = {} if prefix == known else {"api_key": "sk-test"}
        cls = type(af.get_model(name, **options))
        if cls not in classes:
            classes.add(cls)
            found[prefix] = cls
    seen: list[object] = []
    for prefix, server in COMPATIBLE.items():
        if not any(server is other for other in seen):  # `qwen` is `dashscope`
            seen.append(server)
            found[prefix] = type(af.get_model(f"{prefix}:m", api_key="sk-test"))
    return found


def provider_surfaces() -> frozenset[str]:
    """The models the package offers: each `get_model` prefix (aliases once), and each public
    model class that no prefix builds (by class name: `FunctionModel`, `FallbackModel`)."""
    prefixes = _registry_prefixes()
    built = set(prefixes.values())
    classes = {
        name
        for name in af.__all__
        if _is_model_class(value := getattr(af, name)) and value not in built
    }
    return frozenset(prefixes) | classes


def tool_kinds() -> frozenset[str]:
    """The tool kinds the package defines, by class name, and `MCPTool (task)`: an MCP tool
    called as a task (its calls take another path to their result)."""
    # Imported so that their subclasses are defined.
    import agentforge_typed.tools._http
    import agentforge_typed.tools._schema_tool
    import agentforge_typed.tools.mcp._server  # noqa: F401
    from agentforge_typed.tools._base import DeclaredTool
    from agentforge_typed.tools._function import Tool
    from agentforge_typed.tools.mcp import _tasks

    kinds = {Tool.__name__}
    pending = list(DeclaredTool.__subclasses__())
    while pending:
        kind = pending.pop()
        if not kind.__name__.startswith("_"):
            kinds.add(kind.__name__)
        pending.extend(kind.__subclasses__())
    if hasattr(_tasks, "call_as_task"):  # an MCP tool whose calls the server runs as tasks
        kinds.add("MCPTool (task)")
    return frozenset(kinds)


def cli_commands() -> frozenset[str]:
    """The `agentforge-typed` subcommands."""
    from agentforge_typed.cli._main import _parser

    parser = _parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return frozenset(action.choices)
    raise AssertionError("the CLI has no subcommands")


def composite_models() -> frozenset[str]:
    """The models made of other models (a `FallbackModel`), by class name: the public classes
    that name which of their models answered a response (`answering`)."""
    return frozenset(
        name
        for name in af.__all__
        if isinstance(value := getattr(af, name), type) and hasattr(value, "answering")
    )


def history_steps() -> frozenset[str]:
    """What runs over the whole history before each model call: the ready history processors
    (the package's public functions from `_history`) and `unsendable`, the check of what any
    processor returns."""
    return frozenset(
        {"unsendable"}
        | {
            name
            for name in af_loop.__all__
            if inspect.isfunction(value := getattr(af_loop, name))
            and value.__module__ == "agentforge_typed.loop._history"
        }
    )


def server_transports() -> frozenset[str]:
    """The transports a `ToolServer` serves tools on (`serving.TRANSPORTS`)."""
    from agentforge_typed.serving import TRANSPORTS

    return frozenset(TRANSPORTS)


SERVICE_VALUES: Mapping[str, str] = {
    "tools": "the tools themselves: the tool axis",
    "max_round_trips": "a number",
    "parallel": "a switch",
    "deps_type": "a class, checked with isinstance",
    "groups": "names for registered tools",
    "usage_limits": "numbers, checked by the loop",
    "max_result_chars": "a number",
    "blocking_in_event_loop": "a switch",
    "tool_search": "names to offer; the search is the package's own (`search_score`)",
    "digest_secret": "a key for the digests of paused calls",
    "store": "where conversations live, used by runs given a conversation_id: the store axis",
}
"""The `ToolService` options that hold values, not code of the program's own that the loop
calls: every other keyword of `ToolService.__init__` is a hook (the `hook` axis)."""


def service_hooks() -> frozenset[str]:
    """The `ToolService` options through which the loop calls the program's own code."""
    parameters = inspect.signature(ToolService.__init__).parameters
    return frozenset(name for name in parameters if name != "self") - set(SERVICE_VALUES)


# -- the axes ------------------------------------------------------------------------------------

ProviderFactory = Callable[..., ChatModel]
"""`build(base_url, api_key, **options)`: the model, pointed at the server at `base_url`, with
`api_key` and the HTTP options given (`max_retries`, `timeout`, caps, `http_client`, ...)."""

PROVIDER: Axis[ProviderFactory | None] = Axis(
    "provider",
    provider_surfaces,
    "each model the package offers: the `get_model` prefixes (the compatible servers among "
    "them) and the public model classes no prefix builds; traits: `wire` (the vendor shape of "
    "its answers) and `models` (how many models it asks before it gives up)",
)


def _prefixed(prefix: str) -> ProviderFactory:
    def build(base_url: str, api_key: str, **options: Any) -> ChatModel:
        return af.get_model(f"{prefix}:m", base_url=base_url, api_key=api_key, **options)

    return build


NO_SERVER = (
    "answers in the process, from the request or the program's own function: it reads no "
    "server and holds no key"
)

for _prefix, _cls in _registry_prefixes().items():
    if _prefix == "fake":
        continue
    # Every prefix with a wire is built alike (by `get_model`, pointed at the server): a new
    # one is registered, and checked by every guarantee, as soon as the registry has it.
    _wire = _wire_of(af.get_model(f"{_prefix}:m", api_key="sk-test"))
    if _wire is not None:
        PROVIDER.register(_prefix, _prefixed(_prefix), wire=_wire, models=1)

PROVIDER.register(
    "fake",
    None,
    exempt={
        "bounded": NO_SERVER,
        "deadline": NO_SERVER,
        "secret": NO_SERVER,
        "malformed": NO_SERVER,
        "contained": "computes every answer from the request itself: nothing it reads can fail",
    },
)


PROVIDER.register(
    "FunctionModel",
    None,
    exempt={
        "bounded": NO_SERVER,
        "deadline": NO_SERVER,
        "secret": NO_SERVER,
        "malformed": "its answers are the program's own `AiMessage`s, validated by pydantic",
    },
    scripted=af.FunctionModel,
)


def _fallback(base_url: str, api_key: str, **options: Any) -> ChatModel:
    """Two OpenAI-wire models at `base_url`: what the first refuses surfaces as it is, what it
    fails on transiently goes to the second."""
    first = af.get_model("openai:m", base_url=base_url, api_key=api_key, **options)
    second = af.get_model("openai:m2", base_url=base_url, api_key=api_key, **options)
    return af.FallbackModel(first, second)


PROVIDER.register("FallbackModel", _fallback, wire="openai", models=2)


ToolFactory = Callable[..., "BuiltTool"]
"""`build(handler, *, parameters=TEXT, name="t", **options)`: a tool of the kind whose call runs
`handler(arguments)` (arguments as a dict) and answers what it returns (a `str`, an
`ImageContent`, a value), entered with `with` or `async with`; `options` are the common ones:
`max_result_chars`, `timeout`."""


@dataclass(frozen=True)
class Parameters:
    """What a tool takes: its JSON schema (for the kinds declared by schema) and a typed function
    of the same arguments around a handler (for `@tool`, and `HttpTool(args_model=...)`)."""

    schema: dict[str, Any]
    typed: Callable[[Callable[[dict[str, Any]], Any]], Callable[..., Any]]
    args_model: type[Any] | None = None


def _text_typed(handler: Callable[[dict[str, Any]], Any]) -> Callable[..., Any]:
    def t(text: str = "") -> Any:
        """Answer what the handler makes of `text`."""
        return handler({"text": text})

    return t


TEXT = Parameters({"type": "object", "properties": {"text": {"type": "string"}}}, _text_typed)
"""One optional string, `text`."""


class BuiltTool:
    """A tool a factory built, with whatever serves it: `with` or `async with` gives the tool."""

    def __init__(
        self,
        tool: Any = None,
        *,
        enter: Callable[[], Any] | None = None,
        aenter: Callable[[], Any] | None = None,
        close: Callable[[], Any] | None = None,
        aclose: Callable[[], Any] | None = None,
    ) -> None:
        self.tool = tool
        self._enter, self._aenter, self._close, self._aclose = enter, aenter, close, aclose

    def __enter__(self) -> Any:
        if self._enter is not None:
            self.tool = self._enter()
        return self.tool

    def __exit__(self, *exc_info: object) -> None:
        if self._close is not None:
            self._close()

    async def __aenter__(self) -> Any:
        if self._aenter is not None:
            self.tool = await self._aenter()
        elif self._enter is not None:
            self.tool = self._enter()
        return self.tool

    async def __aexit__(self, *exc_info: object) -> None:
        if self._aclose is not None:
            await self._aclose()
        elif self._close is not None:
            self._close()


TOOL: Axis[ToolFactory] = Axis(
    "tool",
    tool_kinds,
    "each tool kind (`Tool`, the public `DeclaredTool` subclasses, and an MCP tool called as a "
    "task); trait `remote`: a valid call leaves the process",
)


def _register_tool(name: str, **kwargs: Any) -> Callable[[ToolFactory], ToolFactory]:
    def register(factory: ToolFactory) -> ToolFactory:
        TOOL.register(name, factory, **kwargs)
        return factory

    return register


@_register_tool("Tool", remote=False)
def _typed_tool(
    handler: Callable[[dict[str, Any]], Any],
    *,
    parameters: Parameters = TEXT,
    name: str = "t",
    **options: Any,
) -> BuiltTool:
    return BuiltTool(af.tool(name=name, **options)(parameters.typed(handler)))


@_register_tool(
    "SchemaTool",
    remote=False,
    exempt={"contained.validator": "validates against its JSON schema only: no code of its own"},
)
def _schema_tool(
    handler: Callable[[dict[str, Any]], Any],
    *,
    parameters: Parameters = TEXT,
    name: str = "t",
    **options: Any,
) -> BuiltTool:
    spec = af.ToolSpecification(name=name, description="", parameters=parameters.schema)
    return BuiltTool(af.SchemaTool(spec, handler, **options))


@_register_tool(
    "HttpTool",
    remote=False,
    exempt={
        "bounded.content": "an HTTP tool's result is its response body, read as text: it has no "
        "content parts",
        "contained.validator": "validates against its JSON schema (or an args_model of the "
        "program's: test_conformance_containment checks that one)",
    },
)
def _http_tool(
    handler: Callable[[dict[str, Any]], Any],
    *,
    parameters: Parameters = TEXT,
    name: str = "t",
    **options: Any,
) -> BuiltTool:
    served = ScriptedServer()

    def answer(request: Request) -> Reply:
        # The handler runs on each request's JSON body; what it raises is a 500 naming it.
        answered = handler(json.loads(request.body or b"{}"))
        text = answered if isinstance(answered, str) else pydantic_core.to_json(answered).decode()
        return Reply(200, text.encode(), {"content-type": "text/plain"})

    served.route("/", answer)
    url = f"{served.url}/"

    declared: dict[str, Any] = (
        {"args_model": parameters.args_model}
        if parameters.args_model
        else {"parameters": parameters.schema}
    )
    built = af.HttpTool(name, url=url, method="POST", **declared, **options)
    return BuiltTool(built, close=served.close)


MCP_SDK_1 = version("mcp").startswith("1.")
_MCP_OPTIONS = ("timeout", "max_result_chars")


@_register_tool(
    "MCPTool",
    remote=True,
    exempt={"contained.validator": "validates against the server's JSON schema only"},
)
def _mcp_tool(
    handler: Callable[[dict[str, Any]], Any],
    *,
    parameters: Parameters = TEXT,
    name: str = "t",
    **options: Any,
) -> BuiltTool:
    """The SDK's own low-level `Server` in this process, over memory streams, whose one tool runs
    `handler` on a worker thread."""
    if MCP_SDK_1:
        pytest.skip("SDK 2's low-level `Server`")
    import anyio
    from mcp.server.lowlevel import Server
    from mcp.types import CallToolResult, ListToolsResult
    from mcp.types import ImageContent as MCPImage
    from mcp.types import TextContent as MCPText
    from mcp.types import Tool as MCPTool
    from mcp_memory import in_memory

    async def list_tools(context: Any, params: Any) -> ListToolsResult:
        return ListToolsResult(tools=[MCPTool(name=name, input_schema=parameters.schema)])

    async def call_tool(context: Any, params: Any) -> CallToolResult:
        answer = await anyio.to_thread.run_sync(
            handler, dict(params.arguments or {}), abandon_on_cancel=True
        )
        if isinstance(answer, ImageContent):
            data = base64.b64encode(answer.data or b"").decode()
            block: Any = MCPImage(type="image", data=data, mime_type=answer.media_type or "")
        else:
            text = answer if isinstance(answer, str) else pydantic_core.to_json(answer).decode()
            block = MCPText(type="text", text=text)
        return CallToolResult(content=[block])

    unknown = set(options) - set(_MCP_OPTIONS)
    assert not unknown, f"the MCP factory takes {_MCP_OPTIONS}, not {unknown}"
    served = Server("conformance", on_list_tools=list_tools, on_call_tool=call_tool)
    return _served(in_memory(served, label="conformance", **options))


def _served(server: Any, *, as_task: bool = False) -> BuiltTool:
    """The one tool of an MCP server, entered with the tool (`as_task`: called as a task)."""

    def enter() -> Any:
        server.__enter__()
        (tool,) = server.tools()
        assert tool.as_task is as_task
        return tool

    async def aenter() -> Any:
        await server.__aenter__()
        (tool,) = server.tools()
        assert tool.as_task is as_task
        return tool

    return BuiltTool(enter=enter, aenter=aenter, close=server.close, aclose=server.aclose)


@_register_tool(
    "MCPTool (task)",
    remote=True,
    exempt={"contained.validator": "validates against the server's JSON schema only"},
)
def _mcp_task_tool(
    handler: Callable[[dict[str, Any]], Any],
    *,
    parameters: Parameters = TEXT,
    name: str = "t",
    **options: Any,
) -> BuiltTool:
    """A task-only tool (`execution.taskSupport: "required"`) of a server in this process, over
    memory streams, serving the tasks extension (tests/mcp_tasks.py): each call is a task that
    runs `handler` on a worker thread, polled with `tasks/get`, its result fetched with
    `tasks/result`, stopped by `tasks/cancel`."""
    if MCP_SDK_1:
        pytest.skip("SDK 2's memory streams")
    from mcp_tasks import task_server

    unknown = set(options) - set(_MCP_OPTIONS)
    assert not unknown, f"the MCP factory takes {_MCP_OPTIONS}, not {unknown}"
    server = task_server(handler, parameters.schema, name=name, render=_mcp_result, **options)
    return _served(server, as_task=True)


def _mcp_result(answer: Any) -> dict[str, Any]:
    """A handler's answer as a `CallToolResult` (wire form), as `_mcp_tool`'s server sends it."""
    if isinstance(answer, ImageContent):
        data = base64.b64encode(answer.data or b"").decode()
        return {"content": [{"type": "image", "data": data, "mimeType": answer.media_type or ""}]}
    text = answer if isinstance(answer, str) else pydantic_core.to_json(answer).decode()
    return {"content": [{"type": "text", "text": text}]}


DriverFactory = Callable[..., ToolChatResult[Any]]
"""`run(service, model, prompt, **options)`: the run under that driver, to its end; its
`ToolChatResult` (a stream's last event's)."""


def drive(
    driver: str, service: ToolService[Any], model: ChatModel, prompt: Any, **options: Any
) -> ToolChatResult[Any]:
    """`service.<driver>(model, prompt, **options)` run to the end."""
    if driver == "chat":
        return service.chat(model, prompt, **options)
    if driver == "achat":
        return asyncio.run(service.achat(model, prompt, **options))
    if driver == "stream":
        last = list(service.stream(model, prompt, **options))[-1]
    else:

        async def consume() -> Any:
            return [event async for event in service.astream(model, prompt, **options)][-1]

        last = asyncio.run(consume())
    assert isinstance(last, FinalResultEvent)
    return last.result


def _driver(name: str) -> DriverFactory:
    def run(
        service: ToolService[Any], model: ChatModel, prompt: Any, **options: Any
    ) -> ToolChatResult[Any]:
        return drive(name, service, model, prompt, **options)

    return run


def _no_durable_driver(*args: Any, **kwargs: Any) -> ToolChatResult[Any]:
    raise AssertionError("the durable driver runs only against Temporal's test server")


DRIVER: Axis[DriverFactory] = Axis(
    "driver",
    lambda: {"chat", "achat", "stream", "astream", "temporal"},
    "the loop's drivers: `ToolService`'s four and the durable one",
)
for _name in ("chat", "achat", "stream", "astream"):
    DRIVER.register(_name, _driver(_name))
_DURABLE = (
    "needs a workflow of its own, defined before a worker starts, against Temporal's test "
    "server: tests/durable/test_temporal.py::{}"
)
DRIVER.register(
    "temporal",
    _no_durable_driver,
    exempt={
        "linear": _DURABLE.format("test_a_durable_run_is_linear_in_its_history"),
        "contained": "drives the loop through `adrive`, achat's own loop (checked here), with "
        "tools and model calls in activities: "
        + _DURABLE.format("test_an_error_that_ends_the_run_fails_the_workflow")
        + " and tests/durable/test_temporal.py::"
        "test_a_validator_raising_in_the_workflow_is_the_error_result_achat_gives",
        "scoped": "not registered yet",
        "once": "not registered yet",
        "decided": "not registered yet",
    },
)
DRIVERS = frozenset(DRIVER.surfaces)
"""The loop's drivers, by name (kept for the modules that import it)."""


CliFactory = Callable[[str], list[str]]
"""`argv(url)`: the command's arguments that make it read the OpenAI-compatible server at `url`
(which the test also puts in `OPENAI_BASE_URL`)."""

CLI: Axis[CliFactory | None] = Axis(
    "cli",
    cli_commands,
    "each `agentforge-typed` subcommand; traits: `offline` (argument lists that read no "
    "server), `timeout` (the option that bounds its requests)",
)
_NO_NETWORK = (
    "reads only the module it is given, no server (tests/conformance/test_conformance_cli.py::"
    "test_a_command_that_reads_no_server_makes_no_network_request)"
)
_UNDER_PROVIDER = (
    "reads only through a provider's HttpShell, whose caps and total_timeout the provider axis "
    "checks (and, with --store, a store, whose caps and timeout the store axis checks); it "
    "prints each event as it arrives, and Ctrl-C ends it (exit status 130)"
)
CLI.register(
    "probe",
    lambda url: ["probe", "--model", "openai:local-model", "--base-url", url, "--no-max-tools"],
    timeout="--timeout",
)
CLI.register(
    "run",
    lambda url: ["run", "examples/weather.py:tools", "Paris?", "--model", "openai:gpt-x"],
    exempt={"bounded": _UNDER_PROVIDER, "deadline": _UNDER_PROVIDER},
)
CLI.register(
    "eval",
    lambda url: [
        "eval",
        "tests/fixtures/evals/weather.jsonl",
        "--target",
        "examples/weather.py:tools",
        "--model",
        "openai:gpt-x",
    ],
    exempt={
        "bounded": "reads only through a provider's HttpShell, whose caps the provider axis "
        "checks; an attempt keeps the first MAX_TEXT_CHARS (2,000) characters of an answer's "
        "text (tests/evals/test_evals_run.py::test_an_answer_s_text_is_kept_to_its_cap)"
    },
    timeout="--timeout",
)
_OFFLINE = {"bounded": _NO_NETWORK, "deadline": _NO_NETWORK, "secret": _NO_NETWORK}
CLI.register(
    "schema",
    None,
    exempt={**_OFFLINE, "malformed": _NO_NETWORK},
    offline=[
        ["schema", "examples/weather.py:tools"],
        ["schema", "examples/support.py:tools", "--dialect", "gemini"],
    ],
)
CLI.register(
    "check",
    None,
    exempt={**_OFFLINE, "malformed": _NO_NETWORK},
    offline=[
        ["check", "examples/weather.py:tools", "--strict"],
        ["check", "examples/weather.py:tools", "--profile", "ollama"],
    ],
)

_STORE_ONLY = (
    "reads no model server and holds no API key: only its store, whose guarantees the store "
    "axis checks (tests/conformance/test_conformance_stores.py) and this command's own tests: "
    "tests/cli/test_stores_cli.py::{}"
)
CLI.register(
    "conversations",
    None,
    exempt={
        "bounded": _STORE_ONLY.format("test_a_record_over_the_cap_is_refused_in_one_line"),
        "deadline": _STORE_ONLY.format("test_a_locked_store_ends_within_the_timeout")
        + " and tests/cli/test_stores_cli.py::test_a_silent_server_ends_within_the_timeout",
        "secret": _STORE_ONLY.format("test_the_store_password_is_never_shown"),
        "malformed": _STORE_ONLY.format("test_a_corrupt_record_is_one_line"),
    },
    offline=[
        ["conversations", "--store", "memory:"],
        ["conversations", "--store", "memory:", "list", "--json"],
    ],
)


_SERVES = (
    "serves what MCP clients send, not what a server answers: the server axis checks its "
    "guarantees over this very command (tests/conformance/test_conformance_serving.py::{})"
)
_SERVES_BROWSERS = (
    "serves browsers, not what a model server answers (its model's reads are the provider "
    "axis's): the ui axis checks its guarantees over the endpoints this command serves "
    "(tests/conformance/test_conformance_ui.py::{})"
)
CLI.register(
    "serve",
    None,
    exempt={
        "bounded": _SERVES_BROWSERS.format("test_a_body_over_the_cap_is_refused"),
        "deadline": _SERVES_BROWSERS.format("test_a_reader_that_reads_nothing_is_given_up"),
        "secret": _SERVES_BROWSERS.format("test_no_frame_and_no_log_holds_the_model_s_key"),
        "malformed": _SERVES_BROWSERS.format(
            "test_a_malformed_request_is_refused_and_nothing_runs"
        ),
        "printable": "prints only its own lines: the URL it serves and how many tools",
    },
)
CLI.register(
    "mcp",
    None,
    exempt={
        "bounded": _SERVES.format("test_a_request_over_the_cap_is_refused_one_at_it_served"),
        "deadline": _SERVES.format("test_every_call_ends_within_the_server_s_timeout"),
        "secret": _SERVES.format("test_no_client_and_no_log_sees_a_secret"),
        "malformed": _SERVES.format("test_a_malformed_request_is_answered_and_serving_goes_on"),
    },
    # `--list` prints what `tools/list` declares and serves nothing: it reads only the module.
    offline=[
        ["mcp", "examples/weather.py:tools", "--list"],
        ["mcp", "examples/support.py:tools", "--list", "--tools", "get_my_account"],
    ],
)


ServerFactory = Callable[..., contextlib.AbstractContextManager[Any]]
"""`serve(target, *args, env=None)`: `agentforge-typed mcp TARGET ARGS` over the transport for
the block, with `env` added to its environment; yields a `serving_support.Endpoint`: `client()`
(the official SDK client on a new session) and `exchange(body)` (one raw request on a new
session)."""


def _endpoint(name: str) -> ServerFactory:
    def serve(target: str, *args: str, env: dict[str, str] | None = None) -> Any:
        import serving_support

        return getattr(serving_support, f"{name}_endpoint")(target, *args, env=env)

    return serve


SERVER: Axis[ServerFactory] = Axis(
    "server",
    server_transports,
    "each transport a `ToolServer` serves tools on, the CLI's `mcp` command behind it: what its "
    "MCP clients send is read there",
)
SERVER.register(
    "stdio",
    _endpoint("stdio"),
    exempt={
        "scoped": "a process per client, a session per process: nothing of one client is in "
        "another's process (tests/serving/test_serving.py::"
        "test_deps_are_made_once_per_session_or_per_call checks sessions within one server)",
    },
)
SERVER.register("http", _endpoint("http"))


HistoryFactory = Callable[[list[Any]], object]
"""`step(messages)`: the step run over the history before a model call, as the loop runs it."""


def _processed(processor: Any) -> HistoryFactory:
    from agentforge_typed.loop._history import process

    return lambda messages: process([processor], messages)


HISTORY: Axis[HistoryFactory] = Axis(
    "history",
    history_steps,
    "what runs over the whole history before each model call: the ready history processors "
    "and `unsendable`, the check of what any processor returns",
)


def _unsendable(messages: list[Any]) -> object:
    from agentforge_typed.loop._history import unsendable

    return unsendable(messages)


HISTORY.register("unsendable", _unsendable)
HISTORY.register("keep_last_rounds", _processed(af_loop.keep_last_rounds(10)))
HISTORY.register("drop_old_tool_results", _processed(af_loop.drop_old_tool_results(10)))


@dataclass(frozen=True)
class Hooked:
    """A service option that calls `code` (the program's own), and the call of the model that
    makes the loop call it."""

    options: dict[str, Any]
    call: tuple[str, str]
    """The tool name and arguments the model sends."""


HookFactory = Callable[[Callable[[], Any]], Hooked]
"""`build(code)`: the `ToolService` options installing a hook whose body is `code()` (which
raises, in the containment tests), and the call that makes the loop run it. Trait `raises`:
what a hook that raises ends the run with — `"propagates"` (the program's own exception, as the
guide documents, carrying the run's history), or the `AgentForgeError` subclass it becomes."""

HOOK: Axis[HookFactory] = Axis(
    "hook",
    service_hooks,
    "each `ToolService` option through which the loop calls the program's own code",
)


def _hook(
    name: str, call: tuple[str, str] = ("ok", "{}"), **traits: Any
) -> Callable[[Callable[[Callable[[], Any]], Any]], Any]:
    def register(option: Callable[[Callable[[], Any]], Any]) -> Any:
        HOOK.register(name, lambda code: Hooked({name: option(code)}, call), **traits)
        return option

    return register


_PROPAGATES = "propagates"


@_hook("before_tool_call", raises=_PROPAGATES)
def _before(code: Callable[[], Any]) -> Any:
    return lambda call, context: code()


@_hook("after_tool_call", raises=_PROPAGATES)
def _after(code: Callable[[], Any]) -> Any:
    return lambda execution: code()


@_hook("arguments_error_handler", ("ok", '{"x": 1}'), raises=_PROPAGATES)
def _arguments_handler(code: Callable[[], Any]) -> Any:
    return lambda error, context: code()


@_hook("execution_error_handler", ("boom", "{}"), raises=_PROPAGATES)
def _execution_handler(code: Callable[[], Any]) -> Any:
    return lambda error, context: code()


@_hook("unknown_tool_handler", ("nowhere", "{}"), raises=_PROPAGATES)
def _unknown_handler(code: Callable[[], Any]) -> Any:
    return lambda call, names: code()


@_hook("prepare_tools", raises=_PROPAGATES)
def _prepare(code: Callable[[], Any]) -> Any:
    return lambda context, specifications: code()


@_hook("history_processors", raises="HistoryProcessorError")
def _processors(code: Callable[[], Any]) -> Any:
    def processor(messages: list[Any]) -> list[Any]:
        # The first model call goes out; the one after the tool's result does not.
        return code() if len(messages) > 1 else messages

    return [processor]


@_hook("guardrails", raises="GuardrailError")
def _guardrails(code: Callable[[], Any]) -> Any:
    # A guardrail that raises blocks (fails closed): at the input, the run ends with
    # `GuardrailError` before any model call; at a call or a result, the model reads the refusal
    # (tests/conformance/test_conformance_containment.py::
    # test_a_guardrail_or_rule_that_raises_refuses).
    return [af.input_guardrail(lambda messages: code(), name="broken")]


HOOK.register(
    "rules",
    lambda code: Hooked(
        {"rules": [af.CallRule.allow(when=lambda arguments: code())]}, ("ok", "{}")
    ),
    exempt={
        "contained": "a rule that raises refuses the call (fails closed): the run goes on, the "
        "model reading the refusal (tests/conformance/test_conformance_containment.py::"
        "test_a_guardrail_or_rule_that_raises_refuses)",
    },
)


WIRE: Axis[Callable[[], Any]] = Axis(
    "wire",
    wire_cores,
    "each wire core (`providers/_<name>_wire.py`): its stream accumulator (the factory) and its "
    "`Wire` (trait `wire`), for the streamed fields and content rendering",
)


def _wires() -> None:
    from agentforge_typed.providers._anthropic_wire import AnthropicStreamAccumulator, AnthropicWire
    from agentforge_typed.providers._gemini_wire import GeminiStreamAccumulator, GeminiWire
    from agentforge_typed.providers._openai_wire import OpenAIWire, StreamAccumulator
    from agentforge_typed.providers._responses_wire import (
        OpenAIResponsesWire,
        ResponsesStreamAccumulator,
    )

    WIRE.register("anthropic", AnthropicStreamAccumulator, wire=AnthropicWire())
    WIRE.register("openai", StreamAccumulator, wire=OpenAIWire())
    WIRE.register("responses", ResponsesStreamAccumulator, wire=OpenAIResponsesWire())
    WIRE.register("gemini", GeminiStreamAccumulator, wire=GeminiWire())


_wires()


def store_kinds() -> frozenset[str]:
    """The conversation stores the package offers (`agentforge_typed.stores`), by class name."""
    import agentforge_typed.stores as stores

    return frozenset(
        name
        for name in stores.__all__
        if name.endswith("Store")
        and isinstance(getattr(stores, name), type)
        and name != "ConversationStore"
    )


StoreFactory = Callable[[Path, pytest.FixtureRequest], str]
"""`locate(tmp_path, request)`: the URL of a new, empty place for a store of the kind, which
the tests open with `store_from_url(url, **options)` (`claim_ttl`, `max_record_bytes`, `timeout`),
in this process or in a worker process. Trait `shared`: whether two stores opened on one URL see
the same conversations (a database; `memory:` is a new store each time)."""

STORE: Axis[StoreFactory] = Axis(
    "store",
    store_kinds,
    "each conversation store (`agentforge_typed.stores`); trait `shared`: two stores opened "
    "on one URL see the same conversations",
)
STORE.register(
    "MemoryStore",
    lambda tmp_path, request: "memory:",
    exempt={
        "once": "lives in one process: its claims between threads are checked by "
        "tests/conformance/test_conformance_stores.py::test_one_claim_wins_among_threads",
        "deadline": "never waits: its lock is held only while one record is copied",
        "malformed": "keeps the messages it was given, checked when saved: it reads nothing "
        "another program wrote",
    },
    shared=False,
)
STORE.register(
    "SQLiteStore",
    lambda tmp_path, request: f"sqlite:///{tmp_path / 'conversations.db'}",
    shared=True,
)
STORE.register(
    "PostgresStore",
    lambda tmp_path, request: request.getfixturevalue("postgres").dsn(),
    shared=True,
)


def ui_endpoints() -> frozenset[str]:
    """The endpoints a browser posts to on `agentforge_typed.ui`'s app (its POST routes)."""
    from starlette.routing import Route

    from agentforge_typed.ui import create_app

    app = create_app(ToolService(), af.FakeModel())
    return frozenset(
        route.path
        for route in app.routes
        if isinstance(route, Route) and "POST" in (route.methods or ())
    )


UIFactory = Callable[[str], Any]
"""`conversation(thread)`: a new conversation with the endpoint as its protocol's client holds
one (`ui_support.Conversation`: `path`, `body(text)`, `decision(approved)`, `send(client, body)`,
`text(frames)`, `waiting`)."""

UI: Axis[UIFactory] = Axis(
    "ui",
    ui_endpoints,
    "each endpoint of the UI app (`agentforge_typed.ui.create_app`): what a browser sends is "
    "read there",
)


def _conversation(path: str) -> UIFactory:
    def conversation(thread: str) -> Any:
        import ui_support

        return ui_support.PROTOCOLS[path](thread)

    return conversation


UI.register("/ag-ui", _conversation("/ag-ui"))
UI.register("/api/chat", _conversation("/api/chat"))

AXES: tuple[Axis[Any], ...] = (
    PROVIDER,
    WIRE,
    TOOL,
    DRIVER,
    CLI,
    HISTORY,
    HOOK,
    STORE,
    SERVER,
    UI,
)


# -- the former interface: names covered, by axis (ported modules use the registry) ---------------


def surfaces() -> Mapping[str, frozenset[str]]:
    """Every surface the suite must cover, by axis."""
    return {
        **{axis.name: axis.discovered() for axis in AXES},
        "composite": composite_models(),
    }


def assert_covers(guarantee: str, axis: str, covered: Iterable[str]) -> None:
    """Fail when a surface of `axis` exists that `guarantee`'s tests do not cover. (Parametrise
    over `AXIS.each(guarantee)` instead: this remains for modules not ported yet.)"""
    missing = sorted(surfaces()[axis] - set(covered))
    assert not missing, (
        f"{guarantee}: no conformance test covers the {axis} surface(s) {', '.join(missing)}; "
        "register each in the suite (see DEVELOPERS.md, 'The conformance suite')"
    )


# -- timing --------------------------------------------------------------------------------------

LINEAR_FACTOR = 16.0
"""The most that 8n may cost against n: linear is 8, quadratic 64; the rest is room for noise."""


def _best(
    run: Callable[[int], object], size: int, repeat: int, clock: Callable[[], float]
) -> float:
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        # The collector's full passes cost in proportion to everything alive, not to the input:
        # kept out of the timing, they cannot make a linear surface look quadratic.
        gc.disable()
        try:
            started = clock()
            run(size)
            best = min(best, clock() - started)
        finally:
            gc.enable()
    return best


def assert_linear(
    run: Callable[[int], object],
    n: int,
    *,
    what: str,
    repeat: int = 3,
    floor: float = 0.002,
    clock: Callable[[], float] = time.perf_counter,
) -> None:
    """Assert that `run(8 * n)` costs at most `LINEAR_FACTOR` times `run(n)`.

    `run(size)` builds nothing it times: it feeds an input of `size` units (deltas, items,
    characters) prepared outside, or cheap to prepare. The best of `repeat` runs of each size is
    compared; a small size under `floor` seconds is measured at `floor`, so timer noise on a tiny
    input cannot fail a linear surface. `clock=time.process_time` measures CPU time, which other
    work on a shared machine does not move, for a surface that never waits.
    """
    run(n)  # warm-up: validators and caches built outside the timing
    small = max(_best(run, n, repeat, clock), floor)
    large = _best(run, 8 * n, repeat, clock)
    ratio = large / small
    assert ratio <= LINEAR_FACTOR, (
        f"{what}: 8x the input took {ratio:.1f}x the time ({small * 1e3:.1f} ms -> "
        f"{large * 1e3:.1f} ms); linear is 8x, the limit {LINEAR_FACTOR:g}x"
    )


@contextlib.asynccontextmanager
async def entered(built: BuiltTool) -> AsyncIterator[Any]:
    """`async with built` as a helper for the async tests."""
    async with built as tool:
        yield tool


@contextlib.contextmanager
def released() -> Iterator[threading.Event]:
    """An event a handler waits on, set when the block ends: a handler that "never returns"
    returns once its test is over, so no thread outlives the test by long."""
    event = threading.Event()
    try:
        yield event
    finally:
        event.set()
