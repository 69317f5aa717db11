"""The report: its JSON form read back, `compare`, and the HTML page (self-contained, escaped,
with the per-tool chart)."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from agentforge_typed import AiMessage, FunctionModel, ToolCall, ToolService, tool
from agentforge_typed.evals import (
    REPORT_VERSION,
    EvalCase,
    EvalReport,
    compare,
    render_html,
    run_eval,
)
from agentforge_typed.evals._html import BAR_WIDTH

HOSTILE = '<script>alert(1)</script>"\x1b[2J\u202e&'


@tool
def lookup(token: str) -> str:
    """Look a token up."""
    return token


@tool
def other(token: str) -> str:
    """Another tool."""
    return token


def report_of(answers: dict[str, str], **options: Any) -> EvalReport:
    """Each case `id` expects `lookup(token=id)`; the model calls `lookup` with `answers[id]`."""

    def fn(messages: Any, parameters: Any) -> AiMessage:
        if messages[-1].role == "tool":
            return AiMessage(text="done " + HOSTILE)
        case_id = messages[0].content
        return AiMessage(
            tool_calls=[
                ToolCall(id="x", name="lookup", arguments=json.dumps({"token": answers[case_id]}))
            ]
        )

    cases = [
        EvalCase.model_validate(
            {
                "id": case_id,
                "input": case_id,
                "expected_calls": [{"name": "lookup", "arguments": {"token": [case_id]}}],
            }
        )
        for case_id in answers
    ]
    return run_eval(cases, ToolService([lookup, other]), FunctionModel(fn), **options)


def test_the_json_report_reads_back_as_it_was(tmp_path: Path) -> None:
    report = report_of({"a": "a", "b": "wrong"}, repeat=2)
    path = tmp_path / "report.json"
    path.write_text(report.to_json())
    document = json.loads(path.read_text())
    assert (document["format"], document["version"]) == (
        "agentforge-typed.eval-report",
        REPORT_VERSION,
    )
    assert EvalReport.load(path) == report
    assert document["summary"]["pass_hat_k"] == {"1": 0.5, "2": 0.5}


def test_the_schema_is_pydantic_s_and_names_its_version() -> None:
    schema = EvalReport.model_json_schema()
    assert schema["properties"]["version"]["const"] == REPORT_VERSION
    assert {"summary", "tools", "cases", "unfinished"} <= set(schema["properties"])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not an eval report"),
        ('{"format": "something-else"}', "not an eval report of version 1 (format:"),
        (None, "not an eval report of version 1 (version:"),
    ],
)
def test_a_file_that_is_no_report_of_this_version_is_refused(
    tmp_path: Path, text: str | None, message: str
) -> None:
    if text is None:
        document = json.loads(report_of({"a": "a"}).to_json())
        document["version"] = 2
        text = json.dumps(document)
    path = tmp_path / "r.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=re.escape(message)):
        EvalReport.load(path)
    with pytest.raises(ValueError, match="cannot be read"):
        EvalReport.load(tmp_path / "absent.json")


def test_compare_finds_regressions_fixes_new_and_removed_cases() -> None:
    before = report_of({"a": "a", "b": "wrong", "c": "c", "gone": "gone"})
    after = report_of({"a": "wrong", "b": "b", "c": "c", "new": "new"})
    comparison = compare(before, after)
    changes = {c.id: (c.change, c.before_passes, c.after_passes) for c in comparison.changes}
    assert changes == {
        "a": ("regression", "1/1", "0/1"),
        "b": ("fix", "0/1", "1/1"),
        "c": ("same", "1/1", "1/1"),
        "new": ("new", None, "1/1"),
        "gone": ("removed", "1/1", None),
    }
    assert [c.id for c in comparison.regressions] == ["a"]
    assert [c.id for c in comparison.fixes] == ["b"]
    assert (comparison.before_score, comparison.after_score) == (0.75, 0.75)


def test_an_unfinished_case_of_an_interrupted_run_is_no_regression() -> None:
    before = report_of({"a": "a", "b": "b"})
    after = EvalReport.build(
        [c for c in report_of({"a": "a", "b": "b"}).cases if c.id == "a"],
        model="m",
        unfinished=["b"],
        interrupted=True,
    )
    assert [c.id for c in compare(before, after).changes] == ["a"]
    assert not after.passed


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_the_html_page_is_self_contained_escaped_and_plots_each_tool() -> None:
    before = report_of({"a": "a", "b": "b"})
    report = report_of({"a": "a", "b": "wrong", HOSTILE: "x"})
    page = render_html(report, compare(before, report))
    parser = _Page()
    parser.feed(page)
    tags = [tag for tag, _ in parser.tags]
    # Nothing is fetched: no script, no external stylesheet, image, frame or link.
    assert not {"script", "link", "img", "iframe", "object", "embed"} & set(tags)
    assert not re.search(r"(?:src|href)\s*=", page)
    assert "url(" not in page
    csp = [a["content"] for t, a in parser.tags if t == "meta" and a.get("http-equiv")]
    assert csp == ["default-src 'none'; style-src 'unsafe-inline'"]
    # What the cases and the model wrote is text, never markup or a control character.
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "\x1b" not in page and "\u202e" not in page
    # The chart: well-formed SVG, a bar per tool, its width the tool's accuracy.
    svg = page[page.index("<svg") : page.index("</svg>") + len("</svg>")]
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    bars = {g.get("data-tool"): g for g in root.iter(f"{ns}g")}
    assert set(bars) == {"lookup"}
    filled = bars["lookup"].findall(f"{ns}rect")[1]
    assert float(filled.get("width") or 0) == pytest.approx(BAR_WIDTH / 3, abs=0.1)
    assert "1/3 (33%)" in "".join(bars["lookup"].itertext())
    assert 'id="comparison"' in page and "regression" in page


def test_an_unexpected_tool_only_gets_a_bar_saying_so() -> None:
    def fn(messages: Any, parameters: Any) -> AiMessage:
        if messages[-1].role == "tool":
            return AiMessage(text="done")
        return AiMessage(tool_calls=[ToolCall(id="x", name="other", arguments='{"token": "t"}')])

    case = EvalCase.model_validate({"id": "none", "input": "hi", "expected_calls": []})
    report = run_eval([case], ToolService([lookup, other]), FunctionModel(fn))
    page = render_html(report)
    assert "no call expected; 1 unexpected" in page
    empty = render_html(EvalReport.build([], model="m"))
    assert "No tool call was expected or made." in empty
