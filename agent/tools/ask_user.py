"""``ask_user``: a question to the user in the middle of a turn, through a LangGraph interrupt.

The drain guarantee sends a model back to work when it answers with plan items open; a question
to the user is not such an answer. The tool pauses the run with ``interrupt()`` (Studio shows it;
rows, budget and history stay as they are) and returns the user's answer as its result when the
run is resumed with ``Command(resume=<answer>)``, so the same turn goes on.

The interrupt value is ``{"type": "question", "question", "options", "todo"}``, ``todo`` being
the plan item in progress (or null), plus LangChain's ``HITLRequest`` keys for the action
``ask_user`` with ``args`` ``{"question", "options", "answer": ""}`` (``agent.turn.review``).
The answer, in LangChain's form or the short one (``agent.turn.question.answer_of``):

- ``{"decisions": [{"type": "respond", "message": "<answer>"}]}``: the message is the result;
- ``{"decisions": [{"type": "edit", "edited_action": {"name": "ask_user", "args": {...,
  "answer": "<answer>"}}}]}``: the edited ``answer`` (agent-chat-ui, which has no respond
  control, answers so);
- ``{"decisions": [{"type": "reject", "message"?}]}``: the user declines to answer;
- anything else (the short form): the answer itself, text as given, other values as JSON.

A malformed decision asks again with ``error`` set. A new message sent while the question is
pending is taken as the answer (``agent.turn.question``).
"""

from __future__ import annotations

from typing import Annotated

from langchain_core.tools import BaseTool, tool
from langgraph.types import interrupt
from pydantic import Field, StringConstraints
from pydantic.json_schema import SkipJsonSchema

from agent.tool_names import ASK_USER
from agent.tools.runtime import ToolRuntimeT, call_key, state_value
from agent.turn.plan_rows import TurnPlan
from agent.turn.question import answer_of, mark_question_asked, question_request
from storage import Database
from storage.repositories import TurnScope

QUESTION_MAX_LENGTH = 2000
OPTION_MAX_LENGTH = 200
MAX_OPTIONS = 20

Question = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1, max_length=QUESTION_MAX_LENGTH)
]
Option = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1, max_length=OPTION_MAX_LENGTH)
]
Options = Annotated[
    Annotated[list[Option], Field(max_length=MAX_OPTIONS)] | SkipJsonSchema[None],
    Field(description="Choices, if any."),
]
DESCRIPTION = (
    "Ask the user one question you cannot go on without (ambiguity, a missing detail, a "
    "choice); the answer is the result."
)
"""What the model reads, on every call: when to ask (the schema says how)."""


def build_ask_user_tool(database: Database) -> BaseTool:
    """``ask_user``, reading the item in progress from ``database`` for the question's card."""

    @tool(ASK_USER, description=DESCRIPTION)
    async def ask_user(question: Question, runtime: ToolRuntimeT, options: Options = None) -> str:
        """Pause the turn with the question (an interrupt); its resume value is the answer."""
        scope = TurnScope(
            state_value(runtime, "conversationId", "") or "",
            state_value(runtime, "turnId", "") or "",
        )
        todo = None
        if scope.conversation_id and scope.turn_id:
            rows, _ = await TurnPlan(database, scope).rows(["in_progress"])
            if rows:
                todo = rows[0].to_dict()
        await mark_question_asked(database, call_key(runtime, ASK_USER))
        error = ""
        while True:
            value = interrupt(question_request(question, options, todo, error))
            try:
                return answer_of(value)
            except ValueError as problem:
                error = str(problem)

    return ask_user
