"""The registry half of `ToolService`: its options, its tools and groups, and what a run asks of
them (the request parameters, the deps check, the tools a run offers); `ToolService`
(`_service`) adds the drivers."""

from __future__ import annotations

import inspect
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic

from typing_extensions import Self

from .._exceptions import ToolArgumentsError
from .._identity import CallDigests
from .._messages import ChatMessage, ToolCall, shown_name
from .._records import ToolExecution, ToolExecutionResult
from .._request import ChatRequestParameters, ToolSpecification
from .._sync import running_loop
from ..tools._base import DepsT, ToolContext, ToolExecutor, ToolLike
from ..tools._budget import check_max_result_chars
from ..tools._invoke import is_async_callable
from ..tools._signature import deps_accepted, needing_deps, type_name
from ._decisions import CallRule, check_rules
from ._guardrails import Guardrail, Guardrails
from ._history import HistoryProcessor, check_processors
from ._output import OutputSpec
from ._toolsets import Offer, PrepareTools, ToolSearch, ToolSelection, add_to_groups, group_sources
from ._usage import UsageLimits

logger = logging.getLogger("agentforge_typed")

if TYPE_CHECKING:
    from ..stores import ConversationStore


__all__ = [
    "AfterToolCall",
    "ArgumentsErrorHandler",
    "BeforeToolCall",
    "ExecutionErrorHandler",
    "ToolRegistry",
    "UnknownToolHandler",
    "available_tools_handler",
    "is_tool",
    "list_available_tools",
    "tools_from",
]


ArgumentsErrorHandler = Callable[
    [ToolArgumentsError, ToolContext[Any]], "ToolExecutionResult | str"
]
"""Replaces the default arguments-error policy: return what the model reads, or raise to stop."""
ExecutionErrorHandler = Callable[[BaseException, ToolContext[Any]], "ToolExecutionResult | str"]
"""Replaces the default execution-error result: return what the model reads, or raise to stop."""
UnknownToolHandler = Callable[[ToolCall, Sequence[str]], "ToolExecutionResult | str | None"]
"""Answers a call to an unregistered tool (given the registered names); `None` raises."""
BeforeToolCall = Callable[
    [ToolCall, ToolContext[Any]],
    "ToolExecutionResult | str | Awaitable[ToolExecutionResult | str | None] | None",
]
"""Runs before each call; a result (or text) is used instead of executing the tool. It may be an
async function under `achat`/`astream` (an approval that asks a service)."""
AfterToolCall = Callable[[ToolExecution], "Awaitable[None] | None"]
"""Sees every execution, after error policies (audit, metrics, logging); it may be an async
function under `achat`/`astream`."""


def available_tools_handler(call: ToolCall, available: Sequence[str]) -> ToolExecutionResult:
    """An `unknown_tool_handler` that tells the model which tools exist, so it can correct itself
    (quoting at most `MAX_NAME_CHARS` characters of the name it sent)."""
    names = ", ".join(f"`{name}`" for name in available) or "none"
    return ToolExecutionResult.error(
        f"There is no tool named `{shown_name(call.name)}`. Available tools: {names}.",
        "unknown_tool",
    )


list_available_tools = available_tools_handler
"""The former name of `available_tools_handler`, kept for existing code."""


