"""Which words of an answer claim a change (``agent.turn.claim_check.claimed_changes``): a
claim the turn did nothing for ends it ``incomplete``, so a sentence read as a claim when it is
none would downgrade a true answer, and one missed would let a false claim through."""

from __future__ import annotations

import pytest

from agent.turn.claim_check import claimed_changes


@pytest.mark.parametrize(
    ("text", "verbs"),
    [
        # measured on Qwen2.5-Coder 1.5B and 0.5B (bench/RESULTS.md, issue 40)
        ("I've renamed 'call grandma' to 'call grandma on Sunday'.", ["renamed"]),
        ("I've updated 'book the dentist appointment' to 'dentist'.", ["updated"]),
        ("I've added 'Dan meeting' to your tasks.", ["added"]),
        ("Sure, I'll create the tasks for you:\n\n1. Prepare slides", ["created"]),
        # other forms of a done change
        ("'buy milk' has been added to your tasks.", ["added"]),
        ("Both tasks were marked as done.", ["marked"]),
        ("Added 'buy milk'. Deleted 'old note'.", ["added", "deleted"]),
        ("I have successfully deleted the task.", ["deleted"]),
        ("I went ahead and checked off 'walk the dog'.", ["checked off"]),
        ("We've cancelled the appointment task.", ["cancelled"]),
        ("Let me mark it as done.", ["marked"]),
    ],
)
def test_a_stated_or_promised_change_is_a_claim(text: str, verbs: list[str]) -> None:
    assert claimed_changes(text) == verbs


@pytest.mark.parametrize(
    "text",
    [
        "I have not added anything.",
        "I couldn't rename it: there is no task called 'call grandma'.",
        "You completed 2 tasks this week.",
        "Would you like me to add 'buy milk'?",
        "Here are your tasks:\n- buy milk (completed)\n- pay rent",
        "12 times 12 is 144.",
        "The meeting was moved to Friday, as you said.",
        "The trip has been cancelled? Sorry to hear that.",
        "I can add it if you tell me the title.",
    ],
)
def test_no_claim_in_answers_refusals_questions_and_listings(text: str) -> None:
    assert claimed_changes(text) == []
