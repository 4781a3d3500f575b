"""The embedded default understands more everyday phrasings without ever acting on a guess
(issue 40 §1, §2): questions about the list, synonyms and idioms, negations, deletions in the
user's own words, and a few request shapes in Spanish, French, German, Portuguese and Italian.
Each request here is one of ``bench/eval/corpus2.json``'s classes, in its words or close to
them; the compact profile decides them without a model call."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from agent.prompting.compact_arithmetic import arithmetic_answer
from agent.prompting.compact_binding import StepBinding
from agent.prompting.compact_languages import in_english, looks_foreign
from agent.prompting.compact_lookup import matching_task
from agent.prompting.compact_tools import bind_step, step_binding
from agent.tools.ask_user import build_ask_user_tool
from agent.tools.personal_tasks import build_task_tools
from agent.tools.todos import build_todo_tools
from storage import Database


@pytest.fixture
def tools() -> list[Any]:
    database = Database("sqlite+aiosqlite:///:memory:")
    return [*build_todo_tools(database), *build_task_tools(database), build_ask_user_tool(database)]


def acted(tools: list[Any], request: str, titles: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """The calls the harness makes for a one-step ``request`` with tasks ``titles`` listed:
    the lookup's result is given back, then the action (or question) is what it calls."""
    listed = [{"id": f"t-{index}", "title": title} for index, title in enumerate(titles)]
    history: list[Any] = [HumanMessage(request)]
    binding = step_binding(tools, [], history, None, request)
    if binding.reply is not None and [c["name"] for c in binding.reply.tool_calls] == [
        "list_tasks"
    ]:
        [lookup] = binding.reply.tool_calls
        result = ToolMessage(
            json.dumps({"tasks": listed}), tool_call_id=lookup["id"], name="list_tasks"
        )
        history += [binding.reply, result]
        binding = step_binding(tools, [], history, None, request)
    if binding.reply is None:
        return [(tool["function"]["name"], {}) for tool in binding.tools]
    return [(call["name"], call["args"]) for call in binding.reply.tool_calls]


def answer_of(tools: list[Any], request: str) -> AIMessage | None:
    binding = step_binding(tools, [], [HumanMessage(request)], None, request)
    assert binding.phase == "answer" and not binding.tools
    return binding.reply


# --- questions about the list get the listing; other questions the model --------------------


@pytest.mark.parametrize(
    "request_text",
    [
        "Anything left for me to do today?",
        "What's on my agenda?",
        "What's on my plate?",
        "Do I have anything pending?",
        "Have I got any tasks?",
        "Remind me what I have to do.",
        "Is there anything on my to-do list?",
    ],
)
def test_a_question_about_the_list_is_answered_with_the_listing_alone(
    tools: list[Any], request_text: str
) -> None:
    calls = acted(tools, request_text, ["mow the lawn"])

    assert [name for name, _ in calls] == ["list_tasks"]


@pytest.mark.parametrize(
    "request_text",
    [
        "How many days are there in a week?",
        "Can you help me with something?",
        "Who wrote Hamlet?",
        "Any idea what the weather will be?",
    ],
)
def test_a_question_not_about_the_tasks_is_the_models_with_no_tool(
    tools: list[Any], request_text: str
) -> None:
    assert answer_of(tools, request_text) is None  # the model answers, no tool bound


@pytest.mark.parametrize(
    ("question", "answer"),
    [
        ("What is 12 times 12?", "12 times 12 is 144."),
        ("what's 7 plus 5", "7 plus 5 is 12."),
        ("How much is 1 divided by 3?", "1 divided by 3 is about 0.3333."),
        ("What is 5 / 0?", "5 / 0 has no answer: you cannot divide by zero."),
    ],
)
def test_a_sum_is_computed_not_left_to_the_small_model(
    tools: list[Any], question: str, answer: str
) -> None:
    reply = answer_of(tools, question)

    # The 270M model answered "12 times 12 is 14" (measured).
    assert reply is not None and not reply.tool_calls and reply.content == answer


def test_only_one_operation_on_two_numbers_is_computed() -> None:
    assert arithmetic_answer("What is the capital of France?") is None
    assert arithmetic_answer("What is 2 plus 2 plus 2?") is None


