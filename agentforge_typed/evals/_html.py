"""An eval report as one self-contained HTML page: the totals, the per-tool accuracy as an inline
SVG chart, the comparison with an earlier run, and each case with what went wrong.

No script, no stylesheet, font or image from anywhere (a Content-Security-Policy forbids them
too), so the page opens offline and shows the same everywhere. Every piece of text is escaped:
case ids, tool names, arguments and answers are the cases' and the model's words.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterator
from typing import Any

from ._report import Attempt, CaseReport, Comparison, EvalReport, Rate

__all__ = ["render_html"]

_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:72rem;padding:0 1rem;color:#1b1b1b}
h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:2rem}
table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:.3rem .5rem;vertical-align:top}
tr:nth-child(even){background:#f4f4f6}th{border-bottom:1px solid #999}
.pass{color:#17662a}.fail{color:#a3161d}.meta{color:#555}code{font-size:12px;white-space:pre-wrap;word-break:break-word}
details{margin:.2rem 0}summary{cursor:pointer}
svg text{font:12px system-ui,sans-serif;fill:#1b1b1b}
"""
_CSP = "default-src 'none'; style-src 'unsafe-inline'"

BAR_WIDTH = 400
"""The width, in pixels, of a bar at 100%."""
_ROW = 24
_LABEL = 200


def render_html(report: EvalReport, comparison: Comparison | None = None) -> str:
    """`report` as one self-contained HTML page (UTF-8 text), with `comparison`'s changes if
    given (what `agentforge-typed eval --html` writes)."""
    title = f"Eval report: {report.model}"
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        f'<p class="meta">{_e(_meta(report))}</p>',
        *_summary(report),
        '<section id="tools"><h2>Per-tool accuracy</h2>',
        tool_chart(report),
        "</section>",
        *(_comparison(comparison) if comparison is not None else ()),
        *_cases(report),
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def tool_chart(report: EvalReport) -> str:
    """The per-tool accuracy as an SVG bar chart: one bar per tool, its length the share of the
    tool's expected calls made with matching arguments, its label the counts."""
    tools = list(report.tools.items())
    height = max(1, len(tools)) * _ROW + 8
    width = _LABEL + BAR_WIDTH + 160
    rows = [
        f'<svg xmlns="http://www.w3.org/2000/svg" id="tool-accuracy" role="img" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'aria-label="Per-tool accuracy">',
        "<title>Per-tool accuracy: calls made with matching arguments, of those expected</title>",
    ]
    if not tools:
        rows.append(f'<text x="0" y="{_ROW - 8}">No tool call was expected or made.</text>')
    for index, (name, stats) in enumerate(tools):
        y = index * _ROW + 4
        accuracy = stats.accuracy
        share = accuracy or 0.0
        if accuracy is None:
            words = f"no call expected; {stats.unexpected} unexpected"
        else:
            words = f"{stats.correct}/{stats.expected} ({accuracy:.0%})"
            if stats.unexpected:
                words += f"; {stats.unexpected} unexpected"
        colour = "#2f8f46" if share >= 0.9 else "#d08c1d" if share >= 0.5 else "#c0392b"
        rows.append(
            f'<g class="bar" data-tool="{_e(name)}" data-accuracy="{share:.4f}">'
            f"<title>{_e(name)}: {_e(words)}</title>"
            f'<text x="{_LABEL - 8}" y="{y + 15}" text-anchor="end">{_e(_short(name, 28))}</text>'
            f'<rect x="{_LABEL}" y="{y}" width="{BAR_WIDTH}" height="{_ROW - 6}" fill="#e6e6ea"/>'
            f'<rect x="{_LABEL}" y="{y}" width="{share * BAR_WIDTH:.1f}" height="{_ROW - 6}" '
            f'fill="{colour}"/>'
            f'<text x="{_LABEL + BAR_WIDTH + 8}" y="{y + 15}">{_e(words)}</text></g>'
        )
    rows.append("</svg>")
    return "\n".join(rows)


def _meta(report: EvalReport) -> str:
    facts = [
        f"dialect: {report.dialect or 'as the provider sends it'}",
        f"{report.repeat} attempt{'s' if report.repeat != 1 else ''} per case",
        f"created {report.created_at.isoformat(timespec='seconds')}",
    ]
    if report.interrupted:
        facts.append(f"interrupted: {len(report.unfinished)} case(s) unfinished")
    return " · ".join(facts)


