"""Resolving a `TARGET` (`module:attribute` or `path/to/file.py:attribute`) to tools.

Every way a target can be wrong raises `TargetError` with a one-line message; the CLI prints it
and exits with status 2, never a traceback.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ..loop._registry import is_tool, tools_from
from ..loop._service import ToolService
from ..tools._base import ToolLike
from ..tools._signature import deps_accepted, needing_deps, type_name

if TYPE_CHECKING:
    from .._transport._redaction import Redactor

__all__ = [
    "Target",
    "TargetError",
    "deps_named",
    "display_path",
    "load_object",
    "load_target",
    "model_secrets",
    "refuse_missing_deps",
    "run_deps",
    "source_location",
    "tools_of",
]

_ACCEPTED = "a Tool, a function, a list of them, an object with @tool methods, or a ToolService"


class TargetError(Exception):
    """A `TARGET` that cannot be loaded, or holds no tool; the message is one line."""


@dataclass(frozen=True)
class Target:
    """What a `TARGET` names: the value found, and the module it was found in."""

    spec: str
    module: ModuleType
    value: object

    def items(self) -> list[object]:
        """The value as a list of tool sources (a list or tuple target is spread)."""
        if isinstance(self.value, (list, tuple)):
            return list(self.value)
        return [self.value]

    def service(self, **options: Any) -> ToolService:
        """A `ToolService` target itself, or a new one (made with `options`) with every tool
        registered.

        Raises:
            TargetError: The value holds no tool, or two tools share a name.
        """
        if isinstance(self.value, ToolService):
            return self.value
        service = ToolService(**options)
        for item in self.items():
            try:
                service.register(item)
            except Exception as exc:  # whatever the module's own code raises: one line
                raise TargetError(f"{self.spec}: {_first_line(exc)}") from None
        return service


def load_target(spec: str) -> Target:
    """Import the module of `spec` and look the attribute up (dotted paths allowed).

    Raises:
        TargetError: Malformed spec, module or file not found, import failure, missing
            attribute, or a value that is none of the accepted kinds.
    """
    module, value = load_object(spec)
    try:
        looks_like_tools = _looks_like_tools(value)
        described = "" if looks_like_tools else _describe(value)
    except Exception as exc:  # an attribute of the value raised on inspection
        raise TargetError(f"{spec}: inspecting it failed: {_first_line(exc)}") from None
    if not looks_like_tools:
        raise TargetError(f"{spec} is {described}, not {_ACCEPTED}")
    return Target(spec, module, value)


def load_object(spec: str) -> tuple[ModuleType, Any]:
    """The module and the attribute that `spec` (`module:attribute`, `file.py:attribute`) names.

    Raises:
        TargetError: Malformed spec, module or file not found, import failure, missing attribute.
    """
    module_part, colon, attribute = spec.rpartition(":")
    if not colon or not module_part or not attribute:
        raise TargetError(f"expected module:attribute or path/to/file.py:attribute, got {spec!r}")
    module = _import(module_part)
    value: Any = module
    for name in attribute.split("."):
        try:
            value = getattr(value, name)
        except AttributeError:
            raise TargetError(f"{module_part!r} has no attribute {attribute!r}") from None
        except Exception as exc:  # a module `__getattr__` or a property that raises
            raise TargetError(
                f"reading {attribute!r} of {module_part!r} failed: {_first_line(exc)}"
            ) from None
    return module, value


def deps_named(target: Target, spec: str | None) -> Any:
    """What `--deps` names: `module:attribute`, or an attribute of TARGET's module; without
    `--deps`, TARGET's module attribute `deps` (`None` when it has none).

    Raises:
        TargetError: The spec names nothing.
    """
    if spec is None:
        return getattr(target.module, "deps", None)
    if ":" in spec:
        return load_object(spec)[1]
    try:
        return getattr(target.module, spec)
    except AttributeError:
        raise TargetError(f"--deps: {target.module.__name__!r} has no attribute {spec!r}") from None
    except Exception as exc:  # a module `__getattr__` that raises
        raise TargetError(f"--deps: reading {spec!r} failed: {type(exc).__name__}: {exc}") from None


def _import(name: str) -> ModuleType:
    if name.endswith(".py") or os.sep in name or "/" in name:
        return _import_file(Path(name))
    # Like `python -m`, make modules in the current directory importable.
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
            raise TargetError(f"no module named {name!r}") from None
        raise TargetError(f"importing {name!r} failed: {_first_line(exc)}") from None
    except Exception as exc:
        raise TargetError(f"importing {name!r} failed: {_first_line(exc)}") from None


def _import_file(path: Path) -> ModuleType:
    shown = str(path)
    if not path.is_file():
        raise TargetError(f"no such file: {shown!r}")
    path = path.resolve()
    # Like `python path/to/file.py`: the file's directory is importable, so it can import siblings.
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    name = path.stem if path.stem.isidentifier() else "_agentforge_target"
    existing = sys.modules.get(name)
    if existing is not None:
        if getattr(existing, "__file__", None) == str(path):
            return existing
        name = f"_agentforge_target_{name}"  # never shadow a module already imported
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise TargetError(f"cannot import {shown!r} as a Python module")
    module = importlib.util.module_from_spec(spec)
    # Registered before running it: pydantic and dataclasses resolve annotations through it.
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise TargetError(f"importing {shown!r} failed: {_first_line(exc)}") from None
    return module


def _looks_like_tools(value: object) -> bool:
    if isinstance(value, ToolService):
        return True
    if isinstance(value, (list, tuple)):
        return bool(value) and all(_is_tool_source(item) for item in value)
    return _is_tool_source(value)


def _is_tool_source(value: object) -> bool:
    if is_tool(value) or inspect.isfunction(value) or inspect.ismethod(value):
        return True
    if inspect.isclass(value) or inspect.ismodule(value):
        return False
    if callable(getattr(value, "tools", None)):
        return True
    return any(is_tool(member) for _, member in inspect.getmembers(type(value)))


def _describe(value: object) -> str:
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__} holding something else" if value else "empty"
    if inspect.isclass(value):
        return f"the class {value.__name__} (pass an instance)"
    return f"a {type(value).__name__}"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def tools_of(items: Sequence[object]) -> Iterator[tuple[object, ToolLike | Exception]]:
    """Each item's tools, or the error that stopped it from being one (for `check`)."""
    for item in items:
        try:
            for found in tools_from(item):
                yield item, found
        except Exception as exc:  # whatever the module's own code raises: a finding
            yield item, exc


