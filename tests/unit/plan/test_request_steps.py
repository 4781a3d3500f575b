"""The compact plan's steps are the user's own words: every clause and quoted phrase of a
request is looked at once, each step carries its verb, and nothing is invented or repeated."""

from __future__ import annotations

import pytest

from agent.prompting.request_steps import core_phrase, request_steps, verb_at_start


def words(request: str) -> list[str]:
    return [step.words for step in request_steps(request)]


def test_quoted_items_each_keep_the_verb_and_place_of_their_clause() -> None:
    request = (
        "Plan my Saturday: add 'buy groceries' and 'do laundry' to my tasks, "
        "then show me what is left"
    )

    steps = request_steps(request)

    assert [step.words for step in steps] == [
        "Plan my Saturday",
        "add 'buy groceries' to my tasks",
        "add 'do laundry' to my tasks",
        "show me what is left",
    ]
    assert [step.heading for step in steps] == [True, False, False, False]
    assert [core_phrase(step) for step in steps[1:3]] == ["buy groceries", "do laundry"]


def test_a_quote_keeps_commas_and_ands_inside_it() -> None:
    steps = request_steps("add 'salt, pepper and oil' to my list")

    assert [step.phrase for step in steps] == ["salt, pepper and oil"]


def test_a_bare_list_of_quotes_takes_the_verb_of_the_clause_before_it() -> None:
    assert words("Add three tasks: 'pay rent', 'book flights', and 'renew passport'") == [
        "Add three tasks",
        "Add three tasks: 'pay rent'",
        "Add three tasks: 'book flights'",
        "Add three tasks: 'renew passport'",
    ]


def test_unquoted_items_after_a_verb_follow_it() -> None:
    steps = request_steps("Add milk, eggs and bread to my tasks")

    assert [step.words for step in steps] == ["Add milk", "eggs", "bread to my tasks"]
    assert [step.follows for step in steps] == ["", "Add milk", "eggs"]
    assert [core_phrase(step) for step in steps] == ["milk", "eggs", "bread"]


def test_curly_quotes_and_double_quotes_are_quotes() -> None:
    steps = request_steps('add \u2018call mom\u2019 and "pay rent"')

    assert [step.phrase for step in steps] == ["call mom", "pay rent"]


def test_the_same_words_twice_are_one_step() -> None:
    assert words("add 'milk', then add 'milk'") == ["add 'milk'"]


def test_courtesy_alone_is_no_step() -> None:
    assert words("Please add 'milk'. Thanks!") == ["add 'milk'"]


@pytest.mark.parametrize(
    ("phrase", "verb", "core"),
    [
        ("mark the dentist appointment as done", "mark", "dentist appointment"),
        ("remove the old stuff from my list", "remove", "old stuff"),
        ("remember to call the bank", "remember to", "call the bank"),
        ("add a task called water the plants", "add", "water the plants"),
    ],
)
def test_the_target_of_a_step_is_its_words_without_verb_article_and_place(
    phrase: str, verb: str, core: str
) -> None:
    [step] = request_steps(phrase)

    assert verb_at_start(step.words, ("add", "mark", "remove", "remember to")) == verb
    assert core_phrase(step, verb) == core


def test_a_verb_is_matched_as_a_whole_word_at_the_start() -> None:
    assert verb_at_start("address the letter", ("add",)) is None
    assert verb_at_start("please show me all", ("show",)) == "show"
    assert verb_at_start("buy milk then show", ("show",)) is None


def test_next_week_is_part_of_a_title_not_a_new_step() -> None:
    assert words("add 'buy fertilizer' for next weekend") == [
        "add 'buy fertilizer' for next weekend"
    ]


def test_a_comma_after_a_quote_still_ends_its_clause() -> None:
    assert words("Add 'renew car insurance', mark buy milk as done") == [
        "Add 'renew car insurance'",
        "mark buy milk as done",
    ]


def test_an_apostrophe_inside_a_word_is_no_quote() -> None:
    request = (
        "Let's track this project here: put 'draft the outline' and 'collect references' "
        "on this conversation's task list, and add 'don't forget the milk'"
    )

    assert [step.phrase for step in request_steps(request)] == [
        "track this project here",
        "draft the outline",
        "collect references",
        "don't forget the milk",
    ]


def test_the_marks_of_its_own_placeholders_in_a_request_are_plain_spaces() -> None:
    # Before: "\x01\ue000\x01" or "\x000\x00" in a message raised IndexError.
    steps = request_steps("add \x01\ue000\x01 and \x000\x00 milk")

    assert [step.phrase for step in steps] == ["add \ue000", "0 milk"]
