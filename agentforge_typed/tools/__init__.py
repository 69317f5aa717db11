"""Tool kinds: everything that can answer a `ToolCall`.

- `_base`: what every kind shares and implements: `ToolContext`, `ToolExecutionResult`, the
  `ToolExecutor` and `ToolLike` protocols, `ToolSource`, and `DeclaredTool`, the read-only
  declaration a kind that is not `@tool` inherits.
- `_outcomes`, `_invoke`, `_argument_errors`: the result builders, calling a user's handler sync or
  async under a timeout, and the arguments-error report the model reads.
- `@tool` function tools: `_function` (`Tool`, `tool`), `_signature` and `_docstrings` (signature →
  arguments model and schema), `_arguments` (validation and envelope repairs), `_result_text`.
- Schema-declared tools: `_schema_arguments` (jsonschema validation and repairs), `_schema_tool`
  (`SchemaTool`), `_http` (`HttpTool`), `_mcp` (`MCPServer`, `MCPTool`).

A new kind implements `ToolLike` (usually by subclassing `DeclaredTool`) and builds its results
with `_outcomes`, so the model reads the same texts whatever backs a tool.

This module is the documented home of the plumbing a tool-kind author needs; everyday names are
exported from `agentforge_typed` itself.
"""
