"""Two work-arounds for ``langgraph-runtime-pg`` 0.11.1.post1 with stock ``langgraph-api`` 0.11.1.

Applied by ``agent.app.server_worker`` in each worker process, after the server's environment is set
and before the server is imported. Each one names the upstream defect; delete it when the runtime
fixes it. Nothing here changes how turnplan behaves, only whether the server starts and accepts
runs at all.

1. **The store is read before the pool exists** (server fails to start). With ``http.app`` in
   ``langgraph.json``, langgraph-api wraps the whole app, lifespan included, in its
   ``EnsureStoreAccessible`` middleware, which asks the runtime for its store on the first ASGI
   message: the lifespan's ``startup``. runtime-pg's ``Store()`` raises until its ``start_pool()``
   has run, and ``start_pool()`` runs inside that very lifespan, so the lifespan dies with
   "Store requires setup_store()/start_pool() first" (uvicorn then logs "ASGI 'lifespan' protocol
   appears unsupported" and serves without a queue). The in-memory runtime builds its store
   without a pool, so ``langgraph dev`` never shows this. The shim lets lifespan messages pass
   the middleware; HTTP requests, which come after startup, still get the store.
2. **Runs cannot be created with custom auth** (every ``runs.create`` answers 500). langgraph-api
   puts the authenticated user into the run's ``config.configurable.langgraph_auth_user`` as a
   ``ProxyUser`` object, and runtime-pg writes the run's kwargs to a JSONB column with
   SQLAlchemy's default ``json.dumps``, which raises "Object of type ProxyUser is not JSON
   serializable". The shim gives runtime-pg's engine langgraph-api's own serializer
   (``langgraph_api.serde.json_dumpb``), which writes the user as its ``dict()``, as the
   server's other stores do.
"""

from __future__ import annotations

import functools
from typing import Any

from langgraph_api.middleware import ensure_store
from langgraph_api.serde import json_dumpb
from starlette.types import Receive, Scope, Send

_APPLIED = False


def apply() -> None:
    """Install both shims (idempotent). Import only after the server's environment is set:
    langgraph-api reads its configuration when first imported."""
    global _APPLIED
    if _APPLIED:
        return
    _let_lifespan_pass_the_store_middleware()
    _serialize_run_kwargs_like_the_server()
    _APPLIED = True


def _let_lifespan_pass_the_store_middleware() -> None:
    """Shim 1: ``EnsureStoreAccessible`` reads the store only for requests, not for lifespan."""
    middleware = ensure_store.EnsureStoreAccessible
    original = middleware.__call__

    async def call(self: Any, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        await original(self, scope, receive, send)

    middleware.__call__ = call


def _json_text(value: Any) -> str:
    """JSON for a JSONB column, with the server's rules for objects (``model_dump``, ``dict``)."""
    text: str = json_dumpb(value).decode()
    return text


def _serialize_run_kwargs_like_the_server() -> None:
    """Shim 2: runtime-pg's engine serializes JSON columns with langgraph-api's serializer."""
    from langgraph_runtime_pg import database  # only installed in the workers' environment

    create_engine = database.create_async_engine

    @functools.wraps(create_engine)
    def create_async_engine(*args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("json_serializer", _json_text)
        return create_engine(*args, **kwargs)

    database.create_async_engine = create_async_engine
