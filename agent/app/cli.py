"""The ``turnplan`` console command.

One function registers each subcommand (its parser, and the handler it dispatches to), so adding
one (``run``) is a new ``add_*`` function in ``SUBCOMMANDS`` and nothing else changes.

Each handler imports what its command needs when it runs: ``turnplan mcp``, which an MCP client
starts for every session, then loads the MCP server alone (about 1 s) rather than the supervisor
and its model stack too (about 3 s more).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from agent.context import BUILTIN_TOOLSETS

if TYPE_CHECKING:
    from agent.todolist.mcp_server import TodoListServer

    # argparse gives the object ``add_subparsers`` returns no public, runtime-generic name.
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]


def add_serve_model(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "serve-model",
        help="run the embedded local model as an OpenAI-compatible server until Ctrl-C",
        description=(
            "Assemble an embedded model (once) and serve it with llama.cpp on 127.0.0.1, so "
            "several turnplan processes, or any OpenAI client, can share it."
        ),
    )
    parser.add_argument(
        "--port", type=int, default=None, help="port to listen on (default: a free one)"
    )
    parser.add_argument(
        "--model",
        default="local",
        help="local (the default embedded model) or local:<name>, see docs/models.md",
    )
    parser.set_defaults(
        handler=lambda args: asyncio.run(serve_model(port=args.port, model=args.model))
    )


def add_run(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "run",
        help="run one turn of the supervisor and print its plan as it moves",
        description=(
            "Run one user turn: the supervisor plans it as TODO rows, drains them, and answers. "
            "With no model configured this uses the embedded local model (no API key, no "
            "network); see --model."
        ),
    )
    parser.add_argument(
        "request",
        nargs="?",
        help='what you ask the agent, e.g. "Plan my Saturday: ..." (not with --resume)',
    )
    parser.add_argument(
        "--model",
        default=None,
        help='"local", "openai:<model>" or any "<provider>:<model>" of LangChain\'s '
        "init_chat_model, e.g. anthropic:claude-sonnet-4-5 (default: TURNPLAN_MODEL, else local)",
    )
    parser.add_argument(
        "--database",
        default=None,
        help="SQLAlchemy async URL (default: TURNPLAN_DATABASE_URL, else .turnplan/turnplan.db)",
    )
    parser.add_argument(
        "--plan",
        choices=["auto", "always", "off"],
        default="auto",
        help="always: make the first model call write the plan (create_todo); auto: let the "
        "model decide (default); off: no plan tools at all",
    )
    parser.add_argument("--user", default="local-user", help="user whose tasks the turn manages")
    parser.add_argument(
        "--conversation", default=None, help="conversation id to file the turn under"
    )
    parser.add_argument(
        "--toolset",
        dest="toolsets",
        action="append",
        choices=BUILTIN_TOOLSETS,
        default=None,
        help="a built-in toolset to bind, repeatable (default: personal_tasks); "
        "conversation_tasks keeps a task list of the conversation in .agents/tasks/",
    )
    parser.add_argument(
        "--approve-plan",
        action="store_true",
        help="show the plan and ask for your approval before any of it is worked",
    )
    parser.add_argument(
        "--thread",
        default=None,
        help="continue this conversation thread (kept in the database; printed by every run)",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="finish the interrupted turn of --thread (its process died) instead of a new one",
    )
    parser.set_defaults(handler=lambda args: asyncio.run(run_command(args)))


RUN_EXIT_CODES = {
    "answered": 0,
    "failed": 1,
    "budget_exhausted": 3,
    "stalled": 4,
    "no_answer": 5,
    "paused": 6,
    "incomplete": 7,
}
"""``turnplan run``'s exit status by how the turn ended: 0 only for an answer, so a script can
trust it; 2 is a usage error (options that do not go together, as argparse's own); any status
not listed (none is expected) exits 1, like a failure."""

RUN_STATUS_MEANINGS = {
    "failed": "the model or the database failed, the audit of the answer failed, or there was "
    "nothing to run (the message above says which)",
    "budget_exhausted": "the turn used its limit of model calls before its plan was done (the "
    "message above lists what was and was not done)",
    "stalled": "the model kept answering instead of working on the open plan items (the message "
    "above lists what was and was not done)",
    "no_answer": "the model replied with nothing, no text and no tool call, also when asked again "
    "(the message above gives the plan's state)",
    "paused": "the turn waits for your answer to its question",
    "incomplete": "part of the request was not done: a plan item was cancelled because it "
    "failed or could not be done, the action failed, or the audit of the answer found parts "
    "not done (the message above says what and why)",
}
"""The one line ``turnplan run`` prints on standard error when the turn did not answer."""


def run_exit_status(status: str) -> int:
    """The exit status of ``turnplan run`` for a turn that ended with ``status``."""
    return RUN_EXIT_CODES.get(status, 1)


def why_not_answered(status: str) -> str:
    """One line naming the turn's status and what it means (for any status but answered)."""
    meaning = RUN_STATUS_MEANINGS.get(status, "the turn did not end with an answer")
    return f"turnplan run: turn {status} (exit {run_exit_status(status)}): {meaning}."


async def run_command(args: argparse.Namespace) -> int:
    """Exit 0 only when the turn ended with an answer; otherwise the status's own code
    (``RUN_EXIT_CODES``: 1 failed, also for bad settings and nothing to resume; 3
    budget_exhausted, 4 stalled, 5 no_answer, 6 paused, 7 incomplete) with one line on standard
    error saying why."""
    from agent.app.run_turn import run_turn
    from agent.errors import ConfigurationError
    from agent.llm.chat_models import close_chat_models
    from agent.llm.local_model import stop_shared_local_model_server
    from prompts import PromptFolderError

    stopped_by = _cancel_on_signals()
    if args.resume and not args.thread:
        print("turnplan run: --resume needs --thread ID (the thread to finish).", file=sys.stderr)
        return 2
    if not args.resume and not args.request:
        print('turnplan run: say what you want done, e.g. turnplan run "..."', file=sys.stderr)
        return 2
    try:
        report = await run_turn(
            args.request,
            model=args.model,
            database_url=args.database,
            user_id=args.user,
            conversation_id=args.conversation,
            thread_id=args.thread,
            resume=args.resume,
            planning=args.plan,
            toolsets=args.toolsets,
            approve_plan=args.approve_plan,
        )
    except (ConfigurationError, PromptFolderError) as error:  # the graph checks the prompts
        print(f"turnplan run: {error}", file=sys.stderr)
        return 1
    except asyncio.CancelledError:
        if not stopped_by:
            raise
        print(
            f"turnplan run: stopped by {stopped_by[0].name}; the turn can be finished with "
            "--thread ID --resume (the thread is printed above).",
            file=sys.stderr,
        )
        return 128 + stopped_by[0]
    finally:
        await close_chat_models()
        await stop_shared_local_model_server()
    code = run_exit_status(report.status)
    if code:
        print(why_not_answered(report.status), file=sys.stderr, flush=True)
    return code


def _cancel_on_signals() -> list[signal.Signals]:
    """Make SIGINT and SIGTERM cancel the running command, so its ``finally`` blocks stop what
    it started (the model server, MCP sessions and servers) before the process exits; SIGTERM's
    default would end the process with none of that. Returns the list the first signal is
    recorded in.

    After the first, both signals get their defaults back (KeyboardInterrupt, termination): a
    second one ends the process at once, should the clean-up hang. Its children end even then:
    see ``agent.child_process``."""
    loop = asyncio.get_running_loop()
    command = asyncio.current_task()
    assert command is not None
    received: list[signal.Signals] = []

    def stop(signum: signal.Signals) -> None:
        received.append(signum)
        for handled in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(handled)  # back to KeyboardInterrupt and SIG_DFL
        command.cancel()

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop, signum)
    return received