async def models_answer(question: str, reply: str) -> str:
    model = GenericFakeChatModel(messages=iter([AIMessage(content=reply)]))
    binding = StepBinding("answer", [], None, 120)
    answer = await bind_step(model, binding).ainvoke([HumanMessage(question)])
    return str(answer.content)


async def test_the_models_own_answer_to_a_question_is_the_answer() -> None:
    answer = await models_answer("Who wrote Hamlet?", "Shakespeare wrote Hamlet.")

    assert answer == "Shakespeare wrote Hamlet."


@pytest.mark.parametrize(
    ("question", "reply"),
    [
        ("What is the capital of France?", "What is the capital of France?"),
        ("What's the capital of France?", "France is the capital of France."),
        ("Tell me a joke.", "I am a student at the University of Rome."),  # the examples' Rome
        ("How do I boil an egg?", "How do I cook a chicken?"),
        ("Who wrote Hamlet?", ""),
    ],
)
async def test_a_reply_that_says_nothing_new_is_said_to_be_no_answer(
    question: str, reply: str
) -> None:
    answer = await models_answer(question, reply)

    assert answer.startswith("I have no answer to that")


# --- synonyms and idioms ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("request_text", "title"),
    [
        ("Stick 'order new glasses' on my to-do list.", "order new glasses"),
        ("Set a reminder to call the plumber.", "call the plumber"),
        ("Don't forget to call the dentist.", "call the dentist"),
        ("Don't let me forget to renew the parking permit.", "renew the parking permit"),
    ],
)
def test_everyday_ways_to_ask_for_a_task_add_it(
    tools: list[Any], request_text: str, title: str
) -> None:
    assert acted(tools, request_text, []) == [("add_task", {"title": title})]


@pytest.mark.parametrize(
    "request_text",
    ["Take 'renew the passport' off my list.", "Scrap 'renew the passport' from my tasks."],
)
def test_taking_a_named_task_off_the_list_deletes_that_task(
    tools: list[Any], request_text: str
) -> None:
    calls = acted(tools, request_text, ["buy stamps", "renew the passport"])

    assert calls == [("delete_task", {"task_identifier": "t-1"})]


def test_stick_and_take_off_need_the_list_as_their_subject(tools: list[Any]) -> None:
    # "stick with the plan", "take the day off" ask nothing of the tasks.
    for request in ("Stick with the plan.", "Take the day off."):
        reply = answer_of(tools, request)
        assert reply is not None and not reply.tool_calls


# --- negations --------------------------------------------------------------------------------


def test_add_this_but_dont_add_that_adds_only_the_first(tools: list[Any]) -> None:
    calls = acted(tools, "Add 'buy milk' but don't add 'buy eggs'.", [])

    assert calls == [("add_task", {"title": "buy milk"})]


def test_a_correction_takes_back_only_the_step_whose_words_it_names(tools: list[Any]) -> None:
    request = "Add 'water the plants' and 'call mom'. Actually, never mind the plants."

    assert acted(tools, request, []) == [("add_task", {"title": "call mom"})]


def test_i_just_want_to_see_my_list_after_a_negation_lists(tools: list[Any]) -> None:
    calls = acted(tools, "Please don't delete anything, I just want to see my list.", ["a"])

    assert [name for name, _ in calls] == ["list_tasks"]


def test_a_request_taken_back_at_once_says_nothing_changed(tools: list[Any]) -> None:
    reply = answer_of(tools, "Add 'water the plants'. Wait, no, don't.")

    assert reply is not None and not reply.tool_calls
    assert "changed nothing" in str(reply.content)


# --- a task named in the user's own words -----------------------------------------------------


def test_two_or_more_words_all_in_one_title_and_no_other_name_it() -> None:
    tasks = [{"id": "1", "title": "prepare for the meeting with Dan"}, {"id": "2", "title": "x"}]

    assert matching_task("the Dan meeting", tasks, quoted=False) == tasks[0]


@pytest.mark.parametrize(
    ("words", "titles"),
    [
        ("the report", ["submit report", "buy milk"]),  # one word: asked about
        ("the Dan meeting", ["prepare the meeting with Dan", "book the meeting room"]),
        ("the Dan meeting", ["meeting with Dan", "call Dan"]),
        ("the old photos", ["sort the photos"]),  # "old" is in no title
    ],
)
def test_words_that_could_mean_another_task_or_say_too_little_name_none(
    words: str, titles: list[str]
) -> None:
    tasks = [{"id": str(index), "title": title} for index, title in enumerate(titles)]

    assert matching_task(words, tasks, quoted=False) is None


