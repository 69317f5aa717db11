"""The rules of the one decision on each call (`ToolService(rules=[...])`): whether a call may run
now, be held for a person, or be refused — composable `CallRule`s on a tool name or group, a
predicate on the call's validated arguments, or the tool's annotations.

The run (`_run.Run._plan`) makes the decision, in this order, and records it on the execution
(`ToolExecution.decision`):

1. **selection**: a call of a tool the run does not offer is refused (`UnknownToolError`, or the
   `unknown_tool_handler`'s answer);
2. **approval**: a person's decision on a resumed call (`approvals=`, `external_results=`);
3. **rules**: the first `CallRule` that matches decides (`allow`, `ask`, `refuse`); a rule that
   raises refuses (fail closed);
4. **requires_approval**: the tool's own policy (MCP trust tiers and annotations feed it), and
   an external tool's wait for its result;
5. **guardrails**: the call guardrails, on every call about to run;
6. **before_tool_call**: the hook's answer, when it gives one;
7. otherwise **default**: it runs.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import pydantic_core

from .._messages import ToolCall
from .._records import CallDecision, PendingResult, ToolExecutionResult
from ..tools._base import ToolLike
from ..tools._outcomes import reraise_uncontained

__all__ = ["Annotation", "CallRule", "RuleOutcome", "check_rules", "first_match"]

RuleOutcome = Literal["allow", "ask", "refuse"]
Annotation = Literal["read_only", "destructive", "idempotent", "open_world"]

_DECIDED: Mapping[RuleOutcome, Literal["allowed", "asked", "refused"]] = {
    "allow": "allowed",
    "ask": "asked",
    "refuse": "refused",
}


@dataclass(frozen=True, slots=True)
class CallRule:
    """One rule of the decision on each call: what it decides (`outcome`) for the calls it
    matches — all of `tools`, `annotation` and `when` that are given must hold.

    Build one with `CallRule.allow(...)`, `CallRule.ask(...)` or `CallRule.refuse(...)`.

    Attributes:
        outcome: `"allow"`: run without asking (the tool's own `requires_approval` is not
            consulted; guardrails still are); `"ask"`: hold for a person's approval; `"refuse"`:
            the model reads the refusal, and the body never runs. An external tool's call waits
            for its result whatever an `allow` or `ask` says.
        tools: Tool names and `"group:NAME"` groups it applies to (empty: every tool).
        when: A predicate on the call's validated arguments (the tool's arguments model, or a
            dict); a call whose arguments are invalid is not matched (it fails validation, and
            nothing runs). A predicate that raises refuses the call (fail closed).
        annotation: A behaviour the tool declares (`ToolAnnotations`), as a trusted source says
            it: an MCP server's hints count only when it is `trusted`, and what a tool does not
            say takes MCP's defaults (not read-only, destructive, not idempotent, open world).
        name: How the decision names the rule (`"rule:NAME"`); by default its outcome and tools.
        reason: What the model reads for a refusal (and the decision records).
    """

    outcome: RuleOutcome
    tools: Collection[str] = ()
    when: Callable[[Any], bool] | None = None
    annotation: Annotation | None = None
    name: str | None = None
    reason: str | None = None

    @classmethod
    def allow(
        cls,
        tools: Collection[str] = (),
        *,
        when: Callable[[Any], bool] | None = None,
        annotation: Annotation | None = None,
        name: str | None = None,
    ) -> CallRule:
        """A rule that lets the calls it matches run without asking anyone."""
        return cls("allow", _names(tools), when, annotation, name)

    @classmethod
    def ask(
        cls,
        tools: Collection[str] = (),
        *,
        when: Callable[[Any], bool] | None = None,
        annotation: Annotation | None = None,
        name: str | None = None,
        reason: str | None = None,
    ) -> CallRule:
        """A rule that holds the calls it matches for a person's approval."""
        return cls("ask", _names(tools), when, annotation, name, reason)

    @classmethod
    def refuse(
        cls,
        tools: Collection[str] = (),
        *,
        when: Callable[[Any], bool] | None = None,
        annotation: Annotation | None = None,
        name: str | None = None,
        reason: str | None = None,
    ) -> CallRule:
        """A rule that refuses the calls it matches (the model reads `reason`)."""
        return cls("refuse", _names(tools), when, annotation, name, reason)

    @property
    def label(self) -> str:
        """`"rule:NAME"`, as `CallDecision.rule` records it."""
        shown = self.name or f"{self.outcome} {', '.join(self.tools) or '*'}"
        return f"rule:{shown}"

    def decision(self, reason: str | None = None) -> CallDecision:
        return CallDecision(_DECIDED[self.outcome], self.label, reason or self.reason)


