"""Which registered tools a run offers: named groups, per-run selection, `prepare_tools` and
tool search.

A `ToolService` registers tools once; a run offers only some of them. What a round offers is
also what the round may call: a call to a registered tool that was not offered is answered like
a call to an unknown tool, so a selection is enforced by the loop, not by the model's good will.
Everything here is free of I/O; `Run` asks an `Offer` for each round's tools and looks calls up
through it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic

import pydantic_core

from .._exceptions import ModelRetry
from .._messages import ChatMessage, ToolCall, ToolResultMessage
from .._records import ToolExecutionResult
from .._request import ChatRequestParameters, ToolSpecification
from ..tools._base import DeclaredTool, DepsT, ReturnBehavior, ToolContext, ToolLike
from ..tools._outcomes import failure_result, success_result, with_repairs

__all__ = [
    "GROUP_PREFIX",
    "Offer",
    "PrepareContext",
    "PrepareTools",
    "ToolSearch",
    "ToolSelection",
    "add_to_groups",
    "group_sources",
    "resolve",
    "search_score",
]

GROUP_PREFIX = "group:"
"""A selector starting with this names a group (`"group:billing"`) rather than a tool."""


@dataclass(frozen=True, slots=True)
class PrepareContext(Generic[DepsT]):
    """What a `prepare_tools` hook knows about the run when it chooses a round's tools."""

    deps: DepsT
    """The run's `deps` (e.g. the user, whose permissions decide what is offered)."""
    conversation_id: str
    round_trip: int
    """1 for the first model call of the run, +1 for each further one."""
    messages: Sequence[ChatMessage]
    """The conversation so far."""


PrepareTools = Callable[
    [PrepareContext[Any], Sequence[ToolSpecification]], Sequence[ToolSpecification]
]
"""`prepare_tools(ctx, specifications) -> specifications`: runs before every model call with what
the round would offer; it may drop tools or adjust their specifications (a description), never
add one that was not given."""


@dataclass(frozen=True, slots=True)
class ToolSearch:
    """Offer a small core set plus a search tool; tools the search finds are offered from the next
    round on, for the rest of the run.

    The search ranks tools with `search_score`: no embeddings, the same query over the same tools
    always gives the same list. The found names are read back from the search tool's result
    messages, so a run resumed from its history offers the same tools again.

    Args:
        core: Tool names and `"group:NAME"` selectors offered from the first round on.
        catalog: What the search looks in (names and groups); `None` is every tool the run may
            use. The core is never among the results.
        max_results: The most tools one search returns.
        name: The search tool's name, as the model calls it.
    """

    core: Sequence[str] = ()
    catalog: Sequence[str] | None = None
    max_results: int = 5
    name: str = "search_tools"

    def __post_init__(self) -> None:
        _check_selectors(self.core, "ToolSearch.core")
        if self.catalog is not None:
            _check_selectors(self.catalog, "ToolSearch.catalog")
        if self.max_results < 1:
            raise ValueError("ToolSearch.max_results must be at least 1")

    @property
    def specification(self) -> ToolSpecification:
        """The search tool's declaration."""
        return ToolSpecification(
            name=self.name,
            description=(
                "Search the available tools by keywords (what you want to do, the objects it "
                "concerns). Returns matching tools by name with a one-line description; they can "
                "be called from your next turn on."
            ),
            parameters={
                "type": "object",
                "properties": {"query": {"type": "string", "description": "Keywords to search."}},
                "required": ["query"],
                "additionalProperties": False,
            },
        )


ToolSelection = Sequence[str] | ToolSearch
"""A run's `tools=`: tool names and `"group:NAME"` selectors, or a `ToolSearch`."""


def _check_selectors(selectors: object, where: str) -> None:
    # A lone string is a Sequence[str] too: "group:billing" would select its characters.
    if isinstance(selectors, str):
        raise TypeError(
            f"{where} must be a list of tool names or 'group:NAME' selectors, not a string: "
            f"pass [{selectors!r}]"
        )
    if not isinstance(selectors, Iterable):
        raise TypeError(f"{where} must be a list of tool names or 'group:NAME' selectors")


def add_to_groups(
    groups: dict[str, list[str]], group: str | Iterable[str] | None, names: Iterable[str]
) -> None:
    """Record `names` as members of `group` (one name or several); a tool may sit in many."""
    if group is None:
        return
    chosen = list(group) if isinstance(group, Iterable) and not isinstance(group, str) else [group]
    for name in chosen:  # all checked first: a bad name adds the tools to no group
        if not isinstance(name, str) or not name or name.startswith(GROUP_PREFIX):
            raise ValueError(f"invalid group name {name!r}")
    for name in chosen:
        members = groups.setdefault(name, [])
        members += [n for n in names if n not in members]