def _summary(report: EvalReport) -> Iterator[str]:
    summary = report.summary
    rows = [
        ("Score", _share(summary.passed, summary.attempts) + " of attempts passed"),
        ("Tool selection", _rate(summary.tool_selection)),
        ("Arguments", _rate(summary.arguments)),
        ("Irrelevance", _rate(summary.irrelevance)),
        ("pass^k", ", ".join(f"k={k}: {v:.2f}" for k, v in summary.pass_hat_k.items()) or "-"),
        ("Errors", f"{summary.errors} ({summary.unscored} measured nothing)"),
        ("Rounds", "-" if summary.rounds is None else f"{summary.rounds:.2f} per attempt"),
        ("Latency", _latency(report)),
        ("Tokens", _tokens(report)),
    ]
    yield '<section id="summary"><h2>Summary</h2><table>'
    for label, value in rows:
        yield f"<tr><th>{_e(label)}</th><td>{_e(value)}</td></tr>"
    yield "</table></section>"


def _comparison(comparison: Comparison) -> Iterator[str]:
    before = "-" if comparison.before_score is None else f"{comparison.before_score:.2%}"
    after = "-" if comparison.after_score is None else f"{comparison.after_score:.2%}"
    yield '<section id="comparison"><h2>Against the earlier run</h2>'
    yield (
        f"<p>Score {_e(before)} → {_e(after)}: {len(comparison.regressions)} regression(s), "
        f"{len(comparison.fixes)} fix(es).</p>"
    )
    changed = [c for c in comparison.changes if c.change != "same"]
    if changed:
        yield "<table><tr><th>Case</th><th>Change</th><th>Before</th><th>Now</th></tr>"
        for change in changed:
            css = (
                "fail"
                if change.change == "regression"
                else "pass"
                if change.change == "fix"
                else ""
            )
            yield (
                f'<tr class="{css}"><td>{_e(change.id)}</td><td>{_e(change.change)}</td>'
                f"<td>{_e(change.before_passes or '-')}</td><td>{_e(change.after_passes or '-')}</td></tr>"
            )
        yield "</table>"
    yield "</section>"


def _cases(report: EvalReport) -> Iterator[str]:
    yield '<section id="cases"><h2>Cases</h2>'
    if report.unfinished:
        yield f"<p>Unfinished: {_e(', '.join(report.unfinished))}</p>"
    yield "<table><tr><th>Case</th><th>Passed</th><th>What went wrong</th></tr>"
    for case in report.cases:
        css = "pass" if case.passed else "fail"
        failed = next((a for a in case.attempts if not a.passed), None)
        detail = "" if failed is None else _attempt(case, failed)
        yield (
            f'<tr class="{css}"><td>{_e(case.id)}</td>'
            f"<td>{case.passes}/{len(case.attempts)}</td><td>{detail}</td></tr>"
        )
    yield "</table></section>"


def _attempt(case: CaseReport, attempt: Attempt) -> str:
    lines = attempt.problems()
    shown = "".join(f"<div>{_e(line)}</div>" for line in lines[:10])
    calls = [
        {"name": call.name, "arguments": call.arguments}
        for turn in attempt.turns
        for call in turn.calls
    ]
    sent = json.dumps(calls, ensure_ascii=False, indent=1, default=str)
    return (
        f"{shown}<details><summary>calls made</summary><code>{_e(_short(sent, 4000))}</code>"
        "</details>"
    )


def _rate(rate: Rate) -> str:
    return "-" if not rate.total else _share(rate.ok, rate.total)


def _share(ok: int, total: int) -> str:
    return "-" if not total else f"{ok}/{total} ({ok / total:.0%})"


def _latency(report: EvalReport) -> str:
    latency = report.summary.latency_ms
    if latency.p50 is None or latency.p95 is None:
        return "-"
    return f"p50 {latency.p50:.0f} ms, p95 {latency.p95:.0f} ms"


def _tokens(report: EvalReport) -> str:
    tokens = report.summary.tokens
    cost = "" if tokens.cost is None else f", est. ${tokens.cost:.6f}"
    return f"{tokens.input} in / {tokens.output} out / {tokens.total} total{cost}"


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _e(value: Any) -> str:
    """Escaped for HTML text and attributes; control characters (which HTML forbids) and
    bidirectional overrides become spaces."""
    text = str(value)
    if not text.isprintable():
        text = "".join(c if c.isprintable() or c in "\n\t" else " " for c in text)
    return html.escape(text, quote=True)
