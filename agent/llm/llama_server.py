"""``python -m agent.llm.llama_server``: llama-cpp-python's OpenAI-compatible server, made safe on
every CPU by loading the model without llama.cpp's extra buffer types.

Why this exists: a natively built llama.cpp repacks the weights at load time into "extra"
CPU buffer types (``CPU_REPACK``, and on Intel Xeons with AMX the ``AMX`` buffer). The AMX path
dies with a general protection fault in ``libggml-cpu`` at the first inference (llama.cpp issue
20824), which turned turnplan's first command into ``model call failed: Connection error``.
``llama_model_params.use_extra_bufts = False`` skips repacking altogether and avoided the crash.
A build flag is not enough: pip caches the wheel it built and reuses it on the next install, so
the fix has to live in the process that loads the model, whatever wheel it runs.

``llama_cpp.Llama`` has no argument for that field, so the launcher wraps llama.cpp's single
model-loading entry point (``llama_model_load_from_file``) to clear it on every load, then starts
the stock server app (same command-line options as ``python -m llama_cpp.server``, same HTTP
API). After loading it prints one line with the value read back from the loaded model's params,
and llama.cpp's own load log (``... model buffer size``) names every buffer it allocated, so a
test can check both.

Nothing here runs at import time; ``llama_cpp`` is imported only by ``main``/``disable_...``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, cast

LOADED_LINE_PREFIX = "turnplan-llama-server: model loaded with use_extra_bufts="
"""Start of the line printed once the model is loaded (followed by the value read back)."""

_MARK = "_turnplan_no_extra_bufts"


def disable_extra_buffer_types() -> None:
    """Make every model this process loads skip llama.cpp's extra buffer types (no repacking).

    Wraps ``llama_cpp.llama_cpp.llama_model_load_from_file``, which every ``Llama`` (and so the
    server's model proxy, including a later reload) loads weights through; the wrapper clears
    ``use_extra_bufts`` on the params it is given, so the loaded ``Llama.model_params`` reads it
    back as False. Idempotent.
    """
    import llama_cpp.llama_cpp as llama_lib

    load: Callable[[bytes, Any], Any] = llama_lib.llama_model_load_from_file
    if getattr(load, _MARK, False):
        return

    def load_without_extra_buffer_types(path_model: bytes, params: Any) -> Any:
        params.use_extra_bufts = False
        return load(path_model, params)

    setattr(load_without_extra_buffer_types, _MARK, True)
    llama_lib.llama_model_load_from_file = load_without_extra_buffer_types


def register_tool_call_handlers() -> None:
    """Make the chat formats of ``agent.llm.tool_call_handlers`` available to the server
    (``--chat_format turnplan-gguf-template-tools`` / ``turnplan-chatml-tools``). Idempotent."""
    from llama_cpp import llama_chat_format

    from agent.llm.embedded_models import CHATML_TOOLS, GGUF_TEMPLATE_TOOLS
    from agent.llm.tool_call_handlers import chatml_tools, gguf_template_tools

    # Untyped singleton, and our handlers take the wire's plain dicts rather than its TypedDicts.
    registry: Any = llama_chat_format.LlamaChatCompletionHandlerRegistry
    registry().register_chat_completion_handler(
        GGUF_TEMPLATE_TOOLS, gguf_template_tools, overwrite=True
    )
    registry().register_chat_completion_handler(CHATML_TOOLS, chatml_tools, overwrite=True)


def loaded_use_extra_bufts() -> bool | None:
    """``use_extra_bufts`` of the model the server app holds, or None if none is loaded."""
    from llama_cpp.server import app as server_app

    proxy = getattr(server_app, "_llama_proxy", None)
    model = getattr(proxy, "_current_model", None)
    if model is None:
        return None
    return bool(model.model_params.use_extra_bufts)


def main(argv: Sequence[str] | None = None) -> None:
    """Parse ``llama_cpp.server``'s options, load the model without extra buffer types, serve."""
    import uvicorn
    from llama_cpp.server.app import create_app
    from llama_cpp.server.cli import add_args_from_model, parse_model_from_args
    from llama_cpp.server.settings import ModelSettings, ServerSettings, Settings

    parser = argparse.ArgumentParser(
        prog="python -m agent.llm.llama_server",
        description="llama.cpp's OpenAI-compatible server, weights loaded without repacking.",
    )
    add_args_from_model(parser, Settings)
    args = parser.parse_args(argv)
    # parse_model_from_args is annotated as returning the class it is given, not an instance.
    server_settings = cast(ServerSettings, parse_model_from_args(ServerSettings, args))
    model_settings = [cast(ModelSettings, parse_model_from_args(ModelSettings, args))]

    disable_extra_buffer_types()
    register_tool_call_handlers()
    app = create_app(server_settings=server_settings, model_settings=model_settings)
    print(f"{LOADED_LINE_PREFIX}{loaded_use_extra_bufts()}", file=sys.stderr, flush=True)
    uvicorn.run(
        app,
        host=server_settings.host,
        port=int(server_settings.port),
        ssl_keyfile=server_settings.ssl_keyfile,
        ssl_certfile=server_settings.ssl_certfile,
    )


if __name__ == "__main__":
    # llama_cpp.server reads a CONFIG_FILE from the environment and would then bypass the
    # options above (and our settings); turnplan never uses one.
    os.environ.pop("CONFIG_FILE", None)
    main()
