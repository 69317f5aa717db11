"""The conformance suite's shared pieces: what surfaces exist, and the checks every one must pass.

Every surface that reads what a server, a tool or a model sends — a wire core, a tool kind, a
loop driver, a CLI command — joins the suite. Each `test_conformance_*.py` module checks one
guarantee (linear, bounded, secret, deadlines) and declares what it covers; its
`test_covers_every_surface` compares that with what the package has (`surfaces()`), so a new wire
module, tool kind, driver or command fails the suite until it is registered.
"""

from __future__ import annotations

import gc
import pkgutil
import time
from collections.abc import Callable, Iterable, Mapping

import agentforge_typed.providers as providers

__all__ = [
    "DRIVERS",
    "assert_covers",
    "assert_linear",
    "cli_commands",
    "composite_models",
    "history_steps",
    "surfaces",
    "tool_kinds",
    "wire_cores",
]

DRIVERS = frozenset({"chat", "achat", "stream", "astream", "temporal"})
"""The loop's drivers: `ToolService`'s four and the durable one."""

LINEAR_FACTOR = 16.0
"""The most that 8n may cost against n: linear is 8, quadratic 64; the rest is room for noise."""


def wire_cores() -> frozenset[str]:
    """The provider wire modules (`providers/_<name>_wire.py`), by `<name>`."""
    return frozenset(
        module.name.removeprefix("_").removesuffix("_wire")
        for module in pkgutil.iter_modules(providers.__path__)
        if module.name.startswith("_") and module.name.endswith("_wire")
    )


def tool_kinds() -> frozenset[str]:
    """The tool kinds the package defines, by class name."""
    # Imported so that their subclasses are defined.
    import agentforge_typed.tools._http
    import agentforge_typed.tools._mcp
    import agentforge_typed.tools._schema_tool  # noqa: F401
    from agentforge_typed.tools._base import DeclaredTool
    from agentforge_typed.tools._function import Tool

    kinds = {Tool.__name__}
    pending = list(DeclaredTool.__subclasses__())
    while pending:
        kind = pending.pop()
        if not kind.__name__.startswith("_"):
            kinds.add(kind.__name__)
        pending.extend(kind.__subclasses__())
    return frozenset(kinds)


def cli_commands() -> frozenset[str]:
    """The `agentforge-typed` subcommands."""
    import argparse

    from agentforge_typed.cli._main import _parser

    parser = _parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return frozenset(action.choices)
    raise AssertionError("the CLI has no subcommands")


def composite_models() -> frozenset[str]:
    """The models made of other models (a `FallbackModel`), by class name: the public classes
    that name which of their models answered a response (`answering`)."""
    import agentforge_typed

    return frozenset(
        name
        for name in agentforge_typed.__all__
        if isinstance(value := getattr(agentforge_typed, name), type)
        and hasattr(value, "answering")
    )


def history_steps() -> frozenset[str]:
    """What runs over the whole history before each model call: the ready history processors
    (the package's public functions from `_history`) and `unsendable`, the check of what any
    processor returns."""
    import inspect

    import agentforge_typed

    return frozenset(
        {"unsendable"}
        | {
            name
            for name in agentforge_typed.__all__
            if inspect.isfunction(value := getattr(agentforge_typed, name))
            and value.__module__ == "agentforge_typed._history"
        }
    )


def surfaces() -> Mapping[str, frozenset[str]]:
    """Every surface the suite must cover, by axis."""
    return {
        "wire": wire_cores(),
        "tool": tool_kinds(),
        "driver": DRIVERS,
        "cli": cli_commands(),
        "history": history_steps(),
        "composite": composite_models(),
    }


def assert_covers(guarantee: str, axis: str, covered: Iterable[str]) -> None:
    """Fail when a surface of `axis` exists that `guarantee`'s tests do not cover."""
    missing = sorted(surfaces()[axis] - set(covered))
    assert not missing, (
        f"{guarantee}: no conformance test covers the {axis} surface(s) {', '.join(missing)}; "
        "register each in the suite (see DEVELOPERS.md, 'The conformance suite')"
    )


def _best(
    run: Callable[[int], object], size: int, repeat: int, clock: Callable[[], float]
) -> float:
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        # The collector's full passes cost in proportion to everything alive, not to the input:
        # kept out of the timing, they cannot make a linear surface look quadratic.
        gc.disable()
        try:
            started = clock()
            run(size)
            best = min(best, clock() - started)
        finally:
            gc.enable()
    return best


def assert_linear(
    run: Callable[[int], object],
    n: int,
    *,
    what: str,
    repeat: int = 3,
    floor: float = 0.002,
    clock: Callable[[], float] = time.perf_counter,
) -> None:
    """Assert that `run(8 * n)` costs at most `LINEAR_FACTOR` times `run(n)`.

    `run(size)` builds nothing it times: it feeds an input of `size` units (deltas, items,
    characters) prepared outside, or cheap to prepare. The best of `repeat` runs of each size is
    compared; a small size under `floor` seconds is measured at `floor`, so timer noise on a tiny
    input cannot fail a linear surface. `clock=time.process_time` measures CPU time, which other
    work on a shared machine does not move, for a surface that never waits.
    """
    run(n)  # warm-up: validators and caches built outside the timing
    small = max(_best(run, n, repeat, clock), floor)
    large = _best(run, 8 * n, repeat, clock)
    ratio = large / small
    assert ratio <= LINEAR_FACTOR, (
        f"{what}: 8x the input took {ratio:.1f}x the time ({small * 1e3:.1f} ms -> "
        f"{large * 1e3:.1f} ms); linear is 8x, the limit {LINEAR_FACTOR:g}x"
    )
