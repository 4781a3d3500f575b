"""Local-model plumbing that needs no model: the missing-extra error and URL handling."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.llm.chat_models import ModelConfigurationError, clear_model_cache, get_chat_model
from agent.llm.embedded_models import model_cache_dir
from agent.llm.local_model import normalize_base_url, require_local_extra
from tests.fakes import pretend_llama_cpp_is_missing


def test_missing_extra_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    pretend_llama_cpp_is_missing(monkeypatch)

    with pytest.raises(ModelConfigurationError) as raised:
        require_local_extra()

    assert 'pip install -e ".[local]"' in str(raised.value)
    assert "llama_cpp" in str(raised.value)


async def test_local_model_without_the_extra_fails_before_any_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TURNPLAN_LOCAL_MODEL_URL", raising=False)
    pretend_llama_cpp_is_missing(monkeypatch)
    clear_model_cache()

    with pytest.raises(ModelConfigurationError, match=r"pip install -e \"\.\[local\]\""):
        await get_chat_model("local", timeout=5, max_retries=0)


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:8000", "http://127.0.0.1:8000/", "http://127.0.0.1:8000/v1/"],
)
def test_running_server_url_may_omit_v1(url: str) -> None:
    assert normalize_base_url(url) == "http://127.0.0.1:8000/v1"


def test_cache_folder_follows_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TURNPLAN_MODEL_CACHE", str(tmp_path / "models"))
    assert model_cache_dir() == tmp_path / "models"
    monkeypatch.delenv("TURNPLAN_MODEL_CACHE")
    assert model_cache_dir() == Path.home() / ".cache" / "turnplan" / "models"
