"""A small stdio MCP server for tests: notes kept per MCP session, and a tool that kills it.

``remember`` and ``recall`` show whether two calls ran in the same session (the notes of one
session are invisible to another); ``crash`` ends the process mid-call, as a server that dies
would.
"""

from __future__ import annotations

import os
import weakref

from mcp.server.fastmcp import Context, FastMCP

server = FastMCP("notes")
_notes: weakref.WeakKeyDictionary[object, list[str]] = weakref.WeakKeyDictionary()


@server.tool()
def remember(text: str, ctx: Context) -> str:  # type: ignore[type-arg]
    """Keep a note for this session."""
    _notes.setdefault(ctx.session, []).append(text)
    return f"noted ({len(_notes[ctx.session])} in this session)"


@server.tool()
def recall(ctx: Context) -> str:  # type: ignore[type-arg]
    """The notes of this session, one per line."""
    return "\n".join(_notes.get(ctx.session, [])) or "(no notes)"


@server.tool()
def crash() -> str:
    """End the server process at once."""
    os._exit(1)


if __name__ == "__main__":
    server.run("stdio")
