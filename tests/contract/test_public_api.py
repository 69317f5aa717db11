"""The curated public API: `__all__` is the common path, sorted and documented; every other public
name has a documented home in a sub-package, and every name the top level ever exported still
imports from it."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
import types
import typing
import warnings
from pathlib import Path

import pytest

import agentforge_typed

COMMON_PATH = """
AgentForgeError AiMessage AnthropicChatModel Approval Approved AudioContent BinaryContent
ChatMessage ChatModel ChatRequest ChatRequestParameters ChatResponse Content CustomMessage
DocumentContent Elicitation ElicitationAnswer FakeModel FallbackModel FileContent FinalResultEvent
FunctionModel GeminiChatModel ImageContent MCPServer ModelError ModelRetry OpenAIChatModel
OpenAIResponsesModel OutputValidationError PendingCall RunOptions SystemMessage TextContent
TextDelta Tool ToolArgumentsError ToolCall ToolCallEvent ToolChatResult ToolContext ToolExecution
ToolExecutionError ToolFailed ToolLoopEvent ToolLoopLimitError ToolResultEvent ToolResultMessage
ToolReturn ToolService UnknownToolError UsageLimitExceededError UsageLimits UserMessage
__version__ get_model pending_calls tool
""".split()
"""`agentforge_typed.__all__`: the common path (docs/reference/api.md)."""

EARLIER_ALL = """
AfterToolCall AgentForgeError AiMessage AllModelsFailedError AnthropicChatModel Approval
ApprovalPolicy Approved ArgumentProblem ArgumentsErrorHandler AudioContent BeforeToolCall
BinaryContent Block CallCheck CallDecision CallRule ChatMessage ChatModel ChatRequest
ChatRequestParameters ChatResponse Content ConversationConflictError CustomMessage Dialect
DocumentContent Elicitation ElicitationAnswer ErrorKind ExecutionErrorHandler FakeModel
FallbackModel FileContent FinalResultEvent FinishReason FunctionModel GeminiChatModel Guardrail
GuardrailError GuardrailOutcome HandlerTimeoutError HistoryProcessor HistoryProcessorError
HttpTool ImageContent Instrumentation LocalRedirect MCPAuthorizationError MCPServer MCPTool
MCPToolFilter MemoryCache ModelError ModelFunction ModelProfile ModelRetry OpenAIChatModel
OpenAIResponsesModel OutputCallEvent OutputSpec OutputValidationError PartialArgumentsEvent
PendingCall PendingReason PrepareContext PrepareTools Redact ResponseComplete ResponseFormat
ResultCache ReturnBehavior RunOptions RunOutput SchemaDialectError SchemaTool StoreCache
StreamEvent SubRunEvent SystemMessage TextContent TextDelta ThinkingDelta TokenUsage Tool
ToolAnnotations ToolArgumentsError ToolCall ToolCallDelta ToolCallEvent ToolChatResult ToolChoice
ToolContext ToolExecution ToolExecutionError ToolExecutionResult ToolExecutor ToolFailed ToolLike
ToolLoopEvent ToolLoopLimitError ToolProgressEvent ToolResultEvent ToolResultMessage ToolReturn
ToolSearch ToolSelection ToolServer ToolService ToolSpecification UnknownToolError
UnknownToolHandler UnsupportedFeatureError UsageLimitExceededError UsageLimits UserMessage
__version__ ask_client ask_client_model available_tools_handler call_guardrail
drop_old_tool_results get_model input_guardrail instrument keep_last_rounds list_available_tools
logging_hook max_cost_per_call output_guardrail pending_calls redact_secrets result_guardrail
serve_mcp tool
""".split()
"""`agentforge_typed.__all__` before it was cut to the common path: every name still imports."""

MOVED = {
    "agentforge_typed.loop": """
        AfterToolCall ArgumentsErrorHandler BeforeToolCall Block CallCheck CallDecision CallRule
        ExecutionErrorHandler Guardrail GuardrailError GuardrailOutcome HistoryProcessor
        HistoryProcessorError Instrumentation OutputCallEvent OutputSpec PartialArgumentsEvent
        PendingReason PrepareContext PrepareTools Redact RunOutput SubRunEvent ToolProgressEvent
        ToolSearch ToolSelection UnknownToolHandler available_tools_handler call_guardrail
        drop_old_tool_results input_guardrail instrument keep_last_rounds list_available_tools
        logging_hook max_cost_per_call output_guardrail redact_secrets result_guardrail
    """.split(),
    "agentforge_typed.providers": """
        AllModelsFailedError Dialect FinishReason ModelFunction ModelProfile ResponseComplete
        ResponseFormat SchemaDialectError StreamEvent ThinkingDelta TokenUsage ToolCallDelta
        ToolChoice UnsupportedFeatureError render_schema
    """.split(),
    "agentforge_typed.serving": """
        ToolServer ask_client ask_client_model serve_mcp
    """.split(),
    "agentforge_typed.stores": """
        ConversationConflictError
    """.split(),
    "agentforge_typed.tools": """
        ApprovalPolicy ArgumentProblem ErrorKind HandlerTimeoutError HttpTool LocalRedirect
        MCPAuthorizationError MCPTool MCPToolFilter MemoryCache ResultCache ReturnBehavior
        SchemaTool StoreCache ToolAnnotations ToolDecorator ToolExecutionResult ToolExecutor
        ToolLike ToolSpecification
    """.split(),
}
"""The public home of each name importable from the top but not in its `__all__`: those that left
it (`render_schema` and `ToolDecorator` earlier)."""

PUBLIC_MODULES = (
    "agentforge_typed.loop",
    "agentforge_typed.providers",
    "agentforge_typed.serving",
    "agentforge_typed.stores",
    "agentforge_typed.tools",
)
"""The sub-packages that are the documented homes of the names off the common path."""

API_PAGE = Path(__file__).parents[2] / "docs" / "reference" / "api.md"


def test_all_is_sorted_and_unique() -> None:
    names = agentforge_typed.__all__
    assert names == sorted(set(names))


def test_all_is_the_common_path() -> None:
    assert agentforge_typed.__all__ == COMMON_PATH


def test_every_name_the_top_level_exported_still_imports_from_it_without_a_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in EARLIER_ALL:
            assert getattr(agentforge_typed, name) is not None, name
    # In a fresh interpreter, where nothing is loaded yet: `from ... import` takes the lazy path.
    code = f"from agentforge_typed import {', '.join(EARLIER_ALL)}"
    subprocess.run([sys.executable, "-W", "error", "-c", code], check=True, timeout=60)


def test_each_name_off_the_common_path_is_exported_by_its_home() -> None:
    moved = [name for names in MOVED.values() for name in names]
    assert len(moved) == len(set(moved))  # one home each
    assert set(EARLIER_ALL) - set(COMMON_PATH) <= set(moved)
    for module_name, names in MOVED.items():
        module = importlib.import_module(module_name)
        for name in names:
            assert name in module.__all__, (module_name, name)
            assert getattr(agentforge_typed, name) is getattr(module, name), (module_name, name)
            assert name in dir(agentforge_typed), name


def test_every_name_the_top_level_lists_off_its_all_has_a_home() -> None:
    moved = {name for names in MOVED.values() for name in names}
    listed = {
        name
        for name in dir(agentforge_typed)
        if not name.startswith("_")
        and name not in agentforge_typed.__all__
        and name not in {"TYPE_CHECKING", "Any"}  # the module's own imports
        and not isinstance(getattr(agentforge_typed, name), types.ModuleType)
    }
    assert listed == moved


def test_a_deprecated_name_says_where_its_replacement_lives() -> None:
    with pytest.warns(
        DeprecationWarning,
        match=r"use ArgumentProblem \(the same class, from "
        r"agentforge_typed\.tools\)",
    ):
        agentforge_typed.ArgumentError  # noqa: B018
    with pytest.warns(DeprecationWarning, match=r"use UsageLimitExceededError \(the same class\)"):
        agentforge_typed.UsageLimitExceeded  # noqa: B018


def test_no_name_is_exported_from_two_public_homes() -> None:
    seen: dict[str, str] = dict.fromkeys(agentforge_typed.__all__, "agentforge_typed")
    for module_name in PUBLIC_MODULES:
        for name in importlib.import_module(module_name).__all__:
            assert name not in seen, (name, seen[name], module_name)
            seen[name] = module_name


@pytest.mark.parametrize("module_name", ["agentforge_typed", *PUBLIC_MODULES])
def test_every_public_name_is_on_the_api_page(module_name: str) -> None:
    page = API_PAGE.read_text()
    section = page.split(f"## `{module_name}`", 1)
    assert len(section) == 2, f"docs/reference/api.md has no section for {module_name}"
    listed = set(re.findall(r"`(\w+)`", section[1].split("\n## ", 1)[0]))
    missing = sorted(set(importlib.import_module(module_name).__all__) - listed)
    assert missing == [], (module_name, missing)


def test_every_exported_name_exists() -> None:
    for name in agentforge_typed.__all__:
        assert hasattr(agentforge_typed, name), name


def test_every_exported_class_and_function_has_a_docstring() -> None:
    undocumented = []
    for name in agentforge_typed.__all__:
        value = getattr(agentforge_typed, name)
        # Type aliases (`Callable[...]`) carry no docstring of their own: the docs describe them.
        # (On Python 3.10 `isinstance(Callable[[int], str], type)` is true.)
        if typing.get_origin(value) is None and (isinstance(value, type) or callable(value)):
            if not (value.__doc__ or "").strip():
                undocumented.append(name)
    assert undocumented == []


def test_import_defers_what_a_program_may_not_use() -> None:
    deferred = [
        # pydantic loads its plugin registry with the first validator it builds: the contract's
        # models build theirs at first use, not at import.
        "pydantic.plugin._loader",
        "asyncio",
        "mcp",
        "httpx",
        "jsonschema",
        "agentforge_typed.providers.openai",
        "agentforge_typed.providers._dialects",
        "agentforge_typed.loop._tracing",
        "agentforge_typed.tools._http",
        "agentforge_typed.tools.mcp._server",
        "agentforge_typed.serving._server",
        "agentforge_typed.cli",
    ]
    code = (
        # The public homes load their names on first use too.
        "import sys, agentforge_typed\n"
        "import agentforge_typed.loop, agentforge_typed.providers, agentforge_typed.serving\n"
        "import agentforge_typed.tools\n"
        f"loaded = [m for m in {deferred!r} if m in sys.modules]\n"
        "assert not loaded, loaded\n"
        "from agentforge_typed import OpenAIChatModel, HttpTool\n"
        "assert 'httpx' in sys.modules and 'jsonschema' in sys.modules\n"
        "assert 'OpenAIChatModel' in dir(agentforge_typed)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_a_blocking_run_never_loads_asyncio() -> None:
    code = (
        "import sys\n"
        "from agentforge_typed import AiMessage, FunctionModel, ToolCall, ToolService, tool\n"
        "@tool\n"
        "def add(a: int, b: int) -> int:\n"
        "    return a + b\n"
        "def script(messages, parameters):\n"
        "    if len(messages) > 1:\n"
        "        return AiMessage(text=messages[-1].text)\n"
        "    call = ToolCall(id='c1', name='add', arguments='{\"a\": 2, \"b\": 3}')\n"
        "    return AiMessage(tool_calls=[call])\n"
        "assert ToolService([add]).chat(FunctionModel(script), '2 + 3?').text == '5'\n"
        "assert 'asyncio' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_unknown_attribute_is_an_attribute_error() -> None:
    import pytest

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        agentforge_typed.nope  # type: ignore[attr-defined]  # noqa: B018


def test_plumbing_lives_in_documented_submodules_and_stays_importable() -> None:
    from agentforge_typed import loop, providers, serving, tools

    assert "render_schema" not in agentforge_typed.__all__
    assert "ToolDecorator" not in agentforge_typed.__all__
    assert agentforge_typed.render_schema is providers.render_schema
    assert agentforge_typed.ToolDecorator is tools.ToolDecorator
    for module in (loop, providers, serving, tools):
        for name in module.__all__:
            value = getattr(module, name)
            # As above: type aliases carry no docstring of their own.
            if typing.get_origin(value) is None and (isinstance(value, type) or callable(value)):
                assert (value.__doc__ or "").strip(), (module.__name__, name)