class ToolRegistry(Generic[DepsT]):
    """The registered tools and the options of a `ToolService` (see its docstring): everything
    but the drivers, which a `Run` reads."""

    def __init__(
        self,
        tools: Iterable[object] | None = None,
        *,
        max_round_trips: int = 100,
        arguments_error_handler: ArgumentsErrorHandler | None = None,
        execution_error_handler: ExecutionErrorHandler | None = None,
        unknown_tool_handler: UnknownToolHandler | None = None,
        parallel: bool = True,
        before_tool_call: BeforeToolCall | None = None,
        after_tool_call: AfterToolCall | None = None,
        deps_type: type[DepsT] | None = None,
        groups: Mapping[str, Iterable[object]] | None = None,
        prepare_tools: PrepareTools | None = None,
        tool_search: ToolSearch | None = None,
        usage_limits: UsageLimits | None = None,
        max_result_chars: int | None = None,
        history_processors: Sequence[HistoryProcessor] | None = None,
        blocking_in_event_loop: bool = False,
        digest_secret: str | bytes | None = None,
        guardrails: Sequence[Guardrail[Any]] | None = None,
        rules: Sequence[CallRule] | None = None,
        store: ConversationStore | str | None = None,
    ) -> None:
        if max_round_trips < 1:
            raise ValueError("max_round_trips must be at least 1")
        self.max_round_trips = max_round_trips
        self.arguments_error_handler = arguments_error_handler
        self.execution_error_handler = execution_error_handler
        self.unknown_tool_handler = unknown_tool_handler
        self.parallel = parallel
        self.before_tool_call = before_tool_call
        self.after_tool_call = after_tool_call
        self.deps_type = deps_type
        self.usage_limits = usage_limits
        self.max_result_chars = check_max_result_chars(max_result_chars)
        self.history_processors = check_processors(history_processors)
        self.blocking_in_event_loop = blocking_in_event_loop
        self.guardrails: Guardrails | None = Guardrails(guardrails) if guardrails else None
        """The guardrails by point (`None`: none, the fast path)."""
        self.rules: tuple[CallRule, ...] = tuple(rules or ())
        """The rules of the decision on each call, in order (see `_decisions`)."""
        if self.rules:
            check_rules(self.rules, None)
        self._digests = CallDigests(digest_secret)
        """The digests of paused calls (the secret lives only inside it)."""
        self._store = _as_store(store)
        self._tools: dict[str, ToolLike] = {}
        self._watched: list[_Watched] = []
        """The registered sources whose tools may change (`tools_version`)."""
        self._generation = 0
        """+1 whenever the registered tools change after a run may have started."""
        self._default_parameters: ChatRequestParameters | None = None
        self._needy: list[str] | None = None
        """The registered tools that need deps (`needing_deps`), found at the first run."""
        self.prepare_tools = prepare_tools
        self.tool_search = tool_search
        self._groups: dict[str, list[str]] = {}
        for item in tools or ():
            self.register(item)
        for group, source in group_sources(groups or {}):
            self.register(source, group=group)

    def __repr__(self) -> str:
        return f"ToolService(tools={list(self._tools)!r})"

    @property
    def store(self) -> ConversationStore | None:
        """Where the runs given a `conversation_id` keep their conversation (`None`: nowhere);
        set it to a `ConversationStore` or a store URL."""
        return self._store

    @store.setter
    def store(self, store: ConversationStore | str | None) -> None:
        self._store = _as_store(store)

    # -- registration ------------------------------------------------------------------------

    @property
    def tools(self) -> Sequence[ToolLike]:
        """The registered tools, in registration order."""
        return tuple(self._tools.values())

    @property
    def specifications(self) -> Sequence[ToolSpecification]:
        """What the model is offered."""
        return tuple(t.specification for t in self._tools.values())

    @property
    def groups(self) -> Mapping[str, Sequence[str]]:
        """The named groups and the names of their tools, in registration order."""
        return {group: tuple(names) for group, names in self._groups.items()}

    def register(self, source: object, *, group: str | Iterable[str] | None = None) -> Self:
        """Register a `Tool` (or any `ToolLike`), a plain typed function (decorated on the fly),
        a `ToolSource` such as an entered `MCPServer`, or an object whose methods carry `@tool`.

        A source registers whole or not at all: when one of its tools cannot be registered,
        none is. `group` puts its tools into one or several named groups, which a run selects
        with `tools=["group:NAME"]`; registering the same tool object again with a
        `group` adds it to that group.

        Raises:
            ValueError: a tool with the same name is already registered, or `source` holds two
                tools of one name.
            SchemaDialectError: a tool asks for a provider-enforced schema (`strict_schema`)
                that the OpenAI strict dialect cannot express — refused now, not at the first
                request.
            TypeError: `source` holds no tool, a tool's `ToolContext[X]` does not accept the
                service's `deps_type`, or a tool's declared return type cannot be serialized to
                JSON (a plain class: pydantic has no schema for it).
        """
        items = tools_from(source)
        if group is not None and all(self._tools.get(item.name) is item for item in items):
            add_to_groups(self._groups, group, [item.name for item in items])
            return self
        self._admissible(items, source)
        add_to_groups(self._groups, group, [item.name for item in items])
        self._tools.update((item.name, item) for item in items)
        version = getattr(source, "tools_version", None)
        if isinstance(version, int) and not is_tool(source):
            self._watched.append(_Watched(source, [item.name for item in items], group, version))
        self._changed()
        return self

    def _admissible(
        self, items: Sequence[ToolLike], source: object, replacing: Collection[str] = ()
    ) -> None:
        """Raise when `items` (from `source`, in place of the tools named `replacing`) cannot
        be registered; see `register`."""
        counts = Counter(item.name for item in items)
        taken = [name for name in counts if name in self._tools and name not in replacing]
        clash = next(iter(taken), None) or next((n for n in counts if counts[n] > 1), None)
        if clash is not None:
            problem = (
                f"a tool named {clash!r} is already registered"
                if taken
                else f"two of its tools are named {clash!r}"
            )
            raise ValueError(
                problem if len(items) == 1 else f"{problem}; nothing from {source!r} was registered"
            )
        for item in items:
            expected = getattr(item, "deps_type", Any)
            if self.deps_type is not None and not deps_accepted(expected, self.deps_type):
                raise TypeError(
                    f"tool {item.name!r} takes ToolContext[{type_name(expected)}], which does not "
                    f"accept this service's deps type {type_name(self.deps_type)}"
                )
            if item.specification.strict_schema:
                # What OpenAI's strict mode cannot express (`dict[str, X]`) is refused here, for
                # every kind of tool, rather than at the first request.
                from ..providers._dialects import render_schema

                render_schema(item.specification.parameters, "openai-strict")
            _require_serializable_return(item)

    def _changed(self) -> None:
        self._default_parameters = None
        self._needy = None
        self._generation += 1

    def _refresh(self) -> None:
        """Take the new tool list of each watched source whose `tools_version` moved, whole:
        one that cannot be registered (a name another tool holds) is refused, with a warning,
        and the source's old tools stay."""
        changed = False
        for watched in self._watched:
            version = getattr(watched.source, "tools_version", watched.version)
            if version == watched.version:
                continue
            watched.version = version
            old = set(watched.names)
            try:
                items = tools_from(watched.source)
                self._admissible(items, watched.source, replacing=old)
            except (TypeError, ValueError) as exc:
                logger.warning(
                    "the changed tools of %s were refused, its former tools stay: %s",
                    repr(watched.source),  # as it is now, not when the record is formatted
                    exc,
                )
                continue
            names = [item.name for item in items]
            for group, members in self._groups.items():
                if any(name in old for name in members):
                    members[:] = [name for name in members if name not in old]
                    add_to_groups(self._groups, group, names)
            add_to_groups(self._groups, watched.group, names)
            for name in old:
                del self._tools[name]
            self._tools.update((item.name, item) for item in items)
            watched.names = names
            changed = True
        if changed:
            self._changed()

    def _offer(
        self,
        tools: ToolSelection | None,
        deps: Any,
        conversation_id: str,
        messages: Sequence[ChatMessage],
    ) -> Offer | None:
        """What a run offers when it selects, searches or prepares its tools; `None` when it
        offers every registered tool (the fast path)."""
        if tools is None and self.tool_search is None and self.prepare_tools is None:
            return None
        return Offer(
            self._tools,
            self._groups,
            tools,
            self.tool_search,
            self.prepare_tools,
            deps,
            conversation_id,
            messages,
        )

    def register_spec(
        self,
        specification: ToolSpecification,
        handler: Callable[[dict[str, Any]], Any] | ToolExecutor,
        **options: Any,
    ) -> Self:
        """Register a tool defined by a hand-written JSON schema; arguments are validated against
        the schema itself before `handler` (a sync or async callable receiving the arguments
        dict, or a `ToolExecutor`) runs. `options` go to `SchemaTool`."""
        from ..tools._schema_tool import SchemaTool

        return self.register(SchemaTool(specification, handler, **options))

    def _async_hooks(self, asynchronous: bool) -> tuple[bool, bool]:
        """Whether `before_tool_call` and `after_tool_call` are async functions; under a blocking
        run (`chat`, `stream`) one that is is a `TypeError`, before any model call."""
        if self.before_tool_call is None and self.after_tool_call is None:
            return False, False
        hooks = {"before_tool_call": self.before_tool_call, "after_tool_call": self.after_tool_call}
        found = {name: hook is not None and is_async_callable(hook) for name, hook in hooks.items()}
        for name, is_async in found.items():
            if is_async and not asynchronous:
                raise TypeError(
                    f"{name} is an async function: it runs only under achat/astream; "
                    "use a plain function with chat/stream"
                )
        return found["before_tool_call"], found["after_tool_call"]

    def _check_deps(self, deps: Any, *, selected: bool = False) -> None:
        """Refuse, before any model call, `deps` that are not an instance of `deps_type`, or,
        without a `deps_type`, no deps for tools that need them (not an `AttributeError` inside a
        tool that the model would read). A run that `selected` its tools may leave those out."""
        expected = self.deps_type
        if expected is None:
            if deps is None and not selected:
                if self._needy is None:
                    self._needy = needing_deps(self._tools.values())
                if self._needy:
                    raise TypeError(
                        f"{', '.join(self._needy)} need{'s' if len(self._needy) == 1 else ''} "
                        "deps: pass deps=... to the run (and deps_type=... to ToolService, for "
                        "mypy to check them)"
                    )
            return
        if deps_accepted(expected, type(deps)):
            return
        raise TypeError(
            f"deps must be an instance of {type_name(expected)} (this service's deps_type), "
            f"not {type(deps).__qualname__}"
        )

    def _refuse_in_event_loop(self, driver: str, instead: str) -> None:
        if self.blocking_in_event_loop or running_loop() is None:
            return
        raise RuntimeError(
            f"ToolService.{driver}() blocks, and this thread runs an event loop (async code or a "
            f"notebook): use `{instead}` there, or ToolService(blocking_in_event_loop=True) to "
            "block the loop until the run ends"
        )

    def _request_parameters(
        self, user: ChatRequestParameters | None, output: OutputSpec[Any] | None
    ) -> ChatRequestParameters:
        # Registered tools are always offered; the caller's parameters win for everything else.
        if user is None and output is None:
            if self._default_parameters is None:
                tools = self.specifications or None
                self._default_parameters = ChatRequestParameters.model_construct(tools=tools)
            return self._default_parameters
        specifications = list(self.specifications)
        if user is not None and user.tools:
            specifications += [s for s in user.tools if s.name not in self._tools]
        if output is not None and not output.in_text:
            if output.name in self._tools:
                raise ValueError(
                    f"the output tool name {output.name!r} is taken by a registered tool"
                )
            specifications.append(output.specification)
        merged = ChatRequestParameters().merge(user)
        merged = merged.model_copy(update={"tools": tuple(specifications) or None})
        return output.request_parameters(merged) if output and output.native else merged


