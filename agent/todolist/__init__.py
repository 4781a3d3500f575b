"""Seed 001's session todo list, served over MCP by ``turnplan mcp``.

Logic and wiring live apart, each module importing only the ones above it in this list:
``schemas`` (the seed's tool schemas and data model), ``validation`` (the seed's rules on a whole
list, and the error envelope), ``sessions`` (one list per open MCP session), ``mcp_server`` (the
two tools on the SDK's low-level server), ``transports`` (stdio and streamable HTTP). Nothing here
imports the supervisor graph.
"""