def group_sources(groups: Mapping[str, Iterable[object]]) -> Iterator[tuple[str, object]]:
    """`(group, source)` for each source of `ToolService(groups=...)`.

    Raises:
        TypeError: A group maps to one tool instead of a list of them.
    """
    for group, sources in groups.items():
        if isinstance(sources, str) or not isinstance(sources, Iterable):
            raise TypeError(f"group {group!r} must map to a list of tool sources")
        for source in sources:
            yield group, source


def resolve(
    selectors: Iterable[str], tools: Mapping[str, ToolLike], groups: Mapping[str, Sequence[str]]
) -> list[str]:
    """The tool names `selectors` name, in registration order.

    Raises:
        ValueError: a selector names no registered tool or group (a typo must not silently offer
            nothing).
    """
    chosen: set[str] = set()
    for selector in selectors:
        if not isinstance(selector, str):
            raise TypeError(f"a tool selector must be a string, not {type(selector).__name__}")
        if selector.startswith(GROUP_PREFIX):
            group = selector[len(GROUP_PREFIX) :]
            if group not in groups:
                raise ValueError(f"no tool group named {group!r}; groups: {sorted(groups)}")
            chosen.update(groups[group])
        elif selector in tools:
            chosen.add(selector)
        else:
            raise ValueError(
                f"no registered tool named {selector!r}; tools: {', '.join(tools) or 'none'}"
            )
    return [name for name in tools if name in chosen]


_WORD = re.compile(r"[a-z0-9]+")
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")


def _words(text: str) -> set[str]:
    """Lower-case words of `text` (camelCase and snake_case split), a trailing plural `s` cut."""
    words = _WORD.findall(_CAMEL.sub(r"\1 \2", text).lower())
    return {w[:-1] if len(w) > 3 and w.endswith("s") else w for w in words}


def search_score(query: str, specification: ToolSpecification) -> int:
    """How well `specification` matches `query`: for each distinct query word, 3 points when the
    tool's name holds it, 2 when a parameter name does, 1 when the description does.

    Words are split at anything not a letter or digit and at camelCase humps, compared in lower
    case, with a trailing `s` dropped from words longer than three letters.
    """
    return _score(_words(query), specification)


def _score(query: set[str], specification: ToolSpecification) -> int:
    properties = specification.parameters.get("properties")
    parameters = " ".join(properties) if isinstance(properties, Mapping) else ""
    name, params = _words(specification.name), _words(parameters)
    description = _words(specification.description)
    return sum(3 * (word in name) + 2 * (word in params) + (word in description) for word in query)


def _summary(description: str) -> str:
    return description.strip().split("\n", 1)[0].strip()


