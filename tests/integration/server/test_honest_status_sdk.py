"""An honest turn status over ``langgraph dev`` and the real ``langgraph_sdk`` client (issue 40
§4): a turn whose item was cancelled because its action failed ends ``incomplete``; a turn whose
plan the user rejected ends ``answered`` (the user's choice is not a failure). Each row says who
cancelled it."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph_sdk import get_client

from tests.dev_server import DevServer
from tests.http_asking import approval_aware_model, gives_up_on_a_missing_task

pytestmark = pytest.mark.integration


def request(text: str) -> Any:
    return {"messages": [{"role": "user", "content": text}]}


async def test_a_failed_item_is_incomplete_and_a_rejected_plan_answered_over_the_sdk(
    dev_server: DevServer,
) -> None:
    async with get_client(url=dev_server.url) as client:
        dev_server.model.respond_with(gives_up_on_a_missing_task)
        failed = await client.threads.create()
        await client.runs.wait(
            failed["thread_id"],
            "supervisor",
            input=request("tick off ghost"),
        )
        failed_state = await client.threads.get_state(failed["thread_id"])

        dev_server.model.respond_with(approval_aware_model)
        rejected = await client.threads.create()
        await client.runs.wait(
            rejected["thread_id"],
            "supervisor",
            input=request("add bread and milk"),
            context={"approve_plan": True},
        )
        await client.runs.wait(
            rejected["thread_id"],
            "supervisor",
            command={"resume": {"action": "reject", "reason": "not today"}},
        )
        rejected_state = await client.threads.get_state(rejected["thread_id"])

    values: Any = failed_state["values"]
    assert values["turnStatus"] == "incomplete", dev_server.log_tail()
    (row,) = values["todos"]
    assert (row["status"], row["cancelledBy"]) == ("cancelled", "agent")
    answer = values["messages"][-1]["content"]
    assert "- Complete ghost: No task found matching 'ghost'." in answer

    values = rejected_state["values"]
    assert values["turnStatus"] == "answered", dev_server.log_tail()
    assert [(r["status"], r["cancelledBy"]) for r in values["todos"]] == [("cancelled", "user")] * 2
    assert "Not done" not in values["messages"][-1]["content"]
