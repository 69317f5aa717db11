"""Cold costs against their floors: decorating a tool, registering schema-declared tools, importing.

- Decoration: `tool(fn)` for the three workloads of `dispatch.py` (2 parameters, the order DTO,
  12 parameters), against building a `TypeAdapter` of the same arguments (the `TypedDict` of the
  signature) plus its `json_schema()` (pydantic's own generator) — what any pydantic-based tool
  library must do. Target: ≤ 1.5x.
- Registration: 500 schema-declared tools (as an MCP server lists them) made `SchemaTool`s and
  registered on a `ToolService`, against building their jsonschema validators alone (the schema
  check plus the validator). Target: ≤ 2x.
- Import: `import agentforge_typed` in a fresh interpreter, less an empty interpreter's start,
  against `import pydantic, httpx` (the issue's floor; pydantic's own import defers `BaseModel`)
  and against `import httpx; from pydantic import BaseModel, TypeAdapter` (pydantic as a program
  uses it). Target: ≤ 1.5x both. Each interpreter may write its bytecode cache (as an installed
  package has one), even under `PYTHONDONTWRITEBYTECODE`; a first, unmeasured run writes it. Also
  `agentforge-typed --help`, which should answer well under a second.

Run: `python benchmarks/cold_start.py [--quick]`. Every number is the best of several runs: on a
shared machine the best is the stablest estimate of the cost itself.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from pydantic import TypeAdapter

sys.path.insert(0, str(Path(__file__).parent))
from dispatch import OrderArgs, SearchArgs, WeatherArgs, get_weather, place_order, search

from agentforge_typed import ToolService, tool
from agentforge_typed.tools import SchemaTool, ToolSpecification

WORKLOADS: list[tuple[str, Callable[..., Any], type]] = [
    ("2 params", get_weather, WeatherArgs),
    ("order DTO", place_order, OrderArgs),
    ("12 params", search, SearchArgs),
]


def best(fn: Callable[[], object], number: int, repeat: int) -> float:
    """Seconds per call, best of `repeat` runs of `number` calls."""
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number


def decoration(quick: bool) -> None:
    number, repeat = (20, 3) if quick else (100, 7)
    print("decoration (per tool)            tool      floor   ratio (target ≤ 1.5x)")
    for label, function, typed_dict in WORKLOADS:

        def ours(function: Callable[..., Any] = function) -> None:
            tool(function)

        def floor(typed_dict: type = typed_dict) -> None:
            TypeAdapter(typed_dict).json_schema()

        mine, base = best(ours, number, repeat), best(floor, number, repeat)
        print(f"  {label:<28} {mine * 1e3:6.3f} ms {base * 1e3:6.3f} ms   {mine / base:.2f}x")


def _listed(count: int) -> list[dict[str, Any]]:
    """Schemas shaped like an MCP server's `tools/list`: a few typed, described properties."""
    return [
        {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": f"File {i}.", "minLength": 1},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100},
                "mode": {"type": "string", "enum": ["read", "write"]},
                "tags": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["path"],
            "additionalProperties": False,
        }
        for i in range(count)
    ]


def registration(quick: bool) -> None:
    schemas = _listed(500)
    specs = [
        ToolSpecification(name=f"tool_{i}", description=f"Tool {i}.", parameters=schema)
        for i, schema in enumerate(schemas)
    ]

    def handler(arguments: dict[str, Any]) -> str:
        return "ok"

    def ours() -> None:
        ToolService([SchemaTool(spec, handler) for spec in specs])

    def floor() -> None:
        for schema in schemas:
            Draft202012Validator.check_schema(schema)
            Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)

    repeat = 3 if quick else 7
    mine, base = best(ours, 1, repeat), best(floor, 1, repeat)
    print(
        f"registration of 500 schema tools  {mine * 1e3:6.1f} ms {base * 1e3:6.1f} ms   "
        f"{mine / base:.2f}x (target ≤ 2x)"
    )


_ENV = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}


def _best_run(argv: list[str], runs: int) -> float:
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=_ENV)  # writes the caches
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=_ENV)
        times.append(time.perf_counter() - start)
    return min(times)


def imports(quick: bool) -> None:
    runs = 5 if quick else 20

    def cost(code: str) -> float:
        return _best_run([sys.executable, "-c", code], runs)

    empty = cost("pass")
    lazy_floor = cost("import pydantic, httpx") - empty
    used_floor = cost("import httpx; from pydantic import BaseModel, TypeAdapter") - empty
    ours = cost("import agentforge_typed") - empty
    print(
        f"import agentforge_typed           {ours * 1e3:6.1f} ms\n"
        f"  vs import pydantic, httpx       {lazy_floor * 1e3:6.1f} ms   {ours / lazy_floor:.2f}x "
        "(target ≤ 1.5x)\n"
        f"  vs httpx + pydantic.BaseModel   {used_floor * 1e3:6.1f} ms   {ours / used_floor:.2f}x "
        "(target ≤ 1.5x)"
    )
    cli = shutil.which("agentforge-typed")
    if cli is not None:
        print(f"agentforge-typed --help           {_best_run([cli, '--help'], runs) * 1e3:6.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats (a smoke run)")
    quick = parser.parse_args().quick
    decoration(quick)
    registration(quick)
    imports(quick)


if __name__ == "__main__":
    main()
