"""docs/design/invariants.md names, for each invariant, the code that keeps it and the tests that
prove it, as backticked `path.py` or `path.py::Name.attribute`: each must exist, so that a rename
not carried to the page fails here instead of leaving it wrong.

Names are looked up in the file's syntax tree (a module-level class, function or assignment, then
an attribute, method or assignment in that class), not imported: the durable and serving modules
need their extras, and a test module is not importable on its own.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "design" / "invariants.md"
INVARIANTS = ("Identity", "Scoped", "Decided", "Once", "Linear", "Bounded", "Contained", "Secret")
"""DESIGN.md §4, in its order: a section each."""

REFERENCE = re.compile(r"`((?:agentforge_typed|tests)/[\w/]+\.py)(?:::([\w.]+))?`")
GUARANTEE_LINE = re.compile(r"^\*\*What proves it\.\*\* Guarantees? (.*?)\.$", re.MULTILINE)


@cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def _names(body: list[ast.stmt]) -> dict[str, ast.stmt]:
    """What a module or class body defines, by name."""
    found: dict[str, ast.stmt] = {}
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found[node.name] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found[target.id] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            found[node.target.id] = node
    return found


def missing(path: str, name: str | None) -> str | None:
    """Why `path` (relative to the repository) or `name` in it does not exist; `None` if it does."""
    file = ROOT / path
    if not file.is_file():
        return f"{path}: no such file"
    if name is None:
        return None
    body = _tree(file).body
    for depth, part in enumerate(name.split(".")):
        node = _names(body).get(part)
        if node is None:
            return f"{path}::{name}: no {part!r} there"
        if not isinstance(node, ast.ClassDef):
            if depth != name.count("."):
                return f"{path}::{name}: {part!r} is not a class"
            break
        body = node.body
    return None


def sections(text: str) -> dict[str, str]:
    """The page's `## ` sections, by heading."""
    parts = re.split(r"^## (.+)$", text, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def guarantees() -> set[str]:
    """The keys of `tests/conformance.py::GUARANTEES`."""
    for node in _tree(ROOT / "tests" / "conformance.py").body:
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id == "GUARANTEES"
            and isinstance(node.value, ast.Dict)
        ):
            return {ast.literal_eval(key) for key in node.value.keys if key is not None}
    raise AssertionError("tests/conformance.py declares no GUARANTEES")


TEXT = PAGE.read_text(encoding="utf-8")
REFERENCES = sorted(set(REFERENCE.findall(TEXT)))


def test_the_page_cites_code_and_tests() -> None:
    assert len(REFERENCES) > 100


@pytest.mark.parametrize(
    ("path", "name"), REFERENCES, ids=[f"{p}::{n}" if n else p for p, n in REFERENCES]
)
def test_every_cited_location_exists(path: str, name: str) -> None:
    assert missing(path, name or None) is None


def test_every_invariant_has_a_section_citing_code_and_tests() -> None:
    found = sections(TEXT)
    assert [heading for heading in found if heading in INVARIANTS] == list(INVARIANTS)
    for heading in INVARIANTS:
        cited = [path for path, _ in REFERENCE.findall(found[heading])]
        assert any(path.startswith("agentforge_typed/") for path in cited), heading
        assert any(path.startswith("tests/") and "/test_" in path for path in cited), heading


def test_every_named_guarantee_is_one_of_the_suite() -> None:
    named = [
        name for line in GUARANTEE_LINE.findall(TEXT) for name in re.findall(r"`([\w.]+)`", line)
    ]
    assert named and set(named) <= guarantees()


def test_a_missing_file_class_or_member_is_reported() -> None:
    here = "tests/docs/test_docs_invariants.py"
    assert missing(here, None) is None
    assert missing(here, "missing") is None
    assert missing("agentforge_typed/loop/_run.py", "Run.check_decision") is None
    assert missing("agentforge_typed/tools/_budget.py", "MAX_CONTENT_BYTES") is None
    assert missing("tests/nothing.py", None) == "tests/nothing.py: no such file"
    assert missing(here, "absent") == f"{here}::absent: no 'absent' there"
    assert missing("agentforge_typed/loop/_run.py", "Run.gone") == (
        "agentforge_typed/loop/_run.py::Run.gone: no 'gone' there"
    )
    assert missing(here, "missing.attribute") == (
        f"{here}::missing.attribute: 'missing' is not a class"
    )
