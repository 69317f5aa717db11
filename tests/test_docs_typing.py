"""docs/typing.md's examples type-check under `mypy --strict`, not only run (`test_docs.py` runs
them): its `# type: ignore[code]` lines must each still be needed (`warn_unused_ignores`)."""

from __future__ import annotations

import gc
import sys
from pathlib import Path

from mypy import api
from test_docs import ROOT, python_blocks

PAGE = ROOT / "docs" / "typing.md"


def page_as_module(text: str) -> str:
    """The page's ```python blocks as one module, each code line at its Markdown line number."""
    lines: list[str] = []
    for line, code, _ in python_blocks(text):
        lines += [""] * (line - 1 - len(lines))
        lines += code.splitlines()
    return "\n".join(lines) + "\n"


def test_page_as_module_keeps_markdown_line_numbers() -> None:
    text = "# T\n```python\nx = 1\n```\ntext\n```python\ny = 2\n```\n"
    assert page_as_module(text).splitlines() == ["", "", "x = 1", "", "", "", "y = 2"]


def test_typing_page_type_checks_under_strict_mypy(tmp_path: Path) -> None:
    module = tmp_path / "docs_typing_md.py"
    module.write_text(page_as_module(PAGE.read_text(encoding="utf-8")), encoding="utf-8")
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
                str(tmp_path / "cache"),
                "--no-error-summary",
                str(module),
            ]
        )
    finally:
        sys.setrecursionlimit(recursion_limit)
        gc.set_threshold(*gc_threshold)
    # Errors name the module's lines, which are the page's lines.
    assert stdout.replace(str(module), "docs/typing.md") == ""
    assert (status, stderr) == (0, "")
