"""The `agentforge-typed` command line: `run`, `schema` and `check` on a module's tools, `mcp`
to serve them over MCP, `serve` a chat page in front of them, `eval` of a model on cases, `probe`
of a model endpoint, and `conversations` of a store.

Exit status: 0 success; 1 the run or the probe failed, `check` found errors, a dialect
cannot express a schema, a store refused or failed, or an eval fell short (see `eval`'s help);
2 a usage error (bad arguments, a `TARGET` that does not load, an unknown model, a store URL that
names no store, a cases file or case that cannot run).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .._exceptions import AgentForgeError
from .._messages import ChatMessage, SystemMessage, UserMessage
from .._records import Approval
from .._request import ChatRequestParameters
from ..loop._options import RunOptions
from ..loop._service import ToolService
from ..loop._toolsets import GROUP_PREFIX, resolve
from ..providers._dialects import DIALECTS, SchemaDialectError
from ..providers._fallback import FallbackModel
from ..providers._registry import COMPATIBLE, KNOWN_MODEL_PREFIXES, get_model
from ._eval import UsageError as _EvalUsageError
from ._eval import add_parser as _add_eval
from ._mcp import UsageError as _McpUsageError
from ._mcp import add_parser as _add_mcp
from ._options import positive_float, positive_int
from ._serve import add_parser as _add_serve
from ._target import (
    TargetError,
    load_target,
    model_secrets,
    run_deps,
)
from ._text import printable, printable_json

if TYPE_CHECKING:
    pass

__all__ = ["main"]

_TARGET_HELP = (
    "module:attribute or path/to/file.py:attribute naming a Tool, a function, a list of them, "
    "an object with @tool methods, or a ToolService"
)


_MODEL_HELP = (
    f"one of {', '.join(KNOWN_MODEL_PREFIXES)} (default: fake, offline), or an "
    f"OpenAI-compatible server's <server>:<model>, <server> one of {', '.join(COMPATIBLE)} "
    "(e.g. llamacpp:gemma-3); keys and base URLs come from OPENAI_API_KEY / "
    "OPENAI_BASE_URL, ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL, GEMINI_API_KEY (or "
    "GOOGLE_API_KEY) / GOOGLE_GEMINI_BASE_URL, <SERVER>_API_KEY / <SERVER>_BASE_URL"
)


_STORE_FORMS = (
    "sqlite:///path.db (sqlite:////absolute/path.db), postgresql://user@host/db, or memory:"
)


class _UsageError(Exception):
    """A one-line problem with what the user asked for: exit status 2."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        status: int = args.handler(args)
    except (TargetError, _UsageError, _McpUsageError, _EvalUsageError) as exc:
        print(f"agentforge-typed: error: {printable(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\nagentforge-typed: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, and keep Python from complaining at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return status


def _version() -> str:
    from .. import __version__

    return __version__


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentforge-typed",
        description="Run, inspect and lint typed Python tools for LLM function calling.",
    )
    parser.add_argument("--version", action="version", version=f"agentforge-typed {_version()}")
    commands = parser.add_subparsers(title="commands", required=True, metavar="COMMAND")

    run = commands.add_parser(
        "run",
        help="run the tool loop on a prompt",
        description="Run the model -> tools -> model loop on PROMPT and show it as it happens: "
        "streamed text, each tool call with its arguments, each result or error, the final "
        "answer, token usage and timing.",
    )
    run.add_argument("target", metavar="TARGET", help=_TARGET_HELP)
    run.add_argument(
        "prompt",
        metavar="PROMPT",
        nargs="?",
        help="the user message (optional with --conversation: without it, the stored "
        "conversation resumes, its paused calls decided by --approve and --deny)",
    )
    run.add_argument("--model", default="fake", help=_MODEL_HELP)
    run.add_argument(
        "--fallback",
        metavar="MODEL",
        action="append",
        help="a model to ask when the one before it fails with a transient error (a rate limit, "
        "overload, a 5xx, a connection error or a timeout); repeatable, asked in order",
    )
    run.add_argument(
        "--max-tokens",
        type=positive_int,
        metavar="N",
        help="the most tokens each model answer may take (default: the model's; a base model "
        "without one may write until it is stopped)",
    )
    run.add_argument("--system", help="a system message sent before PROMPT")
    run.add_argument(
        "--max-rounds",
        type=positive_int,
        metavar="N",
        help="model calls allowed before the run fails (default: the ToolService's, 100)",
    )
    run.add_argument(
        "--deps",
        metavar="SPEC",
        help="what tools receive as ToolContext.deps: module:attribute, or an attribute of "
        "TARGET's module (default: TARGET's module attribute `deps`, if it has one); a function "
        "or class of no arguments is called for them",
    )
    run.add_argument(
        "--json", action="store_true", help="print the whole ToolChatResult as JSON instead"
    )
    run.add_argument(
        "--tools",
        metavar="NAMES",
        action="append",
        help="offer only these tools (comma-separated names; repeatable; with --group, both)",
    )
    run.add_argument(
        "--group",
        metavar="NAME",
        action="append",
        help="offer the tools of this group of a ToolService TARGET (repeatable)",
    )
    run.add_argument(
        "--store",
        metavar="URL",
        help=f"where conversations are kept (with --conversation): {_STORE_FORMS}",
    )
    run.add_argument(
        "--conversation",
        metavar="ID",
        help="continue the stored conversation ID (with --store): its history, then PROMPT; "
        "saved at every round and when the run pauses or ends",
    )
    run.add_argument(
        "--approve",
        metavar="CALL",
        action="append",
        help="approve the paused call CALL of the conversation (repeatable)",
    )
    run.add_argument(
        "--deny",
        metavar="CALL[=REASON]",
        action="append",
        help="deny the paused call CALL of the conversation, with a REASON the model reads "
        "(repeatable)",
    )
    run.set_defaults(handler=_run)

    schema = commands.add_parser(
        "schema",
        help="print the tool declarations a provider is sent",
        description="Print TARGET's tool declarations exactly as a provider sends them.",
    )
    schema.add_argument("target", metavar="TARGET", help=_TARGET_HELP)
    schema.add_argument(
        "--dialect",
        choices=DIALECTS,
        default="openai",
        help="openai: as the OpenAI provider sends them (strict only for strict_schema tools); "
        "openai-strict: every tool with strict: true; anthropic; gemini: functionDeclarations "
        "entries as the Gemini provider sends them (default: openai)",
    )
    schema.set_defaults(handler=_schema)

    check = commands.add_parser(
        "check",
        help="lint tool definitions",
        description="Lint TARGET's tools: missing tool or parameter descriptions (warnings), "
        "names a provider refuses, schemas a dialect cannot express, duplicate names, items "
        "that cannot be made tools (errors). One line per finding: file:line: level: tool: "
        "message [code]. Exit status 1 when there is an error.",
    )
    check.add_argument("target", metavar="TARGET", help=_TARGET_HELP)
    check.add_argument(
        "--dialect",
        action="append",
        choices=DIALECTS,
        help=f"a dialect to check; repeat for several (default: all, {', '.join(DIALECTS)})",
    )
    check.add_argument(
        "--strict", action="store_true", help="treat warnings as errors (exit status 1)"
    )
    check.add_argument(
        "--profile",
        metavar="NAME",
        help="also lint against a model profile's limits (a built-in name such as ollama or "
        "gemini-openai, or a profile file written by probe)",
    )
    check.set_defaults(handler=_check)

    probe = commands.add_parser(
        "probe",
        help="measure what a model behind an OpenAI-compatible endpoint supports",
        description="Send a small bounded set of live requests (tiny prompts, max_tokens "
        "limited) to find what the model supports: tool calling, tool_choice modes, parallel "
        "calls, strict schemas (enforced or not), schema keywords, streamed tool calls, usage in "
        "streams, system messages, the reasoning field, max tools. Prints a capability table; "
        "--write saves it as a profile file for get_model(..., profile=PATH) and "
        "OpenAIChatModel(..., profile=PATH).",
    )
    probe.add_argument(
        "--model",
        required=True,
        metavar="PROVIDER:MODEL",
        help="openai:<model> or a compatible server's prefix (ollama:qwen3, deepseek:…); the "
        "key comes from the provider's environment variable",
    )
    probe.add_argument("--base-url", metavar="URL", help="the API root (default: the provider's)")
    probe.add_argument("--json", action="store_true", help="print the result as JSON")
    probe.add_argument("--write", metavar="PATH", help="write the measured profile to PATH")
    probe.add_argument(
        "--no-max-tools",
        dest="max_tools",
        action="store_false",
        help="do not measure max_tools (up to 11 requests, the first offering 1024 tiny tools); "
        "keep the provider profile's value",
    )
    probe.add_argument(
        "--timeout",
        type=positive_float,
        default=120.0,
        metavar="SECONDS",
        help="the most one request may take, from sending it to the last byte of its answer, "
        "retries included (default: 120)",
    )
    probe.set_defaults(handler=_probe)

    conversations = commands.add_parser(
        "conversations",
        help="list, show or delete the conversations of a store",
        description="List (newest first, a page at a time), show or delete the conversations "
        "kept in a store. Exit status 1 when the store refuses a record (too large, corrupt, "
        "a newer schema) or fails, or when there is no such conversation.",
    )
    conversations.add_argument("--store", required=True, metavar="URL", help=_STORE_FORMS)
    conversations.add_argument(
        "--timeout",
        type=positive_float,
        metavar="SECONDS",
        help="the most the store may wait: to connect, for a lock, for a statement (default: 10)",
    )
    actions = conversations.add_subparsers(title="actions", metavar="ACTION")
    listing = actions.add_parser("list", help="list conversations, newest first (the default)")
    listing.add_argument(
        "--limit", type=positive_int, default=50, metavar="N", help="at most N (default: 50)"
    )
    listing.add_argument("--cursor", help="the page after the one that printed this cursor")
    listing.add_argument("--json", action="store_true", help="print the page as JSON")
    listing.set_defaults(handler=_conversations, action="list")
    show = actions.add_parser("show", help="show one conversation and its messages")
    show.add_argument("id", metavar="ID", help="the conversation id")
    show.add_argument("--json", action="store_true", help="print it as JSON, whole")
    show.set_defaults(handler=_conversations, action="show")
    delete = actions.add_parser("delete", help="delete one conversation")
    delete.add_argument("id", metavar="ID", help="the conversation id")
    delete.set_defaults(handler=_conversations, action="delete")
    conversations.set_defaults(
        handler=_conversations, action="list", limit=50, cursor=None, json=False
    )
    _add_mcp(commands, _TARGET_HELP).set_defaults(handler=_mcp)
    _add_eval(commands, _TARGET_HELP, _MODEL_HELP).set_defaults(handler=_eval)
    _add_serve(commands, _TARGET_HELP).set_defaults(handler=_serve)
    return parser