DEFAULT_MCP_PORT = 8000


def add_mcp(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "mcp",
        help="serve the session todo list (todolist__get, todolist__set) over MCP",
        description=(
            "Serve seed 001's todolist__get and todolist__set tools: one todo list per MCP "
            "session, forgotten when the session ends. stdio by default (an MCP client starts "
            "this command); --transport http serves streamable HTTP at http://HOST:PORT/mcp."
        ),
    )
    parser.add_argument(
        "--transport",
        choices=["stdio", "http"],
        default="stdio",
        help="stdio: one session on stdin/stdout (default); http: streamable HTTP, many sessions",
    )
    parser.add_argument(
        "--host", default=None, help="address to listen on with http (default: 127.0.0.1)"
    )
    parser.add_argument(
        "--port",
        type=int,
        default=None,
        help=f"port to listen on with http (default: {DEFAULT_MCP_PORT}; 0 picks a free one)",
    )
    parser.add_argument(
        "--idle-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="with http, end a session (and forget its list) after this long without a request "
        "(default: 1800)",
    )
    parser.set_defaults(handler=mcp_command)


def mcp_command(args: argparse.Namespace) -> int:
    """Exit 0 when the client or a signal ended the server, 1 if it could not listen, 2 for
    options that do not go together."""
    http_only = {"--host": args.host, "--port": args.port, "--idle-timeout": args.idle_timeout}
    if args.transport == "stdio":
        given = [flag for flag, value in http_only.items() if value is not None]
        if given:
            print(f"turnplan mcp: {', '.join(given)} needs --transport http.", file=sys.stderr)
            return 2
    if args.idle_timeout is not None and not 0 < args.idle_timeout < float("inf"):
        print("turnplan mcp: --idle-timeout must be a positive number of seconds.", file=sys.stderr)
        return 2
    from agent.todolist.mcp_server import build_server
    from agent.todolist.sessions import SessionLists
    from agent.todolist.transports import serve_stdio

    server = build_server(SessionLists())
    if args.transport == "stdio":
        # stdout carries the protocol; nothing else may be printed there.
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve_stdio(server))
        return 0
    return asyncio.run(
        serve_mcp_http(
            server,
            host=args.host or "127.0.0.1",
            port=DEFAULT_MCP_PORT if args.port is None else args.port,
            idle_timeout=args.idle_timeout,
        )
    )