def _names(tools: Collection[str]) -> tuple[str, ...]:
    if isinstance(tools, str):
        return (tools,)
    return tuple(tools)


def check_rules(rules: Sequence[CallRule], groups: Mapping[str, Sequence[str]] | None) -> None:
    """Refuse a rule that is not a `CallRule` or (given the service's `groups`, when a run
    starts) names a group the service does not have: a refusal that silently matches nothing."""
    for rule in rules:
        if not isinstance(rule, CallRule):
            raise TypeError(f"rules take CallRule objects, not {type(rule).__name__}")
        if rule.outcome not in _DECIDED:
            raise ValueError(
                f"a rule's outcome is 'allow', 'ask' or 'refuse', not {rule.outcome!r}"
            )
        if groups is None:
            continue
        for name in rule.tools:
            if name.startswith("group:") and name[6:] not in groups:
                raise ValueError(
                    f"rule {rule.label!r} names the group {name[6:]!r}, which is not registered "
                    f"(groups: {', '.join(groups) or 'none'})"
                )


def first_match(
    rules: Sequence[CallRule],
    tool: ToolLike,
    name: str,
    groups: Mapping[str, Sequence[str]],
    arguments: Callable[[], tuple[bool, Any]],
) -> CallDecision | None:
    """The decision of the first rule that matches a call of `tool` (named `name`), or `None`.
    `arguments()` gives the call's validated arguments (`False, None` when they are invalid).
    A rule whose predicate raises refuses the call."""
    for rule in rules:
        if rule.tools and not _names_tool(rule.tools, name, groups):
            continue
        if rule.annotation is not None and not _declares(tool, rule.annotation):
            continue
        if rule.when is not None:
            valid, validated = arguments()
            if not valid:
                continue
            try:
                matched = rule.when(validated)
            except Exception as error:
                return CallDecision(
                    "refused", rule.label, f"the rule raised {type(error).__name__}"
                )
            if matched is not True and matched is not False:
                return CallDecision(
                    "refused", rule.label, f"the rule answered {type(matched).__name__}, not bool"
                )
            if not matched:
                continue
        return rule.decision()
    return None


def _names_tool(tools: Collection[str], name: str, groups: Mapping[str, Sequence[str]]) -> bool:
    for entry in tools:
        if entry == name or (entry.startswith("group:") and name in groups.get(entry[6:], ())):
            return True
    return False


def _declares(tool: ToolLike, annotation: Annotation) -> bool:
    """Whether `tool` declares `annotation`, as a trusted source says it; what it does not say
    takes MCP's defaults (the worst case for anything that loosens a rule)."""
    hints = getattr(tool, "trusted_annotations", None)
    if hints is None and not hasattr(tool, "trusted_annotations"):
        hints = tool.specification.annotations
    if hints is None:  # says nothing: MCP's defaults
        return annotation in ("destructive", "open_world")
    read_only = bool(hints.read_only) and not hints.contradictions()
    if annotation == "read_only":
        return read_only
    if annotation == "destructive":
        return not read_only and hints.destructive is not False
    if annotation == "idempotent":
        return read_only or hints.idempotent is True
    return hints.open_world is not False


# -- the decisions the run records ------------------------------------------------------------

SELECTION = CallDecision("refused", "selection")
HOOK_ANSWERED = CallDecision("allowed", "before_tool_call")
HOOK_REFUSED = CallDecision("refused", "before_tool_call")
APPROVED = CallDecision("allowed", "approval")
DENIED = CallDecision("refused", "approval")
ANSWERED = CallDecision("allowed", "external")
ASKED = CallDecision("asked", "requires_approval")
WAITS = CallDecision("asked", "external")


def by_person(result: ToolExecutionResult | None, approved: bool) -> CallDecision | None:
    """The decision a resumed call's caller made: approved, denied, answered (an external
    result), or `None` (undecided: the call is decided again)."""
    if result is None:
        return APPROVED if approved else None
    if type(result) is PendingResult:
        return ASKED
    return DENIED if result.error_kind == "denied" else ANSWERED


def held_by(held: ToolExecutionResult) -> CallDecision:
    pending = getattr(held, "pending", None)
    return WAITS if pending is not None and pending.reason == "external" else ASKED


def validated(tool: ToolLike | None, call: ToolCall) -> tuple[bool, Any]:
    """The call's validated arguments (the tool's `validate_arguments`, else the decoded JSON),
    or `(False, None)` when they are invalid: such a call fails validation, and nothing runs."""
    validate = getattr(tool, "validate_arguments", None)
    try:
        if validate is None:
            return True, pydantic_core.from_json(call.arguments or "{}")
        return True, validate(call.arguments)
    except BaseException as exc:
        reraise_uncontained(exc)
        return False, None
