"""The curated public API: `__all__` sorted, complete, and every name documented."""

from __future__ import annotations

import subprocess
import sys
import typing

import agentforge_typed


def test_all_is_sorted_and_unique() -> None:
    names = agentforge_typed.__all__
    assert names == sorted(set(names))


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
        "agentforge_typed.cli",
    ]
    code = (
        "import sys, agentforge_typed\n"
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
    from agentforge_typed import providers, tools

    assert "render_schema" not in agentforge_typed.__all__
    assert "ToolDecorator" not in agentforge_typed.__all__
    assert agentforge_typed.render_schema is providers.render_schema
    assert agentforge_typed.ToolDecorator is tools.ToolDecorator
    for module in (providers, tools):
        for name in module.__all__:
            value = getattr(module, name)
            # As above: type aliases carry no docstring of their own.
            if typing.get_origin(value) is None and (isinstance(value, type) or callable(value)):
                assert (value.__doc__ or "").strip(), (module.__name__, name)
