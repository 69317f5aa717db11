"""The tool loop: `ToolService` and everything a run consults.

Private modules; the public names are exported from `agentforge_typed` itself.
"""
