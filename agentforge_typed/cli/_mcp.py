"""`agentforge-typed mcp TARGET`: serve a module's tools over MCP (stdio, or HTTP with `--http`).

What a desktop client's configuration runs: the tools are served until the client closes stdin
(stdio) or the process is interrupted (HTTP). Everything the command says goes to stderr, as
stdout is the protocol's under stdio.
"""

from __future__ import annotations

import argparse
import logging
import os
import stat
import sys
from collections.abc import Callable, Sequence
from typing import Any

from ._options import port, positive_float
from ._target import Target, deps_named
from ._text import printable_json

__all__ = ["UsageError", "add_parser", "log_to_stderr", "serve"]

_INSTALL = 'the mcp command needs the serve extra: pip install "agentforge-typed[serve]"'


class UsageError(Exception):
    """A one-line problem with what the user asked for: exit status 2."""


def add_parser(commands: Any, target_help: str) -> argparse.ArgumentParser:
    """Add the `mcp` subcommand to `commands` (the main parser's subparsers)."""
    mcp: argparse.ArgumentParser = commands.add_parser(
        "mcp",
        help="serve TARGET's tools over MCP (stdio, or streamable HTTP with --http)",
        description="Serve TARGET's tools to MCP clients (desktop assistants, IDEs, other "
        "agents): over stdio by default, as a client's configuration starts it; with --http, "
        "streamable HTTP at http://HOST:PORT/mcp. Arguments are validated strictly, as for a "
        "model; tools that require approval ask the client first. Messages go to stderr.",
    )
    mcp.add_argument("target", metavar="TARGET", help=target_help)
    mcp.add_argument(
        "--http",
        action="store_true",
        help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio",
    )
    mcp.add_argument(
        "--host",
        default="127.0.0.1",
        help="the address to bind with --http (default: 127.0.0.1, this machine only; any "
        "other without --token-env gets a warning)",
    )
    mcp.add_argument(
        "--port",
        type=port,
        default=8765,
        help="the port with --http (default: 8765; 0 picks a free one, shown on stderr)",
    )
    mcp.add_argument(
        "--deps",
        metavar="MOD:FACTORY",
        help="what tools receive as ToolContext.deps: a function (or class) of no arguments "
        "called once per session, or a value shared by all; module:attribute, or an attribute "
        "of TARGET's module (default: TARGET's module attribute `deps`, if it has one)",
    )
    mcp.add_argument(
        "--deps-scope",
        choices=("session", "call"),
        default="session",
        help="call the --deps factory once per session (default) or once per call",
    )
    mcp.add_argument(
        "--token-env",
        metavar="VAR",
        help="with --http, require the bearer token held by the environment variable VAR "
        "(Authorization: Bearer <token>) on every request",
    )
    mcp.add_argument(
        "--tools",
        metavar="NAMES",
        action="append",
        help="serve only these tools (comma-separated names; repeatable; with --group, both)",
    )
    mcp.add_argument(
        "--group",
        metavar="NAME",
        action="append",
        help="serve the tools of this group of a ToolService TARGET (repeatable)",
    )
    mcp.add_argument(
        "--call-timeout",
        type=positive_float,
        default=300.0,
        metavar="SECONDS",
        help="the most a call's body may run, its tool's own timeout within it (default: 300)",
    )
    mcp.add_argument(
        "--list",
        action="store_true",
        help="print the tools as tools/list declares them (JSON) and exit, serving nothing",
    )
    return mcp


def deps_factory(target: Target, spec: str | None) -> Callable[[], Any] | None:
    """The deps factory `--deps` names (or TARGET's module's `deps`): a callable is the factory, a
    value is shared by every session."""
    value = deps_named(target, spec)
    if value is None or callable(value):
        return value  # type: ignore[no-any-return]
    return lambda: value


def serve(args: argparse.Namespace, target: Target, selection: Sequence[str] | None) -> int:
    """Serve (or list, with `--list`) what `args` ask for; the exit status."""
    try:
        from ..serving._server import ToolServer
    except ImportError as exc:
        raise UsageError(f"{_INSTALL} ({exc})") from None
    token = _token(args)
    service = target.service()
    deps = deps_factory(target, args.deps)
    if deps is None:
        from ..tools._signature import needing_deps

        needy = needing_deps(t for t in service.tools if selection is None or t.name in selection)
        if needy:
            raise UsageError(
                f"{', '.join(needy)} need{'s' if len(needy) == 1 else ''} deps, and none are "
                "given: pass --deps module:factory, or define `deps` in TARGET's module"
            )
    try:
        server = ToolServer(
            service,
            deps=deps,
            deps_scope=args.deps_scope,
            select=selection,
            call_timeout=args.call_timeout,
        )
    except (TypeError, ValueError) as exc:
        raise UsageError(str(exc).splitlines()[0]) from None
    if args.list:
        print(printable_json(server.declarations()))
        return 0
    log_to_stderr()
    count = len(server.declarations())
    tools = f"{count} tool{'' if count == 1 else 's'}"
    if not args.http:
        if _is_file(sys.stdin):
            raise UsageError(
                "stdin is a file: over stdio, the server is started by its client, which speaks "
                "to it through a pipe (or use --http)"
            )
        print(f"agentforge-typed: serving {tools} over stdio", file=sys.stderr, flush=True)
        server.serve_stdio()
        return 0
    try:
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise UsageError(f"{_INSTALL} ({exc})") from None

    def ready(url: str) -> None:
        print(f"agentforge-typed: serving {tools} at {url}", file=sys.stderr, flush=True)

    server.serve_http(host=args.host, port=args.port, token=token, on_ready=ready)
    return 0


def _is_file(stream: Any) -> bool:
    try:
        return stat.S_ISREG(os.fstat(stream.fileno()).st_mode)
    except (AttributeError, OSError, ValueError):  # no descriptor (a test's stand-in)
        return False


def _token(args: argparse.Namespace) -> str | None:
    if args.token_env is None:
        return None
    if not args.http:
        raise UsageError(
            "--token-env applies to --http only (over stdio, the client is the process that started the server)"
        )
    token = os.environ.get(args.token_env)
    if not token:
        raise UsageError(f"--token-env: the environment variable {args.token_env} is not set")
    return token


def log_to_stderr() -> None:
    """Show the server's warnings (a bind without a token, a failing deps factory) on stderr."""
    logger = logging.getLogger("agentforge_typed")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("agentforge-typed: %(levelname)s: %(message)s"))
        handler.setLevel(logging.WARNING)
        logger.addHandler(handler)
