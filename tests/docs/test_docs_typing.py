"""The ```python blocks of README.md and every docs page type-check under `mypy --strict`, not
only run (`test_docs.py` runs them); their `# type: ignore[code]` lines must each still be needed
(`warn_unused_ignores`).

One mypy run checks every page, each as a module whose code keeps its Markdown line numbers, with
the cache `mypy` itself keeps in the repository (CI runs `mypy` first, so the package comes from
it). Blocks fenced ```python no-run are checked too; only `no-check` leaves a block out.
"""

from __future__ import annotations

import gc
import re
import sys
from pathlib import Path

from mypy import api
from test_docs import PAGES, ROOT, python_blocks


def page_as_module(text: str) -> str:
    """The page's checked ```python blocks as one module, each code line at its Markdown line."""
    lines: list[str] = []
    for line, code, _, checks in python_blocks(text):
        if checks:
            lines += [""] * (line - 1 - len(lines))
            lines += code.splitlines()
    return "\n".join(lines) + "\n"


def run_mypy(modules: dict[Path, str]) -> tuple[str, str, int]:
    """mypy over `modules` (file → the page it stands for), its output naming the pages."""
    # mypy raises the recursion limit and the garbage collector's thresholds for its own run;
    # later tests (a schema "nested too deeply to check") must see the interpreter's own.
    recursion_limit, gc_threshold = sys.getrecursionlimit(), gc.get_threshold()
    try:
        stdout, stderr, status = api.run(
            [
                "--config-file",
                str(ROOT / "mypy.ini"),
                "--strict",
                "--warn-unused-ignores",
                "--cache-dir",
                str(ROOT / ".mypy_cache"),
                "--no-error-summary",
                *map(str, modules),
            ]
        )
    finally:
        sys.setrecursionlimit(recursion_limit)
        gc.set_threshold(*gc_threshold)
    # By file name: a module mypy finds unchanged in its cache is reported under the path it had.
    for module, page in modules.items():
        stdout = re.sub(rf"^\S*\b{re.escape(module.name)}:", f"{page}:", stdout, flags=re.MULTILINE)
    return stdout, stderr, status


def test_page_as_module_keeps_markdown_line_numbers() -> None:
    text = "# T\n```python\nx = 1\n```\ntext\n```python no-run\ny = 2\n```\n"
    text += "```python no-run no-check\nz: int = ''\n```\n"
    assert page_as_module(text).splitlines() == ["", "", "x = 1", "", "", "", "y = 2"]


def test_errors_name_the_page_and_its_line(tmp_path: Path) -> None:
    module = tmp_path / "docs_page_md.py"
    module.write_text(page_as_module("# T\n\n```python\nx: int = 1\ny: str = x\n```\n"))
    stdout, _, status = run_mypy({module: "docs/page.md"})
    assert status == 1
    assert stdout.startswith("docs/page.md:5: error: Incompatible types in assignment")


def test_every_page_type_checks_under_strict_mypy(tmp_path: Path) -> None:
    modules = {}
    for page in PAGES:
        name = page.relative_to(ROOT).as_posix()
        module = tmp_path / (re.sub(r"\W", "_", name) + ".py")
        module.write_text(page_as_module(page.read_text(encoding="utf-8")), encoding="utf-8")
        modules[module] = name
    stdout, stderr, status = run_mypy(modules)
    assert stdout == "", "\n" + stdout
    assert (status, stderr) == (0, "")
