"""Write the golden files our code produces for the cases named (all when none are):
`request.json` and `expected.json`, from each case's `input.json` and recorded vendor bodies.

    python tests/golden_update.py [<vendor>/<case> ...]

Never run by the tests: what it writes is what the code does today, right or wrong. Read every
changed file against the vendor's documentation before committing it (`git diff tests/fixtures`).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from golden_support import (
    CHUNKINGS,
    EXPECTED,
    RESPONSE,
    STREAM,
    Case,
    blocking_json,
    cases,
    cut,
    sent,
    stream_async,
    stream_sync,
)


def write(path: Path, value: Any) -> None:
    text = json.dumps(value, ensure_ascii=False, indent=2) + "\n"
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")


def update(case: Case) -> None:
    write(case.folder / "request.json", json.loads(asyncio.run(sent(case, "chat")).content))
    wanted: dict[str, Any] = {}
    blocking = blocking_json(case)
    if case.has(RESPONSE):
        wanted["response"] = blocking
    if case.has(STREAM):
        cuts = [cut(case.bytes(STREAM), size) for size in CHUNKINGS.values()]
        outcomes = [stream_sync(case, pieces, blocking) for pieces in cuts]
        outcomes += [asyncio.run(stream_async(case, pieces, blocking)) for pieces in cuts]
        if any(outcome != outcomes[0] for outcome in outcomes):
            sys.exit(f"{case.id}: the stream parses differently as it is cut")
        wanted["stream"] = outcomes[0]
    write(case.folder / EXPECTED, wanted)


def main(names: list[str]) -> None:
    found = {case.id: case for case in cases()}
    if unknown := [name for name in names if name not in found]:
        sys.exit(f"no such case: {', '.join(unknown)}")
    for name in names or list(found):
        update(found[name])


if __name__ == "__main__":
    main(sys.argv[1:])
