"""`python -m agentforge_typed` and the `agentforge-typed` console script."""

from __future__ import annotations

import sys

from .cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
