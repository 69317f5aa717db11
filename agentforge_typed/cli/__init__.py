"""The `agentforge-typed` command line (`python -m agentforge_typed`)."""

from ._main import main

__all__ = ["main"]