def test_a_deletion_in_the_users_own_words_deletes_the_one_task_they_name(
    tools: list[Any],
) -> None:
    request = "The meeting with Dan got cancelled, please remove the Dan meeting task."
    titles = ["prepare for the meeting with Dan", "buy milk"]

    assert acted(tools, request, titles) == [("delete_task", {"task_identifier": "t-0"})]


# --- other languages --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("request_text", "title"),
    [
        ("Añade 'llamar al dentista' a mis tareas.", "llamar al dentista"),
        ("Añade comprar pan a mi lista.", "comprar pan"),
        ("Ajoute 'appeler le plombier' à ma liste.", "appeler le plombier"),
        ("Füge 'Zahnarzt anrufen' zu meinen Aufgaben hinzu.", "Zahnarzt anrufen"),
        ("Setze 'Reifen wechseln' auf meine Liste.", "Reifen wechseln"),
        ("Adiciona 'comprar café' à minha lista.", "comprar café"),
        ("Aggiungi 'chiamare la nonna' alla mia lista.", "chiamare la nonna"),
    ],
)
def test_an_addition_in_another_language_adds_the_title_as_written(
    tools: list[Any], request_text: str, title: str
) -> None:
    assert acted(tools, request_text, []) == [("add_task", {"title": title})]


@pytest.mark.parametrize(
    ("request_text", "tool"),
    [
        ("Marca 'pagar el alquiler' como hecho.", "complete_task"),
        ("Marque 'pagar el alquiler' comme fait.", "complete_task"),
        ("Markiere 'pagar el alquiler' als erledigt.", "complete_task"),
        ("Segna 'pagar el alquiler' come fatto.", "complete_task"),
        ("Borra 'pagar el alquiler' de mi lista.", "delete_task"),
        ("Supprime 'pagar el alquiler' de mes tâches.", "delete_task"),
        ("Lösche 'pagar el alquiler' aus meiner Liste.", "delete_task"),
        ("Apaga 'pagar el alquiler' da minha lista.", "delete_task"),
        ("Elimina 'pagar el alquiler' dalla mia lista.", "delete_task"),
    ],
)
def test_done_or_delete_in_another_language_acts_on_the_quoted_task(
    tools: list[Any], request_text: str, tool: str
) -> None:
    calls = acted(tools, request_text, ["lavar el coche", "pagar el alquiler"])

    assert calls == [(tool, {"task_identifier": "t-1"})]


@pytest.mark.parametrize(
    "request_text",
    [
        "Muéstrame mis tareas.",
        "Montre-moi mes tâches.",
        "Zeig mir meine Aufgaben.",
        "Mostra as minhas tarefas.",
        "Mostrami le mie attività.",
    ],
)
def test_a_listing_in_another_language_lists(tools: list[Any], request_text: str) -> None:
    assert [name for name, _ in acted(tools, request_text, ["a"])] == ["list_tasks"]


def test_marca_alone_is_not_read_as_done_without_as_done(tools: list[Any]) -> None:
    # "marca" also means "note" or "dial": without "como hecho" it is not read as done.
    assert in_english("Marca 'pagar el alquiler'.") == "Marca 'pagar el alquiler'."


@pytest.mark.parametrize(
    ("request_text", "titles"),
    [
        ("Elimina el informe.", ["escribir el informe", "imprimir el informe"]),
        ("Lösch es.", ["submit report", "buy milk"]),
    ],
)
def test_a_vague_deletion_in_another_language_is_asked_about(
    tools: list[Any], request_text: str, titles: list[str]
) -> None:
    [(name, args)] = acted(tools, request_text, titles)

    assert name == "ask_user" and args["options"] == titles


@pytest.mark.parametrize(
    "request_text",
    ["Añade pan y leche a mi lista.", "Sortiere meine Aufgaben nach Wichtigkeit."],
)
def test_words_in_another_language_no_rule_reads_change_nothing_and_say_so(
    tools: list[Any], request_text: str
) -> None:
    reply = answer_of(tools, request_text)

    # "pan y leche" could be one title or two: not split by a guess.
    assert reply is not None and not reply.tool_calls
    assert str(reply.content).startswith("Not done: I changed nothing. I did not understand")