def source_location(obj: object) -> tuple[str, int] | None:
    """`(file, line)` of the function behind a tool (or a function), shown relative to the
    current directory when it lies below it."""
    function: Any = inspect.unwrap(obj) if callable(obj) else obj
    function = getattr(function, "__func__", function)
    try:
        file = inspect.getsourcefile(function)
        lines, line = inspect.getsourcelines(function)
    except (TypeError, OSError):
        return None
    if file is None:
        return None
    # Point at the `def`, not at the decorators above it.
    for offset, text in enumerate(lines):
        if text.lstrip().startswith(("def ", "async def ")):
            line += offset
            break
    return display_path(file), max(line, 1)


def display_path(file: str) -> str:
    """`file` relative to the current directory when it lies below it, else as it is."""
    try:
        relative = os.path.relpath(file)
    except ValueError:  # another drive, on Windows
        return file
    return file if relative.startswith(os.pardir) else relative


def model_secrets(models: Sequence[object]) -> Redactor:
    """What `run` and `eval` keep out of its output: the keys of the models it runs with (a server may
    echo one in a successful answer, which no error boundary sees)."""
    from .._transport._redaction import Redactor
    from ..providers._base import secrets_of

    return Redactor.joined(secrets_of(m) for m in models)


def refuse_missing_deps(tools: Sequence[ToolLike]) -> None:
    """Refuse to run tools whose `ToolContext[X]` does not accept `None` without deps: each call
    would fail inside the tool, and the run would still end "successfully"."""
    needy = needing_deps(tools)
    if needy:
        raise TargetError(
            f"{', '.join(needy)} need{'s' if len(needy) == 1 else ''} deps, and none are given: "
            "pass --deps module:attribute, or define `deps` in TARGET's module"
        )


def run_deps(
    target: Target, spec: str | None, tools: Sequence[ToolLike], deps_type: Any = None
) -> Any:
    """The deps a run of `tools` gets: what `--deps` names (see `deps_named`), called when it is a
    function or class of no arguments (a factory) rather than deps the tools take as they are.

    Raises:
        TargetError: No deps for tools that need them; a factory that fails; deps that are not
            the `X` of a tool's `ToolContext[X]` (or an instance of the service's `deps_type`):
            each call would fail inside the tool.
    """
    value = deps_named(target, spec)
    if value is None:
        refuse_missing_deps(tools)
        return None
    expected = [(f"{t.name} takes ToolContext[{{}}]", getattr(t, "deps_type", Any)) for t in tools]
    if deps_type is not None:
        expected.append(("the service's deps_type is {}", deps_type))
    expected = [(says, wanted) for says, wanted in expected if wanted is not Any]
    named = f"--deps {spec}" if spec is not None else "TARGET's module attribute `deps`"
    takes_as_is = bool(expected) and all(deps_accepted(w, type(value)) for _, w in expected)
    if callable(value) and not takes_as_is:
        try:
            value = value()
        except Exception as exc:  # the factory's own failure, said in one line
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise TargetError(
                f"{named}: calling the factory failed: {type(exc).__name__}"
                + (f": {reason}" if reason else "")
            ) from None
        named += " (called)"
    for says, wanted in expected:
        if not deps_accepted(wanted, type(value)):
            raise TargetError(
                f"{named} gave {type_name(type(value))}, but {says.format(type_name(wanted))}"
            )
    return value
