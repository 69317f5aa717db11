"""The chat page in a real browser: the machine's headless Chromium (Debian's `chromium`, which
`.ci/run` installs) driven by Playwright, as a person uses it: types a question, watches the tool
call stream in, approves or denies it, answers a server's question in a form, reloads, and sees
a tool's hostile text as text. Under CI (`CI` set) a missing browser fails the suite; elsewhere
the module skips, saying how to install one. Screenshots go to `tests/artifacts/`.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import browser_support
import pytest
import ui_support

from agentforge_typed import (
    AiMessage,
    ChatMessage,
    ChatRequestParameters,
    FunctionModel,
    MCPServer,
    ToolCall,
    ToolResultMessage,
    ToolService,
)
from agentforge_typed.ui import create_app

pytestmark = pytest.mark.slow  # each test starts a browser

browser = browser_support.browser
ARTIFACTS = Path(__file__).parents[1] / "artifacts"
FIXTURE_SERVER = str(Path(__file__).parents[1] / "mcp_fixture_server.py")
RAW_SERVER = str(Path(__file__).parents[1] / "mcp_raw_server.py")
WAIT_MS = 30_000


class Page:
    """A page of the app at `url`, recording what went wrong in it (console errors: a script
    error, a refused content security policy)."""

    def __init__(self, browser: Any, url: str) -> None:
        self.context = browser.new_context(viewport={"width": 960, "height": 720})
        self.page = self.context.new_page()
        self.page.set_default_timeout(WAIT_MS)
        self.problems: list[str] = []
        self.page.on("pageerror", lambda error: self.problems.append(str(error)))
        self.page.on(
            "console",
            lambda m: self.problems.append(m.text) if m.type == "error" else None,
        )
        self.page.goto(url)

    def ask(self, text: str) -> None:
        self.page.fill('[data-role="input"]', text)
        self.page.click('[data-action="send"]')

    def assistant_says(self, text: str) -> None:
        self.page.locator('[data-role="assistant"]', has_text=text).last.wait_for()

    def tool(self, name: str) -> Any:
        return self.page.locator("[data-tool-call-id]", has_text=name).last

    def idle(self) -> None:
        self.page.wait_for_function("!document.querySelector('[data-role=\"input\"]').disabled")

    def shot(self, name: str) -> Path:
        ARTIFACTS.mkdir(exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path

    def close(self) -> None:
        self.context.close()


@pytest.fixture()
def url() -> Iterator[str]:
    ui_support.deleted.clear()
    app = create_app(ui_support.service(), ui_support.model(), title="Files")
    with ui_support.served(app) as served:
        yield served


def test_a_person_approves_a_call_and_keeps_the_conversation(browser: Any, url: str) -> None:
    page = Page(browser, url)
    page.ask("delete /tmp/report.txt")
    call = page.tool("delete_file")
    call.wait_for()
    # The call and its arguments are shown in its element, waiting for a person.
    assert call.get_attribute("data-role") == "tool"
    call.locator(".tool-args", has_text="/tmp/report.txt").wait_for()
    approve = call.locator('[data-action="approve"]')
    approve.wait_for()
    assert call.locator('[data-action="deny"]').is_visible()
    assert ui_support.deleted == []
    page.shot("ui-waiting")
    approve.click()
    page.assistant_says("Done: deleted /tmp/report.txt")
    call.locator(".tool-result", has_text="deleted /tmp/report.txt").wait_for()
    assert ui_support.deleted == ["/tmp/report.txt"]
    assert page.page.locator('[data-role="user"]').first.inner_text() == "delete /tmp/report.txt"
    page.idle()
    page.shot("ui-approved")

    # A reload shows the same conversation, and it goes on from there.
    page.page.reload()
    page.assistant_says("Done: deleted /tmp/report.txt")
    page.tool("delete_file").locator(".tool-result", has_text="deleted").wait_for()
    page.ask("lookup abc")
    page.assistant_says("Done: value-of-abc")
    assert page.problems == []
    page.close()


def test_a_denial_with_a_reason_and_an_image(browser: Any, url: str) -> None:
    page = Page(browser, url)
    page.ask("delete /etc/passwd")
    call = page.tool("delete_file")
    call.locator('[data-action="deny"]').wait_for()
    call.locator("input").fill("not that one")
    call.locator('[data-action="deny"]').click()
    page.assistant_says("Done: The user denied the call to `delete_file`: not that one")
    assert ui_support.deleted == []
    page.idle()
    page.ask("photo")
    image = page.tool("photo").locator(".tool-result img")
    image.wait_for()
    assert image.get_attribute("src") == "data:image/png;base64," + ui_support.image_b64()
    assert page.page.evaluate("(i) => i.naturalWidth", image.element_handle()) == 2
    page.idle()
    page.shot("ui-image")
    assert page.problems == []
    page.close()


def test_hostile_text_is_shown_as_text(browser: Any, url: str) -> None:
    page = Page(browser, url)
    page.ask(f"echo {ui_support.EVIL}")
    page.assistant_says("Done: <img")
    result = page.tool("echo").locator(".tool-result")
    assert result.inner_text() == ui_support.EVIL
    # Nothing the tool or the model said became an element or ran.
    assert page.page.locator("main img").count() == 0
    assert page.page.title() == "Files"
    assert page.page.locator('[data-role="user"]').inner_text() == f"echo {ui_support.EVIL}"
    assert page.problems == []
    page.close()


def _asks(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
    if isinstance(messages[-1], ToolResultMessage):
        return AiMessage(text=f"The server heard: {messages[-1].text}")
    return AiMessage(tool_calls=[ToolCall(id="q1", name="ask", arguments="{}")])


def test_a_server_s_question_is_a_form(browser: Any) -> None:
    with tempfile.TemporaryFile("w+") as errlog:
        with MCPServer.stdio(sys.executable, [FIXTURE_SERVER], errlog=errlog) as mcp:
            app = create_app(ToolService([mcp]), FunctionModel(_asks))
            with ui_support.served(app) as url:
                page = Page(browser, url)
                page.ask("who am I?")
                field = page.tool("ask").locator('input[name="name"]')
                field.wait_for()
                page.tool("ask").locator("label", has_text="name").wait_for()
                page.shot("ui-question")
                field.fill("Ada")
                page.tool("ask").locator('[data-action="answer"]').click()
                page.assistant_says("The server heard: answer: accept Ada")
                assert page.problems == []
                page.close()


def _goes(messages: Sequence[ChatMessage], parameters: ChatRequestParameters) -> AiMessage:
    if isinstance(messages[-1], ToolResultMessage):
        return AiMessage(text=f"The server heard: {messages[-1].text}")
    return AiMessage(tool_calls=[ToolCall(id="q1", name="go", arguments="{}")])


@pytest.mark.parametrize(
    ("url", "link"),
    [("https://auth.example.com/consent?flow=1", True), ("javascript:alert(1)", False)],
)
def test_a_server_s_url_question_is_a_link_and_a_done_button(
    browser: Any, url: str, link: bool
) -> None:
    # The second URL never reaches the page as a question: the client declines it at once.
    step = {"ask": {"mode": "url", "message": "Sign in", "url": url, "elicitationId": "e-1"}}
    script = {"tools": [{"name": "go", "inputSchema": {"type": "object"}}], "calls": {"go": [step]}}
    server = MCPServer.stdio(sys.executable, [RAW_SERVER, json.dumps(script)], revision="handshake")
    with server as mcp:
        app = create_app(ToolService([mcp]), FunctionModel(_goes))
        with ui_support.served(app) as served:
            page = Page(browser, served)
            page.ask("sign me in")
            if not link:
                page.assistant_says('The server heard: {"action": "decline"}')
                assert page.page.locator("main a").count() == 0
                assert page.problems == []
                page.close()
                return
            anchor = page.tool("go").locator('a[data-role="url"]')
            anchor.wait_for()
            assert anchor.inner_text() == url
            assert anchor.get_attribute("href") == url
            assert anchor.get_attribute("rel") == "noopener noreferrer"
            page.shot("ui-url-question")
            page.tool("go").locator('[data-action="done"]').click()
            page.assistant_says('The server heard: {"action": "accept"}')
            assert page.problems == []
            page.close()