# -- run ---------------------------------------------------------------------------------------


# Each command imports what only it needs when it runs, so `--help` answers quickly.


PAUSED = 3
"""`run`'s exit status for a run that paused on calls awaiting approval or an external result."""


def _run(args: argparse.Namespace) -> int:
    from ._run import LiveDisplay, result_json

    target = load_target(args.target)
    service = target.service()
    if args.max_rounds is not None:
        service.max_round_trips = args.max_rounds
    selection = _selection(service, args.tools, args.group)
    selected = [t for t in service.tools if selection is None or t.name in selection]
    deps = run_deps(target, args.deps, selected, service.deps_type)
    try:
        model = get_model(args.model)
        fallbacks = [get_model(name) for name in args.fallback or ()]
    except (ValueError, AgentForgeError) as exc:
        raise _UsageError(str(exc)) from None
    redactor = model_secrets([model, *fallbacks])
    if fallbacks:
        model = FallbackModel(model, *fallbacks)
    approvals = _decisions(args)
    given: list[ChatMessage] = []
    if args.system:
        given.append(SystemMessage(text=args.system))
    if args.prompt is not None:
        given.append(UserMessage(content=args.prompt))
    elif args.conversation is None:
        raise _UsageError("PROMPT is required (without --conversation, there is nothing to resume)")
    messages = given or None  # none: the stored conversation resumes
    parameters = None
    if args.max_tokens is not None:
        parameters = ChatRequestParameters(max_tokens=args.max_tokens)
    options: RunOptions = {"tools": selection, "conversation_id": args.conversation}
    if approvals:
        options["approvals"] = approvals
    _stored(service, args)
    try:
        if args.json:
            result = service.chat(model, messages, parameters, deps=deps, **options)
            print(result_json(result, redactor))
        else:
            events = service.stream(model, messages, parameters, deps=deps, **options)
            result = LiveDisplay(sys.stdout, redactor).show(events, time.perf_counter())
    except AgentForgeError as exc:
        sys.stdout.flush()
        shown = printable(redactor.replace(str(exc)))
        print(f"agentforge-typed: {type(exc).__name__}: {shown}", file=sys.stderr)
        return 1
    except ValueError as exc:  # a decision on no paused call, new input while calls wait, ...
        if args.conversation is None:
            raise
        raise _UsageError(printable(redactor.replace(str(exc)))) from None
    finally:
        if service.store is not None and args.store is not None:
            service.store.close()
    if result.pending and args.conversation is not None and not args.json:
        print(
            f"== resume: run again with --conversation {printable(args.conversation)} and "
            "--approve CALL or --deny CALL[=REASON] for each paused call"
        )
    return PAUSED if result.pending else 0


