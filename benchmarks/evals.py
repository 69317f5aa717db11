"""What an eval adds per case over calling the loop directly, at concurrency 32, against the local
scale server (`scale_server.py` under uvicorn, as `scale.py` runs it: two-round conversations,
each answer 50-200 ms).

Both sides run the same N conversations through `ToolService.achat` on one `OpenAIChatModel`,
32 at a time: the floor in a plain worker pool, the eval through `arun_eval` with one case per
conversation (its expected call scored, its report built). Printed per side: wall seconds and
client CPU ms per case; then the eval's overhead against the floor. Target: at most 5% (the
issue's). Sides alternate over several turns and the best turn of each is kept, so that a burst
of other work on the machine does not skew one side.

    python benchmarks/evals.py [--n 400] [--turns 3]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any

from scale import lookup, start_server

from agentforge_typed import OpenAIChatModel, ToolService
from agentforge_typed.evals import EvalCase, ExpectedCall, arun_eval

CONCURRENCY = 32
TARGET = 1.05


def _cases(n: int) -> list[EvalCase]:
    return [
        EvalCase(
            id=f"case-{i}",
            input=f"Look up tok{i:05d}",
            expected_calls=[ExpectedCall(name="lookup", arguments={"token": [f"tok{i:05d}"]})],
        )
        for i in range(n)
    ]


async def _direct(service: ToolService, model: OpenAIChatModel, n: int) -> None:
    prompts = iter([f"Look up tok{i:05d}" for i in range(n)])

    async def worker() -> None:
        for prompt in prompts:
            await service.achat(model, prompt)

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))


async def _eval(service: ToolService, model: OpenAIChatModel, n: int) -> None:
    report = await arun_eval(_cases(n), service, model, concurrency=CONCURRENCY)
    assert report.summary.passed == n, report.summary


def _measure(
    base_url: str,
    n: int,
    side: Callable[[ToolService, OpenAIChatModel, int], Coroutine[Any, Any, None]],
) -> tuple[float, float]:
    """Wall seconds and client CPU seconds of one side's N cases (a fresh loop and model)."""

    async def run() -> tuple[float, float]:
        model = OpenAIChatModel(
            "scale", base_url=base_url, api_key="x", max_retries=0, timeout=30.0
        )
        service = ToolService([lookup])
        await service.achat(model, "Look up warmup")  # connections and validators built
        cpu, wall = time.process_time(), time.perf_counter()
        await side(service, model, n)
        result = time.perf_counter() - wall, time.process_time() - cpu
        await model.aclose()
        return result

    return asyncio.run(run())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=400, help="cases per side and turn")
    parser.add_argument("--turns", type=int, default=3)
    args = parser.parse_args(argv)
    server, base_url = start_server(faults=False)
    try:
        best: dict[str, tuple[float, float]] = {}
        for _ in range(args.turns):
            for name, side in (("direct", _direct), ("eval", _eval)):
                wall, cpu = _measure(base_url, args.n, side)
                if name not in best or cpu < best[name][1]:
                    best[name] = (wall, cpu)
    finally:
        server.terminate()
        server.wait(10)
    print(f"{args.n} cases at concurrency {CONCURRENCY}, best of {args.turns} turns")
    for name, (wall, cpu) in best.items():
        print(f"  {name:<7} {wall:6.2f} s wall  {cpu * 1000 / args.n:6.3f} ms CPU per case")
    cpu_ratio = best["eval"][1] / best["direct"][1]
    wall_ratio = best["eval"][0] / best["direct"][0]
    verdict = "within" if cpu_ratio <= TARGET else "OVER"
    print(
        f"eval / direct: CPU per case {cpu_ratio:.3f}x, wall {wall_ratio:.3f}x "
        f"({verdict} the {TARGET:.2f}x target on CPU)"
    )


if __name__ == "__main__":
    main()
