"""Every ```python block of README.md and docs/ (sub-folders included) runs, so the docs cannot rot.

The blocks of one page run in order in one module namespace (a page reads like one script), from
the repository root, offline: opening a network connection fails the page. A block fenced
```python no-run is shown but skipped (for code that needs a real API key, say); it is still
type-checked with the rest (`test_docs_typing.py`) unless its fence also says `no-check`, kept for
code mypy cannot read at all (each use says why next to it).
"""

from __future__ import annotations

import re
import shlex
import socket
import subprocess
import sys
import types
from pathlib import Path
from typing import Any, NamedTuple, NoReturn

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

# An opening fence of three or more backticks with its info string, up to the matching close.
FENCE = re.compile(
    r"^(?P<fence>`{3,})(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=fence)[ \t]*$", re.MULTILINE | re.DOTALL
)


class Block(NamedTuple):
    """A ```python block: `line` is its code's first line in the page."""

    line: int
    code: str
    runs: bool
    checks: bool


def python_blocks(text: str) -> list[Block]:
    """Each ```python block of a Markdown page, in order."""
    blocks = []
    for match in FENCE.finditer(text):
        info = match["info"].strip().split()
        if not info or info[0] != "python":
            continue
        line = text.count("\n", 0, match.start("body")) + 1
        blocks.append(Block(line, match["body"], "no-run" not in info, "no-check" not in info))
    return blocks


def _offline(*args: Any, **kwargs: Any) -> NoReturn:
    raise RuntimeError("documentation examples must run offline: a network connection was opened")


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(ROOT).as_posix())
def test_page_examples_run(page: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(socket.socket, "connect", _offline)
    monkeypatch.setattr(socket, "create_connection", _offline)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    # A real module, so pydantic and dataclasses can resolve the annotations of classes defined
    # in the examples.
    name = "docs_" + re.sub(r"\W", "_", page.relative_to(ROOT).as_posix())
    module = types.ModuleType(name)
    monkeypatch.setitem(sys.modules, name, module)
    for line, code, runs, _ in python_blocks(page.read_text(encoding="utf-8")):
        if runs:
            # Padding keeps tracebacks pointing at the Markdown line.
            exec(compile("\n" * (line - 1) + code, str(page), "exec"), module.__dict__)


def test_readme_has_runnable_examples() -> None:
    assert any(block.runs for block in python_blocks((ROOT / "README.md").read_text()))


def test_the_runner_finds_runs_and_skips_blocks() -> None:
    text = "\n".join(
        [
            "# Title",
            "```python",
            "x = 1",
            "```",
            "```text",
            "not python",
            "```",
            "````python no-run",
            "```python",
            "nested = True",
            "```",
            "````",
            "```python no-run no-check",
            "skipped = True",
            "```",
            "```json",
            "{}",
            "```",
        ]
    )
    assert python_blocks(text) == [
        (3, "x = 1\n", True, True),
        (9, "```python\nnested = True\n```\n", False, True),
        (14, "skipped = True\n", False, False),
    ]


# An inline link's target, `[text](target)`, up to a space (a title) or the closing parenthesis.
LINK = re.compile(r"\[[^\]]*\]\(<?([^)\s>]+)>?(?:\s[^)]*)?\)")


def prose(text: str) -> str:
    """The page without its fenced blocks and inline code, where brackets are not links."""
    text = FENCE.sub(lambda match: "\n" * match[0].count("\n"), text)
    return re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", text, flags=re.DOTALL)


def anchors(text: str) -> set[str]:
    """The ids GitHub gives the page's headings: lower case, punctuation dropped, spaces to `-`,
    a repeated id suffixed `-1`, `-2`, …"""
    seen: dict[str, int] = {}
    ids = set()
    for heading in re.findall(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", FENCE.sub("", text), re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        ids.add(f"{slug}-{count}" if count else slug)
    return ids


def broken_links(page: Path) -> list[str]:
    """The relative links of a Markdown page whose file, or heading, does not exist."""
    broken = []
    text = page.read_text(encoding="utf-8")
    for target in LINK.findall(prose(text)):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:, …
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked.read_text("utf-8")):
            broken.append(f"{target}: no such heading")
    return broken


@pytest.mark.parametrize(
    "page", [*PAGES, ROOT / "DEVELOPERS.md"], ids=lambda page: page.relative_to(ROOT).as_posix()
)
def test_relative_links_resolve(page: Path) -> None:
    assert broken_links(page) == []


def test_broken_links_are_found(tmp_path: Path) -> None:
    (tmp_path / "guide").mkdir()
    (tmp_path / "other.md").write_text("# Other\n## The `x` API (new)\n## Usage\n## Usage\n")
    page = tmp_path / "guide" / "page.md"
    page.write_text(
        "# Page\n[ok](../other.md) [ok](../other.md#the-x-api-new) [ok](../other.md#usage-1)\n"
        "[ok](#page) [web](https://example.com/x.md) `[code](missing.md)`\n"
        "```text\n[fenced](missing.md)\n```\n"
        "[gone](missing.md) [no heading](../other.md#nothing) [no heading](#usage)\n"
    )
    assert broken_links(page) == [
        "missing.md: no such file",
        "../other.md#nothing: no such heading",
        "#usage: no such heading",
    ]


def shell_blocks(text: str) -> list[str]:
    return [m["body"].strip() for m in FENCE.finditer(text) if m["info"].strip() == "bash"]


def test_readme_set_up_commands_work() -> None:
    """The README's two set-up commands: the first runs the CLI on its offline default (run here
    with this interpreter, the install being what the test environment already did); the second
    is `.ci/run`, which runs the test suite."""
    install_and_run, run_tests = shell_blocks((ROOT / "README.md").read_text(encoding="utf-8"))[:2]
    venv, install, run = (part.strip() for part in install_and_run.split("&&"))
    assert venv == "python3 -m venv .venv"
    assert install == ".venv/bin/pip install -e ."
    command = shlex.split(run)
    assert command[:2] == [".venv/bin/agentforge-typed", "run"]
    assert "--model" not in command  # the offline default
    completed = subprocess.run(
        [sys.executable, "-m", "agentforge_typed", *command[1:]],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert completed.returncode == 0, completed.stderr
    assert "-> get_weather" in completed.stdout and "tool calls (0 failed)" in completed.stdout

    assert run_tests == "bash .ci/run"
    assert "python -m pytest -q" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