def _stored(service: ToolService, args: argparse.Namespace) -> None:
    """Give `service` the store `--store` names, for the conversation `--conversation` names (a
    ToolService TARGET may bring its own store instead)."""
    if args.conversation is None:
        if args.store is not None:
            raise _UsageError("--store needs --conversation ID (the conversation to continue)")
        if args.approve or args.deny:
            raise _UsageError("--approve and --deny decide the paused calls of a --conversation")
        return
    if args.store is None:
        if service.store is None:
            raise _UsageError("--conversation needs --store URL (where conversations are kept)")
        return
    from ..stores import store_from_url

    try:
        service.store = store_from_url(args.store)
    except (ValueError, ImportError) as exc:
        raise _UsageError(f"--store: {exc}") from None


def _decisions(args: argparse.Namespace) -> dict[str, Approval]:
    """The decisions `--approve` and `--deny` give, by call id."""
    decisions: dict[str, Approval] = {call_id: True for call_id in args.approve or ()}
    for denial in args.deny or ():
        call_id, equals, reason = denial.partition("=")
        if call_id in decisions:
            raise _UsageError(f"call {printable(call_id)!r} is both approved and denied")
        decisions[call_id] = reason if equals and reason else False
    return decisions


def _selection(
    service: ToolService, names: Sequence[str] | None, groups: Sequence[str] | None
) -> list[str] | None:
    """The tool names `--tools` and `--group` select (`None`: no selection, every tool)."""
    if names is None and groups is None:
        return None
    tools = {t.name: t for t in service.tools}
    chosen: set[str] = set()
    for option, selectors in (
        ("--tools", [n.strip() for text in names or () for n in text.split(",") if n.strip()]),
        ("--group", [GROUP_PREFIX + group for group in groups or ()]),
    ):
        try:
            chosen.update(resolve(selectors, tools, service.groups))
        except ValueError as exc:
            raise _UsageError(f"{option}: {exc}") from None
    return [name for name in tools if name in chosen]


