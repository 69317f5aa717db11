"""Write tests/slow_tests.txt from a run's JUnit XML: `python tests/measure_slow.py junit.xml`.

Run the whole suite with `--junitxml junit.xml` on a machine like CI's first. A test is slow when
one of its runs took longer than `SLOW_SECONDS`; a parametrised test is listed whole when any of
its cases is, so the fast subset does not depend on which case was measured.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

SLOW_SECONDS = 0.25
OUT = Path(__file__).resolve().parent / "slow_tests.txt"


def slow_tests(junit: Path) -> list[str]:
    slow: set[str] = set()
    for case in ElementTree.parse(junit).iter("testcase"):
        if float(case.get("time", "0")) <= SLOW_SECONDS:
            continue
        module = case.get("classname", "").split(".")
        name = case.get("name", "").split("[", 1)[0]
        # classname is the path's folders and module, then any class: `tests.loop.test_x`,
        # `tests.tools.mcp.test_x`, `tests.loop.test_x.TestClass`
        path = [part for part in module if part.startswith("test_")]
        if not path:
            continue
        start = module.index(path[0])
        file = "/".join(module[: start + 1]) + ".py"
        slow.add("::".join([file, *module[start + 1 :], name]))
    return sorted(slow)


def main() -> None:
    listed = slow_tests(Path(sys.argv[1]))
    header = (
        f"# Tests slower than {SLOW_SECONDS} s in the last measured run (tests/measure_slow.py); "
        "`-m 'not slow'` leaves them out.\n"
    )
    OUT.write_text(header + "".join(f"{test}\n" for test in listed), encoding="utf-8")
    print(f"{len(listed)} slow tests written to {OUT}")


if __name__ == "__main__":
    main()