def test_english_requests_and_questions_are_left_as_written() -> None:
    for request in ("Remove the gym task.", "What was on my list?", "Add milk", "Delete it."):
        assert in_english(request) == request
        assert not looks_foreign(request)
    assert looks_foreign("Sortiere meine Aufgaben nach Wichtigkeit.")


# --- what the second review's phrasings showed (bench/eval/corpus3.json) --------------------


@pytest.mark.parametrize(
    "request_text, words",
    [
        ("Once I get paid on Friday, mark 'pay rent' as done.", "Once"),
        ("When the landlord confirms, delete 'pay rent'.", "When"),
    ],
)
def test_a_condition_in_a_clause_of_its_own_defers_the_change(
    tools: list[Any], request_text: str, words: str
) -> None:
    reply = answer_of(tools, request_text)

    assert reply is not None and not reply.tool_calls
    assert str(reply.content).startswith("Not done: I changed nothing.")
    assert f'("{words}"' in str(reply.content)


def test_all_but_a_named_task_is_not_read_as_that_task(tools: list[Any]) -> None:
    reply = answer_of(tools, "Complete all of them except 'call mom'.")

    assert reply is not None and not reply.tool_calls
    assert str(reply.content).startswith("Not done: I changed nothing.")


def test_a_take_back_with_a_replacement_is_in_doubt_not_understood(tools: list[Any]) -> None:
    reply = answer_of(tools, "Not that, I said 'buy grapes'.")
    assert reply is not None and str(reply.content).startswith("Not done: I changed nothing.")
    assert "I said 'buy grapes'" in str(reply.content)

    taken_back = answer_of(tools, "Mark 'pay rent' as done. Actually never mind.")
    assert taken_back is not None and str(taken_back.content) == "Understood: I changed nothing."


def test_a_request_too_long_to_read_whole_is_not_done_in_part(tools: list[Any]) -> None:
    venting = " ".join(f"Day {number} was long and nothing went well." for number in range(14))
    request = f"{venting} Anyway, please add 'book the vet for Luna' to my list."

    reply = answer_of(tools, request)

    assert reply is not None and not reply.tool_calls
    assert str(reply.content).startswith("Not done: I changed nothing.")
    assert "more than 12" in str(reply.content)
    assert acted(tools, "Add 'book the vet for Luna' to my list.", [])[0][0] == "add_task"


@pytest.mark.parametrize(
    "request_text, tool",
    [
        ("Delete 'buy milk'. See you later!", "delete_task"),
        ("Mark 'laundry' as done. Talk to you tomorrow!", "complete_task"),
        ("Delete 'call mom'. I'll call her tomorrow instead.", "delete_task"),
        ("Mark 'pay rent' as done. Thanks, I'll check back later.", "complete_task"),
        ("When you get a chance, delete 'laundry'.", "delete_task"),
        ("Hi! Before we start, delete 'laundry'.", "delete_task"),
    ],
)
def test_a_goodbye_a_plan_of_the_users_own_or_a_polite_when_puts_nothing_off(
    tools: list[Any], request_text: str, tool: str
) -> None:
    titles = ["buy milk", "laundry", "call mom", "pay rent"]
    assert [name for name, _ in acted(tools, request_text, titles)] == [tool]


GROCERIES = ["eggs", "milk", "bread", "butter", "cheese", "apples", "pears", "rice", "pasta"]
GROCERIES += ["coffee", "tea", "jam", "honey"]


def test_a_list_of_twelve_under_a_lead_in_is_read_whole(tools: list[Any]) -> None:
    """The lead-in line is no step: twelve items are acted on, a thirteenth is too many."""
    listed = "Add these to my list:\n" + "\n".join(f"- {item}" for item in GROCERIES[:12])
    binding = step_binding(tools, [], [HumanMessage(listed)], None, listed)
    assert binding.reply is not None and binding.reply.tool_calls
    assert binding.reply.tool_calls[0]["args"] == {"title": "eggs"}

    reply = answer_of(tools, f"{listed}\n- {GROCERIES[12]}")
    assert reply is not None and "more than 12" in str(reply.content)