# -- schema ------------------------------------------------------------------------------------


def _schema(args: argparse.Namespace) -> int:
    from ._declare import declarations

    service = load_target(args.target).service()
    try:
        rendered = declarations(service.specifications, args.dialect)
    except SchemaDialectError as exc:
        print(f"agentforge-typed: {printable(str(exc))}", file=sys.stderr)
        return 1
    # Descriptions may be an MCP server's words: escaped where they would reach the terminal.
    print(printable_json(rendered))
    return 0


# -- check -------------------------------------------------------------------------------------


def _check(args: argparse.Namespace) -> int:
    from ._check import check_target

    target = load_target(args.target)
    profile = None
    if args.profile is not None:
        from ..providers._profiles import resolve_profile

        try:
            profile = resolve_profile(args.profile)
        except ValueError as exc:
            raise _UsageError(f"--profile: {exc}") from None
    findings = check_target(target, tuple(dict.fromkeys(args.dialect or DIALECTS)), profile)
    for finding in findings:
        print(printable(str(finding)))
    errors = sum(f.level == "error" for f in findings)
    warnings = sum(f.level == "warning" for f in findings)
    print(
        f"{errors} error{'' if errors == 1 else 's'}, {warnings} warning{'' if warnings == 1 else 's'}"
    )
    return 1 if errors or (args.strict and warnings) else 0


