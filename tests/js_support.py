"""The JavaScript clients the tests run under Node 22: `tests/js`, installed when missing.

The npm packages (exact versions in `tests/js/package-lock.json`, Node itself among them) are
installed into `tests/js/node_modules` when missing (`npm ci --prefix tests/js`). Without npm a
module using them skips, saying so; under CI (`CI` set) it fails instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
JS = ROOT / "tests" / "js"
NODE = JS / "node_modules" / ".bin" / "node"
INSTALL = "npm ci --prefix tests/js"


def unavailable(why: str) -> None:
    message = f"{why}: install the JavaScript clients with `{INSTALL}` (needs npm)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="module")
def node() -> Path:
    """Node 22 from `tests/js/node_modules`, installed first when missing."""
    if not NODE.exists():
        npm = shutil.which("npm")
        if npm is None:
            unavailable("npm is not on PATH")
        assert npm is not None
        installed = subprocess.run(
            [npm, "ci", "--prefix", str(JS), "--no-audit", "--no-fund", "--loglevel=error"],
            capture_output=True,
            text=True,
            timeout=900,
        )
        if installed.returncode != 0 or not NODE.exists():
            unavailable(f"`{INSTALL}` failed: {installed.stderr.strip()[-500:]}")
    return NODE


def run_node(
    node: Path, *args: str, timeout: float = 120, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`node ARGS` in `tests/js`."""
    return subprocess.run(
        [str(node), *args], cwd=JS, capture_output=True, text=True, timeout=timeout, env=env
    )
