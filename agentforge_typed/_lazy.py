"""A package's public names, loaded from their private modules on first use.

`import agentforge_typed` (or one of its packages) must not pay for what a program never touches:
each package lists where its names live, and `lazy_exports` makes the module-level `__getattr__`
and `__dir__` (PEP 562) that load a name when it is first looked up. Type checkers see the
package's `if TYPE_CHECKING:` imports instead.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, homes: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """`__getattr__` and `__dir__` for `package`, whose names are in the modules `homes` gives
    (relative to the package, e.g. `"._server"`). A loaded name is kept in the package, so the
    next lookup is an ordinary attribute."""
    namespace = sys.modules[package].__dict__

    def load(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home, package), name)
        namespace[name] = value
        return value

    def listing() -> list[str]:
        return sorted({*namespace, *homes})

    return load, listing