async def serve_mcp_http(
    server: TodoListServer, *, host: str, port: int, idle_timeout: float | None
) -> int:
    """Serve until SIGINT/SIGTERM; the URL, then each session opened and closed, go to stderr."""
    from agent.auth import TOKENS_ENV, configured_tokens
    from agent.todolist.transports import DEFAULT_IDLE_TIMEOUT, endpoint_url, listen, serve_http

    try:
        tokens = configured_tokens()
    except ValueError as error:
        print(f"turnplan mcp: {error}", file=sys.stderr)
        return 2
    try:
        sock = listen(host, port)
    except (OSError, OverflowError) as error:
        print(f"turnplan mcp: cannot listen on {host}:{port}: {error}", file=sys.stderr)
        return 1
    # Warnings from the libraries in one format; sessions opened and closed as plain lines.
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    session_log = logging.getLogger("agent.todolist")
    session_log.addHandler(handler)
    session_log.setLevel(logging.INFO)
    session_log.propagate = False
    stop_requested = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop_requested.set)
    print(
        f"Todolist MCP server (streamable HTTP): {endpoint_url(sock)}\n"
        + (f"Bearer tokens required ({TOKENS_ENV}).\n" if tokens else "")
        + "Press Ctrl-C to stop.",
        file=sys.stderr,
        flush=True,
    )
    with sock:
        await serve_http(
            server,
            sock,
            stop=stop_requested,
            idle_timeout=DEFAULT_IDLE_TIMEOUT if idle_timeout is None else idle_timeout,
            tokens=tokens,
        )
    print("Todolist MCP server stopped.", file=sys.stderr, flush=True)
    return 0


SUBCOMMANDS: list[Callable[[Subparsers], None]] = [add_serve_model, add_run, add_mcp]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="turnplan", description="turnplan supervisor agent")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for register in SUBCOMMANDS:
        register(subparsers)
    return parser


async def serve_model(*, port: int | None, model: str = "local") -> int:
    """Serve until SIGINT/SIGTERM; exit status 0 after a requested stop, 1 if the server failed."""
    from agent.llm.embedded_models import embedded_model
    from agent.llm.local_model import MODEL_ALIAS, LocalModelServer
    from agent.llm.model_errors import ModelConfigurationError

    try:
        chosen = embedded_model(model)
    except ModelConfigurationError as error:
        print(f"turnplan serve-model: {error}", file=sys.stderr)
        return 1

    stop_requested = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop_requested.set)
    server = LocalModelServer(port=port, model=chosen)
    print("Starting the local model server (the first start assembles the model)...", flush=True)
    try:
        starting = asyncio.create_task(asyncio.to_thread(server.start))
        stopping = asyncio.create_task(stop_requested.wait())
        await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        if not starting.done():
            # Stopped while the model loads (seconds): stop() makes start() give up now, rather
            # than serve once before stopping.
            await asyncio.shield(asyncio.to_thread(server.stop))
            with contextlib.suppress(ModelConfigurationError):
                await starting
            print("Local model server stopped before it was ready.", flush=True)
            return 0
        base_url = starting.result()
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
