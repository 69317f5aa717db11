"""`agentforge-typed eval CASES`: run eval cases against a model, print a table, write the report
(`--json`, `--html`), compare it with an earlier one (`--compare`), and exit non-zero where CI
should stop.

Everything a case could get wrong about its target is found before any model call (exit status
2). What the model and the tools wrote reaches the report through the run's `Redactor` (the
keys of the model it runs with) and the terminal through `printable`. Ctrl-C keeps the attempts
that finished: the table and the reports are written with them, and the exit status is 130.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from ..providers._dialects import DIALECTS
from ._options import positive_float, positive_int
from ._target import load_object, load_target
from ._text import printable

__all__ = ["UsageError", "add_parser", "evaluate"]

EXIT_FAILED = 1
EXIT_INTERRUPTED = 130
_UNRENDERED = " dialect cannot render"
"""In an `EvalSetupError` problem: the --dialect, not the cases, is at fault (exit status 1)."""


class UsageError(Exception):
    """A one-line problem with what the user asked for: exit status 2."""


def add_parser(commands: Any, target_help: str, model_help: str) -> argparse.ArgumentParser:
    """Add the `eval` subcommand to `commands` (the main parser's subparsers)."""
    parser: argparse.ArgumentParser = commands.add_parser(
        "eval",
        help="score how a model calls TARGET's tools on a file of cases",
        description="Run the cases of CASES (JSON lines, or YAML with PyYAML) through the tool "
        "loop against MODEL and score each first answer's calls the way the Berkeley "
        "Function-Calling Leaderboard does: tool selection, every argument, irrelevance, "
        "pass^k over --repeat, rounds, latency, tokens and cost. Exit status: 0 all well; 1 "
        "the score is under --min-score, a case regressed against --compare, an attempt "
        "measured nothing (the model or its server failed, a timeout, a check that raised), or "
        "the --dialect cannot render a tool; 2 a usage error (the cases, the target, a case "
        "naming a tool the target lacks), before any model call; 130 interrupted (what "
        "finished is written).",
    )
    parser.add_argument(
        "cases", metavar="CASES", help="the cases file (.jsonl, .yaml), or with --bfcl a BFCL file"
    )
    parser.add_argument(
        "--target", metavar="TARGET", help=target_help + " (required unless --bfcl)"
    )
    parser.add_argument("--model", default="fake", help=model_help)
    parser.add_argument(
        "--repeat", type=positive_int, default=1, metavar="K", help="attempts per case (default: 1)"
    )
    parser.add_argument(
        "--concurrency",
        type=positive_int,
        default=8,
        metavar="N",
        help="the most attempts in flight at once (default: 8)",
    )
    parser.add_argument(
        "--timeout",
        type=positive_float,
        default=300.0,
        metavar="SECONDS",
        help="the most one attempt may take, every turn and retry included (default: 300)",
    )
    parser.add_argument(
        "--json",
        nargs="?",
        const="-",
        metavar="PATH",
        help="write the report as JSON to PATH (alone: to stdout, the table then to stderr)",
    )
    parser.add_argument("--html", metavar="PATH", help="write the report as one HTML page")
    parser.add_argument(
        "--compare",
        metavar="EARLIER",
        help="an earlier run's --json report: show each case's regression or fix; a regression "
        "is exit status 1",
    )
    parser.add_argument(
        "--min-score",
        type=_score,
        metavar="X",
        help="exit status 1 when the score (the share of attempts that passed) is under X, 0 to 1",
    )
    parser.add_argument(
        "--dialect",
        choices=DIALECTS,
        help="send every tool's schema rendered in this dialect (strict ones also asked to be "
        "enforced) instead of as the provider sends it: compare two runs to see which rendering "
        "the model follows best",
    )
    parser.add_argument(
        "--deps",
        metavar="SPEC",
        help="what tools receive as ToolContext.deps: module:attribute, or an attribute of "
        "TARGET's module (default: TARGET's module attribute `deps`, if it has one); a function "
        "or class of no arguments is called for them",
    )
    parser.add_argument(
        "--output-type",
        metavar="MOD:ATTR",
        help="the run's output type; expected_output is compared to its value (without it, to "
        "the final answer's text)",
    )
    parser.add_argument(
        "--tag", action="append", help="run only the cases with this tag (repeatable)"
    )
    parser.add_argument(
        "--max-tokens", type=positive_int, metavar="N", help="the most tokens of each answer"
    )
    parser.add_argument(
        "--temperature",
        type=float,
        metavar="T",
        help="the sampling temperature (default: the model's)",
    )
    bfcl = parser.add_argument_group("BFCL data (the Berkeley Function-Calling Leaderboard, v4)")
    bfcl.add_argument(
        "--bfcl",
        action="store_true",
        help="CASES is a BFCL question file (BFCL_v4_<category>.json); its functions are the tools",
    )
    bfcl.add_argument(
        "--bfcl-answers",
        metavar="PATH",
        help="its ground truth (default: possible_answer/<the same name> beside it)",
    )
    bfcl.add_argument(
        "--bfcl-functions",
        metavar="DIR",
        help="the multi-turn function docs (default: multi_turn_func_doc beside CASES)",
    )
    bfcl.add_argument(
        "--bfcl-backends",
        metavar="MOD:ATTR",
        help="the multi-turn categories' executable backend classes: a mapping of class name "
        "to class, or a module holding them",
    )
    bfcl.add_argument("--limit", type=positive_int, metavar="N", help="only the first N entries")
    return parser


def _score(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"a score is 0 to 1, got {text}")
    return value


def evaluate(args: argparse.Namespace) -> int:
    """Run the `eval` command; returns its exit status."""
    from .._exceptions import AgentForgeError
    from .._request import ChatRequestParameters
    from .._sync import run_sync
    from ..evals import CasesError, EvalReport, EvalSetupError, arun_eval, compare, load_cases
    from ..evals._run import case_reports
    from ..providers._registry import get_model
    from ._target import model_secrets, run_deps

    earlier = None
    if args.compare is not None:
        try:
            earlier = EvalReport.load(args.compare)
        except ValueError as exc:
            raise UsageError(f"--compare: {exc}") from None
    for option, path in (("--json", args.json), ("--html", args.html)):
        if path not in (None, "-") and not Path(path).resolve().parent.is_dir():
            raise UsageError(f"{option}: no such folder for {path!r}")
    deps = None
    if args.bfcl:
        if args.target is not None:
            raise UsageError("--target and --bfcl: a BFCL file brings its own tools")
        cases, target = _bfcl(args)
    else:
        if args.target is None:
            raise UsageError("--target is required (or --bfcl for a BFCL file)")
        try:
            cases = load_cases(args.cases)
        except CasesError as exc:
            raise UsageError(str(exc)) from None
        loaded = load_target(args.target)
        target = loaded.service()
        deps = run_deps(loaded, args.deps, target.tools, target.deps_type)
    if args.tag:
        cases = [case for case in cases if set(case.tags) & set(args.tag)]
        if not cases:
            raise UsageError(f"no case has the tag {' or '.join(map(repr, args.tag))}")
    output_type = None if args.output_type is None else load_object(args.output_type)[1]
    try:
        model = get_model(args.model)
    except (ValueError, AgentForgeError) as exc:
        raise UsageError(str(exc)) from None
    redactor = model_secrets([model])
    parameters = None
    if args.max_tokens is not None or args.temperature is not None:
        parameters = ChatRequestParameters(max_tokens=args.max_tokens, temperature=args.temperature)
    table_out = sys.stderr if args.json == "-" else sys.stdout
    progress = Progress(sys.stderr, len(cases) * args.repeat)
    attempts: dict[str, list[Any]] = {case.id: [None] * args.repeat for case in cases}

    def record(case: Any, index: int, attempt: Any) -> None:
        attempts[case.id][index] = attempt
        progress.advance(attempt.passed)

    interrupted = False
    try:
        report = run_sync(
            lambda: arun_eval(
                cases,
                target,
                model,
                repeat=args.repeat,
                concurrency=args.concurrency,
                dialect=args.dialect,
                deps=deps,
                parameters=parameters,
                output_type=output_type,
                timeout=args.timeout,
                model_name=args.model,
                on_attempt=record,
            )
        )
    except EvalSetupError as exc:
        *first, last = exc.problems[:20]
        for problem in first:
            print(f"agentforge-typed: {printable(problem)}", file=sys.stderr)
        if all(_UNRENDERED in problem for problem in exc.problems):
            print(f"agentforge-typed: {printable(last)}", file=sys.stderr)
            return EXIT_FAILED
        raise UsageError(last) from None
    except KeyboardInterrupt:
        interrupted = True
        reports, unfinished = case_reports(cases, attempts)
        report = EvalReport.build(
            reports,
            model=args.model,
            dialect=args.dialect,
            repeat=args.repeat,
            unfinished=unfinished,
            interrupted=True,
        )
    finally:
        progress.clear()
        close = getattr(model, "close", None)
        if callable(close):
            close()
    # One redaction for everything shown or written: the model's key, wherever a server put it.
    report = EvalReport.model_validate(redactor.redact(report.model_dump(mode="json")))
    comparison = None if earlier is None else compare(earlier, report)
    for line in table(report):
        print(printable(line, lines=True), file=table_out)
    if comparison is not None:
        for line in comparison_lines(comparison, args.compare):
            print(printable(line, lines=True), file=table_out)
    written = _write(report, comparison, args)
    if interrupted:
        done = len(report.cases)
        print(
            f"agentforge-typed: interrupted: {done} of {done + len(report.unfinished)} cases "
            f"finished{written}",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    return _verdict(report, comparison, args.min_score)


def _bfcl(args: argparse.Namespace) -> tuple[list[Any], Any]:
    from ..evals import load_bfcl

    backends = None
    if args.bfcl_backends is not None:
        spec = args.bfcl_backends
        backends = load_object(spec)[1] if ":" in spec else load_object(f"{spec}:__name__")[0]
    try:
        suite = load_bfcl(
            args.cases,
            args.bfcl_answers,
            functions=args.bfcl_functions,
            backends=backends,
            limit=args.limit,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return suite.cases, suite.setup


def _write(report: Any, comparison: Any, args: argparse.Namespace) -> str:
    """Write `--json` and `--html`; returns what was written, for the interrupted line."""
    from ..evals import render_html

    written: list[str] = []
    if args.json == "-":
        print(report.to_json())
    elif args.json is not None:
        Path(args.json).write_text(report.to_json() + "\n", encoding="utf-8")
        written.append(args.json)
    if args.html is not None:
        Path(args.html).write_text(render_html(report, comparison), encoding="utf-8")
        written.append(args.html)
    return f"; written to {', '.join(written)}" if written else ""


def _verdict(report: Any, comparison: Any, min_score: float | None) -> int:
    """The exit status, with the reason on stderr's last line when it is not 0."""
    reasons: list[str] = []
    summary = report.summary
    if summary.unscored:
        first = next(
            a.error
            for case in report.cases
            for a in case.attempts
            if a.error is not None and not a.error.scored
        )
        reasons.append(
            f"{summary.unscored} of {summary.attempts} attempts measured nothing "
            f"(first: {first.kind} error: {first.type}: {first.message})"
        )
    if min_score is not None and (summary.score or 0.0) < min_score:
        reasons.append(f"the score {summary.score or 0.0:.4f} is under --min-score {min_score:g}")
    if comparison is not None and comparison.regressions:
        ids = ", ".join(c.id for c in comparison.regressions[:10])
        count = len(comparison.regressions)
        reasons.append(f"{count} regression{'s' if count != 1 else ''} against --compare: {ids}")
    for reason in reasons:
        print(f"agentforge-typed: {printable(reason)}", file=sys.stderr)
    return EXIT_FAILED if reasons else 0


# -- what the terminal shows ---------------------------------------------------------------------


class Progress:
    """A one-line progress bar on `out`, redrawn in place, only where `out` is a terminal."""

    WIDTH = 30

    def __init__(self, out: TextIO, total: int) -> None:
        self.out = out
        self.total = total
        self.done = 0
        self.failed = 0
        self.started = time.monotonic()
        self.shown = _is_terminal(out)

    def advance(self, passed: bool) -> None:
        self.done += 1
        self.failed += not passed
        if self.shown:
            filled = self.WIDTH * self.done // max(self.total, 1)
            bar = "#" * filled + "-" * (self.WIDTH - filled)
            seconds = int(time.monotonic() - self.started)
            self.out.write(
                f"\r[{bar}] {self.done}/{self.total} attempts, {self.failed} failed, "
                f"{seconds // 60:02d}:{seconds % 60:02d}"
            )
            self.out.flush()

    def clear(self) -> None:
        if self.shown and self.done:
            self.out.write("\r" + " " * (self.WIDTH + 60) + "\r")
            self.out.flush()
            self.done = 0


def _is_terminal(out: TextIO) -> bool:
    try:
        return out.isatty()
    except (AttributeError, ValueError):
        return False


def table(report: Any) -> list[str]:
    """The report as terminal lines: one row per case, then the totals."""
    cases = report.cases
    width = min(40, max([4, *(len(case.id) for case in cases)]))
    lines = [
        f"{'case':<{width}}  passed  tools  args     rounds  ms      tokens  what went wrong",
    ]
    for case in cases:
        attempts = case.attempts
        selection = [
            t.tool_selection for a in attempts for t in a.turns if t.tool_selection is not None
        ]
        matched = total = 0
        for attempt in attempts:
            for turn in attempt.turns:
                for check in turn.expected or ():
                    if check.call is not None:
                        matched += sum(x.ok for x in check.arguments)
                        total += len(check.arguments)
        rounds = sum(a.rounds for a in attempts) / len(attempts)
        latency = sum(a.latency_ms for a in attempts) / len(attempts)
        tokens = sum(a.tokens.total for a in attempts) // len(attempts)
        failed = next((a for a in attempts if not a.passed), None)
        wrong = "" if failed is None else printable("; ".join(failed.problems()[:2]))
        lines.append(
            f"{_cut(printable(case.id), width):<{width}}  {case.passes}/{len(attempts):<5} "
            f"{_ratio(sum(selection), len(selection)):<6} {_ratio(matched, total):<8} "
            f"{rounds:<7.1f} {latency:<7.0f} {tokens:<7} {_cut(wrong, 120)}"
        )
    summary = report.summary
    score = "-" if summary.score is None else f"{summary.score:.2%}"
    pass_k = ", ".join(f"pass^{k} {v:.2f}" for k, v in summary.pass_hat_k.items())
    lines += [
        "",
        f"== {summary.cases} cases, {summary.attempts} attempts: score {score} "
        f"({summary.passed}/{summary.attempts} passed){', ' + pass_k if pass_k else ''}",
        f"== tool selection {_rate(summary.tool_selection)}, arguments "
        f"{_rate(summary.arguments)}, irrelevance {_rate(summary.irrelevance)}",
        f"== {summary.errors} errors ({summary.unscored} measured nothing), rounds "
        f"{summary.rounds or 0:.1f} per attempt, latency p50 {summary.latency_ms.p50 or 0:.0f} ms"
        f" / p95 {summary.latency_ms.p95 or 0:.0f} ms, tokens {summary.tokens.input} in / "
        f"{summary.tokens.output} out{_cost(summary.tokens.cost)}",
    ]
    if report.tools:
        per_tool = ", ".join(
            f"{printable(name)} {stats.correct}/{stats.expected}"
            + (f" (+{stats.unexpected} unexpected)" if stats.unexpected else "")
            for name, stats in report.tools.items()
        )
        lines.append(f"== per tool: {per_tool}")
    if report.dialect:
        lines.append(f"== dialect: {report.dialect}")
    return lines


def comparison_lines(comparison: Any, source: str) -> list[str]:
    """The changes against an earlier run, one line per changed case."""
    before = "-" if comparison.before_score is None else f"{comparison.before_score:.2%}"
    after = "-" if comparison.after_score is None else f"{comparison.after_score:.2%}"
    lines = [
        f"== compared with {source}: score {before} -> {after}; "
        f"{len(comparison.regressions)} regression(s), {len(comparison.fixes)} fix(es)"
    ]
    for change in comparison.changes:
        if change.change != "same":
            lines.append(
                f"   {change.change:<10}  {printable(change.id)}  {change.before_passes or '-'} -> "
                f"{change.after_passes or '-'}"
            )
    return lines


def _ratio(ok: int, total: int) -> str:
    return "-" if not total else f"{ok}/{total}"


def _rate(rate: Any) -> str:
    return "-" if not rate.total else f"{rate.ok}/{rate.total} ({rate.ok / rate.total:.0%})"


def _cost(cost: Any) -> str:
    return "" if cost is None else f", est. cost ${cost:.6f}"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
