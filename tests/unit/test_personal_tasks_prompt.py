"""The prompt section the supervisor includes for the personal-task tools."""

from __future__ import annotations

from agent.errors import ErrorCode
from agent.tools.tasks import TASK_TOOL_FUNCTIONS
from prompts import load_prompt


def test_the_prompt_names_every_task_tool_and_error_code() -> None:
    prompt = load_prompt("personal_tasks")
    for function in TASK_TOOL_FUNCTIONS:
        assert f"`{function.__name__}`" in prompt
    for code in ErrorCode:
        if code is ErrorCode.WORKER_ERROR:  # only `delegate` returns it: see delegation.md
            assert code.value in load_prompt("delegation")
            continue
        if code is ErrorCode.MCP_ERROR:  # only MCP tools return it: see mcp_tools.md
            assert code.value in load_prompt("mcp_tools")
            continue
        if code is ErrorCode.NOT_RUN:  # any tool may return it: see supervisor.md
            assert code.value in load_prompt("supervisor")
            continue
        assert code.value in prompt
