"""The HTTP boundary every reader of a server shares, below tools and providers.

- `_exchange`: one deadline for a whole HTTP exchange, carried to each socket operation (headers
  and redirects included), and one bounded body reader;
- `_decoding`: the capped inflater under it (gzip, deflate: a small body cannot grow past the
  cap);
- `_redaction`: one `Redactor` for errors, results, exceptions, log records and streamed text,
  and what counts as a secret in headers and URLs;
- `_asgi`: the serving side, shared by the servers (`serving`, `ui`): the ASGI types and
  `is_loopback`.

Used by the provider shell, `HttpTool`, MCP over HTTP, `probe` and the CLI.
"""
