"""A chat page in front of your tools: the loop over AG-UI and the AI SDK's UI message stream.

Requires the `ui` extra (`pip install "agentforge-typed[ui]"`: Starlette, uvicorn and the
`ag-ui-protocol` models). `create_app(service, model)` is an ASGI app serving:

- `GET /`: a chat page, one HTML file of plain JavaScript (no build, no CDN).
- `POST /ag-ui`: AG-UI 1.0 (CopilotKit, `@ag-ui/client`, ...).
- `POST /api/chat`: the AI SDK's UI message stream (`useChat`).

The modules: `_reader` (the loop's events read into protocol-neutral moments, one translator
both protocols share), `_agui` and `_vercel` (each protocol's requests and events),
`_conversation` (a request's history checked, its answers as the loop's decisions), `_seal` (the
server's seal on what it hands a client that holds its conversation), `_app` (the endpoints and
their guards). The command line serves a module's tools the same way: `agentforge-typed serve`.
"""

from __future__ import annotations

from ._app import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_RUNS,
    DEFAULT_SEND_TIMEOUT,
    UIOptions,
    create_app,
    serve,
)
from ._seal import MIN_SECRET_BYTES

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_MAX_RUNS",
    "DEFAULT_SEND_TIMEOUT",
    "MIN_SECRET_BYTES",
    "UIOptions",
    "create_app",
    "serve",
]
