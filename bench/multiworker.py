"""``python -m bench.multiworker``: turnplan on a LangGraph Server with several worker processes.

    python -m bench.multiworker setup      # the workers' environment, .turnplan/mw-venv
    python -m bench.multiworker run        # turns per minute, 1 and 2 workers, 40 and 120 turns,
                                           # then a kill -9 of one of two workers mid-turn

Needs ``redis-server`` on the PATH (``apt-get install -y redis-server``); PostgreSQL comes from
``pgserver``. See ``tests/multiworker.py`` for the cluster and the stub model.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from tests.multiworker import MW_VENV, setup_venv


def main(argv: Sequence[str] | None = None) -> None:
    """Dispatch the subcommand."""
    parser = argparse.ArgumentParser(prog="python -m bench.multiworker")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("setup", help=f"create {MW_VENV} (langgraph-runtime-pg and this project)")
    args = parser.parse_args(argv)
    if args.command == "setup":
        setup_venv(quiet=False)
        print(f"ready: {MW_VENV}")


if __name__ == "__main__":
    main()