class Offer:
    """What one run offers, round by round, and the only way its calls find a registered tool."""

    def __init__(
        self,
        tools: Mapping[str, ToolLike],
        groups: Mapping[str, Sequence[str]],
        selection: ToolSelection | None,
        search: ToolSearch | None,
        prepare: PrepareTools | None,
        deps: Any,
        conversation_id: str,
        messages: Sequence[ChatMessage],
    ) -> None:
        if isinstance(selection, ToolSearch):
            search, selection = selection, None
        if selection is not None:
            _check_selectors(selection, "tools")
        self.tools = tools
        allowed = list(tools) if selection is None else resolve(selection, tools, groups)
        self.search = search
        self.core = allowed
        self.catalog: list[str] = []
        self.search_tool: ToolLike | None = None
        if search is not None:
            if search.name in tools:
                raise ValueError(
                    f"the tool search name {search.name!r} is taken by a registered tool"
                )
            core = set(resolve(search.core, tools, groups))
            among = allowed
            if search.catalog is not None:
                within = set(resolve(search.catalog, tools, groups))
                among = [name for name in allowed if name in within]
            # The core narrows with the selection too: a search never widens what a run may use.
            self.core = [name for name in allowed if name in core]
            self.catalog = [name for name in among if name not in core]
            self.search_tool = _SearchTool(search.specification, self._search)
        self.discovered: dict[str, None] = {}
        self.prepare = prepare
        self.deps = deps
        self.conversation_id = conversation_id
        self.messages = messages
        """The run's conversation (its live list)."""
        self.current: dict[str, ToolLike] | None = None
        """The tools offered in the latest request: the only ones a call may run."""
        self._read = 0

    def parameters(
        self, parameters: ChatRequestParameters, round_trip: int, messages: Sequence[ChatMessage]
    ) -> ChatRequestParameters:
        """`parameters` with this round's tools in place of every registered tool."""
        specifications = self._choose(round_trip, messages)
        # What the caller's parameters add (tools not registered, the output tool) stays.
        extra = [s for s in parameters.tools or () if s.name not in self.tools]
        tools = (*specifications, *extra)
        return parameters.model_copy(update={"tools": tools or None})

    def _choose(self, round_trip: int, messages: Sequence[ChatMessage]) -> list[ToolSpecification]:
        """Decide the round's tools (`current`); return their specifications as offered."""
        if self.search is not None:
            self._discover(messages)
        names = [*self.core, *self.discovered]
        offered: dict[str, ToolLike] = {name: self.tools[name] for name in names}
        if self.search_tool is not None:
            offered[self.search_tool.name] = self.search_tool
        specifications = [tool.specification for tool in offered.values()]
        if self.prepare is not None:
            context = PrepareContext(self.deps, self.conversation_id, round_trip, tuple(messages))
            specifications = list(self.prepare(context, tuple(specifications)))
            prepared: dict[str, ToolLike] = {}
            for specification in specifications:
                if not isinstance(specification, ToolSpecification):
                    raise TypeError("prepare_tools must return ToolSpecification objects")
                name = specification.name
                if name in prepared:
                    raise ValueError(f"prepare_tools returned {name!r} twice")
                if name not in offered:
                    raise ValueError(
                        f"prepare_tools returned {name!r}, which this round does not offer; it "
                        "may drop or adjust tools, not add them"
                    )
                prepared[name] = offered[name]
            offered = prepared
        self.current = offered
        return specifications

    def lookup(self, name: str) -> ToolLike | None:
        """The tool a call named `name` may run: one offered in the latest request, else `None`."""
        return self._current().get(name)

    def names(self) -> list[str]:
        """The names offered in the latest request."""
        return list(self._current())

    def _current(self) -> dict[str, ToolLike]:
        if self.current is None:
            # Calls from the history (a resumed run's pending calls) come before any request:
            # they may run what the run's first round offers.
            self._choose(1, self.messages)
        assert self.current is not None
        return self.current

    def _search(self, arguments: dict[str, Any]) -> str:
        assert self.search is not None
        query = arguments["query"]
        words = _words(query)  # once, however long the query: not once per tool
        if not words:
            raise ModelRetry("The query has no words to search for; give some keywords.")
        scored = [(_score(words, self.tools[n].specification), n) for n in self.catalog]
        ranked = sorted((s for s in scored if s[0] > 0), key=lambda s: (-s[0], s[1]))
        found = [
            {"name": name, "description": _summary(self.tools[name].specification.description)}
            for _, name in ranked[: self.search.max_results]
        ]
        if not found:
            return "No tool matches these keywords. Try other ones."
        return pydantic_core.to_json(found).decode()

    def _discover(self, messages: Sequence[ChatMessage]) -> None:
        # The search results in the history are the state: read each one once, in order.
        assert self.search is not None
        catalog = set(self.catalog)
        for message in messages[self._read :]:
            if not (
                isinstance(message, ToolResultMessage) and message.tool_name == self.search.name
            ):
                continue
            if message.is_error:
                continue
            try:
                found = pydantic_core.from_json(message.text)
            except ValueError:
                continue
            for entry in found if isinstance(found, list) else ():
                name = entry.get("name") if isinstance(entry, dict) else None
                if name in catalog:
                    self.discovered[name] = None
        self._read = len(messages)


class _SearchTool(DeclaredTool):
    """The search tool of one run: pure and quick, so both `execute` and `aexecute` run it in
    place (no worker thread, nothing a durable workflow could not replay)."""

    def __init__(
        self, specification: ToolSpecification, search: Callable[[dict[str, Any]], str]
    ) -> None:
        self._specification = specification
        self._return_behavior, self._max_retries, self._sequential = ReturnBehavior.TO_LLM, 2, False
        # Imported here: jsonschema loads only for a run that searches.
        from ..tools._schema_arguments import SchemaArguments

        self._arguments = SchemaArguments(specification.parameters, tool_name=specification.name)
        self._search = search

    def execute(self, call: ToolCall, context: ToolContext[Any]) -> ToolExecutionResult:
        """Validate the arguments, then search."""
        decoded = self._arguments.validate(call.arguments)
        if decoded.arguments is None:
            return decoded.error_result(self.name)
        try:
            result = success_result(self._search(decoded.arguments))
        except ModelRetry as retry:
            result = failure_result(self.name, retry)
        return with_repairs(result, decoded.repairs)

    async def aexecute(self, call: ToolCall, context: ToolContext[Any]) -> ToolExecutionResult:
        """As `execute`: searching never waits on anything."""
        return self.execute(call, context)
