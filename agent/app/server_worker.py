"""One worker process of a LangGraph Server over PostgreSQL and Redis (``langgraph-runtime-pg``).

``langgraph dev`` keeps threads, runs and the run queue in one process's memory; to run more than
one process, the server needs a runtime that keeps them in PostgreSQL and wakes workers through
Redis. ``langgraph-runtime-pg`` is such a runtime for stock, open-source ``langgraph-api``; each
process started by this module serves the API and takes runs off the shared queue, so start as
many as you like (on one machine or several) against the same ``DATABASE_URI`` and ``REDIS_URI``
and put a load balancer in front. A run whose worker dies is taken over by another worker once
its heartbeat in Redis expires (``LG_BG_JOB_HEARTBEAT`` seconds, default 120).

It needs its own environment (docs/deploying.md): runtime-pg 0.11.1.post1
pins ``langgraph-api==0.11.1``, older than the one ``langgraph dev`` uses here.

    DATABASE_URI=postgresql://... REDIS_URI=redis://... \\
        python -m agent.app.server_worker --port 8123 --jobs 10

The server is configured from ``langgraph.json`` the way LangGraph's own container images are, by
environment (``LANGSERVE_GRAPHS``, ``LANGGRAPH_AUTH``, ``LANGGRAPH_HTTP``, ``LANGGRAPH_STORE``),
and the variables of its ``env`` file are added unless the environment already sets them. Unlike
``langgraph dev`` it does not mark itself a development server, so langgraph-api's Studio
shortcut (a request with ``x-auth-scheme: langsmith`` let in without the authenticate handler)
is off. The two runtime work-arounds it needs are in ``agent.app.runtime_pg_shims``.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

RUNTIME_EDITION = "pg"
DEFAULT_JOBS = 10


def server_environment(
    config_path: Path, *, jobs: int, environ: Mapping[str, str]
) -> dict[str, str]:
    """The variables that make stock langgraph-api serve ``config_path`` on runtime-pg.

    ``environ`` wins over the ``env`` file of ``langgraph.json``; ``DATABASE_URI`` and
    ``REDIS_URI`` must be in one of them.
    """
    config: dict[str, Any] = json.loads(config_path.read_text())
    folder = config_path.parent
    settings: dict[str, str] = {}
    env = config.get("env")
    if isinstance(env, str) and (folder / env).is_file():
        from dotenv import dotenv_values

        settings.update({k: v for k, v in dotenv_values(folder / env).items() if v is not None})
    elif isinstance(env, dict):
        settings.update({str(k): str(v) for k, v in env.items()})
    settings.update(environ)
    missing = [name for name in ("DATABASE_URI", "REDIS_URI") if not settings.get(name)]
    if missing:
        raise SystemExit(
            f"Set {' and '.join(missing)}: the workers share one PostgreSQL "
            "(DATABASE_URI=postgresql://...) and one Redis (REDIS_URI=redis://...)."
        )
    settings.update(
        LANGGRAPH_RUNTIME_EDITION=RUNTIME_EDITION,
        LANGSERVE_GRAPHS=json.dumps(config["graphs"]),
        N_JOBS_PER_WORKER=str(jobs),
    )
    for key, variable in (
        ("auth", "LANGGRAPH_AUTH"),
        ("http", "LANGGRAPH_HTTP"),
        ("store", "LANGGRAPH_STORE"),
    ):
        if config.get(key):
            settings[variable] = json.dumps(config[key])
    return settings


def main(argv: Sequence[str] | None = None) -> None:
    """Serve ``langgraph.json`` as one worker until stopped (SIGTERM or Ctrl-C)."""
    parser = argparse.ArgumentParser(prog="python -m agent.app.server_worker", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8123)
    parser.add_argument("--config", type=Path, default=Path("langgraph.json"))
    parser.add_argument(
        "--jobs", type=int, default=DEFAULT_JOBS, help="runs this worker executes at once"
    )
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args(argv)
    config_path = args.config.resolve()
    os.environ.update(server_environment(config_path, jobs=args.jobs, environ=os.environ))
    # Paths in langgraph.json are relative to its folder, as under `langgraph dev`.
    os.chdir(config_path.parent)

    from agent.app import runtime_pg_shims

    runtime_pg_shims.apply()

    import uvicorn

    uvicorn.run(
        "langgraph_api.server:app",
        host=args.host,
        port=args.port,
        lifespan="on",
        access_log=False,
        log_level=args.log_level,
    )


if __name__ == "__main__":
    main()
