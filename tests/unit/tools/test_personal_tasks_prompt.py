"""The prompt section the supervisor includes for the personal-task tools."""

from __future__ import annotations

from agent.errors import ErrorCode
from agent.tools.personal_tasks import TASK_TOOL_FUNCTIONS
from prompts import load_prompt


def test_the_prompt_names_every_task_tool() -> None:
    prompt = load_prompt("personal_tasks")
    for function in TASK_TOOL_FUNCTIONS:
        assert f"`{function.__name__}`" in prompt


def test_error_handling_is_taught_once_through_each_errors_suggestion() -> None:
    """Every tool error carries a ``suggestion`` (``tests/integration/seeds/test_task_tools.py``
    checks the task tools'); the supervisor prompt says to follow it, so no section repeats a rule
    per code on every call. Only codes whose handling is more than a suggestion are named where
    their tools are described."""
    assert "`suggestion`" in load_prompt("supervisor")
    assert ErrorCode.WORKER_ERROR.value in load_prompt("delegation")
    assert ErrorCode.MCP_ERROR.value in load_prompt("mcp_tools")
