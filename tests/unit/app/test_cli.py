"""The ``turnplan`` command's dispatch, without starting a model."""

from __future__ import annotations

import socket

import pytest

from agent.app.cli import main
from tests.fakes import pretend_llama_cpp_is_missing


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


@pytest.mark.parametrize("option", [["--port", "8001"], ["--host", "0.0.0.0"]])
def test_mcp_http_options_need_the_http_transport(
    option: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["mcp", *option]) == 2
    assert f"{option[0]} needs --transport http" in capsys.readouterr().err


def test_mcp_on_a_taken_port_exits_with_one_line_naming_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]

        assert main(["mcp", "--transport", "http", "--port", str(port)]) == 1

    err = capsys.readouterr().err
    assert f"turnplan mcp: cannot listen on 127.0.0.1:{port}" in err
    assert "Traceback" not in err