def _as_store(store: ConversationStore | str | None) -> ConversationStore | None:
    """`store=`: a `ConversationStore`, or a URL `store_from_url` reads (the stores load only
    for a service that has one)."""
    if store is None:
        return None
    from ..stores import ConversationStore, store_from_url

    if isinstance(store, str):
        return store_from_url(store)
    if not isinstance(store, ConversationStore):
        raise TypeError(
            f"store must be a ConversationStore or a store URL, not {type(store).__name__}"
        )
    return store


def is_tool(value: object) -> bool:
    """Whether `value` looks like a `ToolLike` (a specification and an executor)."""
    return hasattr(value, "specification") and hasattr(value, "aexecute")


def _require_serializable_return(item: ToolLike) -> None:
    from ..tools._function import Tool

    if isinstance(item, Tool) and (problem := item.unserializable_return()) is not None:
        raise TypeError(f"tool {item.name!r}: {problem}")


@dataclass
class _Watched:
    """A registered source whose tools may change, and what the service took from it."""

    source: Any
    names: list[str]
    group: str | Iterable[str] | None
    version: int


def tools_from(source: object) -> list[ToolLike]:
    """The tools `source` holds, as `ToolService.register` reads it.

    Raises:
        TypeError: `source` holds no tool.
    """
    if is_tool(source):
        from ..tools._function import Tool

        if isinstance(source, Tool):
            source.require_bound()  # a method taken from the class: refused now, not per call
        return [source]  # type: ignore[list-item]
    tools = getattr(source, "tools", None)
    if callable(tools) and not inspect.isclass(source):
        return list(tools())
    if inspect.isfunction(source) or inspect.ismethod(source):
        from ..tools._function import tool

        return [tool(source)]
    found = [
        getattr(source, name)
        for name, member in inspect.getmembers(type(source))
        if is_tool(member)
    ]
    if not found:
        raise TypeError(
            f"{source!r} is not a tool, a function, a tool source, or an object with @tool methods"
        )
    return found
