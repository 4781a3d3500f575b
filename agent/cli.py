"""The ``turnplan`` console command.

One function registers each subcommand (its parser, and the handler it dispatches to), so adding
one (``run``) is a new ``add_*`` function in ``SUBCOMMANDS`` and nothing else changes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from agent.local_model import MODEL_ALIAS, LocalModelServer
from agent.model_errors import ModelConfigurationError

if TYPE_CHECKING:
    # argparse gives the object ``add_subparsers`` returns no public, runtime-generic name.
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]


def add_serve_model(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "serve-model",
        help="run the embedded local model as an OpenAI-compatible server until Ctrl-C",
        description=(
            "Assemble the embedded Gemma 3 270M model (once) and serve it with llama.cpp on "
            "127.0.0.1, so several turnplan processes, or any OpenAI client, can share it."
        ),
    )
    parser.add_argument(
        "--port", type=int, default=None, help="port to listen on (default: a free one)"
    )
    parser.set_defaults(handler=lambda args: asyncio.run(serve_model(port=args.port)))


SUBCOMMANDS: list[Callable[[Subparsers], None]] = [add_serve_model]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="turnplan", description="turnplan supervisor agent")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for register in SUBCOMMANDS:
        register(subparsers)
    return parser


async def serve_model(*, port: int | None) -> int:
    """Serve until SIGINT/SIGTERM; exit status 0 after a requested stop, 1 if the server failed."""
    stop_requested = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop_requested.set)
    server = LocalModelServer(port=port)
    print("Starting the local model server (the first start assembles the model)...", flush=True)
    try:
        base_url = await asyncio.to_thread(server.start)
        print(
            f"Local model server ready: {base_url} (model {MODEL_ALIAS!r})\n"
            "Use it from turnplan in another shell:\n"
            f"  TURNPLAN_LOCAL_MODEL_URL={base_url}\n"
            "or as any OpenAI-compatible server:\n"
            f"  OPENAI_BASE_URL={base_url} TURNPLAN_MODEL=openai:{MODEL_ALIAS}\n"
            "Press Ctrl-C to stop.",
            flush=True,
        )
        while server.running and not stop_requested.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop_requested.wait(), timeout=1.0)
    except ModelConfigurationError as error:
        print(f"turnplan serve-model: {error}", file=sys.stderr)
        return 1
    finally:
        await asyncio.shield(asyncio.to_thread(server.stop))
    if stop_requested.is_set():
        print("Local model server stopped.", flush=True)
        return 0
    print(
        f"turnplan serve-model: the server exited unexpectedly. Its last output:\n"
        f"{server.output_tail()}",
        file=sys.stderr,
    )
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler
    return handler(args)


if __name__ == "__main__":
    sys.exit(main())
