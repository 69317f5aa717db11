"""The HTML report in a real browser: the machine's headless Chromium (Debian's `chromium`),
driven by Playwright. The page must render its per-tool chart — each bar as wide as its tool's
accuracy — with nothing refused by its Content-Security-Policy and nothing fetched. Where
Chromium or Playwright is missing the module skips, saying how to install them, and fails under
CI (`browser_support`; the structure of the page is checked without a browser in
`test_evals_report.py`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import browser_support
import pytest

from agentforge_typed import AiMessage, FunctionModel, ToolCall, ToolService, tool
from agentforge_typed.evals import EvalCase, render_html, run_eval
from agentforge_typed.evals._html import BAR_WIDTH

pytestmark = pytest.mark.slow  # each test starts a browser

browser = browser_support.browser


@tool
def lookup(token: str) -> str:
    """Look a token up."""
    return token


@tool
def count(text: str) -> int:
    """Count characters."""
    return len(text)


def test_the_report_renders_its_chart_in_a_browser(browser: Any, tmp_path: Path) -> None:
    # lookup: right 3 times of 4; count: never called (0 of 2); a hostile id in the table.
    answers = {"a": "a", "b": "b", "c": "c", "d": "wrong"}

    def fn(messages: Any, parameters: Any) -> AiMessage:
        if messages[-1].role == "tool":
            return AiMessage(text="done")
        prompt = str(messages[0].content)
        if prompt in answers:
            arguments = json.dumps({"token": answers[prompt]})
            return AiMessage(tool_calls=[ToolCall(id="x", name="lookup", arguments=arguments)])
        return AiMessage(text="no")

    cases = [
        EvalCase.model_validate(
            {
                "id": i,
                "input": i,
                "expected_calls": [{"name": "lookup", "arguments": {"token": [i]}}],
            }
        )
        for i in answers
    ] + [
        EvalCase.model_validate(
            {
                "id": f"<img src=x onerror=alert(1)>{n}",
                "input": f"count {n}",
                "expected_calls": [{"name": "count"}],
            }
        )
        for n in range(2)
    ]
    report = run_eval(cases, ToolService([lookup, count]), FunctionModel(fn))
    path = tmp_path / "report.html"
    path.write_text(render_html(report), encoding="utf-8")

    page = browser.new_page()
    problems: list[str] = []
    requests: list[str] = []
    page.on(
        "console",
        lambda message: problems.append(message.text) if message.type == "error" else None,
    )
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.on("request", lambda request: requests.append(request.url))
    page.goto(path.as_uri())
    chart = page.locator("#tool-accuracy")
    assert chart.is_visible()
    widths = {}
    for name in ("lookup", "count"):
        bar = page.locator(f'#tool-accuracy g[data-tool="{name}"] rect')
        track, filled = bar.nth(0).bounding_box(), bar.nth(1).bounding_box()
        assert track is not None and track["width"] == pytest.approx(BAR_WIDTH, abs=1)
        widths[name] = 0.0 if filled is None else filled["width"] / track["width"]
    assert widths["lookup"] == pytest.approx(0.75, abs=0.01)
    assert widths["count"] == pytest.approx(0.0, abs=0.01)
    assert "3/4 (75%)" in (chart.text_content() or "")
    # The hostile case id is text in the table, not an element.
    assert page.locator("#cases img").count() == 0
    assert "<img src=x onerror=alert(1)>0" in page.locator("#cases").inner_text()
    page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
    assert problems == [] and requests == [path.as_uri()]
    page.close()
