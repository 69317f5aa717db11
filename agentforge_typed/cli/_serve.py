"""`agentforge-typed serve TARGET --model MODEL`: a chat page in front of a module's tools.

The page at `http://HOST:PORT/`, AG-UI at `/ag-ui` and the AI SDK's UI message stream at
`/api/chat` (`agentforge_typed.ui`), served by uvicorn until interrupted. What the command says
goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

from .._exceptions import AgentForgeError
from ..loop._service import ToolService
from ..providers._registry import get_model
from ._mcp import UsageError, log_to_stderr
from ._options import port
from ._target import Target, deps_named

__all__ = ["add_parser", "serve"]

_INSTALL = 'the serve command needs the ui extra: pip install "agentforge-typed[ui]"'


def add_parser(commands: Any, target_help: str) -> argparse.ArgumentParser:
    """Add the `serve` subcommand to `commands` (the main parser's subparsers)."""
    serve: argparse.ArgumentParser = commands.add_parser(
        "serve",
        help="serve a chat page in front of TARGET's tools (AG-UI and the AI SDK's stream too)",
        description="Serve a chat page in front of TARGET's tools at http://HOST:PORT/: a "
        "person asks, watches each tool call stream in, and approves or denies the calls that "
        "need it. The same runs are served over AG-UI (POST /ag-ui) and the AI SDK's UI message "
        "stream (POST /api/chat). Messages go to stderr.",
    )
    serve.add_argument("target", metavar="TARGET", help=target_help)
    serve.add_argument(
        "--model",
        required=True,
        metavar="PROVIDER:MODEL",
        help="the model every run uses (openai:gpt-4o-mini, anthropic:..., fake, ...); its key "
        "comes from the provider's environment variable",
    )
    serve.add_argument(
        "--host",
        default="127.0.0.1",
        help="the address to bind (default: 127.0.0.1, this machine only; any other without "
        "--token-env gets a warning)",
    )
    serve.add_argument(
        "--port", type=port, default=8000, help="the port (default: 8000; 0 picks a free one)"
    )
    serve.add_argument(
        "--store",
        metavar="URL",
        help="keep conversations in this store (sqlite:///path.db, postgresql://..., memory:): "
        "the page finds its conversation again after a reload, and an approval given after a "
        "restart resumes the run (default: the browser holds the conversation)",
    )
    serve.add_argument(
        "--token-env",
        metavar="VAR",
        help="require the bearer token held by the environment variable VAR "
        "(Authorization: Bearer <token>) on the endpoints; the page asks for it",
    )
    serve.add_argument(
        "--secret-env",
        metavar="VAR",
        help="seal what browsers hold with the key in the environment variable VAR (at least 16 "
        "bytes), so their conversations survive a restart (default: a key of this process)",
    )
    serve.add_argument(
        "--instructions", metavar="TEXT", help="the system message every conversation starts with"
    )
    serve.add_argument(
        "--deps",
        metavar="MOD:FACTORY",
        help="what tools receive as ToolContext.deps: a function (or class) of no arguments "
        "called for each run, or a value shared by all; module:attribute, or an attribute of "
        "TARGET's module (default: TARGET's module attribute `deps`, if it has one)",
    )
    serve.add_argument(
        "--title", default="agentforge", help="the page's title (default: agentforge)"
    )
    return serve


def serve(args: argparse.Namespace, target: Target) -> int:
    """Serve what `args` ask for until interrupted; the exit status."""
    try:
        from ..ui import create_app
        from ..ui import serve as serve_app
    except ImportError as exc:
        raise UsageError(f"{_INSTALL} ({exc})") from None
    token = _environment(args.token_env, "--token-env")
    secret = _environment(args.secret_env, "--secret-env")
    store = None
    if args.store is not None:
        from ..stores import store_from_url

        if isinstance(target.value, ToolService):
            raise UsageError(
                "--store: TARGET is a ToolService, which brings its own options: make it with "
                "ToolService(..., store=...) instead"
            )
        try:
            store = store_from_url(args.store)
        except (ValueError, ImportError) as exc:
            raise UsageError(f"--store: {exc}") from None
        try:
            service = target.service(store=store)
        except TypeError:
            raise UsageError(
                "--store: this version's ToolService keeps no conversations in a store"
            ) from None
    else:
        service = target.service()
        store = getattr(service, "store", None)
    try:
        model = get_model(args.model)
    except (ValueError, AgentForgeError) as exc:
        raise UsageError(str(exc)) from None
    deps = deps_named(target, args.deps)
    options: dict[str, Any] = {
        "instructions": args.instructions,
        "token": token,
        "host": args.host,
        "title": args.title,
    }
    if secret is not None:
        options["secret"] = secret
    if deps is not None:
        options["deps"] = (lambda request: deps()) if callable(deps) else (lambda request: deps)
    log_to_stderr()
    try:
        app = create_app(service, model, store, **options)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    count = len(service.tools)
    tools = f"{count} tool{'' if count == 1 else 's'}"

    def ready(url: str) -> None:
        print(f"agentforge-typed: serving {tools} at {url}", file=sys.stderr, flush=True)

    asyncio.run(serve_app(app, host=args.host, port=args.port, on_ready=ready))
    return 0


def _environment(variable: str | None, option: str) -> str | None:
    if variable is None:
        return None
    value = os.environ.get(variable)
    if not value:
        raise UsageError(f"{option}: the environment variable {variable} is not set")
    return value
