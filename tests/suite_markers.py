"""Markers the suite applies by itself, so that `python -m pytest -m "not slow"` is the fast
subset (a pytest plugin: `-p suite_markers` in pyproject's addopts).

- `live`: the tests under tests/live (a real llama.cpp server and model).
- `slow`: those, the tests that mark themselves, and every test `tests/slow_tests.txt` names: the
  tests that took longer than `SLOW_SECONDS` in the last measured run, written by
  `python tests/measure_slow.py JUNIT_XML` from a run with `--junitxml`. A new test is fast until
  measured.
"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SLOW_TESTS = HERE / "slow_tests.txt"


def _slow_ids() -> frozenset[str]:
    if not SLOW_TESTS.exists():
        return frozenset()
    lines = SLOW_TESTS.read_text(encoding="utf-8").splitlines()
    return frozenset(line for line in lines if line and not line.startswith("#"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    slow = _slow_ids()
    for item in items:
        if (HERE / "live") in Path(item.path).parents:
            item.add_marker(pytest.mark.live)
            item.add_marker(pytest.mark.slow)
        elif item.nodeid in slow or item.nodeid.split("[", 1)[0] in slow:
            item.add_marker(pytest.mark.slow)