# -- mcp ---------------------------------------------------------------------------------------


def _mcp(args: argparse.Namespace) -> int:
    from ._mcp import serve

    target = load_target(args.target)
    selection = _selection(target.service(), args.tools, args.group)
    return serve(args, target, selection)


# -- eval --------------------------------------------------------------------------------------


def _eval(args: argparse.Namespace) -> int:
    from ._eval import evaluate

    return evaluate(args)


# -- serve -------------------------------------------------------------------------------------


def _serve(args: argparse.Namespace) -> int:
    from ._serve import serve

    return serve(args, load_target(args.target))


# -- probe -------------------------------------------------------------------------------------


def _probe(args: argparse.Namespace) -> int:
    from ..providers._profiles import PROFILES
    from ..providers._registry import endpoint
    from ._probe import plan, probe

    try:
        found = endpoint(args.model, args.base_url)
    except (ValueError, AgentForgeError) as exc:
        raise _UsageError(str(exc)) from None
    print(
        f"probing {found.model} at {found.base_url}: {plan(max_tools=args.max_tools)}",
        file=sys.stderr,
    )
    base = PROFILES[found.profile or "openai"]
    made = 0

    def progress(name: str) -> None:
        nonlocal made
        made += 1
        print(f"request {made}: {name}", file=sys.stderr, flush=True)

    try:
        result = probe(
            found.model,
            found.base_url,
            found.api_key,
            base=base,
            on_request=progress,
            max_tools=args.max_tools,
            timeout=args.timeout,
        )
    except AgentForgeError as exc:
        # One line, scrubbed of the key at the provider boundary; no traceback.
        print(f"agentforge-typed: probe failed: {printable(str(exc))}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result.as_json(), indent=2))
    else:
        print(result.table())
        print(f"{result.requests} requests made")
    if args.write:
        result.profile.dump(args.write)
        print(f"profile written to {args.write}", file=sys.stderr)
    return 0


# -- conversations -------------------------------------------------------------------------------


def _conversations(args: argparse.Namespace) -> int:
    from ..stores import ConversationStoreError, store_from_url
    from ._conversations import (
        conversation_json,
        conversation_lines,
        page_json,
        page_lines,
        shown_id,
    )

    options = {} if args.timeout is None else {"timeout": args.timeout}
    try:
        store = store_from_url(args.store, **options)
    except (ValueError, ImportError) as exc:
        raise _UsageError(f"--store: {exc}") from None
    except TypeError:
        raise _UsageError("--timeout: a memory: store never waits") from None
    try:
        if args.action == "list":
            page = store.list(limit=args.limit, cursor=args.cursor)
            print(page_json(page) if args.json else "\n".join(page_lines(page)))
            return 0
        if args.action == "show":
            conversation = store.load(args.id)
            if conversation is None:
                print(f"agentforge-typed: no conversation {shown_id(args.id)}", file=sys.stderr)
                return 1
            if args.json:
                print(conversation_json(conversation))
            else:
                print("\n".join(conversation_lines(conversation)))
            return 0
        if store.delete(args.id):
            print(f"deleted {shown_id(args.id)}")
            return 0
        print(f"agentforge-typed: no conversation {shown_id(args.id)}", file=sys.stderr)
        return 1
    except ConversationStoreError as exc:
        print(f"agentforge-typed: {printable(str(exc))}", file=sys.stderr)
        return 1
    except ValueError as exc:  # an id, a limit or a cursor the store refuses
        raise _UsageError(printable(str(exc))) from None
    finally:
        store.close()
