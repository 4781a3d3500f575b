"""The ``turnplan`` command's dispatch, without starting a model."""

from __future__ import annotations

import pytest

from agent.cli import main
from tests.unit.test_local_model_setup import pretend_llama_cpp_is_missing


def test_help_lists_serve_model(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    assert "serve-model" in capsys.readouterr().out


def test_a_command_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main([])
    assert exited.value.code == 2
    assert "COMMAND" in capsys.readouterr().err


def test_serve_model_without_the_extra_exits_with_the_install_command(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pretend_llama_cpp_is_missing(monkeypatch)

    assert main(["serve-model"]) == 1
    assert 'pip install -e ".[local]"' in capsys.readouterr().err
